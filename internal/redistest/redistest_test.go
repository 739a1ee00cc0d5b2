package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Skipf and Fatalf record the message and
// end the goroutine, as the real ones do; everything else is the real
// test's.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// record runs f with a recorder on a goroutine of its own (Skipf and Fatalf
// end it) and returns the recorder.
func record(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// TestFindBinary: a missing redis-server skips the test, or fails it when
// SLUICE_REQUIRE_REDIS=1; a found one is returned.
func TestFindBinary(t *testing.T) {
	found := func(string) (string, error) { return "/bin/redis-server", nil }
	missing := func(string) (string, error) { return "", errors.New("not in PATH") }
	for _, tc := range []struct {
		name    string
		look    func(string) (string, error)
		require bool
		want    string // "path", "skip" or "fail"
	}{
		{"found", found, false, "path"},
		{"found, required", found, true, "path"},
		{"missing", missing, false, "skip"},
		{"missing, required", missing, true, "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bin string
			r := record(t, func(tb testing.TB) { bin = findBinary(tb, tc.look, tc.require) })
			got := "path"
			switch {
			case r.failed != "":
				got = "fail"
			case r.skipped != "":
				got = "skip"
			case bin != "/bin/redis-server":
				t.Fatalf("findBinary returned %q", bin)
			}
			if got != tc.want {
				t.Errorf("got %s (skip %q, fail %q), want %s", got, r.skipped, r.failed, tc.want)
			}
		})
	}
}

// TestStartErrorFails puts a redis-server on PATH that exits at once: the
// test must fail, not skip, with or without SLUICE_REQUIRE_REDIS.
func TestStartErrorFails(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho 'fake redis-server: not available' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "redis-server"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	for _, require := range []string{"", "1"} {
		t.Setenv(RequireEnv, require)
		r := record(t, func(tb testing.TB) { StartServer(tb) })
		if r.skipped != "" || !strings.Contains(r.failed, "starting redis-server") {
			t.Errorf("%s=%q: skip %q, fail %q; want a failure to start", RequireEnv, require, r.skipped, r.failed)
		}
	}
}
