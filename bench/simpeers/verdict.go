package simpeers

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/sim"
)

// The verdict rule, in points of capacity (goodput) and ratios of p99.
const (
	// GoodputTie: within this many points of goodput (0.01 = one point
	// of capacity) two algorithms tie on goodput.
	GoodputTie = 0.01
	// P99Tie: a p99 at most this factor of another's ties with it.
	P99Tie = 1.05
	// BigGoodput and BigP99: a lead of BigGoodput points of goodput, or
	// a p99 below 1/BigP99 of the other's, is a large margin on one axis;
	// it wins if the other axis loses at most SmallGoodput points or a
	// factor SmallP99.
	BigGoodput   = 0.05
	BigP99       = 1.15
	SmallGoodput = 0.03
	SmallP99     = 1.15
	// P99Goal is the p99 goal of issue #4: at most twice the no-load p99.
	// An algorithm whose p99 exceeds it buys goodput with latency and
	// does not count as better on goodput.
	P99Goal = 2.0
	// Collapse: an algorithm collapses when its goodput is below this
	// fraction of what was offered (capped at capacity).
	Collapse = 0.5
)

// StandardTen is how many of sim.Standard's scenarios are the ten of
// BENCHMARKS.md (the others are extras).
const StandardTen = 10

// Verdict compares sluice's Default with one peer on one scenario.
type Verdict struct {
	Scenario, Peer string
	// Win reports whether Default is better than the peer (see Beats).
	Win bool
	// Why says which part of the rule decided.
	Why string
}

// Beats reports whether result d (sluice's Default) is better than peer p
// on goodput and p99, and why. The rule:
//
//  1. Default must not collapse (goodput under Collapse × the offered load,
//     capped at capacity) and its p99 must meet P99Goal; a peer that
//     collapses or misses P99Goal where Default does not is beaten.
//  2. Default wins when its goodput is at least the peer's minus
//     GoodputTie and its p99 is at most P99Tie × the peer's.
//  3. Or when it dominates one axis by a large margin without losing
//     much on the other: goodput BigGoodput higher with p99 at most
//     SmallP99 × the peer's, or p99 below the peer's / BigP99 with
//     goodput at most SmallGoodput lower.
func Beats(d, p *sim.Result) (bool, string) {
	dBad, pBad := failed(d), failed(p)
	switch {
	case dBad != "" && pBad == "":
		return false, "default " + dBad
	case dBad != "":
		return false, "both " + dBad
	case pBad != "":
		return true, "peer " + pBad
	}
	dg, pg := float64(d.Goodput), float64(p.Goodput)
	dp, pp := float64(d.P99Ratio), float64(p.P99Ratio)
	switch {
	case dg >= pg-GoodputTie && dp <= pp*P99Tie:
		return true, "ties or leads on both"
	case dg >= pg+BigGoodput && dp <= pp*SmallP99:
		return true, "much more goodput"
	case dp*BigP99 <= pp && dg >= pg-SmallGoodput:
		return true, "much lower p99"
	case dg < pg-GoodputTie:
		return false, fmt.Sprintf("goodput %.1f points lower", 100*(pg-dg))
	default:
		return false, fmt.Sprintf("p99 %.0f%% higher", 100*(dp/pp-1))
	}
}

// failed says how r failed the floor of the comparison ("collapses" or
// "p99 over 2×"), or "" when it did not.
func failed(r *sim.Result) string {
	offered := math.Min(1, float64(r.Offered))
	switch {
	case float64(r.Goodput) < Collapse*offered:
		return "collapses"
	case float64(r.P99Ratio) > P99Goal:
		return "p99 over 2×"
	}
	return ""
}

// Verdicts compares "default" with each of peers on every scenario of
// results.
func Verdicts(scenarios []sim.Scenario, results []*sim.Result, peers []string) []Verdict {
	find := func(sc, alg string) *sim.Result {
		for _, r := range results {
			if r.Scenario == sc && r.Algorithm == alg {
				return r
			}
		}
		return nil
	}
	var out []Verdict
	for _, sc := range scenarios {
		d := find(sc.Name, "default")
		if d == nil {
			continue
		}
		for _, p := range peers {
			if pr := find(sc.Name, p); pr != nil {
				win, why := Beats(d, pr)
				out = append(out, Verdict{Scenario: sc.Name, Peer: p, Win: win, Why: why})
			}
		}
	}
	return out
}

// WriteVerdicts writes the verdicts as a table, one row per scenario, and
// the number of the standard ten scenarios (those among the first
// StandardTen of sim.Standard) in which Default beats every peer, and the
// scenarios in which Default collapses while a peer does not.
func WriteVerdicts(w io.Writer, scenarios []sim.Scenario, results []*sim.Result, peers []string) error {
	vs := Verdicts(scenarios, results, peers)
	ten := map[string]bool{}
	for _, sc := range sim.Standard()[:StandardTen] {
		ten[sc.Name] = true
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\t"+strings.Join(peers, "\t")+"\tall\t")
	won, run := 0, 0
	var collapses []string
	for _, sc := range scenarios {
		row := []string{sc.Name}
		all, any := true, false
		for _, p := range peers {
			for _, v := range vs {
				if v.Scenario == sc.Name && v.Peer == p {
					any = true
					mark := "win"
					if !v.Win {
						mark, all = "LOSE", false
					}
					row = append(row, mark+" ("+v.Why+")")
					if strings.HasPrefix(v.Why, "default collapses") {
						collapses = append(collapses, sc.Name+" vs "+p)
					}
				}
			}
		}
		if !any {
			continue
		}
		verdict := "yes"
		if !all {
			verdict = "no"
		}
		if ten[sc.Name] {
			run++
			if all {
				won++
			}
		} else {
			verdict += " (extra)"
		}
		fmt.Fprintln(tw, strings.Join(append(row, verdict), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("simpeers: writing verdicts: %w", err)
	}
	fmt.Fprintf(w, "default beats every peer in %d of the %d standard scenarios run (goal: 8 of 10)\n", won, run)
	if len(collapses) == 0 {
		fmt.Fprintln(w, "default collapses where a peer does not: never")
	} else {
		fmt.Fprintln(w, "default collapses where a peer does not:", strings.Join(collapses, ", "))
	}
	return nil
}
