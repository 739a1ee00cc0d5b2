package gateway_test

import "testing"

// TestShutdownRightAfterServe shuts gateways down as soon as they serve,
// many times on each engine: Serve returns nil and nothing keeps running.
// (A Shutdown that came while the loops were starting used to race with
// their start and leave the goroutine engine serving the loops' handoff
// listener for ever.)
func TestShutdownRightAfterServe(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", nil)
		for range 20 {
			t.Run("", func(t *testing.T) {
				gw := routedGateway(t, engine, up, `
  - {name: r, upstream: up}
`)
				gw.stop(t)
			})
		}
	})
}
