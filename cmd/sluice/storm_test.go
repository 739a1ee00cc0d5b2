package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// stormConfig is the file of TestReloadStormThenSIGTERM: the engine, the
// upstream and the policies of route r vary. Route limited admits one
// request per hour; every valid variant keeps it as it is.
const stormConfig = `listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: tok}
log: {level: info}
server: {engine: %s}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: limited
    match: {path_prefix: /limited}
    upstream: up
    policies:
      rate_limit: {limit: 1, period: 1h, key: route}
  - name: r
    match: {path_prefix: /r}
    upstream: up
    policies: %s
`

// TestReloadStormThenSIGTERM runs `sluice serve` (file watch on) under a
// bounded load on loopback while its file is rewritten and reloaded many
// times, through POST /reload and SIGHUP, with valid and invalid contents;
// then SIGTERM arrives under the same load, with requests in flight. Every
// answer is right: no request fails but those route limited's rate limit
// refuses (429 with Retry-After, and exactly one admitted: the limit's
// state survives the reloads), and the only transport errors are of
// requests that end after SIGTERM, which the closing listener refuses. Every
// valid reload answers 200 and every invalid one 422; requests parked
// upstream since before the storm complete after SIGTERM; the process
// exits 0. On both engines.
func TestReloadStormThenSIGTERM(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) { reloadStorm(t, engine) })
	}
}

func reloadStorm(t *testing.T, engine string) {
	const (
		workers = 8
		// perWorker bounds each worker's requests; the storm waits for the
		// load to progress, never for a number of requests in a time.
		perWorker = 1_000_000
		held      = 4  // requests parked upstream across the storm and SIGTERM
		rounds    = 24 // file rewrites
	)
	release := make(chan struct{})
	arrived := make(chan struct{}, held)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/r/hold" {
			arrived <- struct{}{}
			<-release
			fmt.Fprint(w, "held")
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	valid := []string{
		"{}",
		"{retry: {attempts: 2}, timeout: 10s}",
		"{circuit_breaker: {consecutive_failures: 1000}, concurrency: {max: 1000}}",
		"{concurrency: {adaptive: {min: 50, max: 1000}}}",
		"{coalesce: true}",
	}
	invalid := []string{
		"routes: [{name: x}]\n",
		"listen: [\n",
		fmt.Sprintf(stormConfig, engine, up.URL, "{rate_limit: {limit: 1, period: 0s}}"),
	}
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, fmt.Sprintf(stormConfig, engine, up.URL, valid[0]))
	p, err := startServe(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	gw, admin := "http://"+p.listen, "http://"+p.admin
	c := newClient(t)

	// Park requests upstream; they finish only after SIGTERM.
	heldDone := make(chan string, held)
	for range held {
		go func() {
			resp, err := c.Get(gw + "/r/hold")
			if err != nil {
				heldDone <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			heldDone <- fmt.Sprintf("%d %s", resp.StatusCode, b)
		}()
	}
	for range held {
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatal("the held requests did not reach the upstream")
		}
	}

	// Load: each worker sends requests until stopped, at most perWorker
	// and for at most twice waitLimit.
	var stop, terminating atomic.Bool
	var sent, limited, limitedOK, refused atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			deadline := time.Now().Add(2 * waitLimit)
			for i := 0; i < perWorker && !stop.Load() && time.Now().Before(deadline); i++ {
				url := fmt.Sprintf("%s/r/w%d/%d", gw, w, i)
				if i%10 == 0 {
					url = gw + "/limited"
				}
				resp, err := c.Get(url)
				if err != nil {
					// A request sent as SIGTERM arrives may not have been
					// accepted yet: the closing listener refuses or resets
					// it. The requests known to be in flight are the held
					// ones.
					if !terminating.Load() {
						fail("GET %s: %v", url, err)
					}
					refused.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				sent.Add(1)
				switch {
				case strings.HasSuffix(url, "/limited") && resp.StatusCode == 429:
					limited.Add(1)
					if resp.Header.Get("Retry-After") == "" {
						fail("429 without Retry-After")
					}
				case strings.HasSuffix(url, "/limited") && resp.StatusCode == 200:
					limitedOK.Add(1)
				case resp.StatusCode != 200 || string(b) != "ok":
					fail("GET %s: %d %q", url, resp.StatusCode, b)
				}
			}
		})
	}

	// The storm: rewrite the file (which the watcher reloads), then POST
	// /reload (which answers for that content) or, every third round,
	// SIGHUP. Each round waits for the load to have been answered again.
	posted := 0 // invalid files sent by POST /reload, each refused and logged
	for i := range rounds {
		from := sent.Load()
		eventually(t, "the load to progress", func() bool { return sent.Load() >= from+workers })
		text, want := fmt.Sprintf(stormConfig, engine, up.URL, valid[i%len(valid)]), 200
		if i%4 == 3 {
			text, want = invalid[(i/4)%len(invalid)], 422
		}
		writeFile(t, path, text)
		if i%3 == 2 {
			if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if code, body := call(t, c, "POST", admin+"/reload", "tok"); code != want {
			t.Errorf("round %d: POST /reload: %d, want %d: %s", i, code, want, body)
		}
		if want == 422 {
			posted++
		}
	}
	// End on a valid file.
	writeFile(t, path, fmt.Sprintf(stormConfig, engine, up.URL, valid[0]))
	if code, body := call(t, c, "POST", admin+"/reload", "tok"); code != 200 {
		t.Errorf("last POST /reload: %d: %s", code, body)
	}

	// SIGTERM under load, with the held requests in flight.
	from := sent.Load()
	eventually(t, "the load to progress", func() bool { return sent.Load() >= from+workers })
	terminating.Store(true)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "/readyz to report shutdown", func() bool {
		code, _ := call(t, c, "GET", admin+"/readyz", "")
		return code == 503
	})
	close(release)
	for range held {
		select {
		case got := <-heldDone:
			if got != "200 held" {
				t.Errorf("request in flight across the storm and SIGTERM: %s", got)
			}
		case <-time.After(waitLimit):
			t.Fatal("a held request did not complete")
		}
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM; log:\n%s", code, p.log.String())
	}
	stop.Store(true)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if limitedOK.Load() != 1 {
		t.Errorf("route limited admitted %d requests across the reloads, want exactly 1 (limit 1 per hour)", limitedOK.Load())
	}
	if sent.Load() == 0 || limited.Load() == 0 {
		t.Errorf("sent %d requests, %d limited: the load did not run", sent.Load(), limited.Load())
	}
	t.Logf("%d requests answered (%d limited), %d refused after SIGTERM", sent.Load(), limited.Load(), refused.Load())
	if n := strings.Count(p.log.String(), `"reload refused"`); n < posted {
		t.Errorf("%d refused reloads in the log, want at least %d", n, posted)
	}
}
