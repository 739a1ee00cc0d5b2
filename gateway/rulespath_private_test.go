package gateway

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestSetRewrittenPathAllocs checks that rewriting a path without a '%'
// (most paths) costs no allocation beyond the rewrite's own: encoding
// each '%' for fasthttp's SetPathBytes copied every path, one more
// allocation on each request of a route with rules, on the goroutine
// engine and HTTP/2.
func TestSetRewrittenPathAllocs(t *testing.T) {
	r := &routeRules{strip: "/api", add: "/v1"}
	var u fasthttp.URI
	u.SetPath("/api/items/42")
	rewrite := testing.AllocsPerRun(100, func() { _ = r.rewrite(u.Path()) })
	set := testing.AllocsPerRun(100, func() {
		u.SetPath("/api/items/42")
		setRewrittenPath(&u, r)
	})
	if string(u.Path()) != "/v1/items/42" {
		t.Fatalf("path %q, want /v1/items/42", u.Path())
	}
	if set > rewrite {
		t.Errorf("setRewrittenPath allocates %v times, the rewrite alone %v", set, rewrite)
	}
}
