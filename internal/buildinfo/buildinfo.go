// Package buildinfo says which build of sluice is running, from what the Go
// toolchain embeds in the binary (runtime/debug.ReadBuildInfo).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version, when set at link time, overrides the version read from the
// build information; builds without a module version or a VCS checkout
// (a Docker build with no .git, for one) set it:
//
//	go build -ldflags "-X github.com/sluicehq/sluice/internal/buildinfo.version=v1.2.3" ./cmd/sluice
var version string

// Info describes one build.
type Info struct {
	// Version is, in order of preference: the version set at link time,
	// the main module's version (a tagged release, or the pseudo-version
	// go build derives from the checkout), the VCS revision's first 12
	// characters with "-dirty" when the tree was modified, or "devel".
	Version string
	// Revision, Time and Modified are the VCS revision, commit time
	// (RFC 3339) and whether the tree had uncommitted changes, as go build
	// records them in a checkout; empty (false) otherwise.
	Revision string
	Time     string
	Modified bool
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo() // nil when the binary carries none
	return FromBuildInfo(bi, version)
}

// FromBuildInfo derives an Info from bi (nil when the binary carries
// none) and override (the version set at link time, or "").
func FromBuildInfo(bi *debug.BuildInfo, override string) Info {
	info := Info{GoVersion: runtime.Version()}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	switch {
	case override != "":
		info.Version = override
	case bi.Main.Version != "" && bi.Main.Version != "(devel)":
		info.Version = bi.Main.Version
	case info.Revision != "":
		info.Version = shortRevision(info.Revision)
		if info.Modified {
			info.Version += "-dirty"
		}
	default:
		info.Version = "devel"
	}
	return info
}

// String is the one-line form `sluice version` prints, for example
// "v1.2.3 (revision 0123456789ab, 2026-01-02T03:04:05Z, modified) go1.26.0";
// the parenthesis is left out when there is no revision.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if i.Revision != "" {
		b.WriteString(" (revision ")
		b.WriteString(shortRevision(i.Revision))
		if i.Time != "" {
			b.WriteString(", ")
			b.WriteString(i.Time)
		}
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" ")
	b.WriteString(i.GoVersion)
	return b.String()
}

func shortRevision(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}
