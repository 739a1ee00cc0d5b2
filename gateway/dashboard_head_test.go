package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDashboardHeadTakesNoViewer asks for the event stream's headers
// (HEAD) dashMaxViewers times, on connections that stay open, then opens
// the stream: it is served. (A HEAD joined the viewers, and its stream,
// whose writes the server drops, never blocked: it held its place for as
// long as its connection stayed open, and enough of them shut every
// browser out.)
func TestDashboardHeadTakesNoViewer(t *testing.T) {
	noLeaks(t)
	g, _, _, reg := sampledGateway(t)
	srv := httptest.NewServer(g.AdminHandler(AdminOptions{Gatherer: reg}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for i := range dashMaxViewers {
		c, err := net.DialTimeout("tcp", addr, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() }) // before the server closes
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, "HEAD /dashboard/events HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "HEAD"})
		if err != nil {
			t.Fatalf("HEAD %d: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("HEAD %d: %d %q", i+1, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(srv.URL + "/dashboard/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the stream after %d HEADs: %d, want 200", dashMaxViewers, resp.StatusCode)
	}
}
