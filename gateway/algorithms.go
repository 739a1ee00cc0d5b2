package gateway

import (
	"fmt"

	"github.com/sluicehq/sluice/concurrency/limit"
	"github.com/sluicehq/sluice/config"
)

// newAlgorithm builds the adaptive limit algorithm a route asks for.
func newAlgorithm(a *config.Adaptive) (limit.Algorithm, error) {
	switch a.Algorithm {
	case "default":
		return limit.NewDefault(limit.DefaultOptions{InitialLimit: a.Initial, MinLimit: a.Min, MaxLimit: a.Max})
	case "latency_gradient":
		return limit.NewLatencyGradient(limit.LatencyGradientOptions{InitialLimit: a.Initial, MinLimit: a.Min, MaxLimit: a.Max})
	case "aimd":
		return limit.NewAIMD(limit.AIMDOptions{InitialLimit: a.Initial, MinLimit: a.Min, MaxLimit: a.Max})
	case "vegas":
		return limit.NewVegas(limit.VegasOptions{InitialLimit: a.Initial, MinLimit: a.Min, MaxLimit: a.Max})
	case "gradient2":
		return limit.NewGradient2(limit.Gradient2Options{InitialLimit: a.Initial, MinLimit: a.Min, MaxLimit: a.Max})
	}
	return nil, fmt.Errorf("algorithm %q is not available", a.Algorithm)
}
