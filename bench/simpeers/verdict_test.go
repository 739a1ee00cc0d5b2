package simpeers

import (
	"testing"

	"github.com/sluicehq/sluice/sim"
)

func TestBeats(t *testing.T) {
	res := func(goodput, p99 float64) *sim.Result {
		r := &sim.Result{}
		r.Goodput, r.P99Ratio, r.Offered = sim.Num(goodput), sim.Num(p99), 3
		return r
	}
	tests := []struct {
		name string
		d, p *sim.Result
		want bool
	}{
		{"ties on both", res(0.975, 1.03), res(0.98, 1.0), true},
		{"goodput 2 points lower", res(0.96, 1.0), res(0.98, 1.05), false},
		{"p99 10% higher", res(0.98, 1.10), res(0.98, 1.0), false},
		{"much more goodput, a little more p99", res(0.98, 1.10), res(0.91, 1.02), true},
		{"much lower p99, a little less goodput", res(0.96, 1.0), res(0.98, 1.20), true},
		{"peer over the 2× p99 goal", res(0.96, 1.0), res(0.99, 2.1), true},
		{"peer collapses", res(0.96, 1.0), res(0.30, 1.0), true},
		{"default collapses", res(0.30, 1.0), res(0.96, 1.0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, why := Beats(tt.d, tt.p); got != tt.want {
				t.Errorf("Beats = %v (%s), want %v", got, why, tt.want)
			}
		})
	}
}
