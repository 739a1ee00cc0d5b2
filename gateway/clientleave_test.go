package gateway_test

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestClientLeaveCutsOnlyItsRequest has clients leave while their requests
// wait for the target, each followed by a request on a coalescing route,
// whose attempts no client watch guards: that request is served, on each
// engine. (The goroutine engine reused a freed exchange with the cut of the
// client that had left, and failed the request of the next, unrelated
// client with that client's departure.) Freed exchanges are reused at
// random, so the sequence runs several times.
func TestClientLeaveCutsOnlyItsRequest(t *testing.T) {
	const rounds = 12
	forEngines(t, func(t *testing.T, engine string) {
		arrived, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/hang" {
				_, _ = io.WriteString(w, "ok")
				return
			}
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
				cancelled <- struct{}{}
			case <-time.After(waitLimit):
			}
		})
		gw := routedGateway(t, engine, up, `
  - {name: shared, match: {path_prefix: /c}, upstream: up, policies: {coalesce: true}}
  - {name: all, upstream: up}
`)
		client := newClient(t)
		for i := range rounds {
			c, _ := dialClient(t, gw.Addr)
			_, _ = io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
			select {
			case <-arrived:
			case <-time.After(waitLimit):
				t.Fatal("the request never reached the target")
			}
			c.Close()
			select {
			case <-cancelled:
			case <-time.After(waitLimit):
				t.Fatal("the target's connection is still open after the client left")
			}
			if r := get(t, client, gw.URL+"/c"); r.Code != 200 || r.Body != "ok" {
				t.Fatalf("round %d: the next client's request: %d %q, want 200 \"ok\"", i, r.Code, r.Body)
			}
		}
	})
}
