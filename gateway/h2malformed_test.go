package gateway_test

import (
	"maps"
	"runtime"
	"testing"
)

// h2MalformedCase is a request RFC 9113 makes malformed, sent on one
// stream: its fields, the DATA after them (none: END_STREAM on the
// HEADERS), and the answer every HTTP/2 engine gives it.
type h2MalformedCase struct {
	name   string
	fields []string
	data   string
	status string // "RST PROTOCOL_ERROR" for a reset
	body   string // "" when any (compared across engines)
}

// h2Get is a GET's pseudo-header fields, then extra.
func h2Get(extra ...string) []string {
	return append([]string{":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a"}, extra...)
}

// h2Post is a POST's pseudo-header fields, then extra.
func h2Post(extra ...string) []string {
	return append([]string{":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/a"}, extra...)
}

// checkH2Malformed sends each case on an h2c connection to a gateway on
// every HTTP/2 engine: each gets the status (and body) the case names, the
// upstream gets none of them, and each engine's answers (status, body and
// the header fields but Date and X-Request-Id) are those of net/http's
// HTTP/2 server (the round "loop-nethttp-h2").
func checkH2Malformed(t *testing.T, cases []h2MalformedCase) {
	answers := map[string]map[string]map[string]string{} // round, case: header fields, ":body"
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		h := dialH2(t, tg.Addr)
		got := map[string]map[string]string{}
		for i, c := range cases {
			id := uint32(1 + 2*i)
			h.headers(t, id, c.data == "", c.fields...)
			if c.data != "" {
				if err := h.fr.WriteData(id, true, []byte(c.data)); err != nil {
					t.Fatal(err)
				}
			}
			st, body := h.read(t, id)
			if st != c.status || (c.body != "" && body != c.body) {
				t.Errorf("%s: %s %q, want %s %q", c.name, st, body, c.status, c.body)
			}
			a := maps.Clone(h.hdr)
			delete(a, "date")
			delete(a, "x-request-id")
			a[":status"], a[":body"] = st, body
			got[c.name] = a
		}
		if seen := u.requests(); len(seen) != 0 {
			t.Errorf("the upstream got %d requests (%s %s first), want none", len(seen), seen[0].Method, seen[0].Target)
		}
		answers[t.Name()] = got
	})
	if runtime.GOOS != "linux" {
		return
	}
	ref := answers[t.Name()+"/loop-nethttp-h2"]
	for round, got := range answers {
		for _, c := range cases {
			if !maps.Equal(got[c.name], ref[c.name]) {
				t.Errorf("%s: %s answered %v, net/http's HTTP/2 server %v", c.name, round, got[c.name], ref[c.name])
			}
		}
	}
}

// TestH2ConnectionSpecificFieldsAnswered sends requests with a
// connection-specific field or a te other than "trailers" (RFC 9113
// section 8.2.2): every HTTP/2 engine answers 400 as net/http's HTTP/2
// server does, its text the body, and no upstream gets them. (The loops
// reset the stream, PROTOCOL_ERROR.)
func TestH2ConnectionSpecificFieldsAnswered(t *testing.T) {
	text := func(name string) string { return `request header "` + name + `" is not valid in HTTP/2` + "\n" }
	checkH2Malformed(t, []h2MalformedCase{
		{name: "connection", fields: h2Get("connection", "keep-alive"), status: "400", body: text("Connection")},
		{name: "keep-alive", fields: h2Get("keep-alive", "timeout=5"), status: "400", body: text("Keep-Alive")},
		{name: "proxy-connection", fields: h2Get("proxy-connection", "keep-alive"), status: "400", body: text("Proxy-Connection")},
		{name: "upgrade", fields: h2Get("upgrade", "h2c"), status: "400", body: text("Upgrade")},
		{name: "transfer-encoding", fields: h2Post("transfer-encoding", "chunked"), data: "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a.test\r\n\r\n",
			status: "400", body: text("Transfer-Encoding")},
		{name: "te gzip", fields: h2Get("te", "gzip"), status: "400", body: `request header "TE" may only be "trailers" in HTTP/2` + "\n"},
		{name: "te trailers, gzip", fields: h2Get("te", "trailers, gzip"), status: "400", body: `request header "TE" may only be "trailers" in HTTP/2` + "\n"},
	})
}

// TestH2ContentLengthMismatchAnswered sends requests whose content-length
// fields disagree with each other or promise more than the DATA bring
// (RFC 9113 section 8.1.1): every HTTP/2 engine answers 400 as the gateway
// answers them behind net/http's HTTP/2 server, and no upstream gets them.
// (The loops reset the stream, PROTOCOL_ERROR.) DATA past the length
// reset the stream on every engine, as net/http's server resets it. (A
// length that is no number on a request with a body, which the loops
// reset, net/http's server reads as 0 and resets at the DATA, unless its
// handler answered 400 first: not compared.)
func TestH2ContentLengthMismatchAnswered(t *testing.T) {
	checkH2Malformed(t, []h2MalformedCase{
		{name: "two lengths", fields: h2Post("content-length", "5", "content-length", "6"), data: "hello", status: "400"},
		{name: "longer than the data", fields: h2Post("content-length", "50"), data: "hello", status: "400"},
		{name: "no data", fields: h2Post("content-length", "5"), status: "400"},
		{name: "GET without data", fields: h2Get("content-length", "5"), status: "400"},
		{name: "HEAD", fields: []string{":method", "HEAD", ":scheme", "http", ":authority", "a.test", ":path", "/a", "content-length", "5"}, status: "400"},
		{name: "shorter than the data", fields: h2Post("content-length", "2"), data: "hello", status: "RST PROTOCOL_ERROR"},
	})
}

// TestH2MethodAndConnectAnswered sends a :method that is no token, which
// every HTTP/2 engine answers 400, and a CONNECT (RFC 9113 section 8.5),
// answered 405 as the gateway answers it behind net/http's HTTP/2 server;
// no upstream gets them. (The loops reset both streams, PROTOCOL_ERROR.)
func TestH2MethodAndConnectAnswered(t *testing.T) {
	checkH2Malformed(t, []h2MalformedCase{
		{name: "method with a space", fields: []string{":method", "GET /evil", ":scheme", "http", ":authority", "a.test", ":path", "/a"}, status: "400"},
		{name: "CONNECT", fields: []string{":method", "CONNECT", ":authority", "evil.test:443"}, status: "405"},
		{name: "CONNECT with a body", fields: []string{":method", "CONNECT", ":authority", "evil.test:443"}, data: "GET / HTTP/1.1\r\n\r\n", status: "405"},
		{name: "CONNECT with a path", fields: []string{":method", "CONNECT", ":authority", "evil.test:443", ":path", "/"}, status: "RST PROTOCOL_ERROR"},
	})
}

// TestH2UserinfoReset sends requests whose :authority, or host field
// without one, holds userinfo (RFC 9113 section 8.3.1 forbids it):
// every HTTP/2 engine resets the stream (PROTOCOL_ERROR), as net/http's
// HTTP/2 server resets it before any handler sees it, and no upstream
// gets them. (The loops answered 400.)
func TestH2UserinfoReset(t *testing.T) {
	checkH2Malformed(t, []h2MalformedCase{
		{name: ":authority", fields: []string{":method", "GET", ":scheme", "http", ":authority", "evil@a.test", ":path", "/a"}, status: "RST PROTOCOL_ERROR"},
		{name: "host", fields: []string{":method", "GET", ":scheme", "http", ":path", "/a", "host", "evil@a.test"}, status: "RST PROTOCOL_ERROR"},
	})
}
