package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// TestStrandedOnce, on the loop engine: a request whose connect was given
// up (its route's timeout ended it) while the connect goes on, then the
// next request of the same half-closed client connecting too, then a
// shutdown cut short: only the connect of the request still upstream
// frees what it holds (stranded); the connect of the ended one leaves
// the client's connection alone. (Both freed it, from two goroutines: a
// data race under -race, and a body's charge could be given back twice.)
func TestStrandedOnce(t *testing.T) {
	addr := fullBacklog(t)
	fc := clock.NewFake(time.Time{})
	gw := startGatewayClock(t, parseConfig(t, `
server: {engine: loop}
upstreams:
  up: {targets: ["http://%s"], connect_timeout: 2s}
routes:
  - {name: short, match: {path_prefix: /short}, upstream: up, policies: {timeout: 1s}}
  - {name: long, upstream: up, policies: {timeout: 1h}}
`, addr), fc)
	c, br := dialClient(t, gw.Addr)
	if _, err := fmt.Fprintf(c, "GET /short HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	eventually(t, "the first request's timer", func() bool { return fc.Timers() > 0 })
	fc.Advance(time.Second)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("first request: %d, want 504", resp.StatusCode)
	}
	body := patternBody(1024)
	if _, err := fmt.Fprintf(c, "POST /long HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second request's body held", func() bool { return heldBytes(t, gw) == float64(len(body)) })
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gw.stopped.Store(true)
	_ = gw.Shutdown(ctx)
	if err := <-gw.served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	// Given back by the second request's connect, once it ends; the
	// first's has ended by then (the leak check at the end waits for it).
	eventually(t, "the held body given back", func() bool { return heldBytes(t, gw) == 0 })
}
