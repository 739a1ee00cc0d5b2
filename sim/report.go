package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
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
