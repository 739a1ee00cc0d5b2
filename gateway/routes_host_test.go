package gateway_test

import (
	"net/http"
	"testing"
)

// TestHostVariantsCannotBypassRoutes checks, on both engines over HTTP/1.1
// and h2c, that a route matched by host serves the host's other spellings
// an upstream reads as it: with the trailing dot of a fully qualified name
// (nginx drops it) and any case or port. (api.example. matched no route
// for api.example and went through the catch-all's policies.)
func TestHostVariantsCannotBypassRoutes(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := startUpstream(t, "up", nil)
		gw := routedGateway(t, engine, up, `
  - name: limited
    match: {host: api.example}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - name: dotted
    match: {host: dotted.example.}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - {name: free, upstream: up}
`)
		c := protoClient(t, proto, nil, "")
		for i, s := range []struct {
			host string
			code int
		}{
			{"api.example", 200},
			{"api.example.", 429},
			{"API.Example.", 429},
			{"api.example.:8080", 429},
			{"dotted.example", 200},
			{"dotted.example.", 429},
			{"other.example", 200},
		} {
			if r := do(t, c, "GET", gw.URL+"/", http.Header{"Host": {s.host}}, nil); r.Code != s.code {
				t.Errorf("step %d (Host %s): status %d, want %d", i, s.host, r.Code, s.code)
			}
		}
	})
}

// TestPathParametersCannotBypassRoutes checks, on both engines over
// HTTP/1.1 and h2c, that a path whose segment parameters (";x", which
// servlet containers drop: Tomcat serves /admin;x/users as /admin/users)
// would choose another route than the path without them is refused (400
// ambiguous_path), and that one they do not change is served. (/admin;x/users
// went through the catch-all route's policies, and so did /x/..;/admin/users
// and /;x/admin/users, whose path without parameters was not normalized.)
func TestPathParametersCannotBypassRoutes(t *testing.T) {
	forEnginesAndProtos(t, func(t *testing.T, engine, proto string) {
		up := startUpstream(t, "up", nil)
		gw := routedGateway(t, engine, up, `
  - name: admin
    match: {path_prefix: /admin/}
    upstream: up
    policies:
      rate_limit: {limit: 100, period: 1h, key: route}
  - {name: free, upstream: up}
`)
		c := protoClient(t, proto, nil, "")
		for i, s := range []struct {
			path string
			code int
		}{
			{"/admin;x/users", 400},
			{"/admin;/users", 400},
			{"/admin;x=1;y=2/users", 400},
			{"/admin/users;jsessionid=1", 200}, // the admin route either way
			{"/admin/;x/users", 200},
			{"/free;x/users", 200}, // the catch-all either way
			{"/admin/users", 200},
			// Without their parameters these hold a dot segment or an
			// empty one, which servlet containers then resolve: all
			// are /admin/users there.
			{"/x/..;/admin/users", 400},
			{"/x/..;y/admin/users", 400},
			{"/.;/admin/users", 400},
			{"/;x/admin/users", 400},
			{"/x;y/../admin/users", 200},  // the admin route either way
			{"/free/..;/free/users", 200}, // the catch-all either way
			{"/admin/x/..;/users", 200},   // the admin route either way
		} {
			r := do(t, c, "GET", gw.URL+s.path, nil, nil)
			if r.Code != s.code {
				t.Errorf("step %d (%s): status %d %q, want %d", i, s.path, r.Code, r.Body, s.code)
			} else if s.code == 400 && r.errorBody(t).Error != "ambiguous_path" {
				t.Errorf("step %d (%s): body %q, want ambiguous_path", i, s.path, r.Body)
			}
		}
	})
}
