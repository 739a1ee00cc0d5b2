package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

// TestVersion checks that `sluice version` prints the build information
// of the running binary, Go version included.
func TestVersion(t *testing.T) {
	want := "sluice " + buildinfo.Read().String() + "\n"
	for _, arg := range []string{"version", "--version", "-v"} {
		var out, errOut bytes.Buffer
		if code := run([]string{arg}, &out, &errOut); code != 0 || out.String() != want {
			t.Errorf("sluice %s: exit %d, stdout %q, stderr %q; want %q", arg, code, out.String(), errOut.String(), want)
		}
		if !strings.HasSuffix(out.String(), " "+runtime.Version()+"\n") {
			t.Errorf("sluice %s: %q does not end with the Go version %s", arg, out.String(), runtime.Version())
		}
	}
}

// TestVersionBuilt builds the command with the Dockerfile's link flags and
// the version set at link time, and checks that the binary prints it: the
// -X flag's symbol path is right and the link-time version wins.
func TestVersionBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("go", "build", "-buildvcs=false",
		"-ldflags=-s -w -X github.com/sluicehq/sluice/internal/buildinfo.version=v9.8.7-test", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("sluice version: %v", err)
	}
	if want := "sluice v9.8.7-test " + runtime.Version() + "\n"; string(out) != want {
		t.Fatalf("sluice version printed %q, want %q", out, want)
	}
}

// TestUsage checks the exit codes of a missing or unknown command, of -h
// (0, usage printed) and of serve given two files.
func TestUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
	}{{nil, 2}, {[]string{"frobnicate"}, 2}, {[]string{"help"}, 0}, {[]string{"validate"}, 2},
		{[]string{"validate", "-h"}, 0}, {[]string{"validate", "--help"}, 0}, {[]string{"validate", "--frobnicate"}, 2},
		{[]string{"serve", "-h"}, 0}, {[]string{"serve", "--config", "a.yaml", "b.yaml"}, 2}, {[]string{"serve", "a.yaml", "b.yaml"}, 2}} {
		var out, errOut bytes.Buffer
		if code := run(tt.args, &out, &errOut); code != tt.code {
			t.Errorf("sluice %q: exit %d, want %d", tt.args, code, tt.code)
		}
		if !strings.Contains(out.String()+errOut.String(), "usage") {
			t.Errorf("sluice %q printed no usage", tt.args)
		}
		if tt.code == 0 && len(tt.args) == 2 && tt.args[0] == "validate" && !strings.HasPrefix(out.String(), "usage: sluice validate") {
			t.Errorf("sluice %q: usage not on stdout: %q", tt.args, out.String())
		}
	}
}

// TestValidate checks `sluice validate`: the example file passes; a bad file
// prints every problem as file:line:col: field: message and exits 1.
func TestValidate(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "sluice.yaml")
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", example}, &out, &errOut); code != 0 {
		t.Fatalf("validate %s: exit %d\n%s", example, code, errOut.String())
	}
	if got := out.String(); got != example+": ok\n" {
		t.Errorf("stdout %q", got)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	text := `listen: nowhere
upstreams:
  up: {targets: ["ftp://x"]}
routes:
  - name: r
    upstream: missing
    policies:
      timeout: soon
      rate_limit: {limit: 0}
      unknown_policy: true
`
	if err := os.WriteFile(bad, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"validate", bad}, &out, &errOut); code != 1 {
		t.Fatalf("validate bad file: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:(\d+):(\d+): \S+: .+$`)
	wantLines := map[string]string{ // field -> line
		"listen":                              "1",
		"upstreams.up.targets[0]":             "3",
		"routes[0].upstream":                  "6",
		"routes[0].policies.timeout":          "8",
		"routes[0].policies.rate_limit.limit": "9",
		"routes[0].policies.unknown_policy":   "10",
	}
	found := map[string]bool{}
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %q is not file:line:col: field: message", l)
			continue
		}
		for field, line := range wantLines {
			if strings.Contains(l, ": "+field+": ") {
				found[field] = true
				if m[1] != line {
					t.Errorf("%s reported at line %s, want %s: %q", field, m[1], line, l)
				}
			}
		}
	}
	for field := range wantLines {
		if !found[field] {
			t.Errorf("no error for %s in:\n%s", field, errOut.String())
		}
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q for a bad file", out.String())
	}

	// Several files: each reported, exit 1 if any is bad.
	out.Reset()
	errOut.Reset()
	if code := run([]string{"validate", example, bad, filepath.Join(t.TempDir(), "absent.yaml")}, &out, &errOut); code != 1 {
		t.Errorf("validate good+bad+absent: exit %d, want 1", code)
	}
	if !strings.Contains(out.String(), example+": ok") || !strings.Contains(errOut.String(), "absent.yaml") {
		t.Errorf("stdout %q stderr %q", out.String(), errOut.String())
	}
}
