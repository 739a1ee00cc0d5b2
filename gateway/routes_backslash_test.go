package gateway_test

import "testing"

// TestBackslashesCannotBypassRoutes checks, on both engines over HTTP/1.1
// and h2c, that a path whose backslashes, read as slashes (as IIS and
// other servers on Windows read them), would choose another route is
// refused (400 ambiguous_path), and that one they do not change is
// served. /free\..\admin\users, raw or as %5C, went through the catch-all
// route's policies to an upstream that serves it as /admin/users. So is
// a path that a servlet container reading backslashes as slashes (Tomcat
// with allowBackslash) reads as another route's, its segment parameters
// removed first, up to the next '/', backslashes and all:
// /admin\x;\..\..\free/users, the catch-all's whichever of the two
// readings is made alone, went through its policies to such an upstream,
// which serves it as /admin/x/users.
func TestBackslashesCannotBypassRoutes(t *testing.T) {
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
			{`/free%5C..%5Cadmin%5Cusers`, 400},
			{`/free%5c..%5cadmin/users`, 400},
			{`/admin%5Cusers`, 400},
			{`/%5Cadmin/users`, 400},          // //admin/users, which is /admin/users
			{`/admin/..%5Cfree%5Cusers`, 400}, // the admin route's, read as /free/users
			{`/admin/x%5C..%5Cusers`, 200},    // the admin route either way
			{`/free%5Cx%5C..%5Cusers`, 200},   // the catch-all either way
			{`/free/a%5Cb`, 200},
			{`/admin%5Cx;%5C..%5C..%5Cfree/users`, 400}, // /admin/x/users, parameters first
			{`/free/a;b%5Cc`, 200},                      // the catch-all every way
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
