package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"
)

// TestWebSocketRewriteStripsDecodedPath opens WebSockets on a route whose
// strip_prefix has sub-delimiters (/w!s, which a path may carry raw or
// percent-encoded): the upstream's handshake has the prefix stripped and
// the query kept, as another request's does, on both engines. The
// rewrite was applied to the path re-encoded, where fasthttp writes '!'
// as %21, so the prefix never came off: /w!s/room went as
// /chat/w%21s/room.
func TestWebSocketRewriteStripsDecodedPath(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := wsGateway(t, engine, up, `    match: {path_prefix: /w!s/}
    rewrite: {strip_prefix: /w!s, add_prefix: /chat}
`)
		for _, tc := range []struct{ path, want string }{
			{"/w!s/room?x=1", "/chat/room?x=1"},
			{"/w%21s/room", "/chat/room"},
			{"/w!s/%252e%252e/x?y=%2F", "/chat/%252e%252e/x?y=%2F"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			c, _, err := websocket.Dial(ctx, gw.URL+tc.path, &websocket.DialOptions{HTTPClient: newClient(t)})
			cancel()
			if err != nil {
				t.Fatalf("%s: dial: %v", tc.path, err)
			}
			if got := (<-up.header).Get("X-Test-Target"); got != tc.want {
				t.Errorf("%s: the upstream got %s, want %s", tc.path, got, tc.want)
			}
			c.Close(websocket.StatusNormalClosure, "")
		}
	})
}

// TestWebSocketOverHTTP2RewriteStripsDecodedPath is
// TestWebSocketRewriteStripsDecodedPath for WebSockets over HTTP/2 (RFC
// 8441).
func TestWebSocketOverHTTP2RewriteStripsDecodedPath(t *testing.T) {
	if !inXConnect(t) {
		return
	}
	forH2Engines(t, func(t *testing.T, engine string) {
		up := startWSUpstream(t)
		gw := wsGateway(t, engine, up, `    match: {path_prefix: /w!s/}
    rewrite: {strip_prefix: /w!s, add_prefix: /chat}
`)
		c := dialH2WS(t, gw.Addr, "/w%21s/room?x=1", nil)
		if c.resp.StatusCode != http.StatusOK {
			t.Fatalf("handshake: %d, want 200", c.resp.StatusCode)
		}
		if got := (<-up.header).Get("X-Test-Target"); got != "/chat/room?x=1" {
			t.Errorf("the upstream got %s, want /chat/room?x=1", got)
		}
		c.closeNormally(t)
	})
}
