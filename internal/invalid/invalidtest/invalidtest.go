// Package invalidtest checks, in tests, the errors that constructors return
// for unusable options.
package invalidtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// Check fails t unless err matches sluice.ErrInvalidOptions and sentinel
// (when not nil), and each of names (the unusable options) appears in a
// line of its own of err's message: one problem per line, as errors.Join
// writes them.
func Check(t testing.TB, err error, sentinel error, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want one naming %q", names)
	}
	if !errors.Is(err, sluice.ErrInvalidOptions) {
		t.Errorf("error %q does not match sluice.ErrInvalidOptions", err)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("error %q does not match %q", err, sentinel)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) < len(names) {
		t.Errorf("error %q has %d lines, want one per problem (%d)", err, len(lines), len(names))
	}
	used := make([]bool, len(lines))
	for _, name := range names {
		found := false
		for i, line := range lines {
			if !used[i] && strings.Contains(line, name) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("error %q names no %q on a line of its own", err, name)
		}
	}
}
