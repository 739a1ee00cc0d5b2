package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/internal/requestid"
	"github.com/sluicehq/sluice/internal/testpki"
	"github.com/sluicehq/sluice/internal/tracing/tracingtest"
)

// dialWSHeader opens a WebSocket to url through c with the handshake
// headers h, failing the test when it cannot.
func dialWSHeader(t *testing.T, c *http.Client, url string, h http.Header) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: c, HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial %s: %v %+v", url, err, resp)
	}
	t.Cleanup(func() { conn.CloseNow() })
	return conn
}

// TestTraceOfWebSocket opens WebSockets through the plaintext listener
// (both engines) and the TLS one (net/http): the upstream's handshake
// carries the client's X-Request-Id, which the log line names, and the
// trace context of the handshake's attempt span, a child of the request's
// server span, itself the client's sampled span's child. A handshake
// without an id or a trace context gets a new id, the log line's, and a
// new unsampled trace context. (The handshake carried neither: the
// upstream could not tie a WebSocket to the gateway's log or trace.)
func TestTraceOfWebSocket(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		ca := testpki.NewCA(t)
		rcv := tracingtest.Start(t)
		up := startWSUpstream(t)
		gw, logs := startObserved(t, parseConfig(t, `
server: {engine: %s, websocket_idle_timeout: 1h}
tls: {listen: 127.0.0.1:0, certificates: %s}
tracing: {endpoint: "%s", sample: 0}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: ws, upstream: up}
`, engine, certList(ca.Server("localhost", "127.0.0.1")), rcv.URL, up.URL))
		tlsURL := "https://" + serveTLS(t, gw)
		for i, via := range []struct {
			name string
			c    *http.Client
			url  string
		}{{"plaintext", newClient(t), gw.URL}, {"tls", protoClient(t, "h1", ca.Pool, ""), tlsURL}} {
			id := "ws-" + via.name
			c := dialWSHeader(t, via.c, via.url+"/a", http.Header{"X-Request-Id": {id},
				"Traceparent": {"00-" + clientTrace + "-" + clientSpan + "-01"}, "Tracestate": {"vendor=x"}})
			sent := <-up.header
			echo(t, c, websocket.MessageText, []byte("hi"))
			c.Close(websocket.StatusNormalClosure, "")
			if ids := sent.Values("X-Request-Id"); len(ids) != 1 || ids[0] != id {
				t.Errorf("%s: the upstream got X-Request-Id %q, want [%s]", via.name, ids, id)
			}
			flushTraces(t, gw, logs, 2*i+1)
			if lines := logs.requests(t, 2*i+1); lines[2*i]["request_id"] != id {
				t.Errorf("%s: the log line's request_id is %v, want %s", via.name, lines[2*i]["request_id"], id)
			}
			servers, attempts := spansBy(rcv.WaitFor(t, 2*(i+1), waitLimit))
			server, ok := servers[id]
			as := attempts[server.SpanID]
			if !ok || server.TraceID != clientTrace || server.ParentSpanID != clientSpan || len(as) != 1 {
				t.Fatalf("%s: server span %+v with attempts %+v, want the client's child with one attempt", via.name, server, as)
			}
			if as[0].Attrs["http.response.status_code"] != int64(http.StatusSwitchingProtocols) {
				t.Errorf("%s: attempt span %+v, want the handshake's 101", via.name, as[0])
			}
			traceID, spanID, flags := splitTraceparent(t, sent.Get("Traceparent"))
			if traceID != clientTrace || spanID != as[0].SpanID || flags != "01" || sent.Get("Tracestate") != "vendor=x" || len(sent.Values("Traceparent")) != 1 {
				t.Errorf("%s: the upstream got traceparent %q tracestate %q, want trace %s, parent %s (the attempt), sampled, vendor=x",
					via.name, sent.Values("Traceparent"), sent.Get("Tracestate"), clientTrace, as[0].SpanID)
			}

			// Neither an id nor a trace context (a malformed id is not kept).
			c = dialWSHeader(t, via.c, via.url+"/b", http.Header{"X-Request-Id": {"not kept"}})
			sent = <-up.header
			c.Close(websocket.StatusNormalClosure, "")
			lines := logs.requests(t, 2*i+2)
			logged, _ := lines[len(lines)-1]["request_id"].(string)
			if got := sent.Get("X-Request-Id"); len(got) != requestid.Len || got != logged {
				t.Errorf("%s: the upstream got X-Request-Id %q, the log line %q; want the same new id", via.name, got, logged)
			}
			if traceID, _, flags := splitTraceparent(t, sent.Get("Traceparent")); traceID == clientTrace || flags != "00" {
				t.Errorf("%s: the upstream got traceparent %q, want a new trace, unsampled", via.name, sent.Get("Traceparent"))
			}
		}
	})
}
