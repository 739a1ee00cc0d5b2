package gateway

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// hijacks frees what a request of the goroutine engine that takes its
// connection over holds when fasthttp never runs the function it gave
// ctx.Hijack: fasthttp first sends the answers still buffered for the
// connection (a pipelined request's), and when that fails it closes the
// connection without running it. Those requests hijack through hijack,
// whose failed function then runs (see connState). The zero value is
// ready.
type hijacks struct {
	n       atomic.Int64 // len(pending), read without mu
	mu      sync.Mutex   // protects pending
	pending map[net.Conn]func()
}

// hijack has fasthttp give ctx's connection to f once the handler
// returns, as ctx.Hijack does; when fasthttp closes the connection
// instead, failed runs.
func (h *hijacks) hijack(ctx *fasthttp.RequestCtx, f fasthttp.HijackHandler, failed func()) {
	c := ctx.Conn()
	h.mu.Lock()
	if h.pending == nil {
		h.pending = map[net.Conn]func(){}
	}
	h.pending[c] = failed
	h.n.Store(int64(len(h.pending)))
	h.mu.Unlock()
	ctx.Hijack(func(hc net.Conn) {
		h.take(c)
		f(hc)
	})
}

// take removes and returns c's failed function, if any.
func (h *hijacks) take(c net.Conn) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	failed := h.pending[c]
	delete(h.pending, c)
	h.n.Store(int64(len(h.pending)))
	return failed
}

// connState is the goroutine engine's ConnState: a connection closed (not
// hijacked) while its hijack was pending runs its failed function.
func (h *hijacks) connState(c net.Conn, s fasthttp.ConnState) {
	if s != fasthttp.StateClosed || h.n.Load() == 0 {
		return
	}
	if failed := h.take(c); failed != nil {
		failed()
	}
}
