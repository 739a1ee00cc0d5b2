package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.json")
	if err := os.WriteFile(file, []byte(`{"name": "f", "duration": "5s", "arrivals": {"load": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // in stdout
	}{
		{"list", []string{"-list"}, "latency-step"},
		{"named scenario, table and goals", []string{"-scenario", "overload-3x", "-alg", "oracle,none"}, "3x: goodput"},
		{"flags override a scenario", []string{"-scenario", "overload-3x", "-duration", "5s", "-workers", "8",
			"-step", "2s:workers=4,delay=+10ms", "-alg", "oracle"}, "overload-3x+flags"},
		{"file", []string{"-file", file, "-alg", "oracle"}, "== f:"},
		{"seeds", []string{"-scenario", "overload-3x", "-duration", "5s", "-alg", "oracle", "-seeds", "2"},
			"goals over seeds 1,2"},
		{"seed list", []string{"-scenario", "overload-3x", "-duration", "5s", "-alg", "oracle", "-seeds", "3,5"},
			"2/2 ok"},
		{"json and svg", []string{"-scenario", "overload-3x", "-duration", "5s", "-alg", "oracle", "-json",
			"-svg", filepath.Join(dir, "p.svg")}, `"algorithm": "oracle"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if err := run(tt.args, &out, &errb); err != nil {
				t.Fatalf("%v: %s", err, errb.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
	var out bytes.Buffer
	if err := run([]string{"-scenario", "low-rate", "-duration", "10s", "-alg", "none", "-json"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(out.Bytes()) {
		t.Error("-json output is not valid JSON")
	}
	if _, err := os.Stat(filepath.Join(dir, "p.svg")); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]string{{"-alg", "nope"}, {"-scenario", "nope"}, {"-step", "30s"}, {"-scenario", "a,b", "-workers", "3"}, {"-seeds", "0"}, {"-seeds", "1,x"}} {
		var o bytes.Buffer
		if err := run(bad, &o, &o); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
