//go:build linux

package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2LoopsGateway starts a gateway on the loop engine with h2c on the
// loops (server.http2.loops), one route "all" to up with policies (YAML
// of the route's policies: field, or "").
func h2LoopsGateway(t *testing.T, up *upstream, policies string) *testGateway {
	t.Helper()
	tg := startGateway(t, parseConfig(t, `
server: {engine: loop, http2: {loops: true}}
upstreams:
  up: {targets: ["%s"]}
routes:
  - name: all
    match: {path_prefix: /}
    upstream: up
%s`, up.URL, policies))
	if w := h2Settings(t, tg.Addr)[http2.SettingInitialWindowSize]; w != 64<<10 {
		t.Fatalf("the h2c connection's stream window is %d: not the loops' (64 KiB)", w)
	}
	return tg
}

// h2Settings returns the settings the gateway at addr sends first on an
// h2c connection.
func h2Settings(t *testing.T, addr string) map[http2.SettingID]uint32 {
	t.Helper()
	fr := h2Dial(t, addr)
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}
	m := map[http2.SettingID]uint32{}
	_ = sf.ForeachSetting(func(s http2.Setting) error { m[s.ID] = s.Val; return nil })
	return m
}

// h2Dial opens an h2c connection (prior knowledge) to addr, closed when
// the test ends, and sends the preface and empty SETTINGS.
func h2Dial(t *testing.T, addr string) *http2.Framer {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return fr
}

// h2Headers encodes a request's header block.
func h2Headers(fields ...string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return b.Bytes()
}

// TestH2LoopsGoClient serves Go's HTTP/2 client (h2c, prior knowledge) on
// the loops: GET, HEAD, POST with a body, cookies, many requests at once
// on one connection; the upstream sees the HTTP/1.1 request the loops
// make of each (Host naming the target, X-Forwarded-*, the cookie crumbs
// joined), and the client the upstream's answer.
func TestH2LoopsGoClient(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Up", "1")
		fmt.Fprintf(w, "%s %s %s %q cookie=%q xff=%s proto=%s host=%s fhost=%s", r.Proto, r.Method, r.URL.RequestURI(), body,
			r.Header.Get("Cookie"), r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Host, r.Header.Get("X-Forwarded-Host"))
	})
	tg := h2LoopsGateway(t, up, "")
	c := protoClient(t, "h2c", nil, "")
	req, _ := http.NewRequest("POST", tg.URL+"/a?q=1", strings.NewReader("hello"))
	req.Header.Add("Cookie", "a=1")
	req.Header.Add("Cookie", "b=2")
	req.Host = "example.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`HTTP/1.1 POST /a?q=1 "hello" cookie="a=1; b=2" xff=127.0.0.1 proto=http host=%s fhost=example.test`, up.addr())
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != want || resp.Header.Get("X-Up") != "1" {
		t.Fatalf("POST: %s %d %v\n%q\nwant %q", resp.Proto, resp.StatusCode, resp.Header, body, want)
	}
	resp, err = c.Head(tg.URL + "/h")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			r, err := tryDo(c, "GET", fmt.Sprintf("%s/n%d", tg.URL, i), nil, nil)
			if err != nil || r.Code != 200 || !strings.Contains(r.Body, fmt.Sprintf("GET /n%d ", i)) {
				errs <- fmt.Errorf("request %d: %d %q %v", i, r.Code, r.Body, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
