package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestForwardedHeadersCGINames checks, on both engines over HTTP/1.1 and
// h2c, that a client's X-Forwarded-For, -Host and -Proto under a name
// with '_' for '-' do not reach the upstream: a CGI-style server reads
// X_Forwarded_For as X-Forwarded-For, and one that took the client's line
// would believe its word on who it is (as Puma did, CVE-2024-45614). (They
// were passed on.)
func TestForwardedHeadersCGINames(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := startUpstream(t, "up", nil)
		gw := gatewayTo(t, engine, up.addr())
		h := http.Header{"X_forwarded_for": {"6.6.6.6"}, "X_forwarded_host": {"evil.example"},
			"X-Forwarded_proto": {"https"}, "X_api_key": {"kept"}}
		if r := do(t, protoClient(t, proto, nil, ""), "GET", gw.URL+"/", h, nil); r.Code != 200 {
			t.Fatalf("status %d", r.Code)
		}
		last := up.lastRequest()
		for k, vs := range last.Header {
			if name := strings.ReplaceAll(k, "_", "-"); name != k && strings.HasPrefix(strings.ToLower(name), "x-forwarded-") {
				t.Errorf("the upstream got the client's %s: %q", k, vs)
			}
		}
		if got := last.Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
			t.Errorf("X-Forwarded-For %q, want [127.0.0.1]", got)
		}
		if got := last.Header.Get("X_api_key"); got != "kept" {
			t.Errorf("X_api_key %q, want it passed on", got)
		}
	})
}
