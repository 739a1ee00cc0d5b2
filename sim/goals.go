package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Goal is one of the targets that sluice's Default must meet, measured on
// one standard scenario (or, for the CV goal, on every steady overload
// scenario).
type Goal struct {
	Name string
	// Scenario is the standard scenario the goal is measured on;
	// "overload-*" stands for every scenario whose name starts with
	// "overload-".
	Scenario string
	// Figures describe the numbers Measure returns, in order.
	Figures []GoalFigure
	// Measure returns the goal's figures for algorithm alg in results (one
	// run of each scenario, that is one seed) and whether they meet the
	// goal; found is false when the goal's scenario was not run.
	Measure func(results []*Result, alg string) (vals []float64, ok, found bool)
}

// GoalFigure says how to print one figure of a goal and which way is worse
// when the goal is checked over several seeds.
type GoalFigure struct {
	// Scale multiplies the value for printing; Prec is the number of
	// decimals printed and Unit follows the number.
	Scale float64
	Prec  int
	Unit  string
	// LowerIsWorse is true for a figure the goal wants high (goodput);
	// otherwise higher is worse (latency, convergence time, rejections).
	LowerIsWorse bool
	// Abs compares and averages absolute values (drift, which may go
	// either way); the worst value is printed with its sign.
	Abs bool
}

// format prints v as the figure.
func (f GoalFigure) format(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fix(Num(v), f.Prec)
	}
	return fix(Num(v*f.Scale), f.Prec) + f.Unit
}

// worse reports whether a is worse than b for the figure.
func (f GoalFigure) worse(a, b float64) bool {
	if f.Abs {
		a, b = math.Abs(a), math.Abs(b)
	}
	if f.LowerIsWorse {
		return a < b
	}
	return a > b
}

var (
	figPct   = GoalFigure{Scale: 100, Prec: 1, Unit: "%"}
	figRatio = GoalFigure{Scale: 1, Prec: 2, Unit: "×"}
	figSec   = GoalFigure{Scale: 1, Prec: 1, Unit: " s"}
)

// Goals returns the targets of the adaptive-limit work:
//   - 3x: at 3× overload goodput ≥ 95% of capacity and p99 ≤ 2× the
//     no-load p99;
//   - half: after capacity halves, the limit converges (±10% of the new
//     optimum, see the package documentation) within 2 s; half@1ms the
//     same at a 1 ms service time;
//   - cv: coefficient of variation of the limit < 10% in steady overload
//     (the largest of 1.5×, 3× and 10×);
//   - drift: |drift| < 5% over 30 minutes at 1.2×;
//   - bursty: at most 1% of attempts rejected at 80% bursty load;
//   - latency: at least 98% of requests served after a +60 ms network
//     delay at 0.8× load.
func Goals() []Goal {
	goodput := figPct
	goodput.LowerIsWorse = true
	served := goodput
	drift := figPct
	drift.Abs = true
	return []Goal{
		{"3x: goodput≥95% p99≤2×", "overload-3x", []GoalFigure{goodput, figRatio},
			one("overload-3x", func(r *Result) ([]float64, bool) {
				return []float64{float64(r.Goodput), float64(r.P99Ratio)}, r.Goodput >= 0.95 && r.P99Ratio <= 2
			})},
		{"half: conv≤2s", "capacity-half", []GoalFigure{figSec}, one("capacity-half", convWithin2s)},
		{"half@1ms: conv≤2s", "capacity-half-1ms", []GoalFigure{figSec}, one("capacity-half-1ms", convWithin2s)},
		{"cv<10%", "overload-*", []GoalFigure{figPct}, cvGoal},
		{"drift<5%", "drift-1.2x", []GoalFigure{drift}, one("drift-1.2x", func(r *Result) ([]float64, bool) {
			return []float64{float64(r.Drift)}, math.Abs(float64(r.Drift)) < 0.05
		})},
		{"bursty: rej≤1%", "bursty-0.8x", []GoalFigure{figPct}, one("bursty-0.8x", func(r *Result) ([]float64, bool) {
			return []float64{float64(r.Rejected)}, r.Rejected <= 0.01
		})},
		{"latency: served≥98%", "latency-step", []GoalFigure{served}, one("latency-step", func(r *Result) ([]float64, bool) {
			return []float64{float64(r.Served)}, r.Served >= 0.98
		})},
	}
}

// one makes a Goal's Measure from a check of the result of one scenario.
func one(scenario string, check func(r *Result) ([]float64, bool)) func([]*Result, string) ([]float64, bool, bool) {
	return func(results []*Result, alg string) ([]float64, bool, bool) {
		for _, r := range results {
			if r.Algorithm == alg && r.Scenario == scenario {
				v, ok := check(r)
				return v, ok, true
			}
		}
		return nil, false, false
	}
}

// convWithin2s is the goal of the capacity-half scenarios: the limit
// converges within 2 s of the first step.
func convWithin2s(r *Result) ([]float64, bool) {
	if len(r.Conv) == 0 {
		return []float64{math.NaN()}, false
	}
	return []float64{float64(r.Conv[0])}, r.Conv[0] <= 2
}

// cvGoal is the CV goal: the largest CV over the steady overload scenarios.
func cvGoal(results []*Result, alg string) ([]float64, bool, bool) {
	worst, found := math.NaN(), false
	for _, r := range results {
		if r.Algorithm != alg || !strings.HasPrefix(r.Scenario, "overload-") {
			continue
		}
		found = true
		if math.IsNaN(worst) || float64(r.CVMax) > worst {
			worst = float64(r.CVMax)
		}
	}
	return []float64{worst}, worst < 0.1, found
}

// algorithms returns the algorithms of results in order of appearance.
func algorithms(results []*Result) []string {
	var algs []string
	seen := map[string]bool{}
	for _, r := range results {
		if !seen[r.Algorithm] {
			seen[r.Algorithm] = true
			algs = append(algs, r.Algorithm)
		}
	}
	return algs
}

// WriteGoals writes, for every algorithm in results, whether it meets each
// goal whose scenario was run ("ok" or "NO" after the figure).
func WriteGoals(w io.Writer, results []*Result) error {
	return WriteGoalsSeeds(w, [][]*Result{results})
}

// WriteGoalsSeeds writes, for every algorithm, whether it meets each goal
// over several runs of the same scenarios with different seeds: runs[i]
// holds the results of seed i. With one seed it prints the figures; with
// more it prints each figure's worst value over the seeds, then their mean
// in brackets, then how many seeds met the goal, and "ok" only when every
// seed did. A convergence that never happened is +Inf ("never"); a figure
// that does not apply ("-") is the worst.
func WriteGoalsSeeds(w io.Writer, runs [][]*Result) error {
	if len(runs) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	goals := Goals()
	hdr := []string{"algorithm"}
	for _, g := range goals {
		hdr = append(hdr, g.Name)
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for _, a := range algorithms(runs[0]) {
		row := []string{a}
		for _, g := range goals {
			row = append(row, goalCell(g, runs, a))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("sim: writing goals: %w", err)
	}
	return nil
}

// goalCell is the cell of goal g for algorithm alg over the runs.
func goalCell(g Goal, runs [][]*Result, alg string) string {
	worst := make([]float64, len(g.Figures))
	sum := make([]float64, len(g.Figures))
	met, n := 0, 0
	for _, res := range runs {
		vals, ok, found := g.Measure(res, alg)
		if !found {
			continue
		}
		for i, v := range vals {
			// A figure that does not apply (NaN) is the worst.
			if n == 0 || math.IsNaN(v) || !math.IsNaN(worst[i]) && g.Figures[i].worse(v, worst[i]) {
				worst[i] = v
			}
			if g.Figures[i].Abs {
				v = math.Abs(v)
			}
			sum[i] += v
		}
		n++
		if ok {
			met++
		}
	}
	if n == 0 {
		return "(not run)"
	}
	var parts []string
	for i, f := range g.Figures {
		parts = append(parts, f.format(worst[i]))
	}
	cell := strings.Join(parts, " ")
	if n > 1 {
		parts = parts[:0]
		for i, f := range g.Figures {
			parts = append(parts, f.format(sum[i]/float64(n)))
		}
		cell += fmt.Sprintf(" [%s] %d/%d", strings.Join(parts, " "), met, n)
	}
	if met == n {
		return cell + " ok"
	}
	return cell + " NO"
}
