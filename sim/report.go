package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteTable writes results as a text table, one block per scenario (in
// the order of scenarios) with one row per algorithm. Latencies are in
// milliseconds; goodput, served, rejected and timed out are percentages.
func WriteTable(w io.Writer, scenarios []Scenario, results []*Result) error {
	const row = "%-16s %8s %20s %6s %6s %6s %6s %6s %6s %6s %5s %8s %6s %7s\n"
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, row, "algorithm", "goodput%", "served%", "p50", "p99", "p99.9", "p99/nl",
		"rej%", "t/o%", "limit", "opt", "conv s", "CV%", "drift%")
	for _, sc := range scenarios {
		fmt.Fprintf(bw, "== %s: %s (offered %s%% of capacity, no-load p99 %s ms)\n",
			sc.Name, sc.About, offered(results, sc.Name), noLoad(results, sc.Name))
		for _, r := range results {
			if r.Scenario != sc.Name {
				continue
			}
			fmt.Fprintf(bw, row,
				r.Algorithm, pct(r.Goodput), servedCell(r), ms(r.P50), ms(r.P99), ms(r.P999),
				fix(r.P99Ratio, 2), pct(r.Rejected), pct(r.TimedOut), fix(r.MeanLimit, 1),
				trimFloat(r.Optimum), convCell(r.Conv), pct(r.CV), pct(r.Drift))
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("sim: writing table: %w", err)
	}
	return nil
}

func offered(results []*Result, name string) string {
	for _, r := range results {
		if r.Scenario == name {
			return pct(r.Offered)
		}
	}
	return "-"
}

func noLoad(results []*Result, name string) string {
	for _, r := range results {
		if r.Scenario == name {
			return ms(r.NoLoadP99)
		}
	}
	return "-"
}

// servedCell is Served, with the served fraction of each priority class.
func servedCell(r *Result) string {
	s := pct(r.Served)
	if len(r.ClassServed) > 0 {
		var cs []string
		for _, c := range r.ClassServed {
			cs = append(cs, pct(c))
		}
		s += " (" + strings.Join(cs, "/") + ")"
	}
	return s
}

func convCell(cs []Num) string {
	if len(cs) == 0 {
		return "-"
	}
	var out []string
	for _, c := range cs {
		out = append(out, fix(c, 1))
	}
	return strings.Join(out, ",")
}

func fix(n Num, prec int) string {
	switch f := float64(n); {
	case math.IsNaN(f):
		return "-"
	case math.IsInf(f, 1):
		return "never"
	default:
		return fmt.Sprintf("%.*f", prec, f)
	}
}

func pct(n Num) string { return fix(n*100, 1) }

func ms(n Num) string {
	if float64(n) >= 100 {
		return fix(n, 0)
	}
	return fix(n, 1)
}

// Goal is one of the targets that sluice's Default must meet, measured on
// one standard scenario.
type Goal struct {
	Name     string
	Scenario string
	// Check returns the figure shown for r and whether it meets the goal.
	Check func(r *Result) (string, bool)
}

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
	return []Goal{
		{"3x: goodput≥95% p99≤2×", "overload-3x", func(r *Result) (string, bool) {
			return pct(r.Goodput) + "% " + fix(r.P99Ratio, 2) + "×", r.Goodput >= 0.95 && r.P99Ratio <= 2
		}},
		{"half: conv≤2s", "capacity-half", convWithin2s},
		{"half@1ms: conv≤2s", "capacity-half-1ms", convWithin2s},
		{"cv<10%", "overload-*", nil},
		{"drift<5%", "drift-1.2x", func(r *Result) (string, bool) {
			return pct(r.Drift) + "%", math.Abs(float64(r.Drift)) < 0.05
		}},
		{"bursty: rej≤1%", "bursty-0.8x", func(r *Result) (string, bool) {
			return pct(r.Rejected) + "%", r.Rejected <= 0.01
		}},
		{"latency: served≥98%", "latency-step", func(r *Result) (string, bool) {
			return pct(r.Served) + "%", r.Served >= 0.98
		}},
	}
}

// convWithin2s is the goal of the capacity-half scenarios: the limit
// converges within 2 s of the first step.
func convWithin2s(r *Result) (string, bool) {
	if len(r.Conv) == 0 {
		return "-", false
	}
	if math.IsInf(float64(r.Conv[0]), 1) {
		return "never", false
	}
	return fix(r.Conv[0], 1) + " s", r.Conv[0] <= 2
}

// cvGoal is the CV goal: the largest CV over the steady overload scenarios.
func cvGoal(results []*Result, alg string) (string, bool, bool) {
	worst, found := Num(math.NaN()), false
	for _, r := range results {
		if r.Algorithm != alg || !strings.HasPrefix(r.Scenario, "overload-") {
			continue
		}
		found = true
		if math.IsNaN(float64(worst)) || r.CVMax > worst {
			worst = r.CVMax
		}
	}
	return pct(worst) + "%", worst < 0.1, found
}

// WriteGoals writes, for every algorithm in results, whether it meets each
// goal whose scenario was run ("ok" or "NO" after the figure).
func WriteGoals(w io.Writer, results []*Result) error {
	var algs []string
	seen := map[string]bool{}
	for _, r := range results {
		if !seen[r.Algorithm] {
			seen[r.Algorithm] = true
			algs = append(algs, r.Algorithm)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	goals := Goals()
	hdr := []string{"algorithm"}
	for _, g := range goals {
		hdr = append(hdr, g.Name)
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for _, a := range algs {
		row := []string{a}
		for _, g := range goals {
			cell, ok, found := "", false, false
			if g.Check == nil {
				cell, ok, found = cvGoal(results, a)
			} else {
				for _, r := range results {
					if r.Algorithm == a && r.Scenario == g.Scenario {
						cell, ok = g.Check(r)
						found = true
					}
				}
			}
			switch {
			case !found:
				cell = "(not run)"
			case ok:
				cell += " ok"
			default:
				cell += " NO"
			}
			row = append(row, cell)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// Report is the JSON form of a set of runs. Its scenarios are normalized
// and in the scenario file format, so each can be run again with
// ParseScenario.
type Report struct {
	Scenarios []ScenarioFile `json:"scenarios"`
	Results   []*Result      `json:"results"`
}

// WriteJSON writes scenarios and results as an indented JSON Report.
func WriteJSON(w io.Writer, scenarios []Scenario, results []*Result) error {
	norm := make([]ScenarioFile, 0, len(scenarios))
	for _, sc := range scenarios {
		n, err := sc.Normalize()
		if err != nil {
			return err
		}
		norm = append(norm, toFile(n))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(Report{Scenarios: norm, Results: results}); err != nil {
		return fmt.Errorf("sim: writing JSON: %w", err)
	}
	return nil
}
