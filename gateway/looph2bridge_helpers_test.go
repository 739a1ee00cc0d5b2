package gateway_test

import (
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// h2LoopsOn makes the gateways a test starts on the loop engine serve h2c
// on the loops (server.http2.loops), while forH2Engines runs its third
// round. The gateway tests run one at a time.
var h2LoopsOn bool

// forH2Engines runs test once on each engine, as forEngines does, and
// once more on the loop engine with h2c on the loops (the test sees the
// engine "loop"): every HTTP/2 engine serves the test's h2c.
func forH2Engines(t *testing.T, test func(t *testing.T, engine string)) {
	forEngines(t, test)
	if runtime.GOOS != "linux" {
		return // the loops serve h2c on Linux only
	}
	t.Run("loop-h2", func(t *testing.T) {
		h2LoopsOn = true
		t.Cleanup(func() { h2LoopsOn = false })
		test(t, "loop")
	})
}

// withH2Loops sets server.http2.loops in cfg, a loop engine's, while
// forH2Engines asks for it.
func withH2Loops(cfg *config.Config) {
	if h2LoopsOn && cfg.Server.Engine == "loop" {
		cfg.Server.HTTP2.Loops = true
	}
}
