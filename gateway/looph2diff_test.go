//go:build linux

package gateway_test

import (
	"net/http"
	"testing"

	"golang.org/x/net/http2"
)

// TestH2LoopsSecondHost sends requests with a host field beside their
// :authority: one naming another host is not forwarded (RFC 9113 section
// 8.3.1; net/http's HTTP/2 path and nginx answer it 400), since an
// upstream or a proxy that reads the host field would disagree with the
// gateway's routing and X-Forwarded-Host; one naming the same host, in
// any case, is served.
func TestH2LoopsSecondHost(t *testing.T) {
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		if fh := r.Header.Get("X-Forwarded-Host"); fh != "a.test" {
			t.Errorf("the upstream got X-Forwarded-Host %q, want a.test", fh)
		}
	})
	tg := h2LoopsGateway(t, up, "")
	cl := h2Dial(t, tg.Addr)
	for i, host := range []string{"evil.test", "a.test, evil.test", "a.test:8080"} {
		id := uint32(1 + 2*i)
		block := h2Headers(":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a", "host", host)
		if err := cl.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if status, _, code, ok := h2Answer(t, cl, id); ok && status != "400" {
			t.Errorf("host %q beside :authority a.test: answered %s, want a 400 or a reset (reset %v)", host, status, code)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("the upstream served %d requests that named a second host", n)
	}
	block := h2Headers(":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a", "host", "A.Test")
	if err := cl.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if status, _, code, ok := h2Answer(t, cl, 7); !ok || status != "200" {
		t.Fatalf("host A.Test beside :authority a.test: answered %q (reset %v), want 200", status, code)
	}
}

// TestH2LoopsEmptyCookieCrumb sends cookie crumbs of which some are empty:
// the upstream gets the others joined with "; " (RFC 9113 section
// 8.2.3), as net/http's HTTP/2 path sends them, not a Cookie field that
// starts or ends with a separator or holds two in a row.
func TestH2LoopsEmptyCookieCrumb(t *testing.T) {
	cookies := make(chan []string, 1)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		cookies <- r.Header.Values("Cookie")
	})
	tg := h2LoopsGateway(t, up, "")
	cl := h2Dial(t, tg.Addr)
	for i, c := range []struct {
		crumbs []string
		want   string
	}{
		{[]string{"", "a=1"}, "a=1"},
		{[]string{"a=1", "", "b=2", ""}, "a=1; b=2"},
		{[]string{""}, ""},
	} {
		id := uint32(1 + 2*i)
		fields := []string{":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/a"}
		for _, v := range c.crumbs {
			fields = append(fields, "cookie", v)
		}
		if err := cl.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h2Headers(fields...), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if status, _, code, ok := h2Answer(t, cl, id); !ok || status != "200" {
			t.Fatalf("crumbs %q: answered %q (reset %v), want 200", c.crumbs, status, code)
		}
		got := <-cookies
		if (c.want == "" && len(got) != 0) || (c.want != "" && (len(got) != 1 || got[0] != c.want)) {
			t.Errorf("crumbs %q: the upstream got Cookie %q, want %q", c.crumbs, got, c.want)
		}
	}
}
