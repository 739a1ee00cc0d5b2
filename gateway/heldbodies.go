package gateway

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/upstream"
)

// heldBodies counts the bytes of the request bodies the gateway holds in
// memory so that a retry may send them again, against
// server.max_held_body_bytes: without such a bound, clients that announce
// bodies of up to maxReplayBody on every stream of every HTTP/2
// connection could make the gateway hold that much times the streams
// times the connections. A body is counted as its buffer grows while its
// bytes arrive (see read), not at the length it announced, so that what
// is counted is memory held: a client that announces a long body and
// sends little takes little of the bound from other requests. Past the
// bound a body streams once and its request is not retried (Envoy's retry
// buffer limit does the same): the request is served, only its retries
// are lost. The zero value is ready to use.
type heldBodies struct {
	bytes     atomic.Int64
	overflows atomic.Uint64
}

// reserve counts n bytes, about to be held, unless that would pass max;
// it reports whether it did (release must then follow), and counts an
// overflow when it did not. A reservation that does not fit never shows in
// the count (compare and swap): one made beside it that fits is granted.
func (h *heldBodies) reserve(n, max int64) bool {
	for {
		held := h.bytes.Load()
		if held+n > max {
			h.overflows.Add(1)
			return false
		}
		if h.bytes.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// release forgets n bytes reserve counted.
func (h *heldBodies) release(n int64) { h.bytes.Add(-n) }

// errNoRoom is the error of readUpTo when its buffer may not grow.
var errNoRoom = errors.New("gateway: no room to hold the request body")

// read reads a body from r to hold it: until r ends or n bytes have come
// (see readUpTo), counting its buffer against limit as the buffer grows. It
// returns the bytes read and how many bytes h counts for them, to release
// once the body is no longer held. On an error of r it counts nothing;
// when h refuses the buffer room (an overflow), the error is errNoRoom and
// the bytes read so far are returned, to be sent before the rest of r
// (resumedBody), still counted: their buffer stays in memory until they
// have been sent. A body that ends before its buffer is full (one of
// unknown length, a gRPC request) is copied to a buffer of its length,
// and counts that: a request of a few bytes does not hold a first buffer
// of firstRead for as long as it is held. Under a limit below firstRead
// the first buffer is limit bytes, so that a body of unknown length of
// under limit bytes is still held (a first buffer of firstRead never
// fits).
func (h *heldBodies) read(r io.Reader, n int, limit int64) (buf []byte, counted int64, err error) {
	first := firstRead
	if limit < firstRead {
		first = max(int(limit), 1)
	}
	buf, err = readUpTo(r, n, first, func(k int) bool {
		if !h.reserve(int64(k), limit) {
			return false
		}
		counted += int64(k)
		return true
	})
	switch {
	case err == nil && len(buf) < cap(buf):
		h.release(int64(cap(buf) - len(buf)))
		counted -= int64(cap(buf) - len(buf))
		buf = append(make([]byte, 0, len(buf)), buf...)
	case err != nil && !errors.Is(err, errNoRoom):
		h.release(counted)
		counted = 0
	}
	return buf, counted, err
}

// firstRead is the most of a body that readUpTo allocates before any of
// it arrived.
const firstRead = 16 << 10

// readUpTo reads r whole into memory, up to n bytes: it returns when r
// ends (io.EOF, not an error) or n bytes have come. Its buffer grows as
// the bytes arrive (doubling, from first bytes, 1 to firstRead, to n at
// most), so that what a client that announces a length and sends little
// makes the gateway hold is at most twice what it sent, past its first
// buffer: an HTTP/2 client announces as many bodies as it has streams.
// grow, unless nil, is asked for each growth (the bytes the buffer gains)
// before it is allocated: when it refuses, readUpTo returns the bytes read
// so far and errNoRoom. On another error of r it returns nil and the
// error.
func readUpTo(r io.Reader, n, first int, grow func(int) bool) ([]byte, error) {
	var buf []byte
	for len(buf) < n {
		if len(buf) == cap(buf) {
			size := min(n, max(first, 2*cap(buf)))
			if grow != nil && !grow(size-cap(buf)) {
				return buf, errNoRoom
			}
			buf = append(make([]byte, 0, size), buf...)
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && len(buf) < n {
			return nil, err
		}
	}
	return buf, nil
}

// resumedBody is a request body stream of which readUpTo read the first
// bytes (head) before it could not hold it: it gives them again, then the
// rest of r, and has r's trailers when r has them (upstream.TrailedBody).
// What held counts for head (n) is given back once head has been read, or
// at release, whichever comes first.
type resumedBody struct {
	head []byte
	r    io.Reader
	held *heldBodies
	n    atomic.Int64
}

// newResumedBody returns the stream of head, then r, whose n bytes held
// counts for head it gives back.
func newResumedBody(head []byte, r io.Reader, held *heldBodies, n int64) *resumedBody {
	b := &resumedBody{head: head, r: r, held: held}
	b.n.Store(n)
	return b
}

func (b *resumedBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		if len(b.head) == 0 {
			b.head = nil // let the buffer go
			b.release()
		}
		return n, nil
	}
	return b.r.Read(p)
}

// release gives back what held counts for head, once: the request that
// streams b has ended, or head has been read. It is safe to call from
// another goroutine than Read's.
func (b *resumedBody) release() { b.held.release(b.n.Swap(0)) }

// Trailer returns r's trailers, or nil when it has none.
func (b *resumedBody) Trailer() http.Header {
	if tb, ok := b.r.(upstream.TrailedBody); ok {
		return tb.Trailer()
	}
	return nil
}
