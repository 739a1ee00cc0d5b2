package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// spoofFields are the client fields that speak for the gateway, the
// connection or the framing (http1.Drop), each valued "evil…": no
// forwarding path may pass one to an upstream. h1 marks those an HTTP/1.1
// request can carry (Transfer_Encoding and Content_Length are refused
// there, TestFramingHeaderUnderscoreRefused), h2 those an HTTP/2 one can
// (connection-specific fields are refused there, RFC 9113 section 8.2.2).
// A client's own X-Request-Id is not among them: the gateway keeps a
// well-formed one (README).
var spoofFields = []struct {
	name   string
	h1, h2 bool
}{
	{"X-Forwarded-For", true, true}, {"X-Forwarded-Host", true, true}, {"X-Forwarded-Proto", true, true},
	{"X_Forwarded_For", true, true}, {"x_forwarded_host", true, true}, {"X-Forwarded_Proto", true, true},
	{"X-Forwarded-Port", true, true}, {"X_Forwarded_Prefix", true, true}, {"x-forwarded-ssl", true, true},
	{"X-Real-IP", true, true}, {"x_real_ip", true, true}, {"Forwarded", true, true},
	{"X_Request_Id", true, true}, {"x-request_id", true, true},
	{"Proxy-Authorization", true, true}, {"Proxy-Connection", true, false}, {"Keep-Alive", true, false},
	{"X-Secret", true, false}, // named by the request's Connection
	{"Transfer_Encoding", false, true}, {"content_length", false, true}, {"Content_length", false, true},
}

// spoofLines returns the spoofFields of a protocol (h2: HTTP/2's) as
// header lines, and the names the Connection header names.
func spoofLines(h2 bool) (lines string, fields []string) {
	for i, f := range spoofFields {
		if h2 && f.h2 || !h2 && f.h1 {
			v := fmt.Sprintf("evil%d", i)
			lines += f.name + ": " + v + "\r\n"
			fields = append(fields, strings.ToLower(f.name), v)
		}
	}
	return lines, fields
}

// TestSpoofFieldsDroppedOnEveryPath sends every field of spoofFields, on
// both engines, over each forwarding path (HTTP/1.1, HTTP/2, a WebSocket
// handshake, a gRPC call), and checks that none reaches the upstream.
// (A gRPC call passed Transfer_Encoding and Content_Length, which the
// other paths drop.)
func TestSpoofFieldsDroppedOnEveryPath(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		h1, _ := spoofLines(false)
		for name, req := range map[string]string{
			"h1":        "GET /a HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, X-Secret\r\n" + h1 + "\r\n",
			"h1 body":   "POST /a HTTP/1.1\r\nHost: x\r\nConnection: X-Secret\r\nContent-Length: 5\r\n" + h1 + "\r\nhello",
			"websocket": "GET /a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, X-Secret\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + h1 + "\r\n",
		} {
			before := u.count()
			exchangeRaw(t, gw.Addr, req, 1)
			msgs, _ := u.since(before)
			if len(msgs) != 1 {
				t.Fatalf("%s: the upstream read %d messages, want 1", name, len(msgs))
			}
			if raw := string(msgs[0].Raw); strings.Contains(raw, "evil") {
				t.Errorf("%s: the upstream got %q", name, raw)
			}
		}

		_, h2 := spoofLines(true)
		before := u.count()
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, true, append([]string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/a"}, h2...)...)
		if st, _ := h.read(t, 1); st != "200" {
			t.Fatalf("h2: status %s, want 200", st)
		}
		if msgs, _ := u.since(before); len(msgs) != 1 || strings.Contains(string(msgs[0].Raw), "evil") {
			t.Errorf("h2: the upstream read %+v", msgs)
		}

		got := make(chan http.Header, 1)
		g := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Header.Clone()
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.WriteHeader(http.StatusOK)
			w.Header().Set("Grpc-Status", "0")
		}))
		g.Config.Protocols = new(http.Protocols)
		g.Config.Protocols.SetUnencryptedHTTP2(true)
		g.Start()
		t.Cleanup(g.Close)
		gg := gatewayTo(t, engine, strings.TrimPrefix(g.URL, "http://"))
		hg := dialH2(t, gg.Addr)
		hg.headers(t, 1, true, append([]string{":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/svc/M",
			"content-type", "application/grpc"}, h2...)...)
		if st, _ := hg.read(t, 1); st != "200" {
			t.Fatalf("grpc: status %s, want 200", st)
		}
		for k, vs := range <-got {
			if strings.Contains(strings.Join(vs, ","), "evil") {
				t.Errorf("grpc: the upstream got %s: %q", k, vs)
			}
		}
	})
}

// TestTrailerTraceContextDropped: a chunked request's trailer section
// reaches the upstream without a Traceparent or Tracestate, as an HTTP/2
// request's does (announceTrailers): with tracing on, an upstream that
// reads trailers with the header read the client's trace context beside
// the gateway's. (They passed.)
func TestTrailerTraceContextDropped(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := gatewayTo(t, engine, u.Addr)
		for _, field := range []string{"Traceparent: evil", "tracestate: evil"} {
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
