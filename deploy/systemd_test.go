package deploy_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

// readUnit reads a systemd unit file into section → key → values (a key
// may repeat). Comments and blank lines are skipped.
func readUnit(t *testing.T, name string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unit := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			unit[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: %q is no key=value in a section", name, line)
			}
			unit[section][k] = append(unit[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return unit
}

// TestSystemdUnit checks deploy/systemd/sluice.service: it validates the
// file it serves before starting, reloads on SIGHUP, gives the graceful
// shutdown its whole server.shutdown_timeout, has descriptors for
// server.max_connections, and its system call filter lets sluice serve
// move its threads to SCHED_BATCH.
func TestSystemdUnit(t *testing.T) {
	s := readUnit(t, "deploy/systemd/sluice.service")["Service"]
	one := func(k string) string {
		t.Helper()
		if len(s[k]) != 1 {
			t.Fatalf("[Service] %s = %q, want one", k, s[k])
		}
		return s[k][0]
	}
	bin, args, _ := strings.Cut(one("ExecStart"), " ")
	file, ok := strings.CutPrefix(args, "serve --config ")
	if !filepath.IsAbs(bin) || !ok || !filepath.IsAbs(file) {
		t.Fatalf("ExecStart=%s, want /abs/sluice serve --config /abs/file", one("ExecStart"))
	}
	if pre := one("ExecStartPre"); pre != bin+" validate "+file {
		t.Errorf("ExecStartPre=%s, want %s validate %s", pre, bin, file)
	}
	if r := one("ExecReload"); !strings.Contains(r, "kill -HUP $MAINPID") {
		t.Errorf("ExecReload=%s, want a SIGHUP", r)
	}
	if one("KillSignal") != "SIGTERM" {
		t.Errorf("KillSignal=%s: sluice serve shuts down gracefully on SIGTERM", one("KillSignal"))
	}
	cfg, err := config.Parse("sluice.yaml", []byte("upstreams: {a: {targets: [\"http://127.0.0.1:1\"]}}\nroutes: [{name: r, upstream: a}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := time.ParseDuration(one("TimeoutStopSec"))
	if err != nil || stop <= cfg.Server.ShutdownTimeout.D() {
		t.Errorf("TimeoutStopSec=%s does not exceed server.shutdown_timeout's default %v", one("TimeoutStopSec"), cfg.Server.ShutdownTimeout.D())
	}
	if n, err := strconv.Atoi(one("LimitNOFILE")); err != nil || n < 2*cfg.Server.MaxConnections {
		t.Errorf("LimitNOFILE=%d: two descriptors per connection at server.max_connections (%d)", n, cfg.Server.MaxConnections)
	}
	if f := one("SystemCallFilter"); !strings.Contains(f, "@system-service") && !strings.Contains(f, "@resources") {
		t.Errorf("SystemCallFilter=%s lets no sched_setattr through (@system-service or @resources)", f)
	}
	if u := one("User"); u == "" || u == "root" {
		t.Errorf("User=%s, want a user of its own", u)
	}
}
