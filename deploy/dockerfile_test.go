// Package deploy_test checks the files that package and observe sluice:
// the Dockerfile and its .dockerignore at the repository root, the
// Kubernetes manifest in deploy/kubernetes, the systemd unit in
// deploy/systemd and the Grafana dashboard in deploy/grafana. Neither
// Docker, a cluster nor systemd is needed: the checks read the files.
package deploy_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// root is the repository root, relative to this package.
const root = ".."

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, COPY, RUN, ...
	args string
}

// stage is one FROM and the instructions after it.
type stage struct {
	image, name string
	body        []instruction
}

// parseDockerfile reads the Dockerfile into its stages. Comments and blank
// lines are skipped; a line ending in a backslash continues on the next.
func parseDockerfile(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var pending string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && pending == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile: %s before the first FROM", in.cmd)
			}
			continue
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// find returns the args of every instruction cmd in s.
func (s stage) find(cmd string) []string {
	var out []string
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// goDirective returns the go directive of the module's go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages, want 2 (build, final)", len(stages))
	}
	build, final := stages[0], stages[1]

	t.Run("build stage", func(t *testing.T) {
		img, tag, _ := strings.Cut(build.image, ":")
		if img != "golang" || build.name == "" {
			t.Fatalf("build stage is FROM %s AS %q, want the official golang image, named", build.image, build.name)
		}
		// The image's Go version (golang:1.26 or golang:1.26.0, maybe
		// with a -variant) is the go.mod's at the precision it gives.
		imageGo, _, _ := strings.Cut(tag, "-")
		modGo := goDirective(t)
		if modGo != imageGo && !strings.HasPrefix(modGo, imageGo+".") {
			t.Errorf("build image has Go %q, go.mod says go %s", imageGo, modGo)
		}
		runs := strings.Join(build.find("RUN"), "\n")
		for _, want := range []string{"CGO_ENABLED=0", "go build", "-trimpath", "-s -w",
			"-X github.com/sluicehq/sluice/internal/buildinfo.version=", "./cmd/sluice"} {
			if !strings.Contains(runs, want) {
				t.Errorf("build stage runs no %q:\n%s", want, runs)
			}
		}
	})

	t.Run("final stage", func(t *testing.T) {
		if final.image != "gcr.io/distroless/static-debian12:nonroot" && final.image != "scratch" {
			t.Errorf("final stage is FROM %s, want distroless static nonroot or scratch", final.image)
		}
		if u := final.find("USER"); len(u) != 1 || strings.HasPrefix(u[0], "root") || strings.HasPrefix(u[0], "0") {
			t.Errorf("final stage USER %q, want one non-root user", u)
		}
		if e := final.find("ENTRYPOINT"); !slices.Equal(e, []string{`["/sluice"]`}) {
			t.Errorf("ENTRYPOINT %q, want [\"/sluice\"]", e)
		}
		cmds := final.find("CMD")
		var cmd []string
		if len(cmds) != 1 || json.Unmarshal([]byte(cmds[0]), &cmd) != nil ||
			!slices.Equal(cmd, []string{"serve", "--config", "/etc/sluice/sluice.yaml"}) {
			t.Fatalf("CMD %q, want [\"serve\", \"--config\", \"/etc/sluice/sluice.yaml\"]", cmds)
		}
		if c := final.find("COPY"); !slices.Contains(c, "--from="+build.name+" /out/sluice /sluice") {
			t.Errorf("final stage does not copy the binary from the %s stage to /sluice: %q", build.name, c)
		}
		// The configuration CMD names is the example, copied in.
		if c := final.find("COPY"); !slices.Contains(c, "examples/sluice.yaml "+cmd[2]) {
			t.Errorf("final stage does not copy examples/sluice.yaml to %s: %q", cmd[2], c)
		}
		if _, err := config.Load(filepath.Join(root, "examples/sluice.yaml")); err != nil {
			t.Errorf("the configuration the image serves does not load: %v", err)
		}
		var exposed []string
		for _, e := range final.find("EXPOSE") {
			exposed = append(exposed, strings.Fields(e)...)
		}
		for _, addr := range []string{config.DefaultListen, config.DefaultAdminListen} {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(exposed, port) && !slices.Contains(exposed, port+"/tcp") {
				t.Errorf("EXPOSE %q lacks the default port %s (%s)", exposed, port, addr)
			}
		}
	})

	t.Run("copied paths", func(t *testing.T) {
		ignored := readDockerignore(t)
		for _, s := range stages {
			for _, c := range s.find("COPY") {
				f := strings.Fields(c)
				if strings.HasPrefix(f[0], "--from=") {
					continue
				}
				for _, src := range f[:len(f)-1] {
					if strings.HasPrefix(src, "--") {
						continue
					}
					if _, err := os.Stat(filepath.Join(root, src)); err != nil {
						t.Errorf("COPY %s: %v", c, err)
					}
					if p := ignoredBy(ignored, src); p != "" {
						t.Errorf("COPY %s: .dockerignore excludes %s (pattern %q)", c, src, p)
					}
				}
			}
		}
		// COPY . . brings the module; the packages the command needs must
		// not be left out of it.
		for _, p := range []string{"go.mod", "go.sum", "cmd/sluice/main.go", "internal/buildinfo/buildinfo.go", "gateway/gateway.go", "config/config.go"} {
			if pat := ignoredBy(ignored, p); pat != "" {
				t.Errorf(".dockerignore excludes %s (pattern %q), which the build needs", p, pat)
			}
		}
	})
}

// readDockerignore returns the patterns of .dockerignore. It fails on the
// syntax ignoredBy does not understand (** and ! exceptions).
func readDockerignore(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") || strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore pattern %q: this test understands no ** or ! patterns", line)
		}
		patterns = append(patterns, filepath.Clean(strings.TrimPrefix(line, "/")))
	}
	return patterns
}

// ignoredBy returns the pattern that excludes path from the build context,
// or "": as Docker does, a pattern matches the path or one of its parent
// directories, relative to the context's root.
func ignoredBy(patterns []string, path string) string {
	path = filepath.Clean(path)
	for _, p := range patterns {
		for q := path; q != "." && q != "/"; q = filepath.Dir(q) {
			if ok, _ := filepath.Match(p, q); ok {
				return p
			}
		}
	}
	return ""
}
