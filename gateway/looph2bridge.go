//go:build linux

package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluicehq/sluice/internal/h2loop"
)

// bridgeAhead bounds the answer bytes of a bridged stream that its
// goroutine has handed to the loop and the connection has not sent (flow
// control holds them back): past it, the goroutine's next write waits, as
// it does while the client leaves the connection's output unread (see
// h2Bridge.credit).
const bridgeAhead = 64 << 10

// bridgeChunk is the most a bridged stream's writer hands the loop at
// once.
const bridgeChunk = 16 << 10

// h2Bridge is a stream of a loopH2 that the loops do not serve as
// HTTP/1.1 (see loopH2.Open and loopH2.Serve), or whose answer turned out
// to stream (loopH2.unstreamed): a goroutine serves it through the HTTP/2
// engine's handler, h2Engine.ServeHTTP, as net/http's server would, with
// an *http.Request made from the stream (its body a bridgeBody) and a
// bridgeWriter. The goroutine never touches the connection: it hands its
// answer's parts to the loop, a task on the loop's queue, and waits while
// bridgeAhead bytes of them are not sent yet; it reads the body the loop
// fed, and the loop opens the stream's window, and the connection's, by
// what it read (HTTP/2 flow control paces the client as the upstream takes
// the body, and a connection holds at most h2loop's ConnWindow of bodies
// not read). A client
// that resets the stream, or whose connection closes, cancels the
// request's context and fails the goroutine's reads and writes.
type h2Bridge struct {
	h  *loopH2        // used on the loop only
	s  *h2loop.Stream // likewise
	st *h2Stream      // the loops' request whose answer streams; nil for ServeHTTP

	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex   // protects what follows
	in         bytes.Buffer // body bytes fed, not yet read
	inEnd      bool         // the body ended (trailer holds its trailers)
	inErr      error        // what the body's end returns instead of io.EOF; nil: io.EOF
	trailer    []hpack.HeaderField
	bodyClosed bool      // the handler closed the body: what comes is dropped
	readDL     time.Time // the body's read deadline; zero: none
	writeDL    time.Time // the answer's write deadline; zero: none
	consumed   int       // body bytes read, not yet given back to the client
	parts      []h2Part  // answer parts for the loop
	queued     int       // their bytes
	pending    int       // answer bytes the connection holds back
	task       bool      // a loop task is due for parts or consumed
	gone       bool      // the stream ended: reads and writes fail
	up         net.Conn  // st's upstream connection while its answer streams
	outWait    bool      // in h.outWait; used on the loop only
	readable   chan struct{}
	writable   chan struct{}
}

// h2Part is a part of a bridged stream's answer.
type h2Part struct {
	status   int // HEADERS when set
	fields   []hpack.HeaderField
	data     []byte
	trailers bool // fields are the trailers
	end      bool
	reset    bool // RST_STREAM INTERNAL_ERROR instead
}

// Open takes a stream at its HEADERS, to a goroutine, when the loops
// would not hold its body whole: gRPC (a call may stream both ways), an
// extended CONNECT (a WebSocket), a body of unknown length or past
// 64 KiB, or one its connection has no room to hold whole (s.Crowded: the
// connection holds h2loop's HeldBodies of them already); and when the
// loops do not serve it: a CONNECT, or a request found malformed at its
// HEADERS (s.Malformed), which the goroutine answers at once as net/http's
// HTTP/2 server does. Other streams arrive whole (Serve).
func (h *loopH2) Open(s *h2loop.Stream) bool {
	if !s.Crowded && s.Protocol == "" && s.ContentLength >= 0 && s.ContentLength <= loopBody && !grpcStream(s) &&
		!s.Malformed && s.Method != http.MethodConnect {
		return false
	}
	h.bridge(s, false)
	return true
}

// grpcStream reports whether s is a gRPC call.
func grpcStream(s *h2loop.Stream) bool {
	for _, f := range s.Header {
		if f.Name == "content-type" {
			return isGRPC(f.Value)
		}
	}
	return false
}

// Data feeds a bridged stream's body to its goroutine.
func (h *loopH2) Data(s *h2loop.Stream, p []byte, end bool) {
	b, ok := s.Value.(*h2Bridge)
	if !ok {
		return
	}
	b.mu.Lock()
	dropped := b.bodyClosed
	if !dropped {
		b.in.Write(p)
	}
	if end {
		b.inEnd, b.trailer = true, s.Trailer
	}
	b.mu.Unlock()
	if dropped {
		h.core.Consumed(s, len(p))
	}
	signal(b.readable)
}

// Writable gives a bridged stream's goroutine the credit of the answer
// bytes the connection sent.
func (h *loopH2) Writable(s *h2loop.Stream) {
	if b, ok := s.Value.(*h2Bridge); ok {
		b.credit()
	}
}

// bridge starts serving s, whose request arrived whole when whole is
// set, on a goroutine; it resets the stream (PROTOCOL_ERROR) instead when
// s's request cannot be one of net/http's.
func (h *loopH2) bridge(s *h2loop.Stream, whole bool) {
	b := h.newBridge(s)
	r, ok := h.bridgeRequest(s, b, whole)
	if !ok {
		b.cancel() // no goroutine serves it
		h.core.Reset(s, http2.ErrCodeProtocol)
		h.later()
		return
	}
	if whole {
		b.in.Write(s.Body)
		b.inEnd, b.trailer = true, s.Trailer
	}
	w := &bridgeWriter{b: b, head: http.Header{}, method: s.Method}
	serve := h.l.e.g.h2.ServeHTTP
	if err := h2RequestHeaders(r.Header); err != nil {
		serve = func(w http.ResponseWriter, _ *http.Request) { http.Error(w, err.Error(), http.StatusBadRequest) }
	}
	h.l.e.bridged.add()
	go b.serve(w, r, serve) // it ends with its stream, or its connection (see h2Bridge)
}

// newBridge makes s a bridged stream.
func (h *loopH2) newBridge(s *h2loop.Stream) *h2Bridge {
	b := &h2Bridge{h: h, s: s, readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if rt := h.l.e.g.state.Load().cfg.Server.ReadTimeout.D(); rt > 0 {
		b.readDL = time.Now().Add(rt) // as net/http's server bounds a request's body
	}
	s.Value = b
	h.core.SetPaced(s, true) // its writer's deadline bounds its answer's wait
	return b
}

// bridgeRequest makes s's request one of net/http's, as its HTTP/2 server
// makes it: Host from :authority (or the host field, which stays in
// Header as there, for ServeHTTP's check of a second host), cookie crumbs
// joined, the URL from :path (from :authority for a CONNECT without
// :protocol), :protocol as a header (an extended CONNECT), the declared
// trailers; its body read from b, its context b's. A body that arrived
// shorter than its content-length ends in an error, as net/http's
// server's does.
func (h *loopH2) bridgeRequest(s *h2loop.Stream, b *h2Bridge, whole bool) (*http.Request, bool) {
	r := &http.Request{
		Method: s.Method, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: make(http.Header, len(s.Header)), Host: s.Authority, RequestURI: s.Path,
		RemoteAddr: h.remoteAddr(), ContentLength: s.ContentLength, TLS: h.tls,
	}
	for _, f := range s.Header {
		k := http.CanonicalHeaderKey(f.Name)
		r.Header[k] = append(r.Header[k], f.Value)
	}
	if c := r.Header["Cookie"]; len(c) > 1 {
		r.Header["Cookie"] = []string{strings.Join(c, "; ")}
	}
	if r.Host == "" {
		r.Host = r.Header.Get("Host")
	}
	if s.Protocol != "" {
		r.Header.Set(":protocol", s.Protocol)
	}
	var err error
	if s.Method == http.MethodConnect && s.Protocol == "" {
		r.URL, r.RequestURI = &url.URL{Host: s.Authority}, s.Authority
	} else if r.URL, err = url.ParseRequestURI(s.Path); err != nil {
		return nil, false
	}
	for _, v := range r.Header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
				if r.Trailer == nil {
					r.Trailer = http.Header{}
				}
				r.Trailer[k] = nil
			}
		}
	}
	r = r.WithContext(b.ctx)
	switch {
	case whole && len(s.Body) == 0 && s.Trailer == nil:
		r.ContentLength, r.Body = 0, http.NoBody
	case whole && s.ContentLength > int64(len(s.Body)):
		b.inErr = fmt.Errorf("gateway: request declared a Content-Length of %d but only wrote %d bytes", s.ContentLength, len(s.Body))
		r.Body = &bridgeBody{b: b, r: r}
	case whole:
		r.ContentLength = int64(len(s.Body))
		r.Body = &bridgeBody{b: b, r: r} // r's Trailer takes the trailers
	default:
		r.Body = &bridgeBody{b: b, r: r}
	}
	return r, true
}

// remoteAddr returns the client's address, "ip:port".
func (h *loopH2) remoteAddr() string {
	if h.remote == "" {
		h.remote = h.c.RemoteAddr().String()
	}
	return h.remote
}

// serve runs handler through w.
func (b *h2Bridge) serve(w *bridgeWriter, r *http.Request, handler http.HandlerFunc) {
	defer b.h.l.e.bridged.done()
	defer b.cancel()
	b.answer(w, func() { handler(w, r) })
}

// h2RequestHeaders returns the error net/http's HTTP/2 server answers
// (400, its text the body) for a request with a connection-specific field
// or a te other than "trailers" (RFC 9113 section 8.2.2), in its words,
// and nil for another request.
func h2RequestHeaders(h http.Header) error {
	for _, k := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"} {
		if _, ok := h[k]; ok {
			return fmt.Errorf("request header %q is not valid in HTTP/2", k)
		}
	}
	if te := h["Te"]; len(te) > 1 || len(te) == 1 && te[0] != "trailers" && te[0] != "" {
		return errors.New(`request header "TE" may only be "trailers" in HTTP/2`)
	}
	return nil
}

// answer runs write, which answers through w, then ends the answer; a
// panic resets the stream instead (reset), as net/http's server does, and
// is logged unless it is http.ErrAbortHandler.
func (b *h2Bridge) answer(w *bridgeWriter, write func()) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				b.h.l.e.g.log.Error("serving a bridged HTTP/2 stream", "panic", v)
			}
			b.reset()
			return
		}
		w.finish()
	}()
	write()
}

// push hands part p to the loop.
func (b *h2Bridge) push(p h2Part) {
	b.mu.Lock()
	if b.gone {
		b.mu.Unlock()
		return
	}
	b.parts = append(b.parts, p)
	b.queued += len(p.data)
	b.scheduleLocked()
}

// reset resets the stream (RST_STREAM INTERNAL_ERROR) and ends it at
// once, as the client's reset would (end): its reads and writes fail and
// its request's context is cancelled before the handler returns. The
// connection calls Cancel only for a stream taken at its HEADERS (Open),
// not for one served whole or continued (unstreamed).
func (b *h2Bridge) reset() {
	b.push(h2Part{reset: true})
	b.end()
}

// scheduleLocked queues the loop's task for b, unless it is due; it
// unlocks b.mu.
func (b *h2Bridge) scheduleLocked() {
	due := b.task
	b.task = true
	b.mu.Unlock()
	if !due {
		l := b.h.l
		l.e.execute(l, b.loopTask)
	}
}

// loopTask, on the loop, gives back the body bytes read and sends the
// parts handed over.
func (b *h2Bridge) loopTask() {
	b.mu.Lock()
	parts, consumed := b.parts, b.consumed
	b.parts, b.consumed, b.task = nil, 0, false
	b.pending += b.queued
	b.queued = 0
	b.mu.Unlock()
	h := b.h
	if h.ended {
		return
	}
	core, s := h.core, b.s
	core.Consumed(s, consumed)
	for _, p := range parts {
		switch {
		case p.reset:
			core.Reset(s, http2.ErrCodeInternal)
		case p.status > 0:
			core.WriteHeaders(s, p.status, p.fields, p.end)
		case p.trailers:
			core.WriteTrailers(s, p.fields)
		default:
			core.WriteData(s, p.data, p.end)
		}
		if p.end || p.trailers || p.reset {
			// No writer waits any more: the connection's write timeout
			// bounds what the client leaves untaken.
			core.SetPaced(s, false)
		}
	}
	b.credit()
	h.later()
}

// credit notes, on the loop, what the connection holds back of b's answer,
// and wakes a writer waiting for it to go. While the client leaves the
// connection's output unread past maxPendingOut, the answer counts as held
// back whole (bridgeAhead), whatever its windows: the writer waits until
// the client reads (loopH2.traffic gives the credit back then).
func (b *h2Bridge) credit() {
	h := b.h
	held := h.core.Pending(b.s)
	if h.c.OutboundBuffered() > maxPendingOut {
		held += bridgeAhead
		if !b.outWait {
			b.outWait = true
			if len(h.outWait) == 0 {
				h.poll() // traffic looks again shortly
			}
			h.outWait = append(h.outWait, b)
		}
	}
	b.mu.Lock()
	b.pending = held
	b.mu.Unlock()
	signal(b.writable)
}

// end fails the stream's reads and writes, and cancels its request: the
// client reset it, the connection closed, or the bridge reset it (reset).
func (b *h2Bridge) end() {
	b.mu.Lock()
	b.gone = true
	up := b.up
	b.mu.Unlock()
	if up != nil {
		_ = up.Close() // the answer's body stops
	}
	signal(b.readable)
	signal(b.writable)
	b.cancel()
}

// signal wakes the goroutine waiting on ch, if any.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// await waits for a signal on ch until deadline dl (none when zero), and
// reports false once it has passed.
func await(ch chan struct{}, dl time.Time) bool {
	if dl.IsZero() {
		<-ch
		return true
	}
	d := time.Until(dl)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// unread gives back their credit to the bridged streams whose writers
// wait for the client to read the connection's output (see credit), once
// it has.
func (h *loopH2) unread() {
	waiting := h.outWait
	h.outWait = nil
	for _, b := range waiting {
		b.outWait = false
		b.credit()
	}
}
