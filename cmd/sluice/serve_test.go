package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// waitLimit bounds every wait of these tests; a passing test never reaches
// it.
const waitLimit = 30 * time.Second

var (
	binDir    string
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sluiceBinary builds the sluice command once for the test binary's run.
func sluiceBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "sluice")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running `sluice serve`.
type proc struct {
	cmd    *exec.Cmd
	listen string // the gateway's address
	tls    string // the TLS listener's address, "off" without one
	admin  string // the admin API's address
	log    *syncBuffer
	exited chan struct{}
	err    error // set before exited is closed
}

// errNotServing is returned by startServe when the process exits before it
// serves; the log is in the error.
var errNotServing = errors.New("sluice serve exited before serving")

// startServe starts `sluice serve` with args and waits until its log says
// it serves. The process is stopped when the test ends.
func startServe(t testing.TB, args ...string) (*proc, error) {
	t.Helper()
	cmd := exec.Command(sluiceBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "HTTP_PROXY=", "HTTPS_PROXY=", "NO_PROXY=*")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: &syncBuffer{}, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	var readyOnce sync.Once
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.log.Write(append(line, '\n'))
			var e struct{ Msg, Listen, TLS, Admin string }
			if json.Unmarshal(line, &e) == nil && e.Msg == "sluice serving" {
				readyOnce.Do(func() {
					p.listen, p.tls, p.admin = e.Listen, e.TLS, e.Admin
					close(ready)
				})
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(waitLimit):
			_ = cmd.Process.Kill()
			<-p.exited
			t.Errorf("sluice serve did not stop on SIGTERM; log:\n%s", p.log.String())
		}
	})
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%w (%v); log:\n%s", errNotServing, p.err, p.log.String())
	case <-time.After(waitLimit):
		t.Fatalf("sluice serve did not start; log:\n%s", p.log.String())
	}
	return nil, nil
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(waitLimit):
		t.Fatalf("sluice serve did not exit; log:\n%s", p.log.String())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("sluice serve: %v", p.err)
	}
	return 0
}

func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: waitLimit}
}

// call sends a request and returns its status and body.
func call(t testing.TB, c *http.Client, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond until it holds, failing after waitLimit. It waits
// for things a process does on its own (a reload after a signal or a file
// change), never to measure time.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	// Write a new file and rename it over the old, as editors do, so that
	// a reader never sees half a file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const serveConfig = `listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: tok}
log: {level: info}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: %s, match: {path_prefix: /%s}, upstream: up}
`

// TestServeProcess runs `sluice serve` as a process: it proxies, serves the
// admin API, reloads on POST /reload (with the token) and on SIGHUP,
// refuses an invalid file while serving on, and on SIGTERM finishes the
// request in flight before exiting 0.
func TestServeProcess(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a/slow" {
			arrived <- struct{}{}
			<-release
		}
		fmt.Fprintf(w, "up %s", r.URL.Path)
	}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, fmt.Sprintf(serveConfig, up.URL, "a", "a"))
	p, err := startServe(t, "--config", path, "--watch=false")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t)
	gw, admin := "http://"+p.listen, "http://"+p.admin
	if code, body := call(t, c, "GET", gw+"/a/hello", ""); code != 200 || body != "up /a/hello" {
		t.Fatalf("proxied request: %d %q", code, body)
	}
	if code, _ := call(t, c, "GET", gw+"/b/x", ""); code != 404 {
		t.Fatalf("unrouted request: %d", code)
	}
	if code, body := call(t, c, "GET", admin+"/metrics", "tok"); code != 200 ||
		!strings.Contains(body, `sluice_requests_total{code="200",outcome="ok",route="a"} 1`) || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	// The probes need no token; everything else does.
	for ep, token := range map[string]string{"/healthz": "", "/readyz": "", "/status": "tok"} {
		if code, _ := call(t, c, "GET", admin+ep, token); code != 200 {
			t.Errorf("%s: %d", ep, code)
		}
	}
	if code, _ := call(t, c, "GET", admin+"/status", ""); code != 401 {
		t.Errorf("/status without the token: %d, want 401", code)
	}

	// POST /reload needs the token.
	writeFile(t, path, fmt.Sprintf(serveConfig, up.URL, "b", "b"))
	if code, _ := call(t, c, "POST", admin+"/reload", ""); code != 401 {
		t.Errorf("POST /reload without token: %d, want 401", code)
	}
	if code, _ := call(t, c, "GET", gw+"/b/x", ""); code != 404 {
		t.Errorf("the file was applied without an authorised reload: %d", code)
	}
	if code, body := call(t, c, "POST", admin+"/reload", "tok"); code != 200 {
		t.Fatalf("POST /reload: %d %s", code, body)
	}
	if code, _ := call(t, c, "GET", gw+"/b/x", ""); code != 200 {
		t.Errorf("route of the reloaded file: %d", code)
	}

	// An invalid file is refused; the gateway serves on.
	writeFile(t, path, "routes: [{name: x}]\n")
	if code, body := call(t, c, "POST", admin+"/reload", "tok"); code != 422 || !strings.Contains(body, path+":1:") {
		t.Errorf("POST /reload of an invalid file: %d %s", code, body)
	}
	if code, _ := call(t, c, "GET", gw+"/b/x", ""); code != 200 {
		t.Errorf("after a refused reload: %d", code)
	}

	// SIGHUP reloads.
	writeFile(t, path, fmt.Sprintf(serveConfig, up.URL, "a", "a"))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "SIGHUP to apply the file", func() bool {
		code, _ := call(t, c, "GET", gw+"/a/x", "")
		return code == 200
	})

	// SIGTERM with a request in flight: it completes, then the process exits 0.
	done := make(chan string, 1)
	go func() {
		resp, err := c.Get(gw + "/a/slow")
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	select {
	case <-arrived:
	case <-time.After(waitLimit):
		t.Fatal("the slow request did not reach the upstream")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "/readyz to report shutdown", func() bool {
		code, _ := call(t, c, "GET", admin+"/readyz", "")
		return code == 503
	})
	close(release)
	if got := <-done; got != "200 up /a/slow" {
		t.Errorf("request in flight at SIGTERM: %s", got)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit code %d after SIGTERM; log:\n%s", code, p.log.String())
	}
}

// TestServeWatchesFile checks that a change of the configuration file is
// applied without a signal.
func TestServeWatchesFile(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, fmt.Sprintf(serveConfig, up.URL, "a", "a"))
	p, err := startServe(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t)
	writeFile(t, path, fmt.Sprintf(serveConfig, up.URL, "b", "b"))
	eventually(t, "the changed file to be applied", func() bool {
		code, _ := call(t, c, "GET", "http://"+p.listen+"/b/x", "")
		return code == 200
	})
}

// TestServePositionalFile checks that `sluice serve FILE` serves FILE, as
// `sluice serve --config FILE` does, with flags after the file too.
func TestServePositionalFile(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "up") }))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "positional.yaml")
	writeFile(t, path, fmt.Sprintf(serveConfig, up.URL, "p", "p"))
	p, err := startServe(t, path, "--watch=false")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, newClient(t), "GET", "http://"+p.listen+"/p/x", ""); code != 200 || body != "up" {
		t.Errorf("GET /p/x: %d %q", code, body)
	}
}

// TestServeBadConfig checks that serve refuses to start on an invalid file.
func TestServeBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, "listen: [\n")
	_, err := startServe(t, "--config", path)
	if !errors.Is(err, errNotServing) || !strings.Contains(err.Error(), path) {
		t.Fatalf("serve with a bad file: %v", err)
	}
}

// TestRedisSharedLimit runs three `sluice serve` processes sharing one real
// redis-server and sends them concurrent requests: together they admit
// exactly the limit.
func TestRedisSharedLimit(t *testing.T) {
	redis := redistest.Start(t)
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer up.Close()
	const limit, replicas, requests = 50, 3, 300
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	// GCRA with the whole quota as burst over a day: no request is earned
	// back while the test runs.
	writeFile(t, path, fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: "off"}
log: {level: info}
store:
  kind: redis
  redis: {addrs: ["%s"], on_error: closed, timeout: 2s, prefix: sluicetest}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: shared
    upstream: up
    policies:
      rate_limit: {algorithm: gcra, limit: %d, burst: %d, period: 24h, key: route}
`, redis, up.URL, limit, limit))
	var addrs []string
	for range replicas {
		p, err := startServe(t, "--config", path, "--watch=false")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, "http://"+p.listen)
	}
	c := newClient(t)
	var admitted, limited atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for w := range 12 {
		wg.Go(func() {
			for i := w; i < requests; i += 12 {
				req, _ := http.NewRequestWithContext(ctx, "GET", addrs[i%replicas]+"/", nil)
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					admitted.Add(1)
				case 429:
					limited.Add(1)
				default:
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if admitted.Load() != limit || limited.Load() != requests-limit {
		t.Errorf("%d replicas admitted %d and limited %d of %d requests; want exactly %d admitted",
			replicas, admitted.Load(), limited.Load(), requests, limit)
	}
	if calls.Load() != limit {
		t.Errorf("the upstream got %d calls, want %d", calls.Load(), limit)
	}
}
