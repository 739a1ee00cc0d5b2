package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestDemo runs `sluice demo` for 4 seconds with a 2.5 s outage, longer
// than the breaker's 2 s window, and checks what it prints: the
// introduction, a line a second, and a summary whose counts add up. Only
// facts that hold on a slow machine are asserted: requests were answered
// by the upstream; the greedy client, sending at 2.5 times its limit, was
// rate limited; and the outage, in which 9 of 10 upstream calls fail, opened
// the breaker, which then rejected requests at once. Which other policies
// act, and how often, depends on timing.
func TestDemo(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"demo", "-duration", "4s", "-outage", "2500ms", "-rate", "100"}, &out, &errOut)
	stdout := out.String()
	if code != 0 {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, errOut.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, errOut.String())
		}
	}()
	if !regexp.MustCompile(`the gateway in front of it at http://127\.0\.0\.1:\d+`).MatchString(stdout) {
		t.Error("the introduction does not name the gateway's loopback address")
	}
	if !regexp.MustCompile(`(?m)^\s+t\s+ok\s+429 rate\s+503 open\s+503 limit\s+5xx upstr\s+504\s+other\s+p50\s+p99\s+breaker\s+limit$`).MatchString(stdout) {
		t.Error("no table header")
	}
	lines := regexp.MustCompile(`(?m)^\s*\d+s(\s+\d+){7}\s+\S+\s+\S+\s+(closed|open|half-open|forced-open|disabled)\s+\d+$`).FindAllString(stdout, -1)
	if len(lines) == 0 {
		t.Error("no line a second")
	}

	m := regexp.MustCompile(`(?m)^summary: (\d+) requests$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatal("no summary")
	}
	total, _ := strconv.Atoi(m[1])
	counts := map[string]int{}
	sum := 0
	for _, c := range demoColumns {
		m := regexp.MustCompile(`(?m)^  ` + c.key + ` +(\d+)  \S`).FindStringSubmatch(stdout)
		if m == nil {
			t.Errorf("summary has no line for %s", c.key)
			continue
		}
		counts[c.key], _ = strconv.Atoi(m[1])
		sum += counts[c.key]
	}
	if total == 0 || sum != total {
		t.Errorf("summary: %d requests, but its outcomes add up to %d", total, sum)
	}
	for _, key := range []string{"ok", "rate_limited", "circuit_open"} {
		if counts[key] == 0 {
			t.Errorf("summary: no %s request", key)
		}
	}
}

// TestDemoPrintConfig: -print-config prints a configuration that is valid
// once its upstream's address is filled in.
func TestDemoPrintConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "-print-config"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	text := strings.ReplaceAll(out.String(), "UPSTREAM", "127.0.0.1:9")
	if _, err := config.Parse("demo.yaml", []byte(text)); err != nil {
		t.Errorf("the demo's configuration does not parse: %v\n%s", err, text)
	}
}
