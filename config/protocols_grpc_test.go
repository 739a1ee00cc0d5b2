package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

func TestGRPCAndWebSocketSettings(t *testing.T) {
	c, err := config.Parse("ok.yaml", []byte(`
upstreams: {a: {targets: ["http://127.0.0.1:1"]}}
routes:
  - name: r
    upstream: a
    grpc: {idempotent: [/pkg.Svc/Get, "/pkg.Other/*"]}
  - name: plain
    upstream: a
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Server.WebSocketIdleTimeout.D(); got != 5*time.Minute {
		t.Errorf("server.websocket_idle_timeout default = %v, want 5m", got)
	}
	if got := c.Server.GRPCIdleTimeout.D(); got != 5*time.Minute {
		t.Errorf("server.grpc_idle_timeout default = %v, want 5m", got)
	}
	if got := c.Routes[0].GRPC.Idempotent; len(got) != 2 || got[0] != "/pkg.Svc/Get" {
		t.Errorf("grpc.idempotent = %q", got)
	}
	if c.Routes[1].GRPC != nil {
		t.Errorf("a route without grpc has %+v", c.Routes[1].GRPC)
	}
}

func TestGRPCAndWebSocketErrors(t *testing.T) {
	src := `server: {websocket_idle_timeout: 0s, grpc_idle_timeout: 25h}
upstreams: {a: {targets: ["http://127.0.0.1:1"]}}
routes:
  - name: r
    upstream: a
    grpc: {idempotent: [pkg.Svc/Get, /pkg.Svc, "/pkg.Svc/a/b", "/ /Get", /pkg.Svc/Get]}
`
	_, err := config.Parse("bad.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	got := err.Error()
	for _, w := range []string{
		`bad.yaml:1:34: server.websocket_idle_timeout: `,
		`bad.yaml:1:57: server.grpc_idle_timeout: `,
		`bad.yaml:6:25: routes[0].grpc.idempotent[0]: want a full method name`,
		`bad.yaml:6:38: routes[0].grpc.idempotent[1]: want a full method name`,
		`bad.yaml:6:48: routes[0].grpc.idempotent[2]: want a full method name`,
		`bad.yaml:6:64: routes[0].grpc.idempotent[3]: want a full method name`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
	if strings.Contains(got, "idempotent[4]") {
		t.Errorf("a valid name refused:\n%s", got)
	}
}
