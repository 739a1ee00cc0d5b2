package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// switchable is an upstream that answers 200 with its name, the path and
// the caller's Authorization, or 503 while failing.
type switchable struct {
	*upstream
	failing atomic.Bool
}

func startSwitchable(t *testing.T, name string, header ...string) *switchable {
	s := &switchable{}
	s.upstream = startUpstream(t, name, func(w http.ResponseWriter, r *http.Request) {
		if s.failing.Load() {
			http.Error(w, name+" down", http.StatusServiceUnavailable)
			return
		}
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		fmt.Fprintf(w, "%s %s %s", name, r.URL.Path, r.Header.Get("Authorization"))
	})
	return s
}

// TestFallbackLevels checks the fallback's levels in order, on both
// engines: another upstream, then the last good answer to the same
// request (within max_age, never a private one, never another caller's,
// with the route's response rules as any upstream answer), then the
// static answer.
func TestFallbackLevels(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		primary := startSwitchable(t, "primary")
		backup := startSwitchable(t, "backup")
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
  backup: {targets: ["%s"]}
routes:
  - name: r
    upstream: up
    headers: {response: {set: {X-Via: sluice}}}
    policies:
      fallback:
        upstream: backup
        last_good: {max_age: 30s}
        status: 503
        content_type: text/plain
        body: static
`, engine, primary.URL, backup.URL))
		c := newClient(t)
		alice := http.Header{"Authorization": {"alice"}}
		bob := http.Header{"Authorization": {"bob"}}
		check := func(what, method, path string, h http.Header, code int, body string) result {
			t.Helper()
			res := do(t, c, method, tg.URL+path, h, nil)
			if res.Code != code || res.Body != body {
				t.Fatalf("%s: %d %q, want %d %q", what, res.Code, res.Body, code, body)
			}
			return res
		}

		check("primary up", "GET", "/a", alice, 200, "primary /a alice")
		primary.failing.Store(true)
		check("primary down: the backup upstream", "GET", "/a", alice, 200, "backup /a alice")
		backup.failing.Store(true)
		res := check("both down: the last good answer", "GET", "/a", alice, 200, "primary /a alice")
		if res.Header.Get("Age") != "0" {
			t.Errorf("last good answer's Age %q, want 0", res.Header.Get("Age"))
		}
		if res.Header.Get("X-Via") != "sluice" {
			t.Errorf("last good answer without the route's response rules: X-Via %q", res.Header.Get("X-Via"))
		}
		check("another caller: not alice's answer", "GET", "/a", bob, 503, "static")
		check("another path", "GET", "/b", alice, 503, "static")
		backupCalls := backup.calls.Load()
		check("a POST", "POST", "/a", alice, 503, "static")
		if n := backup.calls.Load() - backupCalls; n != 0 {
			t.Errorf("a POST went to the fallback upstream %d times, want never", n)
		}

		tg.Clock.Advance(20 * time.Second)
		res = check("20s later", "GET", "/a", alice, 200, "primary /a alice")
		if res.Header.Get("Age") != "20" {
			t.Errorf("last good answer's Age %q, want 20", res.Header.Get("Age"))
		}
		tg.Clock.Advance(10*time.Second + time.Millisecond)
		check("past max_age: the static answer", "GET", "/a", alice, 503, "static")

		// A good answer replaces the last one; the backup's answers are
		// not kept (they are not the route's).
		primary.failing.Store(false)
		check("primary up again", "GET", "/a", alice, 200, "primary /a alice")
		// The backup failed five times in a row: its passive health took it
		// out for five seconds.
		tg.Clock.Advance(5 * time.Second)
		primary.failing.Store(true)
		backup.failing.Store(false)
		check("primary down again: the backup", "GET", "/c", alice, 200, "backup /c alice")
		backup.failing.Store(true)
		check("the backup's answer was not kept", "GET", "/c", alice, 503, "static")
		check("the fresh answer was", "GET", "/a", alice, 200, "primary /a alice")
	})
}

// TestFallbackNeverKeepsPrivateAnswers checks that an answer meant for one
// caller (Set-Cookie, Cache-Control private or no-store) is never given
// again by the last-good level, even to the same caller.
func TestFallbackNeverKeepsPrivateAnswers(t *testing.T) {
	for _, header := range [][]string{
		{"Set-Cookie", "session=1"},
		{"Cache-Control", "private, max-age=60"},
		{"Cache-Control", "no-store"},
		{"Vary", "*"},
	} {
		t.Run(strings.Join(header, ":"), func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				primary := startSwitchable(t, "primary", header...)
				tg := routedGateway(t, engine, primary.upstream, `
  - name: r
    upstream: up
    policies:
      fallback: {last_good: {}}
`)
				c := newClient(t)
				if res := get(t, c, tg.URL+"/a"); res.Code != 200 {
					t.Fatalf("primary up: %d %s", res.Code, res.Body)
				}
				primary.failing.Store(true)
				// No static level: the route's own answer, the upstream's 503.
				if res := get(t, c, tg.URL+"/a"); res.Code != 503 || res.Body != "primary down\n" {
					t.Errorf("after a private answer: %d %q, want the upstream's own 503", res.Code, res.Body)
				}
			})
		})
	}
}

// TestFallbackUpstreamUnreachable checks that the levels go on past a
// fallback upstream that cannot be reached, and that without a static
// level the client gets the route's own error.
func TestFallbackUpstreamUnreachable(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"]}
  backup: {targets: ["http://%s"]}
routes:
  - name: r
    upstream: up
    policies:
      fallback: {upstream: backup}
`, engine, closedAddr(t), closedAddr(t)))
		res := get(t, newClient(t), tg.URL+"/a")
		if res.Code != http.StatusBadGateway || res.errorBody(t).Error != "upstream_unreachable" {
			t.Errorf("both unreachable: %d %s, want 502 upstream_unreachable", res.Code, res.Body)
		}
	})
}

// TestFallbackUpstreamPassiveHealth checks, on both engines, that the
// fallback's upstream, once its passive health took it out (five failures
// in a row), gets no more requests until its five seconds are over, then
// one probe: a failing route must not wait on a fallback known to be down
// with every request. (It got every one.)
func TestFallbackUpstreamPassiveHealth(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		primary := startSwitchable(t, "primary")
		backup := startSwitchable(t, "backup")
		primary.failing.Store(true)
		backup.failing.Store(true)
		tg := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
  backup: {targets: ["%s"]}
routes:
  - name: r
    upstream: up
    policies:
      fallback: {upstream: backup, status: 503, body: static}
`, engine, primary.URL, backup.URL))
		c := newClient(t)
		send := func(n int) {
			t.Helper()
			for range n {
				if res := get(t, c, tg.URL+"/a"); res.Code != 503 || res.Body != "static" {
					t.Fatalf("both down: %d %q, want the static 503", res.Code, res.Body)
				}
			}
		}
		send(5)
		if n := backup.calls.Load(); n != 5 {
			t.Fatalf("the backup got %d requests of 5", n)
		}
		send(3)
		if n := backup.calls.Load(); n != 5 {
			t.Errorf("the backup, out after five failures, got %d more requests, want none", n-5)
		}
		tg.Clock.Advance(5 * time.Second)
		send(1)
		if n := backup.calls.Load(); n != 6 {
			t.Errorf("after its five seconds out, the backup got %d requests, want 6 (one probe)", n)
		}
	})
}

// TestFallbackHonoursRequestNoStore checks, on both engines, that an
// answer to a request with Cache-Control: no-store (RFC 9111 section
// 5.2.1.5: no cache stores any part of it or of its answer) is not kept
// for the last-good level. (It was kept, and given again.)
func TestFallbackHonoursRequestNoStore(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		primary := startSwitchable(t, "primary")
		tg := routedGateway(t, engine, primary.upstream, `
  - name: r
    upstream: up
    policies:
      fallback: {last_good: {}}
`)
		c := newClient(t)
		h := http.Header{"Authorization": {"alice"}, "Cache-Control": {"no-cache, No-Store"}}
		if res := do(t, c, "GET", tg.URL+"/a", h, nil); res.Code != 200 {
			t.Fatalf("primary up: %d %q", res.Code, res.Body)
		}
		primary.failing.Store(true)
		if res := do(t, c, "GET", tg.URL+"/a", http.Header{"Authorization": {"alice"}}, nil); res.Code != 503 || res.Body != "primary down\n" {
			t.Errorf("after an answer to a no-store request: %d %q, want the upstream's own 503", res.Code, res.Body)
		}
	})
}
