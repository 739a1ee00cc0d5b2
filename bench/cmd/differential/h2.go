package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Request is a request sent as HTTP/2 frames on stream 1 of a new
// connection (TLS with ALPN h2, or h2c by prior knowledge): its header
// fields exactly as given (pseudo-header fields among them, in order, any
// bytes: the HPACK encoder checks nothing; on h2c a :scheme of "https"
// is sent as "http"), its DATA frames, then its trailer fields when there
// are any. The frame hooks add what a request alone cannot: frames
// before and after it (the Framer allows illegal writes), or stream 1's
// HEADERS written another way. What the proxy forwards over HTTP/1.1 is
// read as for any other case.
type h2Request struct {
	fields  []hpack.HeaderField
	data    []string
	trailer []hpack.HeaderField
	// note says what the hooks send, for the report.
	note string
	// before writes frames after the client's SETTINGS, before stream 1.
	before func(fr *http2.Framer) error
	// headers writes stream 1's header block in place of one HEADERS
	// frame with END_HEADERS (and END_STREAM without data or trailers).
	headers func(fr *http2.Framer, block []byte, endStream bool) error
	// after writes frames after the request; encode encodes header
	// fields with the connection's encoder.
	after func(fr *http2.Framer, encode func([]hpack.HeaderField) []byte) error
}

// h2get is a GET of path with the usual pseudo-header fields, then the
// fields of kv (name, value, name, value...).
func h2get(path string, kv ...string) *h2Request {
	return h2req("GET", path, nil, kv...)
}

// h2req is a request of method for path, authority x, with the fields of
// kv and data as its DATA frames.
func h2req(method, path string, data []string, kv ...string) *h2Request {
	r := &h2Request{data: data, fields: []hpack.HeaderField{
		{Name: ":method", Value: method}, {Name: ":scheme", Value: "https"}, {Name: ":authority", Value: "x"}, {Name: ":path", Value: path}}}
	r.fields = append(r.fields, fields(kv...)...)
	return r
}

func fields(kv ...string) []hpack.HeaderField {
	var f []hpack.HeaderField
	for i := 0; i+1 < len(kv); i += 2 {
		f = append(f, hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return f
}

// exchangeH2 sends r to p (a TLS or an h2c proxy) and reads the answer on
// stream 1: each :status it gets, and how the stream ended ("ended", "rst
// CODE", "goaway CODE", or "open" at the idle bound).
func (p *proxy) exchangeH2(r *h2Request) (answer, error) {
	c, err := p.dialH2()
	if err != nil {
		return answer{}, err
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetWriteDeadline(start.Add(whole))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return answer{end: "write: " + err.Error()}, nil
	}
	fr := http2.NewFramer(c, c)
	fr.AllowIllegalWrites = true
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	encode := func(fs []hpack.HeaderField) []byte {
		block.Reset()
		for _, f := range fs {
			_ = enc.WriteField(f) // writes to a buffer
		}
		return block.Bytes()
	}
	reqFields := r.fields
	if p.h2c {
		reqFields = slices.Clone(r.fields)
		for i, f := range reqFields {
			if f.Name == ":scheme" && f.Value == "https" {
				reqFields[i].Value = "http"
			}
		}
	}
	endStream := len(r.data) == 0 && len(r.trailer) == 0
	err = fr.WriteSettings()
	if err == nil && r.before != nil {
		err = r.before(fr)
	}
	switch {
	case err != nil:
	case r.headers != nil:
		err = r.headers(fr, encode(reqFields), endStream)
	default:
		err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: encode(reqFields), EndHeaders: true, EndStream: endStream})
	}
	for i := 0; err == nil && i < len(r.data); i++ {
		err = fr.WriteData(1, i == len(r.data)-1 && len(r.trailer) == 0, []byte(r.data[i]))
	}
	if err == nil && len(r.trailer) > 0 {
		err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: encode(r.trailer), EndHeaders: true, EndStream: true})
	}
	if err == nil && r.after != nil {
		err = r.after(fr, encode)
	}
	if err != nil {
		return answer{end: "write: " + err.Error()}, nil
	}
	return readH2Answer(c, fr, start), nil
}

// dialH2 opens a connection to p that speaks HTTP/2: TLS with ALPN h2,
// or plaintext for h2c.
func (p *proxy) dialH2() (net.Conn, error) {
	d := net.Dialer{Timeout: whole}
	if p.h2c {
		c, err := d.Dial("tcp", p.addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		return c, nil
	}
	c, err := tls.DialWithDialer(&d, "tcp", p.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	if proto := c.ConnectionState().NegotiatedProtocol; proto != "h2" {
		c.Close()
		return nil, fmt.Errorf("%s: ALPN chose %q, not h2", p.name, proto)
	}
	return c, nil
}

// readH2Answer reads frames until stream 1 ends or the idle or whole
// bound passes, acknowledging settings and pings.
func readH2Answer(c net.Conn, fr *http2.Framer, start time.Time) answer {
	var a answer
	for time.Since(start) < whole {
		_ = c.SetReadDeadline(minTime(time.Now().Add(idle), start.Add(whole)))
		f, err := fr.ReadFrame()
		if err != nil {
			a.end = "closed"
			if errors.Is(err, os.ErrDeadlineExceeded) {
				a.end = "open"
			}
			return a
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			if s := f.PseudoValue("status"); s != "" {
				var code int
				_, _ = fmt.Sscan(s, &code)
				a.statuses = append(a.statuses, code)
			}
			if f.StreamEnded() {
				a.end = "ended"
				return a
			}
		case *http2.DataFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				a.end = "ended"
				return a
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				a.end = "rst " + f.ErrCode.String()
				return a
			}
		case *http2.GoAwayFrame:
			a.end = "goaway " + f.ErrCode.String()
			return a
		}
	}
	a.end = "open"
	return a
}

// h2Cases are the requests an HTTP/2 front end translates to HTTP/1.1:
// what RFC 9113 section 8 makes malformed (connection-specific fields,
// upper-case names, CR, LF or NUL in a field, a content-length the DATA
// disagree with), and the claims of the HTTP/1.1 corpus in HTTP/2 form.
func h2Cases() []testCase {
	hidden := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	h2 := func(name string, r *h2Request) testCase { return testCase{name: "h2 " + name, h2: r} }
	withTrailer := func(r *h2Request, kv ...string) *h2Request { r.trailer = fields(kv...); return r }
	authority := func(r *h2Request, v string) *h2Request { r.fields[2].Value = v; return r }
	return []testCase{
		h2("plain get", h2get("/a")),
		h2("post content-length", h2req("POST", "/a", []string{"hello"}, "content-length", "5")),
		h2("post without length", h2req("POST", "/a", []string{"hel", "lo"})),
		h2("content-length shorter than data", h2req("POST", "/a", []string{"hello" + hidden}, "content-length", "5")),
		h2("content-length longer than data", h2req("POST", "/a", []string{"hello"}, "content-length", "50")),
		h2("two content-lengths", h2req("POST", "/a", []string{"hello"}, "content-length", "5", "content-length", "6")),
		h2("content-length list", h2req("POST", "/a", []string{"hello"}, "content-length", "5, 5")),
		h2("transfer-encoding chunked", h2req("POST", "/a", []string{"0\r\n\r\n" + hidden}, "transfer-encoding", "chunked")),
		h2("transfer_encoding", h2req("POST", "/a", []string{"0\r\n\r\n" + hidden}, "transfer_encoding", "chunked")),
		h2("content_length", h2req("POST", "/a", []string{"hello" + hidden}, "content_length", "5")),
		h2("connection header", h2get("/a", "connection", "keep-alive")),
		h2("keep-alive header", h2get("/a", "keep-alive", "timeout=5")),
		h2("proxy-connection", h2get("/a", "proxy-connection", "keep-alive")),
		h2("upgrade header", h2get("/a", "upgrade", "h2c")),
		h2("te gzip", h2get("/a", "te", "gzip")),
		h2("te trailers", h2get("/a", "te", "trailers")),
		h2("upper-case name", h2get("/a", "X-Upper", "1")),
		h2("CRLF in value", h2get("/a", "x-a", "1\r\nX-Injected: evil")),
		h2("LF in value", h2get("/a", "x-a", "1\nX-Injected: evil")),
		h2("NUL in value", h2get("/a", "x-a", "1\x00evil")),
		h2("value with leading space", h2get("/a", "x-a", " 1")),
		h2("CRLF in name", h2get("/a", "x-a\r\nx-injected", "evil")),
		h2("colon in name", h2get("/a", "x:a", "1")),
		h2("space in name", h2get("/a", "x a", "1")),
		h2("empty name", h2get("/a", "", "1")),
		h2("underscore name", h2get("/a", "x_a", "1")),
		h2("CRLF in path", h2get("/a HTTP/1.1\r\nHost: evil\r\n\r\nGET /smuggled")),
		h2("space in path", h2get("/a b")),
		h2("absolute path", h2get("http://evil/a")),
		h2("asterisk path", h2req("OPTIONS", "*", nil)),
		h2("empty path", h2get("")),
		h2("method with space", h2req("GET /evil", "/a", nil)),
		h2("lower-case method", h2req("get", "/a", nil)),
		h2("pseudo after regular", &h2Request{fields: fields(":method", "GET", ":scheme", "https", "x-a", "1", ":authority", "x", ":path", "/a")}),
		h2("unknown pseudo", h2get("/a", ":evil", "1")),
		h2("authority and host differ", h2get("/a", "host", "evil")),
		h2("host without authority", &h2Request{fields: fields(":method", "GET", ":scheme", "https", ":path", "/a", "host", "x")}),
		h2("authority with userinfo", authority(h2get("/a"), "evil@x")),
		h2("authority with path", authority(h2get("/a"), "x/evil")),
		h2("empty authority", authority(h2get("/a"), "")),
		h2("empty authority beside host", authority(h2get("/a", "host", "x"), "")),
		h2("cookie split", h2get("/a", "cookie", "a=1", "cookie", "b=2")),
		h2("x-forwarded-for", h2get("/a", "x-forwarded-for", "evil")),
		h2("x_forwarded_for", h2get("/a", "x_forwarded_for", "evil")),
		h2("x-forwarded-host", h2get("/a", "x-forwarded-host", "evil")),
		h2("x-real-ip", h2get("/a", "x-real-ip", "evil")),
		h2("forwarded", h2get("/a", "forwarded", "for=evil")),
		h2("x-forwarded-port", h2get("/a", "x-forwarded-port", "6666", "x-forwarded-prefix", "/evil")),
		h2("x-request-id", h2get("/a", "x-request-id", "evil")),
		h2("trailer x-forwarded-for", withTrailer(h2req("POST", "/a", []string{"hello"}, "trailer", "x-forwarded-for"), "x-forwarded-for", "evil")),
		h2("trailer content-length", withTrailer(h2req("POST", "/a", []string{"hello"}), "content-length", "50")),
		h2("trailer x-request-id", withTrailer(h2req("POST", "/a", []string{"hello"}, "trailer", "x-request-id"), "x-request-id", "evil")),
		h2("CONNECT", &h2Request{fields: fields(":method", "CONNECT", ":authority", "evil:443")}),
	}
}

// String shows the request's fields, data and trailer fields.
func (r *h2Request) String() string {
	var b strings.Builder
	for _, f := range r.fields {
		fmt.Fprintf(&b, "%q: %q; ", f.Name, f.Value)
	}
	for _, d := range r.data {
		fmt.Fprintf(&b, "DATA %q; ", d)
	}
	for _, f := range r.trailer {
		fmt.Fprintf(&b, "trailer %q: %q; ", f.Name, f.Value)
	}
	if r.note != "" {
		b.WriteString(r.note)
	}
	return b.String()
}
