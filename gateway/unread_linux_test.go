package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// TestWriteTimeoutBoundsUnread has a client pipeline requests one at a
// time and read none of the answers, until they wait unread in the
// gateway (on the loops: fewer of them than make the loop stop reading
// requests, which the client then stops sending). The gateway closes the
// connection once server.write_timeout passes without the client reading,
// long before server.idle_timeout.
func TestWriteTimeoutBoundsUnread(t *testing.T) {
	const size = 64 << 10
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(size))
			fmt.Fprintf(w, "%-*s", size, r.URL.Path)
		})
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, write_timeout: 200ms, idle_timeout: 1h}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up}
`, engine, up.URL))
		c, _ := dialClient(t, gw.Addr)
		eventually(t, "the gateway to take the connection", func() bool { return gateway.OpenConns(gw.Gateway) == 1 })
		for i := int64(1); ; i++ {
			if i > 1024 {
				t.Fatalf("%d answers never waited unread", i)
			}
			io.WriteString(c, fmt.Sprintf("GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i))
			closed, unread := false, -1
			eventually(t, "the request to be answered, or the connection closed", func() bool {
				closed = gateway.OpenConns(gw.Gateway) == 0
				if engine == "loop" {
					unread = gateway.LoopUnread(gw.Gateway)
				}
				return closed || (up.calls.Load() == i && (engine != "loop" || unread >= 0))
			})
			if closed || unread > 0 {
				t.Logf("after %d requests: closed %v, unread %d", i, closed, unread)
				break
			}
		}
		eventually(t, "the gateway to close the connection", func() bool { return gateway.OpenConns(gw.Gateway) == 0 })
	})
}
