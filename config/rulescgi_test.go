package config_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestRequestRulesRefuseCGIFramingNames checks that a request rule cannot
// name a framing or hop-by-hop header under its CGI form ('_' for '-'):
// the gateway matches a request rule's names so (X_Secret for X-Secret),
// and remove: [Content_Length] took out the client's Content-Length, so
// that every request whose body streams upstream was answered 502. A
// response rule's names are matched as they are, and pass.
func TestRequestRulesRefuseCGIFramingNames(t *testing.T) {
	const bad = `upstreams: {a: {targets: ["http://x:1"]}}
routes:
  - name: r
    upstream: a
    headers:
      request: {set: {Keep_Alive: x}, remove: [Content_Length, transfer_encoding, X_Fine]}
      response: {remove: [Content_Length]}
`
	_, err := config.Parse("bad.yaml", []byte(bad))
	if err == nil {
		t.Fatal("request rules naming Content_Length and Transfer_Encoding accepted")
	}
	for _, w := range []string{
		`routes[0].headers.request.set.Keep_Alive: Keep_Alive is a framing or hop-by-hop header`,
		`routes[0].headers.request.remove[0]: Content_Length is a framing or hop-by-hop header`,
		`routes[0].headers.request.remove[1]: transfer_encoding is a framing or hop-by-hop header`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("errors lack %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "X_Fine") || strings.Contains(err.Error(), "response") {
		t.Errorf("a good name reported:\n%v", err)
	}
}
