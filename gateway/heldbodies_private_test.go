package gateway

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/iotest"
)

// TestReadUpTo reads bodies of known length: whole, in pieces of one
// byte, and cut short (the bytes that came); its buffer never holds more
// than twice what arrived past the first firstRead bytes.
func TestReadUpTo(t *testing.T) {
	for _, n := range []int{1, firstRead - 1, firstRead, firstRead + 1, 5*firstRead + 3, 1 << 20} {
		body := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		for name, r := range map[string]io.Reader{"whole": bytes.NewReader(body), "one byte at a time": iotest.OneByteReader(bytes.NewReader(body))} {
			if n > 5*firstRead && name != "whole" {
				continue // a million reads
			}
			got, err := readUpTo(r, n, firstRead, nil)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("%d bytes, %s: %d bytes, %v", n, name, len(got), err)
			}
			if cap(got) != n {
				t.Errorf("%d bytes, %s: a buffer of %d", n, name, cap(got))
			}
		}
		if got, err := readUpTo(bytes.NewReader(body[:n-1]), n, firstRead, nil); err != nil || !bytes.Equal(got, body[:n-1]) {
			t.Errorf("%d bytes announced, one fewer sent: %d bytes, %v, want the %d sent", n, len(got), err, n-1)
		}
	}
	// A reader that sends 1000 bytes of 1 MiB, then fails: the buffer
	// grew to firstRead, no further.
	r := io.MultiReader(bytes.NewReader(make([]byte, 1000)), iotest.ErrReader(errors.New("stalled")))
	if _, err := readUpTo(&capWatch{r: r, max: firstRead}, 1<<20, firstRead, nil); err == nil || err.Error() != "stalled" {
		t.Errorf("a stalled body: %v", err)
	}
}

// capWatch fails a test-visible way when a read is offered more room than
// max: readUpTo's buffer grew past what arrived warrants.
type capWatch struct {
	r   io.Reader
	max int
}

func (c *capWatch) Read(p []byte) (int, error) {
	if len(p) > c.max {
		return 0, errors.New("buffer grew before the bytes came")
	}
	return c.r.Read(p)
}

// TestHeldBodiesCountGrowth reads bodies through heldBodies.read: what
// it counts is the buffer, grown as the bytes come (firstRead for 1000
// bytes of an announced 1 MiB, not 1 MiB), cut to the body's length when
// the body ends before the buffer is full (1000); with no room for the next
// growth it returns the bytes read so far with errNoRoom, still counting
// their buffer, and counts an overflow; a broken body counts nothing.
// (A body was counted at its announced length before any of it came.)
func TestHeldBodiesCountGrowth(t *testing.T) {
	var h heldBodies
	const max = 4 * firstRead
	small := make([]byte, 1000)
	stalled := io.MultiReader(bytes.NewReader(small), iotest.ErrReader(errors.New("stalled")))
	if _, n, err := h.read(stalled, 1<<20, max); err == nil || n != 0 || h.bytes.Load() != 0 {
		t.Errorf("a broken body: counted %d (%d held), %v", n, h.bytes.Load(), err)
	}

	var during int64 // what h counts once the 1000 bytes came, before the end
	ended := readerFunc(func([]byte) (int, error) { during = h.bytes.Load(); return 0, io.EOF })
	buf, n, err := h.read(io.MultiReader(bytes.NewReader(small), ended), 1<<20, max)
	if during != firstRead {
		t.Errorf("1000 bytes of 1 MiB come: %d counted, want %d", during, firstRead)
	}
	if err != nil || len(buf) != len(small) || cap(buf) != len(small) || n != int64(len(small)) || h.bytes.Load() != n {
		t.Errorf("1000 bytes of 1 MiB, ended: %d bytes (a buffer of %d), counted %d (%d held), %v; want the 1000 counted", len(buf), cap(buf), n, h.bytes.Load(), err)
	}
	body := bytes.Repeat([]byte("x"), 3*firstRead)
	got, m, err := h.read(bytes.NewReader(body), 1<<20, max)
	if !errors.Is(err, errNoRoom) || m != 2*firstRead || h.bytes.Load() != n+m || !bytes.Equal(got, body[:2*firstRead]) {
		t.Errorf("past the bound: %d bytes, counted %d (%d held), %v; want the %d read, counted, errNoRoom", len(got), m, h.bytes.Load(), err, 2*firstRead)
	}
	if h.overflows.Load() != 1 {
		t.Errorf("%d overflows, want 1", h.overflows.Load())
	}
	h.release(n + m)
	got, m, err = h.read(bytes.NewReader(body), len(body), max)
	if err != nil || !bytes.Equal(got, body) || m != int64(len(body)) {
		t.Errorf("with room: %d bytes, counted %d, %v", len(got), m, err)
	}
}

// readerFunc is a Read function as an io.Reader.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestResumedBodyReleasesOnce reads a resumedBody: its head, then the
// rest, whole and in order; what held counts for the head is given back
// once the head has been read, and release after that gives back nothing
// more (nor does it for a body released before its head was read).
func TestResumedBodyReleasesOnce(t *testing.T) {
	var h heldBodies
	h.reserve(2*firstRead, 2*firstRead)
	b := newResumedBody([]byte("head "), iotest.OneByteReader(bytes.NewReader([]byte("rest"))), &h, firstRead)
	p := make([]byte, 3)
	if n, err := b.Read(p); n != 3 || err != nil || h.bytes.Load() != 2*firstRead {
		t.Fatalf("first read: %d, %v, %d held", n, err, h.bytes.Load())
	}
	got, err := io.ReadAll(io.MultiReader(bytes.NewReader(p), b))
	if string(got) != "head rest" || err != nil || h.bytes.Load() != firstRead {
		t.Errorf("read %q, %v; %d held, want \"head rest\" and %d", got, err, h.bytes.Load(), firstRead)
	}
	b.release()
	unread := newResumedBody([]byte("head"), bytes.NewReader(nil), &h, firstRead)
	unread.release()
	unread.release()
	if h.bytes.Load() != 0 {
		t.Errorf("%d held after the releases, want 0", h.bytes.Load())
	}
}

// TestHeldReserveNoFalseOverflow reserves a byte, and releases it, again
// and again while other goroutines try reservations that never fit: the
// byte always fits, so it is never refused. (reserve added, checked and
// took back: a reservation that did not fit made the count pass the bound
// for a moment, and one that fitted, made then, was refused too.)
func TestHeldReserveNoFalseOverflow(t *testing.T) {
	var h heldBodies
	const bound = 100
	stop := make(chan struct{})
	var wg, started sync.WaitGroup
	for range 3 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				granted := h.reserve(bound+1, bound)
				if i == 0 {
					started.Done()
				}
				if granted {
					t.Error("a reservation past the bound was granted")
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	started.Wait()
	refused := 0
	for range 20000 {
		if !h.reserve(1, bound) {
			refused++
			continue
		}
		h.release(1)
	}
	close(stop)
	wg.Wait()
	if refused > 0 {
		t.Errorf("a byte that fitted was refused %d times in 20000", refused)
	}
	if n := h.bytes.Load(); n != 0 {
		t.Errorf("%d bytes counted after every release", n)
	}
}
