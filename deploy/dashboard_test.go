package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// metricName matches the sluice metric names a query mentions.
var metricName = regexp.MustCompile(`sluice_[a-z_]+`)

// documentedMetrics returns the metrics the table of docs/metrics.md lists.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(sluice_[a-z_]+)` \\|").FindAllSubmatch(b, -1) {
		names[string(m[1])] = true
	}
	if len(names) == 0 {
		t.Fatal("docs/metrics.md documents no metric")
	}
	return names
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// TestDashboard parses deploy/grafana/sluice.json and checks that its
// panels are well formed, that every metric its PromQL queries mention is
// one docs/metrics.md documents (so that it shows what sluice exports), and
// that it covers the gateway's main signals.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/sluice.json: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q, uid %q: want both", d.Title, d.UID)
	}
	var queries []string
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil || q.Query == "" {
			t.Errorf("variable %s: query %s is not {\"query\": ...}", v.Name, v.Query)
		}
		queries = append(queries, q.Query)
	}
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel %q: id %d is used twice", p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.Title == "" || p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %d %q: needs a title and a gridPos within 24 columns", p.ID, p.Title)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("panel %q: want the ${datasource} variable and at least one query", p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" {
					t.Errorf("panel %q: a target without expr or refId", p.Title)
				}
				queries = append(queries, tg.Expr)
			}
		}
	}
	walk(d.Panels)

	documented := documentedMetrics(t)
	used := map[string]bool{}
	for _, q := range queries {
		for _, name := range metricName.FindAllString(q, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && documented[base] {
					name = base
				}
			}
			if !documented[name] {
				t.Errorf("query %q uses %s, which docs/metrics.md does not document", q, name)
			}
			used[name] = true
		}
	}
	for _, want := range []string{"sluice_requests_total", "sluice_request_duration_seconds", "sluice_ratelimit_decisions_total",
		"sluice_breaker_state", "sluice_concurrency_limit", "sluice_config_reloads_total", "sluice_build_info"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	var quantiles []string
	for _, q := range queries {
		if strings.Contains(q, "histogram_quantile(") && strings.Contains(q, "sluice_request_duration_seconds_bucket") {
			quantiles = append(quantiles, q[strings.Index(q, "(")+1:strings.Index(q, ",")])
		}
	}
	for _, want := range []string{"0.5", "0.99"} {
		if !slices.Contains(quantiles, want) {
			t.Errorf("no latency panel shows the %s quantile (found %q)", want, quantiles)
		}
	}
}
