package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/http1"
)

// h2Transport returns the client of an h2 or h2c upstream: HTTP/2 only (over
// TLS with tc, or by prior knowledge without), one connection per target
// shared by concurrent requests, closed once idle for the upstream's
// idle_timeout; connecting takes at most connect_timeout.
func h2Transport(u *config.Upstream, tc *tls.Config) *http.Transport {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: u.ConnectTimeout.D()}).DialContext,
		TLSHandshakeTimeout: u.ConnectTimeout.D(),
		IdleConnTimeout:     u.IdleTimeout.D(),
		DisableCompression:  true,
		Protocols:           new(http.Protocols),
	}
	if tc != nil {
		tr.TLSClientConfig = tc.Clone()
	}
	if u.Protocol == "h2c" {
		tr.Protocols.SetUnencryptedHTTP2(true)
	} else {
		tr.Protocols.SetHTTP2(true)
	}
	return tr
}

// h2RoundTrip sends req to target t over tr, an h2 or h2c transport, and
// reads the response into resp: its status (one outside 200 to 599 fails
// with http1.ErrBadStatus) and headers, and its body whole
// when it is at most http1.SmallBody long, else as a stream (none for a
// HEAD, a 204 or a 304, whatever their Content-Length). The bounds are
// RoundTrip's: the response's head must come by the trip's Head, the whole
// exchange ends by its deadline, each wait between two reads of the body
// is bounded by its wait, and its cut ends the exchange when the client
// leaves. HTTP/2 flow control paces the target when the client reads the
// stream slowly.
func h2RoundTrip(tr *http.Transport, t *Target, req *fasthttp.Request, resp *fasthttp.Response, trp Trip) error {
	ctx, cancel := context.WithCancel(context.Background())
	if !trp.Deadline.IsZero() {
		ctx, cancel = context.WithDeadline(context.Background(), trp.Deadline)
	}
	hreq, err := h2Request(ctx, t, req)
	if err != nil {
		cancel()
		return err
	}
	stall := &stallTimer{wait: trp.Wait, cancel: cancel}
	if err := trp.Cut.set(cancelConn{cancel}); err != nil {
		cancel()
		return err
	}
	if !trp.Head.IsZero() {
		d := time.Until(trp.Head)
		if d <= 0 {
			cancel()
			return fasthttp.ErrTimeout
		}
		stall.arm(d)
	}
	hresp, err := tr.RoundTrip(hreq)
	stall.disarm()
	err = trp.Cut.clear(err)
	if err != nil {
		if hresp != nil {
			hresp.Body.Close()
		}
		cancel()
		if stall.fired.Load() || errors.Is(err, context.DeadlineExceeded) {
			return fasthttp.ErrTimeout
		}
		return err
	}
	if hresp.StatusCode < 200 || hresp.StatusCode > 599 {
		// Interim answers are the transport's to skip; what is left is no
		// final status (net/http's client takes any number).
		hresp.Body.Close()
		cancel()
		return http1.ErrBadStatus
	}
	resp.Reset()
	resp.SetStatusCode(hresp.StatusCode)
	for k, vs := range hresp.Header {
		for _, v := range vs {
			resp.Header.Add(k, v)
		}
	}
	body := &h2Body{body: hresp.Body, stall: stall, cancel: cancel}
	if http1.Bodiless(hreq.Method == http.MethodHead, hresp.StatusCode) || hresp.ContentLength == 0 {
		// A 304's Content-Length is its representation's (RFC 9110
		// section 8.6): there is no body to read, whatever it says.
		body.Close()
		resp.SkipBody = hreq.Method == http.MethodHead
		return nil
	}
	if n := hresp.ContentLength; n > 0 && n <= http1.SmallBody {
		buf := make([]byte, n)
		_, err := io.ReadFull(body, buf)
		body.Close()
		if err != nil {
			return timeoutError(err)
		}
		resp.SetBodyRaw(buf)
		return nil
	}
	resp.SetBodyStream(body, int(hresp.ContentLength)) // -1: chunked to an HTTP/1.1 client
	return nil
}

// TrailedBody is a request body stream that ends with trailers. Trailer
// returns them, their names set before the stream is read: an HTTP/2
// target is sent their values as the request's trailer section once the
// stream has returned io.EOF (values set later are not sent).
type TrailedBody interface {
	io.Reader
	Trailer() http.Header
}

// h2Request is req, prepared for target t, as a
// net/http request for an HTTP/2 transport. A body stream that is a
// TrailedBody with trailers ends with them.
func h2Request(ctx context.Context, t *Target, req *fasthttp.Request) (*http.Request, error) {
	scheme := "http://"
	if t.Client.IsTLS {
		scheme = "https://"
	}
	var body io.Reader
	var trailer http.Header
	n := int64(req.Header.ContentLength())
	if s := req.BodyStream(); s != nil {
		body = s
		if tb, ok := s.(TrailedBody); ok {
			trailer = tb.Trailer()
		}
	} else if b := req.Body(); len(b) > 0 {
		body, n = bytes.NewReader(b), int64(len(b))
	}
	hreq, err := http.NewRequestWithContext(ctx, string(req.Header.Method()), scheme+t.Client.Addr+string(req.RequestURI()), body)
	if err != nil {
		return nil, err
	}
	hreq.Host = string(req.Header.Host())
	if body != nil && n >= 0 {
		hreq.ContentLength = n
	}
	if len(trailer) > 0 {
		hreq.Trailer, hreq.ContentLength = trailer, -1
	}
	for k, v := range req.Header.All() {
		if !http1.EqualName(k, "Host") && !http1.EqualName(k, "Content-Length") && !http1.EqualName(k, "Transfer-Encoding") {
			hreq.Header.Add(string(k), string(v))
		}
	}
	return hreq, nil
}

// stallTimer cancels an exchange when the target keeps it waiting too
// long: for the response's head, then longer than wait
// (response_header_timeout; zero: no bound) between two reads of its body.
type stallTimer struct {
	wait   time.Duration
	cancel context.CancelFunc
	timer  *time.Timer
	fired  atomic.Bool
}

// arm cancels the exchange unless disarm is called within d.
func (s *stallTimer) arm(d time.Duration) {
	if s.timer == nil {
		s.timer = time.AfterFunc(d, func() { s.fired.Store(true); s.cancel() })
		return
	}
	s.timer.Reset(d)
}

func (s *stallTimer) disarm() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// h2Body is the body of a response from an HTTP/2 target: each read is
// bounded by the stall timer and counted by its BodyEnd, and Close ends
// the stream (and frees what the exchange holds) and its BodyEnd.
type h2Body struct {
	body   io.ReadCloser
	stall  *stallTimer
	cancel context.CancelFunc
	BodyEnd
}

func (b *h2Body) Read(p []byte) (int, error) {
	if b.stall.wait > 0 {
		b.stall.arm(b.stall.wait)
	}
	n, err := b.body.Read(p)
	b.Took(n, err)
	b.stall.disarm()
	if err != nil && err != io.EOF && b.stall.fired.Load() {
		err = fasthttp.ErrTimeout
	}
	return n, err
}

func (b *h2Body) Close() error {
	b.stall.disarm()
	err := b.body.Close()
	b.cancel()
	b.End()
	return err
}

// cancelConn lets an Interrupt cut an HTTP/2 exchange, which has no
// connection of its own: its deadline cancels the exchange's context.
type cancelConn struct{ cancel context.CancelFunc }

func (c cancelConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (c cancelConn) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (c cancelConn) Close() error                     { c.cancel(); return nil }
func (c cancelConn) LocalAddr() net.Addr              { return nil }
func (c cancelConn) RemoteAddr() net.Addr             { return nil }
func (c cancelConn) SetDeadline(time.Time) error      { c.cancel(); return nil }
func (c cancelConn) SetReadDeadline(time.Time) error  { c.cancel(); return nil }
func (c cancelConn) SetWriteDeadline(time.Time) error { c.cancel(); return nil }
