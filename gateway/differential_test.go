package gateway_test

import (
	"strings"
	"testing"
)

// Regression tests for what the differential test against nginx
// (scripts/differential.sh) found: what the upstream reads in the bytes the
// gateway forwards.

// TestContentLengthForwardedPlain: a Content-Length the gateway accepts
// reaches the upstream as its digits alone. The loops forwarded the
// client's line as it came ("Content-Length:\t5\t", "Content-Length: 005"),
// whose length a parser that trims only spaces (nginx's) or reads leading
// zeros otherwise may not read as 5, while the goroutine engine wrote it
// afresh.
func TestContentLengthForwardedPlain(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		for _, line := range []string{"Content-Length:\t5\t", "Content-Length: 005", "content-length:5 "} {
			before := u.count()
			got := exchangeRaw(t, gw.Addr, "POST /a HTTP/1.1\r\nHost: x\r\n"+line+"\r\n\r\nhello", 1)
			msgs, _ := u.since(before)
			if got[0].Code != 200 || len(msgs) != 1 {
				t.Fatalf("%q: client got %+v, upstream read %d messages", line, got, len(msgs))
			}
			if raw := string(msgs[0].Raw); !strings.Contains(raw, "\r\nContent-Length: 5\r\n") || strings.Count(strings.ToLower(raw), "content-length") != 1 {
				t.Fatalf("%q: upstream got %q, want one line Content-Length: 5", line, raw)
			}
		}
	})
}

// TestAbsoluteFormNamesHost: a request whose absolute-form target names
// another host than its Host header is refused (400) and reaches no
// upstream. RFC 9112 section 3.2.2 has a server ignore Host for the
// target's authority, which nginx does, while the gateway routed by Host
// and forwarded it as X-Forwarded-Host: a proxy in front that reads the
// target and the gateway then disagree on the request's host.
func TestAbsoluteFormNamesHost(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		for _, c := range []struct {
			target, host string
			want         int
		}{
			{"http://evil/a", "x", 400},
			{"http://evil@x/a", "x", 400},
			{"https://x:8443/a", "x", 400},
			{"http://x/a?q=1", "x", 200},
			{"HTTP://X/a", "x", 200},
			{"https://x:8443", "X:8443", 200},
		} {
			before := u.count()
			got := exchangeRaw(t, gw.Addr, "GET "+c.target+" HTTP/1.1\r\nHost: "+c.host+"\r\n\r\n", 1)
			msgs, _ := u.since(before)
			if got[0].Code != c.want || (c.want == 400) != (len(msgs) == 0) {
				t.Fatalf("%s with Host %s: client got %d, upstream read %d messages; want %d", c.target, c.host, got[0].Code, len(msgs), c.want)
			}
		}
	})
}

// TestTrailerClaimsDropped: a chunked request's trailer section reaches
// the upstream without the fields the gateway sets or drops in the header
// (X-Request-Id, Forwarded, X-Real-IP, X-Forwarded-* in their '_' forms,
// the others than -For, -Host and -Proto too; fasthttp refuses the '-'
// forms of X-Forwarded-*), nor Transfer_Encoding or Content_Length: an
// upstream that reads trailers with the header (as many do) read the
// client's claim beside the gateway's own. Other trailer fields pass.
// (X_Forwarded_Port and the framing names passed.)
func TestTrailerClaimsDropped(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		for _, field := range []string{"X-Request-Id: evil", "x_request_id: evil", "Forwarded: for=evil", "X_Forwarded_For: evil", "X_Forwarded_Host: evil",
			"X_Forwarded_Port: evil", "x_real_ip: evil", "Transfer_Encoding: evil", "Content_Length: evil"} {
			before := u.count()
			got := exchangeRaw(t, gw.Addr, "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
				"5\r\nhello\r\n0\r\n"+field+"\r\nX-Checksum: 1\r\n\r\n", 1)
			msgs, _ := u.since(before)
			if got[0].Code != 200 || len(msgs) != 1 || string(msgs[0].Body) != "hello" {
				t.Fatalf("%s: client got %+v, upstream read %+v", field, got, msgs)
			}
			if raw := string(msgs[0].Raw); strings.Contains(raw, "evil") || !strings.Contains(raw, "\r\nX-Checksum: 1\r\n") {
				t.Fatalf("%s: upstream got %q, want the trailer X-Checksum alone", field, raw)
			}
		}
	})
}

// TestRealIPDropped: a client's X-Real-IP (in any case, '_' for '-')
// never reaches the upstream. nginx's common configuration sets it to the
// client's address and applications behind nginx trust it; the gateway
// passed the client's own, so a client behind sluice chose the address
// such an upstream logs, keys or allows.
func TestRealIPDropped(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		for _, line := range []string{"X-Real-IP: 6.6.6.6", "x-real-ip: 6.6.6.6", "X_Real_Ip: 6.6.6.6"} {
			before := u.count()
			got := exchangeRaw(t, gw.Addr, "GET /a HTTP/1.1\r\nHost: x\r\n"+line+"\r\n\r\n", 1)
			msgs, _ := u.since(before)
			if got[0].Code != 200 || len(msgs) != 1 {
				t.Fatalf("%s: client got %+v, upstream read %d messages", line, got, len(msgs))
			}
			if raw := string(msgs[0].Raw); strings.Contains(raw, "6.6.6.6") {
				t.Fatalf("%s: upstream got %q", line, raw)
			}
		}
	})
}

// TestInvalidHostRefused: a Host that is no host and port (RFC 9110
// section 7.2: a registered name, an IPv4 address or a bracketed IP
// literal, then an optional port) is refused (400, RFC 9112 section 3.2)
// and reaches no upstream. The gateway forwarded "evil@x" and `x"evil` as
// X-Forwarded-Host, from which upstreams build their links.
func TestInvalidHostRefused(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		for host, want := range map[string]int{
			"evil@x": 400, `x"evil`: 400, "x<evil>": 400, "x:80:80": 400, "[::1]x": 400, "x{y}": 400,
			"x_y": 200, "x.": 200, "[::1]:80": 200, "127.0.0.1:8080": 200, "xn--d1acufc.xn--p1ai": 200, "x:": 200,
		} {
			before := u.count()
			got := exchangeRaw(t, gw.Addr, "GET /a HTTP/1.1\r\nHost: "+host+"\r\n\r\n", 1)
			msgs, _ := u.since(before)
			if got[0].Code != want || (want == 400) != (len(msgs) == 0) {
				t.Fatalf("Host %s: client got %d, upstream read %d messages; want %d", host, got[0].Code, len(msgs), want)
			}
		}
	})
}

// TestNoHostNoForwardedHost: an HTTP/1.0 request without a Host reaches
// the upstream without X-Forwarded-Host; the gateway sent one with an
// empty value, from which an upstream builds links with no host.
func TestNoHostNoForwardedHost(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		got := exchangeRaw(t, gw.Addr, "GET /a HTTP/1.0\r\n\r\n", 1)
		msgs, _ := u.since(0)
		if got[0].Code != 200 || len(msgs) != 1 {
			t.Fatalf("client got %+v, upstream read %d messages", got, len(msgs))
		}
		if v := msgs[0].values("X-Forwarded-Host"); len(v) != 0 {
			t.Fatalf("upstream got X-Forwarded-Host %q in %q", v, msgs[0].Raw)
		}
	})
}

// TestForwardedClaimsFromTrustedOnly: the X-Forwarded-* headers the gateway
// does not set (-Port, -Prefix, -Ssl, in any case and '_' forms), which
// frameworks read beside -Host and -Proto to build their links, reach the
// upstream from a trusted proxy only, on plain requests and WebSocket
// handshakes. The gateway replaced a client's X-Forwarded-Host and -Proto
// but passed these, so a client chose the port and path prefix of the
// links an upstream sends.
func TestForwardedClaimsFromTrustedOnly(t *testing.T) {
	claims := "X-Forwarded-Port: 6666\r\nx_forwarded_prefix: /evil\r\nX-Forwarded-Ssl: on\r\n"
	for _, trusted := range []string{"", "127.0.0.1/32"} {
		forEngines(t, func(t *testing.T, engine string) {
			u := startRecordingUpstream(t)
			gw := startGateway(t, parseConfig(t, confConfig, engine, trusted, u.Addr))
			for _, head := range []string{"GET /a HTTP/1.1\r\nHost: x\r\n",
				"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"} {
				before := u.count()
				got := exchangeRaw(t, gw.Addr, head+claims+"\r\n", 1)
				msgs, _ := u.since(before)
				if got[0].Code != 200 || len(msgs) != 1 {
					t.Fatalf("trusted %q: %q: client got %+v, upstream read %d messages", trusted, head, got, len(msgs))
				}
				m := msgs[0]
				n := len(m.values("X-Forwarded-Port")) + len(m.values("X_Forwarded_Prefix")) + len(m.values("X-Forwarded-Ssl"))
				if want := map[string]int{"": 0, "127.0.0.1/32": 3}[trusted]; n != want {
					t.Fatalf("trusted %q: upstream got %d of the claims, want %d: %q", trusted, n, want, m.Raw)
				}
			}
		})
	}
}

// TestFramingHeaderUnderscoreRefused: a request with Transfer_Encoding or
// Content_Length (any case) is refused (400) and reaches no upstream. The
// gateway forwarded them as plain fields, but servers of CGI's lineage
// that read '_' as '-' in their own parser (older waitress and gunicorn
// versions) frame the body by them: the upstream then reads another
// request in the body (nginx drops names with '_').
func TestFramingHeaderUnderscoreRefused(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		for _, line := range []string{"Transfer_Encoding: chunked", "content_length: 40", "Transfer_encoding: identity"} {
			before := u.count()
			got := exchangeRaw(t, gw.Addr, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"+line+"\r\n\r\nhello", 1)
			msgs, _ := u.since(before)
			if got[0].Code != 400 || len(msgs) != 0 {
				t.Fatalf("%s: client got %d, upstream read %d messages; want 400 and none", line, got[0].Code, len(msgs))
			}
		}
	})
}

// TestH2FramingHeaderUnderscoreDropped: an HTTP/2 request's
// transfer_encoding and content_length fields do not reach an HTTP/1.1
// upstream, where servers that read '_' as '-' would frame the body by
// them beside the gateway's own Transfer-Encoding (HTTP/1.1 refuses such
// a request: TestFramingHeaderUnderscoreRefused).
func TestH2FramingHeaderUnderscoreDropped(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/a",
			"transfer_encoding", "chunked", "content_length", "2")
		if err := h.fr.WriteData(1, true, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("status %s, want 200", st)
		}
		msgs, _ := u.since(0)
		if len(msgs) != 1 || string(msgs[0].Body) != "hello" {
			t.Fatalf("upstream read %+v", msgs)
		}
		if raw := strings.ToLower(string(msgs[0].Raw)); strings.Contains(raw, "transfer_encoding") || strings.Contains(raw, "content_length") {
			t.Fatalf("upstream got %q", msgs[0].Raw)
		}
	})
}

// TestH2TrailerClaimsDropped: an HTTP/2 request's trailers reach an
// HTTP/1.1 upstream's trailer section without the fields a chunked
// request's trailer section loses (TestTrailerClaimsDropped): the '_'
// forms of X-Forwarded-Port, X-Real-IP, X-Request-Id, Transfer-Encoding
// and Content-Length. X_Forwarded_Port, Transfer_Encoding and
// Content_Length passed, though the header section drops them.
func TestH2TrailerClaimsDropped(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, false, ":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/a",
			"trailer", "x_forwarded_port, transfer_encoding, content_length, x_real_ip, x_request_id, x-checksum", "content-length", "5")
		if err := h.fr.WriteData(1, false, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		h.headers(t, 1, true, "x_forwarded_port", "evil", "transfer_encoding", "evil", "content_length", "evil",
			"x_real_ip", "evil", "x_request_id", "evil", "x-checksum", "1")
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("status %s, want 200", st)
		}
		msgs, _ := u.since(0)
		if len(msgs) != 1 || string(msgs[0].Body) != "hello" {
			t.Fatalf("upstream read %+v", msgs)
		}
		if raw := string(msgs[0].Raw); strings.Contains(raw, "evil") || !strings.Contains(raw, "\r\nX-Checksum: 1\r\n") {
			t.Fatalf("upstream got %q, want the trailer X-Checksum alone", raw)
		}
	})
}

// TestH2OneHost: an HTTP/2 request whose :path is in absolute form, or
// whose host field names another host than its :authority, is refused
// (400) and reaches no upstream, as nginx refuses both (RFC 9113 section
// 8.3.1). The gateway routed by :authority and forwarded the path alone,
// while a server that reads the :path's host, or the host field, reads
// another host than the gateway's X-Forwarded-Host. A host field that
// says the :authority, in any case, passes.
func TestH2OneHost(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		checkH2Hosts(t, engine, []string{":method", "GET", ":scheme", "http", ":authority", "x"}, []h2HostCase{
			{[]string{":path", "http://evil/a"}, "400"},
			{[]string{":path", "http://x/a"}, "400"},
			{[]string{":path", "/a", "host", "evil"}, "400"},
			{[]string{":path", "/a", "host", "x", "host", "evil"}, "400"},
			{[]string{":path", "/a", "host", "X"}, "200"},
			{[]string{":path", "/a"}, "200"},
		})
	})
}

// h2HostCase is a request's fields after checkH2Hosts's, and the status
// it wants.
type h2HostCase struct {
	fields []string
	want   string
}

// checkH2Hosts sends each case's request, fields after first, on one
// HTTP/2 connection to a gateway of engine's, and checks its status, and
// that the upstream read it unless it was refused 400.
func checkH2Hosts(t *testing.T, engine string, first []string, cases []h2HostCase) {
	u := startRecordingUpstream(t)
	gw := gatewayTo(t, engine, u.Addr)
	h := dialH2(t, gw.Addr)
	for i, c := range cases {
		id := uint32(2*i + 1)
		before := u.count()
		h.headers(t, id, true, append(append([]string(nil), first...), c.fields...)...)
		st, _ := h.read(t, id)
		msgs, _ := u.since(before)
		if st != c.want || (c.want == "400") != (len(msgs) == 0) {
			t.Fatalf("%q: status %s, upstream read %d messages; want %s", c.fields, st, len(msgs), c.want)
		}
	}
}

// TestH2EmptyAuthoritySecondHost: without :authority, the first host
// field names the host, and a second one naming another host is refused as
// beside :authority. An empty first host field let the loops take the
// second ("", then "evil") as the host, where net/http's path answers 400.
func TestH2EmptyAuthoritySecondHost(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		checkH2Hosts(t, engine, []string{":method", "GET", ":scheme", "http", ":path", "/a"}, []h2HostCase{
			{[]string{"host", "", "host", "evil"}, "400"},
			{[]string{"host", "x", "host", "evil"}, "400"},
			{[]string{"host", "x"}, "200"},
		})
	})
}

// TestH2WebSocketClaims: a WebSocket handshake over HTTP/2 (RFC 8441)
// reaches the upstream, over HTTP/1.1, with the X-Forwarded-* the gateway
// does not set from a trusted proxy only, as an HTTP/1.1 handshake does
// (TestForwardedClaimsFromTrustedOnly), and never with transfer_encoding
// or content_length (TestH2FramingHeaderUnderscoreDropped). The handshake
// passed the framing names, and dropped a trusted proxy's claims.
func TestH2WebSocketClaims(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	for _, trusted := range []string{"", "127.0.0.1/32"} {
		forEngines(t, func(t *testing.T, engine string) {
			u := startRecordingUpstream(t)
			gw := startGateway(t, parseConfig(t, confConfig, engine, trusted, u.Addr))
			h := dialH2(t, gw.Addr)
			h.headers(t, 1, false, ":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":authority", "x", ":path", "/ws",
				"sec-websocket-version", "13", "x-forwarded-port", "6666", "transfer_encoding", "chunked", "content_length", "5")
			h.read(t, 1) // the recording upstream answers no 101
			msgs, _ := u.since(0)
			if len(msgs) != 1 {
				t.Fatalf("trusted %q: upstream read %d messages", trusted, len(msgs))
			}
			raw := strings.ToLower(string(msgs[0].Raw))
			if strings.Contains(raw, "transfer_encoding") || strings.Contains(raw, "content_length") ||
				strings.Contains(raw, "x-forwarded-port: 6666") != (trusted != "") {
				t.Fatalf("trusted %q: upstream got %q", trusted, msgs[0].Raw)
			}
		})
	}
}

// TestH2InvalidAuthorityRefused: an HTTP/2 request whose :authority is no
// host and port (RFC 9110 section 7.2), as an HTTP/1.1 Host must be
// (TestInvalidHostRefused), is refused (400) and reaches no upstream.
// net/http's check takes any of the characters a host may hold in any
// order ("x:80:80", "x:evil", "[::1]x"), which the gateway forwarded as
// X-Forwarded-Host.
func TestH2InvalidAuthorityRefused(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		h := dialH2(t, gw.Addr)
		for i, c := range []struct {
			authority, want string
		}{
			{"x:80:80", "400"}, {"x:evil", "400"}, {"[::1]x", "400"}, {"x]y", "400"}, {"x", "200"}, {"[::1]:80", "200"}, {"x:8080", "200"},
		} {
			id := uint32(2*i + 1)
			before := u.count()
			h.headers(t, id, true, ":method", "GET", ":scheme", "http", ":authority", c.authority, ":path", "/a")
			st, _ := h.read(t, id)
			msgs, _ := u.since(before)
			if st != c.want || (c.want == "400") != (len(msgs) == 0) {
				t.Fatalf(":authority %s: status %s, upstream read %d messages; want %s", c.authority, st, len(msgs), c.want)
			}
		}
	})
}
