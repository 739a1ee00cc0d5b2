package gateway_test

import (
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// h2LoopsOff makes the gateways a test starts on the loop engine serve
// HTTP/2 on net/http's HTTP/2 server (server.http2.loops false) while
// forH2Engines runs its third round. The gateway tests run one at a time.
var h2LoopsOff bool

// forH2Engines runs test once on each engine, as forEngines does (the loop
// engine serves HTTP/2 on its loops by default), and once more on the loop
// engine with server.http2.loops false (the test sees the engine "loop"):
// every HTTP/2 engine serves the test's HTTP/2.
func forH2Engines(t *testing.T, test func(t *testing.T, engine string)) {
	forEngines(t, test)
	if runtime.GOOS != "linux" {
		return // the loops serve HTTP/2 on Linux only
	}
	t.Run("loop-nethttp-h2", func(t *testing.T) {
		h2LoopsOff = true
		t.Cleanup(func() { h2LoopsOff = false })
		test(t, "loop")
	})
}

// withH2Loops turns server.http2.loops off in cfg, a loop engine's, while
// forH2Engines asks for net/http's HTTP/2 server.
func withH2Loops(cfg *config.Config) {
	if h2LoopsOff && cfg.Server.Engine == "loop" {
		cfg.Server.HTTP2.Loops = false
	}
}
