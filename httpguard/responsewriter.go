package httpguard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// responseWriter is the http.ResponseWriter Middleware hands to the handler.
// It records whether and with which status the response was committed, lets
// the handler run at most once, and applies AddHeaders hooks when the
// headers go out. It keeps http.Flusher, http.Hijacker and io.ReaderFrom
// working and unwraps for http.ResponseController.
type responseWriter struct {
	w http.ResponseWriter

	// status and committed are written only by the goroutine running the
	// handler and read by ServeHTTP after running.Wait.
	status    int  // the committed status; 0 until committed
	committed bool // the final headers went out, or the connection was hijacked

	running sync.WaitGroup // counts attempts running the handler

	mu       sync.Mutex // protects the fields below
	finished bool       // the guard returned: no attempt may start
	ran      bool       // an attempt ran, or is running, the handler
	sealed   bool       // the hooks were applied: later ones come too late
	hooks    []HeaderSetter
}

var (
	_ http.Flusher  = (*responseWriter)(nil)
	_ http.Hijacker = (*responseWriter)(nil)
	_ io.ReaderFrom = (*responseWriter)(nil)
)

// begin reports whether an attempt may run the handler and, if so, counts it
// as running: the caller must call running.Done when the handler returns.
func (rw *responseWriter) begin() bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.finished || rw.ran {
		return false
	}
	rw.ran = true
	rw.running.Add(1)
	return true
}

// finish stops further attempts and waits for a running handler to return.
func (rw *responseWriter) finish() {
	rw.mu.Lock()
	rw.finished = true
	rw.mu.Unlock()
	rw.running.Wait()
}

func (rw *responseWriter) addHook(hs HeaderSetter) bool {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.sealed {
		return false
	}
	rw.hooks = append(rw.hooks, hs)
	return true
}

// reportRateLimit adds the RateLimit headers of a limiter that admitted
// the request (see ratelimit.WithKeyReport).
func (rw *responseWriter) reportRateLimit(name string, period time.Duration, d ratelimit.Decision) {
	rw.addHook(RateLimitHeaders{Policy: name, Limit: d.Limit, Remaining: d.Remaining, Window: period, Reset: d.ResetAfter})
}

// applyHooks sets the headers of every hook added so far, once; hooks added
// later are refused.
func (rw *responseWriter) applyHooks() {
	rw.mu.Lock()
	hooks := rw.hooks
	rw.hooks, rw.sealed = nil, true
	rw.mu.Unlock()
	if len(hooks) == 0 {
		return
	}
	h := rw.w.Header()
	for _, hs := range hooks {
		hs.SetHeaders(h)
	}
}

// commit records that the final headers are about to go out with code.
func (rw *responseWriter) commit(code int) {
	rw.applyHooks()
	rw.committed, rw.status = true, code
}

// Header returns the underlying writer's header map.
func (rw *responseWriter) Header() http.Header { return rw.w.Header() }

// WriteHeader records the status and writes it. Informational statuses
// (1xx other than 101) pass through without committing the response.
func (rw *responseWriter) WriteHeader(code int) {
	if !rw.committed && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		rw.commit(code)
	}
	rw.w.WriteHeader(code)
}

// Write commits the response with status 200 if nothing was committed yet,
// and writes p.
func (rw *responseWriter) Write(p []byte) (int, error) {
	if !rw.committed {
		rw.commit(http.StatusOK)
	}
	return rw.w.Write(p)
}

// ReadFrom commits the response like Write and copies src to the client,
// with the underlying writer's ReadFrom when it has one.
func (rw *responseWriter) ReadFrom(src io.Reader) (int64, error) {
	if !rw.committed {
		rw.commit(http.StatusOK)
	}
	if rf, ok := rw.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(writerOnly{rw.w}, src)
}

// FlushError flushes the underlying writer (through http.ResponseController),
// which commits the response with status 200 if nothing was committed yet.
// It returns an error wrapping http.ErrNotSupported when the underlying
// writer cannot flush.
func (rw *responseWriter) FlushError() error {
	if !rw.committed {
		rw.applyHooks()
	}
	err := http.NewResponseController(rw.w).Flush()
	if !rw.committed && !errors.Is(err, http.ErrNotSupported) {
		rw.committed, rw.status = true, http.StatusOK
	}
	return err
}

// Flush is FlushError without the error.
func (rw *responseWriter) Flush() { _ = rw.FlushError() }

// Hijack hijacks the underlying connection (through http.ResponseController);
// a hijacked response counts as committed, with status 101.
func (rw *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := http.NewResponseController(rw.w).Hijack()
	if err == nil && !rw.committed {
		rw.committed, rw.status = true, http.StatusSwitchingProtocols
	}
	return conn, buf, err
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (rw *responseWriter) Unwrap() http.ResponseWriter { return rw.w }

// writerOnly hides every method of an io.Writer but Write, so that io.Copy
// does not call ReadFrom back.
type writerOnly struct{ io.Writer }
