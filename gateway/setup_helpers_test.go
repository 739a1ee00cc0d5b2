package gateway_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testpki"
)

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

// serverGateway starts a gateway on engine, with the settings in server
// added to its server section (flow-mapping entries such as
// "max_body_bytes: 16"; "" for none), and one route, "all", without
// policies, to the target at the URL target.
func serverGateway(t testing.TB, engine, server, target string) *testGateway {
	t.Helper()
	return startGateway(t, oneRouteConfig(t, engine, server, "", target))
}

// tlsGateway starts a gateway as serverGateway does, with a TLS listener
// too, serving the certificates certs (as certList writes them): serve
// it with serveTLS.
func tlsGateway(t testing.TB, engine, server, certs, target string) *testGateway {
	t.Helper()
	return startGateway(t, oneRouteConfig(t, engine, server, "tls: {listen: 127.0.0.1:0, certificates: "+certs+"}", target))
}

// caGateway starts a gateway as tlsGateway does, on engine, with one
// route to the target at the URL target, and a TLS listener whose
// certificate (for localhost and 127.0.0.1) the CA returned signs: serve
// it with serveTLS.
func caGateway(t testing.TB, engine, target string) (*testGateway, *testpki.CA) {
	t.Helper()
	ca := testpki.NewCA(t)
	return tlsGateway(t, engine, "", certList(ca.Server("localhost", "127.0.0.1")), target), ca
}

// oneRouteConfig is serverGateway's configuration, with the YAML line
// more ("" for none) at the top level.
func oneRouteConfig(t testing.TB, engine, server, more, target string) *config.Config {
	t.Helper()
	if server != "" {
		server = ", " + server
	}
	return parseConfig(t, `
server: {engine: %s%s}
%s
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, server, more, target)
}

// readLimited is a connection each of whose reads may wait up to
// waitLimit: a deadline that moves on with the bytes, for a test that
// reads so many that their total time depends on the machine.
type readLimited struct{ net.Conn }

func (c readLimited) Read(p []byte) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	return c.Conn.Read(p)
}

// checkClientReset starts a gateway with start, whose route sends every
// request to up, and has an h2c client cancel a request (reset its
// stream) while up holds it: up must see the request's end (its
// connection go) within waitLimit.
func checkClientReset(t *testing.T, start func(up *upstream) *testGateway) {
	t.Helper()
	arrived, gone := make(chan struct{}), make(chan struct{})
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(waitLimit):
		}
	})
	tg := start(up)
	c := protoClient(t, "h2c", nil, "")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", tg.URL+"/hold", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled request got a response")
	}
	select {
	case <-gone:
	case <-time.After(waitLimit):
		t.Fatal("the upstream's request went on after the client reset its stream")
	}
}
