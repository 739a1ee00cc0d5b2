package gateway_test

import (
	"bytes"
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
	open   bool   // with no data: END_STREAM on an empty DATA frame, not on the HEADERS
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
			h.headers(t, id, c.data == "" && !c.open, c.fields...)
			if c.data != "" || c.open {
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
		{name: "HEAD with connection", fields: []string{":method", "HEAD", ":scheme", "http", ":authority", "a.test", ":path", "/a", "connection", "keep-alive"}, status: "400"},
		{name: "keep-alive", fields: h2Get("keep-alive", "timeout=5"), status: "400", body: text("Keep-Alive")},
		{name: "proxy-connection", fields: h2Get("proxy-connection", "keep-alive"), status: "400", body: text("Proxy-Connection")},
		{name: "upgrade", fields: h2Get("upgrade", "h2c"), status: "400", body: text("Upgrade")},
		{name: "transfer-encoding", fields: h2Post("transfer-encoding", "chunked"), data: "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a.test\r\n\r\n",
			status: "400", body: text("Transfer-Encoding")},
		{name: "te gzip", fields: h2Get("te", "gzip"), status: "400", body: `request header "TE" may only be "trailers" in HTTP/2` + "\n"},
		{name: "te trailers twice", fields: h2Get("te", "trailers", "te", "trailers"), status: "400", body: `request header "TE" may only be "trailers" in HTTP/2` + "\n"},
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
		{name: "a length, then no length", fields: h2Post("content-length", "5", "content-length", "5x"), data: "hello", status: "400"},
		{name: "one length spelled twice", fields: h2Post("content-length", "0", "content-length", "00"), status: "400"},
		{name: "signed zero", fields: h2Post("content-length", "-0"), status: "400"},
		{name: "longer than the data", fields: h2Post("content-length", "50"), data: "hello", status: "400"},
		{name: "no data", fields: h2Post("content-length", "5"), status: "400"},
		{name: "empty DATA", fields: h2Post("content-length", "5"), open: true, status: "400", body: `{"error":"body_unreadable"}` + "\n"},
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

// TestH2SchemeReset sends a request whose :scheme is neither "http" nor
// "https": every HTTP/2 engine resets the stream (PROTOCOL_ERROR), as
// net/http's HTTP/2 server resets it before any handler sees it, and no
// upstream gets it. (The loops sent it upstream.)
func TestH2SchemeReset(t *testing.T) {
	checkH2Malformed(t, []h2MalformedCase{
		{name: "ftp", fields: []string{":method", "GET", ":scheme", "ftp", ":authority", "a.test", ":path", "/a"}, status: "RST PROTOCOL_ERROR"},
		{name: "HTTP", fields: []string{":method", "GET", ":scheme", "HTTP", ":authority", "a.test", ":path", "/a"}, status: "RST PROTOCOL_ERROR"},
	})
}

// TestH2MalformedBodiesGiveBackTheWindow sends malformed requests whose
// bodies (48 KiB each, not ended) no handler reads, twice the
// connection's window of them in all: each is answered, and its body's
// share of the connection's window comes back, so that a request after
// them is served (a client that sent past the window would lose the
// connection, FLOW_CONTROL_ERROR).
func TestH2MalformedBodiesGiveBackTheWindow(t *testing.T) {
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startWireUpstream(t, nil)
		tg := gatewayTo(t, engine, u.addr)
		h := dialH2(t, tg.Addr)
		chunk := bytes.Repeat([]byte("x"), 16<<10)
		malformed := [][]string{
			h2Post("connection", "x"),
			h2Post("content-length", "49152", "content-length", "49153"),
			{":method", "CONNECT", ":authority", "a.test:443"},
			{":method", "POST /x", ":scheme", "http", ":authority", "a.test", ":path", "/a"},
		}
		id := uint32(1)
		for i := range 44 {
			h.headers(t, id, false, malformed[i%len(malformed)]...)
			for range 3 {
				if err := h.fr.WriteData(id, false, chunk); err != nil {
					t.Fatal(err)
				}
			}
			if st, _ := h.read(t, id); st != "400" && st != "405" {
				t.Fatalf("request %d: %s, want 400 or 405", i, st)
			}
			id += 2
		}
		h.headers(t, id, false, h2Post("content-length", "49152")...)
		for j := range 3 {
			if err := h.fr.WriteData(id, j == 2, chunk); err != nil {
				t.Fatal(err)
			}
		}
		if st, _ := h.read(t, id); st != "200" {
			t.Fatalf("the request after them: %s, want 200", st)
		}
	})
}
