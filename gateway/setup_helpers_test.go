package gateway_test

import "testing"

// forEnginesAndProtos runs test once on each engine (server.engine) over
// each of HTTP/1.1 and h2c: proto is "h1" or "h2c", as protoClient takes
// it.
func forEnginesAndProtos(t *testing.T, test func(t *testing.T, engine, proto string)) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, proto := range []string{"h1", "h2c"} {
			t.Run(proto, func(t *testing.T) { test(t, engine, proto) })
		}
	})
}

// routedGateway starts a gateway on engine with one upstream, "up", whose
// one target is up, and the routes in YAML (the list under "routes:",
// with %s verbs filled from args).
func routedGateway(t testing.TB, engine string, up *upstream, routes string, args ...any) *testGateway {
	t.Helper()
	return startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
`+routes, append([]any{engine, up.URL}, args...)...))
}
