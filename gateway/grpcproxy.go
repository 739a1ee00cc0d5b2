package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/answer"
	"github.com/sluicehq/sluice/internal/http1"
	"github.com/sluicehq/sluice/internal/requestid"
	"github.com/sluicehq/sluice/internal/tracing"
)

// A gRPC call (an HTTP/2 request whose Content-Type is gRPC's, see isGRPC)
// goes through its route's policies as any request does, with gRPC's
// meaning:
//
//   - a rejection, a timeout or an upstream that cannot be reached is
//     answered in gRPC (HTTP 200, Trailers-Only, see writeGRPCError);
//   - the call's grpc-timeout bounds it, every attempt included, and each
//     attempt tells the upstream what is left of it (the route's timeout
//     may bound an attempt sooner); server.read_timeout does not bound
//     its request, which may stream for as long as the call lasts, but
//     server.max_body_bytes does (RESOURCE_EXHAUSTED past it);
//   - an attempt's outcome is the upstream's grpc-status, read from its
//     trailers: UNAVAILABLE, INTERNAL, RESOURCE_EXHAUSTED,
//     DEADLINE_EXCEEDED (see answer.IsGRPCFailure) fail it although its
//     HTTP status is 200, so breakers, adaptive limits and retries see
//     them; a call ends, for the policies, when its trailers arrive;
//   - only the calls the route's grpc.idempotent names are retried (on
//     UNAVAILABLE, and on what retry.on names of connect_error and
//     timeout), and only while nothing of the answer was sent: their
//     request is read whole first (up to maxReplayBody) and their answer
//     too (up to maxReplayBody, then it streams and is final);
//   - on a route that hedges, those of them whose request is one message
//     (unary and server-streaming calls) are hedged until an answer's
//     first message, which then streams; on a route that only hedges,
//     their request is not read whole first (see grpchedge.go);
//   - a call through which no byte passed either way for
//     server.grpc_idle_timeout ends with DEADLINE_EXCEEDED (see grpcIdle);
//     with its deadline, that bounds its wait for the upstream's answer,
//     which may come only at the call's end: the upstream's
//     response_header_timeout does not;
//     server.write_timeout bounds each write of its answer to the client
//     (see grpcCall.write);
//   - a route's static fallback answers, in gRPC (see grpcFallback and
//     config.Fallback.GRPCStatus), a call its route could not answer and
//     one whose upstream's answer is a failing status with nothing sent
//     before it (held, or Trailers-Only); its other levels (another
//     upstream, the last good answer) are HTTP's only.
//
// Calls go upstream over HTTP/2, whatever the upstream's protocol: over
// its own transport when it is h2 or h2c, else h2c to http:// targets and
// h2 (TLS) to https:// ones.

// grpcCall is one gRPC call on its way upstream, across attempts.
type grpcCall struct {
	rt  *route
	w   http.ResponseWriter
	r   *http.Request
	xff string
	// fwdHost and fwdProto are the X-Forwarded-Host and -Proto to send.
	fwdHost, fwdProto string
	in                *clientBody // the client's request, bounded by server.max_body_bytes
	body              []byte      // the request, read whole when the call may be retried
	rest              io.Reader   // the request when it streams
	sent              bool        // rest was given to an attempt
	tee               *requestTee // rest, kept for a hedge (see keepRequest); nil when not
	// hold: the call may be retried (its request is read whole), so an
	// answer is read whole before any of it is sent; a hedged call's
	// attempts read theirs up to the first message (see grpchedge.go).
	hold  bool
	held  *heldAnswer  // the last attempt's answer, read whole
	wrote bool         // an answer was sent to the client (headers at least)
	obs   *observation // the call's log and trace record
	idle  *grpcIdle    // ends the call after server.grpc_idle_timeout without a byte
	// writeTimeout is server.write_timeout: it bounds each write of the
	// answer to the client (see write).
	writeTimeout time.Duration
}

// heldAnswer is an upstream's gRPC answer read whole; or, when rest is
// not nil, the start (body) of one too long to hold, whose rest streams.
type heldAnswer struct {
	header, trailer http.Header
	body            []byte
	rest            *http.Response
}

// serveGRPC serves the gRPC call r on rt and returns the reason for the
// log ("" when the upstream's answer was passed on). It drives the route's
// lifecycle as the other engines do (see call), with gRPC's outcomes.
func (g *Gateway) serveGRPC(w http.ResponseWriter, r *http.Request, st *state, rt *route, obs *observation) string {
	xff, err := stdLimit(w, r, st, rt)
	if err != nil {
		return writeGRPCError(w, err)
	}
	ctx := r.Context()
	if d, ok := parseGRPCTimeout(r.Header.Get(hdrGRPCTimeout)); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d) // on the wall clock, as attempts' deadlines
		defer cancel()
	}
	// A call's request is bounded by the call's deadline, not by
	// server.read_timeout, which bounds reading an HTTP request whole: a
	// stream may last.
	dl, _ := ctx.Deadline() // zero: none
	_ = http.NewResponseController(w).SetReadDeadline(dl)
	// ... and by server.grpc_idle_timeout, whatever its deadline.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := watchGRPCIdle(rt.life.clock, st.cfg.Server.GRPCIdleTimeout.D(), cancel, r.Body)
	defer idle.stop()
	in := newClientBody(idle.reader(r.Body), st.cfg.Server.MaxBodyBytes)
	c := &grpcCall{rt: rt, w: w, r: r, xff: string(xff), in: in, rest: in, obs: obs, idle: idle, writeTimeout: st.cfg.Server.WriteTimeout.D()}
	c.fwdHost, c.fwdProto = stdForwarded(r, st)
	if rt.grpc.idempotent(r.URL.Path) {
		if rt.policies.retry != nil {
			release, reason := c.readRequest(ctx, &g.held, int64(st.cfg.Server.MaxHeldBodyBytes))
			if reason != "" {
				return reason
			}
			defer release()
		} else if rt.life.flow.hedge != nil {
			c.keepRequest() // not held back (see grpchedge.go)
		}
	}
	err = grpcIdleCause(ctx, c.run(ctx))
	if !c.wrote && err != nil {
		// The failure, or the upstream's failing answer, replaced.
		if reason := grpcFallback(w, rt, err); reason != "" {
			return reason
		}
	}
	switch {
	case c.wrote:
	case c.held != nil:
		c.sendHeld()
	default:
		return writeGRPCError(w, err)
	}
	_, reason := answer.GRPCClassify(err)
	return reason
}

// run drives the call's attempts through the route's lifecycle until one
// is not retried, and returns the last one's error (nil when it held or
// passed on an answer that is not a failure).
func (c *grpcCall) run(ctx context.Context) error {
	var cl call
	cl.start(c.rt.life, stdRequest{c.r}, !c.hold, c.obs)
	hedged := c.hedged()
	if hedged {
		c.rt.life.flow.hedgeBudget.Deposit()
	}
	for {
		var o sluice.Outcome
		if hedged {
			if o = c.race(ctx, &cl); o.Class == sluice.Dropped {
				return o.Err // refused: never retried
			}
		} else {
			a, err := cl.begin()
			if err != nil {
				return err
			}
			o = cl.settle(&a, http.StatusOK, nil, c.attempt(ctx, &a))
		}
		delay, again := cl.next(o)
		err := o.Err
		if !again {
			return err
		}
		if !sleepCtx(ctx, c.rt.life, delay) {
			cl.cancelled(err)
			return err
		}
	}
}

// sleepCtx waits d on lc's clock before another attempt; it returns false
// when ctx ended meanwhile.
func sleepCtx(ctx context.Context, lc *lifecycle, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := lc.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// readRequest reads the call's request whole, so that it can be sent
// again, up to maxReplayBody: a longer one streams, and the call is sent
// once, as is one that held (of at most maxHeld bytes held across the
// gateway, counted as they arrive) has no room for. It returns the
// function that gives back what held counts for the request, to call
// once the call has ended (a streamed request's first bytes are given
// back as soon as they are sent). It answers and returns the reason when
// the request cannot be read (or the call, ctx, ended idle meanwhile).
func (c *grpcCall) readRequest(ctx context.Context, held *heldBodies, maxHeld int64) (release func(), reason string) {
	b, n, err := held.read(c.in, maxReplayBody+1, maxHeld)
	if err != nil && !errors.Is(err, errNoRoom) {
		return nil, writeGRPCError(c.w, grpcIdleCause(ctx, err)) // errClientBody, errBodyTooLarge or errGRPCIdle
	}
	if err != nil || len(b) > maxReplayBody {
		rb := newResumedBody(b, c.in, held, n)
		c.rest = rb
		return rb.release, ""
	}
	c.body, c.rest, c.hold = b, nil, true
	return func() { held.release(n) }, ""
}

// attempt sends the call to a's target, within the route's timeout from
// the attempt's start, and reads or passes on its answer. Its error is
// what the route's policies see: the upstream's failing grpc-status
// (*answer.GRPCStatusError), a failing HTTP status (*StatusError) or an
// *UpstreamError; final when the call may not be sent again.
func (c *grpcCall) attempt(ctx context.Context, a *attempt) error {
	c.held = nil
	if c.body == nil && c.sent {
		return errNotReplayable
	}
	if d := c.rt.life.timeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.start.Add(d))
		defer cancel()
	}
	err := c.exchange(ctx, a.t, a.span)
	if err != nil && (c.wrote || !c.hold) {
		// Sent once: the call is not idempotent (its request streamed to
		// the target, which closes it on failure), or its answer is on
		// its way to the client.
		err = &finalError{err}
	}
	return err
}

// exchange sends the call to t, span the attempt's span, and reads its
// answer: held whole when the call may be retried, passed on as it comes
// otherwise.
func (c *grpcCall) exchange(ctx context.Context, t *target, span *tracing.Attempt) error {
	if !c.hold {
		resp, err := c.roundTrip(ctx, t, span, c.body)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return c.pass(ctx, t, resp, nil)
	}
	h, err := c.fetch(ctx, t, span)
	if h != nil && h.rest != nil {
		// Too long to hold: it streams, and the call is final.
		defer h.rest.Body.Close()
		return c.pass(ctx, t, h.rest, h.body)
	}
	c.held = h
	return err
}

// roundTrip sends the call to t, span the attempt's span, with body (nil:
// the request streams), and returns the upstream's answer (its body to be
// closed), or the attempt's error: a *StatusError for an HTTP status
// other than 200.
func (c *grpcCall) roundTrip(ctx context.Context, t *target, span *tracing.Attempt, body []byte) (*http.Response, error) {
	out, err := c.request(ctx, t, span, body)
	if err != nil {
		return nil, &UpstreamError{Target: t.URL, Err: err}
	}
	tr := t.H2 // an h2 or h2c upstream's own transport
	if tr == nil {
		tr = c.rt.pool.grpcTransport()
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		return nil, transportError(ctx, t, err)
	}
	resp.Body = c.idle.reader(resp.Body)
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplayBody))
		resp.Body.Close()
		ra, _ := answer.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return nil, &StatusError{StatusCode: resp.StatusCode, RetryAfter: ra}
	}
	return resp, nil
}

// fetch sends the call to t, span the attempt's span, and reads its answer
// whole, up to maxReplayBody: it returns the answer and its grpc-status as
// an error (see grpcStatus). An answer too long to hold is returned open
// (its rest to read and close) with what was read of it, and no error.
// It returns the attempt's error alone when there is no answer.
func (c *grpcCall) fetch(ctx context.Context, t *target, span *tracing.Attempt) (*heldAnswer, error) {
	resp, err := c.roundTrip(ctx, t, span, c.body)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReplayBody+1))
	switch {
	case err != nil:
		resp.Body.Close()
		return nil, transportError(ctx, t, err)
	case len(b) > maxReplayBody:
		return &heldAnswer{body: b, rest: resp}, nil
	}
	resp.Body.Close()
	return &heldAnswer{header: resp.Header, trailer: resp.Trailer, body: b}, grpcStatus(resp.Header, resp.Trailer)
}

// request builds the upstream request of an attempt to t, span the
// attempt's span, with body (nil: the request streams): the client's path and end-to-end headers, the gateway's
// X-Forwarded-*, the route's rewrite and header rules, TE: trailers
// (gRPC's), and what is left of the call's deadline as grpc-timeout. The
// client's request trailers are not sent: a gRPC request has none, and a
// gRPC server (grpc-go's) answers one with a connection error, which
// would end every call sharing the gateway's connection to it.
func (c *grpcCall) request(ctx context.Context, t *target, span *tracing.Attempt, body []byte) (*http.Request, error) {
	var rb io.Reader = c.rest
	if body != nil {
		rb = bytes.NewReader(body)
	} else {
		c.sent = true
	}
	scheme := "http://"
	if t.Client.IsTLS {
		scheme = "https://"
	}
	uri := c.r.URL.RequestURI() // the routed path (see serveStd)
	rules := c.rt.rules
	if rules != nil {
		rewritten := url.URL{Path: string(rules.rewrite([]byte(c.r.URL.Path))), RawQuery: c.r.URL.RawQuery}
		uri = rewritten.RequestURI()
	}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+t.Client.Addr+uri, rb)
	if err != nil {
		return nil, err
	}
	if body == nil {
		out.ContentLength = -1
	} else {
		out.ContentLength = int64(len(body))
	}
	// A trusted proxy's other X-Forwarded-* are dropped too (Trusted
	// false); the trace context is set below.
	drop := http1.Drop{Connection: []byte(strings.Join(c.r.Header.Values("Connection"), ", "))}
	for k, vs := range c.r.Header {
		if drop.Drops([]byte(k)) || k == hdrGRPCTimeout {
			continue
		}
		out.Header[k] = slices.Clip(vs) // a rule's Add appends to a copy, not into the client's array another attempt shares
	}
	out.Header.Set("Te", "trailers")
	out.Header.Set("X-Forwarded-For", c.xff)
	out.Header.Set("X-Forwarded-Host", c.fwdHost)
	out.Header.Set("X-Forwarded-Proto", c.fwdProto)
	out.Header.Set(requestid.Header, string(c.obs.id))
	if tp, ts := span.Headers(); tp != nil {
		out.Header.Set("Traceparent", string(tp))
		out.Header.Del("Tracestate")
		if ts != "" {
			out.Header.Set("Tracestate", ts)
		}
	}
	if rules != nil {
		rules.request.apply(out.Header)
		if rules.preserveHost {
			out.Host = c.r.Host
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		out.Header.Set(hdrGRPCTimeout, formatGRPCTimeout(time.Until(dl)))
	}
	return out, nil
}

// pass sends the upstream's answer to the client as it comes, first what
// was read of it (read), each read flushed, then its trailers. It returns
// the answer's grpc-status as an error (see grpcStatus); when the upstream
// breaks off the answer, the client's answer ends with UNAVAILABLE (or
// DEADLINE_EXCEEDED) in its trailers. A failing Trailers-Only answer is
// not sent when the route has a static fallback, which answers instead.
func (c *grpcCall) pass(ctx context.Context, t *target, resp *http.Response, read []byte) error {
	if resp.Header.Get(hdrGRPCStatus) != "" && c.rt.life.fallback != nil && c.rt.life.fallback.GRPCStatic {
		// Trailers-Only: when it is a failure, nothing was sent of it
		// and the route's static fallback replaces it.
		if err := grpcStatus(resp.Header, nil); err != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplayBody))
			return err
		}
	}
	h := c.w.Header()
	c.copyHeader(h, resp.Header)
	for k := range resp.Trailer { // announced, and sent once the body ends
		if answerTrailer(k) {
			h.Add("Trailer", k)
		}
	}
	c.w.WriteHeader(http.StatusOK)
	c.wrote = true
	if resp.Header.Get(hdrGRPCStatus) != "" {
		// Trailers-Only: the headers go with the end of the stream, once
		// the handler returns, as they came.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplayBody))
		return grpcStatus(resp.Header, nil)
	}
	rc := http.NewResponseController(c.w)
	_ = rc.Flush()
	if len(read) > 0 {
		if c.write(rc, read) != nil {
			return errClientGone
		}
	}
	buf := make([]byte, grpcWriteSize)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if c.write(rc, buf[:n]) != nil {
				return errClientGone
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			uerr := transportError(ctx, t, err)
			code, reason := answer.GRPCClassify(uerr)
			h.Set(http.TrailerPrefix+hdrGRPCStatus, strconv.Itoa(int(code)))
			h.Set(http.TrailerPrefix+hdrGRPCMessage, encodeGRPCMessage(grpcMessage(uerr, reason)))
			return uerr
		}
	}
	for k, vs := range resp.Trailer {
		if answerTrailer(k) {
			h[http.TrailerPrefix+k] = vs
		}
	}
	return grpcStatus(resp.Header, resp.Trailer)
}

// sendHeld sends the answer the last attempt held.
func (c *grpcCall) sendHeld() {
	a := c.held
	h := c.w.Header()
	c.copyHeader(h, a.header)
	for k, vs := range a.trailer {
		if answerTrailer(k) {
			h[http.TrailerPrefix+k] = vs
		}
	}
	c.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(c.w)
	// In pieces, as pass writes: server.write_timeout bounds each.
	for b := a.body; len(b) > 0; b = b[min(len(b), grpcWriteSize):] {
		if c.write(rc, b[:min(len(b), grpcWriteSize)]) != nil {
			return
		}
	}
}

// grpcWriteSize is the most of an answer sent to the client at once (see
// write).
const grpcWriteSize = 32 << 10

// write sends b to the client, flushed, within server.write_timeout: a
// client that reads nothing of it for that long has its stream reset, and
// write fails. The deadline is lifted once b is sent, so that a stream
// may pause between messages for as long as its call lasts. rc is the
// client's ResponseWriter's controller.
func (c *grpcCall) write(rc *http.ResponseController, b []byte) error {
	if wt := c.writeTimeout; wt > 0 {
		_ = rc.SetWriteDeadline(time.Now().Add(wt))
		defer rc.SetWriteDeadline(time.Time{})
	}
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// copyHeader adds the upstream's end-to-end headers src to the client's
// dst, as the route's response rules change them.
func (c *grpcCall) copyHeader(dst, src http.Header) {
	copyEndToEnd(dst, src)
	if rules := c.rt.rules; rules != nil {
		rules.response.apply(dst)
	}
}

// copyEndToEnd adds src's end-to-end headers to dst.
func copyEndToEnd(dst, src http.Header) {
	conn := []byte(strings.Join(src.Values("Connection"), ", "))
	for k, vs := range src {
		if http1.IsHop([]byte(k), conn) || k == "Content-Length" {
			continue
		}
		dst[k] = append(dst[k], vs...)
	}
}

// transportError is the error of an attempt to t that the transport failed
// with err: errGRPCIdle when the call ended idle, the client's own (its
// request broke off, or passed server.max_body_bytes) as it is, else the
// upstream's.
func transportError(ctx context.Context, t *target, err error) error {
	if err := grpcIdleCause(ctx, nil); err != nil {
		return err
	}
	if errors.Is(err, errClientBody) {
		return err
	}
	return upstreamError(t, grpcCause(ctx, err))
}

// grpcCause is err, or, when ctx ended first, ctx's cause: an attempt cut
// by its deadline is a timeout, one whose client left is cancelled. An
// attempt that failed once its deadline had passed is a timeout too,
// whatever the failure: the upstream, told the deadline, may end the call
// (reset its stream) just before the gateway does.
func grpcCause(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.Canceled) {
			return errClientGone
		}
		return cerr
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return err
}

// grpcTransport is a pool's HTTP/2 client for gRPC calls: h2c to http://
// targets, h2 to https:// ones, with the upstream's connect and idle
// timeouts. Not its response_header_timeout: a call's wait for its
// answer's head is bounded by the call's deadline and
// server.grpc_idle_timeout alone (an upstream may answer only at the
// call's end, as a client-streaming call's does), as on an h2 or h2c
// upstream's own transport. Built at first use; closed by stop.
type grpcTransport struct {
	once sync.Once
	tr   *http.Transport
}

func (p *pool) grpcTransport() *http.Transport {
	p.grpc.once.Do(func() {
		protos := new(http.Protocols)
		protos.SetHTTP2(true)
		protos.SetUnencryptedHTTP2(true)
		d := &net.Dialer{Timeout: p.Config().ConnectTimeout.D()}
		tr := &http.Transport{
			Protocols:          protos,
			DialContext:        d.DialContext,
			IdleConnTimeout:    p.Config().IdleTimeout.D(),
			DisableCompression: true,
		}
		for _, t := range p.Targets() {
			if t.Client.TLSConfig != nil {
				tr.TLSClientConfig = t.Client.TLSConfig.Clone()
				break
			}
		}
		p.grpc.tr = tr
	})
	return p.grpc.tr
}

// closeGRPC closes the idle connections of the pool's gRPC transport.
func (p *pool) closeGRPC() {
	p.grpc.once.Do(func() {}) // none is built after this
	if p.grpc.tr != nil {
		p.grpc.tr.CloseIdleConnections()
	}
}
