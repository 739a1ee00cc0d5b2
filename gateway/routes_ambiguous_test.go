package gateway_test

import (
	"net/http"
	"testing"
)

// TestRouteHeaderAmbiguous checks, on both engines over HTTP/1.1 and h2c,
// that a request sending a header its route is matched by on more than
// one line is refused with 400 ambiguous_header, and that the forms one
// value can be dressed in (surrounding whitespace, '_' for '-') match as
// that value. (The first line decided: "small" then "big" went through
// the catch-all route's policies to an upstream that may read "big", and
// so did X_Model: big, which CGI-style servers read as X-Model; over
// HTTP/2, " big " did too.) A route that does not look at the header
// does not refuse it.
func TestRouteHeaderAmbiguous(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := startUpstream(t, "up", nil)
		gw := routedGateway(t, engine, up, `
  - name: big
    match: {path_prefix: /m, headers: {X-Model: big}}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - name: rest
    upstream: up
`)
		c := protoClient(t, proto, nil, "")
		for i, s := range []struct {
			path   string
			header http.Header
			code   int
		}{
			{"/m", http.Header{"X-Model": {"small", "big"}}, 400},
			{"/m", http.Header{"X-Model": {"big"}, "X_model": {"small"}}, 400},
			{"/m", http.Header{"X-Model": {"big"}}, 200},
			{"/m", http.Header{"X-Model": {"big"}}, 429},
			{"/m", http.Header{"X_model": {"big"}}, 429},
			{"/m", http.Header{"X-Model": {" big\t"}}, 429},
			{"/m", http.Header{"X-Model": {"small"}}, 200},
			{"/other", http.Header{"X-Model": {"small", "big"}}, 200},
		} {
			r := do(t, c, "GET", gw.URL+s.path, s.header, nil)
			if r.Code != s.code {
				t.Errorf("step %d (%s %q): status %d, want %d", i, s.path, s.header, r.Code, s.code)
				continue
			}
			if s.code == 400 && r.errorBody(t).Error != "ambiguous_header" {
				t.Errorf("step %d: body %q, want ambiguous_header", i, r.Body)
			}
		}
	})
}

// TestRouteHeaderComma checks, on both engines over HTTP/1.1 and h2c, that
// a header a route is matched by sent with a comma in its value is refused
// (400 ambiguous_header) as one sent on two lines is: a framework that
// joins lines with commas reads "small, big" as the two lines it stands
// for, and may take either. (It matched no route that wanted "small" and
// went through the catch-all's policies.) A comma in a header that is no
// list (Authorization's Digest credentials) is part of its one value.
func TestRouteHeaderComma(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := startUpstream(t, "up", nil)
		gw := routedGateway(t, engine, up, `
  - name: small
    match: {path_prefix: /m, headers: {X-Tier: small}}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - name: digest
    match: {path_prefix: /d, headers: {Authorization: 'Digest username="a", realm="r"'}}
    upstream: up
  - name: rest
    upstream: up
`)
		c := protoClient(t, proto, nil, "")
		for i, s := range []struct {
			path   string
			header http.Header
			code   int
		}{
			{"/m", http.Header{"X-Tier": {"small, big"}}, 400},
			{"/m", http.Header{"X-Tier": {"big,small"}}, 400},
			{"/m", http.Header{"X_tier": {"small,"}}, 400},
			{"/m", http.Header{"X-Tier": {"small"}}, 200},
			{"/m", http.Header{"X-Tier": {"big"}}, 200},
			{"/d", http.Header{"Authorization": {`Digest username="a", realm="r"`}}, 200},
			{"/other", http.Header{"X-Tier": {"small, big"}}, 200},
		} {
			r := do(t, c, "GET", gw.URL+s.path, s.header, nil)
			if r.Code != s.code {
				t.Errorf("step %d (%s %q): status %d %q, want %d", i, s.path, s.header, r.Code, r.Body, s.code)
				continue
			}
			if s.code == 400 && r.errorBody(t).Error != "ambiguous_header" {
				t.Errorf("step %d: body %q, want ambiguous_header", i, r.Body)
			}
		}
	})
}
