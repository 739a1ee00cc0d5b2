package gateway

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// deadlineWriter is a ResponseWriter that records the write deadline in
// force when Write is called. Its first SetWriteDeadline signals entered
// and waits for release before the deadline takes effect: a write caught
// between reading its deadline and setting it on the stream.
type deadlineWriter struct {
	entered, release chan struct{}
	mu               sync.Mutex // protects calls, set, atWrite
	calls            int
	set              time.Time // the deadline in force
	atWrite          time.Time // the deadline in force at the last Write
}

func (w *deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	w.calls++
	first := w.calls == 1
	w.mu.Unlock()
	if first {
		close(w.entered)
		<-w.release
	}
	w.mu.Lock()
	w.set = t
	w.mu.Unlock()
	return nil
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.atWrite = w.set
	w.mu.Unlock()
	return len(p), nil
}

func (w *deadlineWriter) Header() http.Header { return http.Header{} }
func (w *deadlineWriter) WriteHeader(int)     {}
func (w *deadlineWriter) FlushError() error   { return nil }

// TestH2StreamConnDeadlineDuringWrite: a write deadline set while a write
// is setting the one it read before (a tunnel's GoAway, whose close frame
// must not wait for server.write_timeout) is the one the write runs
// under, though the older one reaches the stream last.
func TestH2StreamConnDeadlineDuringWrite(t *testing.T) {
	fw := &deadlineWriter{entered: make(chan struct{}), release: make(chan struct{})}
	c := &h2StreamConn{body: io.NopCloser(nil), w: fw, rc: http.NewResponseController(fw)}
	long := time.Now().Add(time.Hour)   // server.write_timeout's
	soon := time.Now().Add(time.Second) // GoAway's
	if err := c.SetWriteDeadline(long); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("frame"))
		wrote <- err
	}()
	<-fw.entered // the write read long and is setting it
	if err := c.SetWriteDeadline(soon); err != nil {
		t.Fatal(err)
	}
	close(fw.release)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if !fw.atWrite.Equal(soon) {
		t.Fatalf("the write ran under the deadline %v, want GoAway's %v", fw.atWrite, soon)
	}
	if !fw.set.IsZero() {
		t.Fatalf("the deadline after the write is %v, want none", fw.set)
	}
}
