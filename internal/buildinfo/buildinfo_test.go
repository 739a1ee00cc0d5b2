package buildinfo_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/sluicehq/sluice/internal/buildinfo"
)

func TestFromBuildInfo(t *testing.T) {
	checkout := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	clean := []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba9876543210"}, {Key: "vcs.modified", Value: "false"}}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     buildinfo.Info
		line     string
	}{
		{"no build info", nil, "",
			buildinfo.Info{Version: "devel", GoVersion: runtime.Version()},
			"devel " + runtime.Version()},
		{"no build info, link-time version", nil, "v9.9.9",
			buildinfo.Info{Version: "v9.9.9", GoVersion: runtime.Version()},
			"v9.9.9 " + runtime.Version()},
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, "",
			buildinfo.Info{Version: "v1.2.3", GoVersion: "go1.26.0"},
			"v1.2.3 go1.26.0"},
		{"devel module, modified checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: checkout}, "",
			buildinfo.Info{Version: "0123456789ab-dirty", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.26.0"},
			"0123456789ab-dirty (revision 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.0"},
		{"pseudo-version from a clean checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20260102030405-fedcba987654"}, Settings: clean}, "",
			buildinfo.Info{Version: "v0.0.0-20260102030405-fedcba987654", Revision: "fedcba9876543210", GoVersion: "go1.26.0"},
			"v0.0.0-20260102030405-fedcba987654 (revision fedcba987654) go1.26.0"},
		{"link-time version wins", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: clean}, "v2.0.0",
			buildinfo.Info{Version: "v2.0.0", Revision: "fedcba9876543210", GoVersion: "go1.26.0"},
			"v2.0.0 (revision fedcba987654) go1.26.0"},
		{"nothing known", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "",
			buildinfo.Info{Version: "devel", GoVersion: "go1.26.0"},
			"devel go1.26.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := buildinfo.FromBuildInfo(tc.bi, tc.override)
			if got != tc.want {
				t.Errorf("FromBuildInfo = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.line {
				t.Errorf("String() = %q, want %q", s, tc.line)
			}
		})
	}
}

// TestRead checks that the test binary's own build information gives a
// version and the toolchain that is running it.
func TestRead(t *testing.T) {
	got := buildinfo.Read()
	if got.Version == "" || got.GoVersion != runtime.Version() {
		t.Fatalf("Read() = %+v, want a version and Go %s", got, runtime.Version())
	}
}
