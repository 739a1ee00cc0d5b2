package gateway_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// trailerUpstream is an upstream that sends the names of each request's
// trailer fields, sorted, on the channel it returns.
func trailerUpstream(t *testing.T) (*upstream, chan []string) {
	names := make(chan []string, 8)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		var got []string
		for k := range r.Trailer {
			got = append(got, k)
		}
		slices.Sort(got)
		names <- got
	})
	return up, names
}

// TestRouteRulesTakeTrailers sends a route that removes X-Secret and sets
// X-User requests whose trailer sections carry X-Secret, X_Secret and
// X-User beside X-Other: the upstream gets X-Other alone, from an
// HTTP/1.1 chunked body on every engine as from HTTP/2 (which dropped
// them already, but X_Secret). An HTTP/1.1 trailer section kept them,
// whatever the route's rules said of the header: many upstreams read
// trailer fields with the header.
func TestRouteRulesTakeTrailers(t *testing.T) {
	const routes = `
  - name: all
    upstream: up
` + cgiRules
	t.Run("h1", func(t *testing.T) {
		forEngines(t, func(t *testing.T, engine string) {
			up, names := trailerUpstream(t)
			gw := routedGateway(t, engine, up, routes)
			got := exchangeRaw(t, gw.Addr, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"+
				"Trailer: X-Secret, X_Secret, X-User, X-Other\r\n\r\n2\r\nhi\r\n0\r\n"+
				"X-Secret: s\r\nX_Secret: s\r\nX-User: admin\r\nX-Other: 1\r\n\r\n", 1)
			if got[0].Code != http.StatusOK {
				t.Fatalf("answer %d, want 200", got[0].Code)
			}
			if seen := <-names; !slices.Equal(seen, []string{"X-Other"}) {
				t.Errorf("the upstream got trailers %v, want [X-Other]", seen)
			}
		})
	})
	forH2Engines(t, func(t *testing.T, engine string) {
		up, names := trailerUpstream(t)
		gw := routedGateway(t, engine, up, routes)
		req, err := http.NewRequest(http.MethodPost, gw.URL+"/x", io.NopCloser(strings.NewReader("hi")))
		if err != nil {
			t.Fatal(err)
		}
		req.Trailer = http.Header{"X-Secret": {"s"}, "X_secret": {"s"}, "X-User": {"admin"}, "X-Other": {"1"}}
		resp, err := protoClient(t, "h2c", nil, "").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if seen := <-names; resp.StatusCode != http.StatusOK || !slices.Equal(seen, []string{"X-Other"}) {
			t.Errorf("answer %d, the upstream got trailers %v, want 200 and [X-Other]", resp.StatusCode, seen)
		}
	})
}
