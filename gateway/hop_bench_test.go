package gateway

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkRemoveHop measures removeHopResponse in the common case: a response with no
// hop-by-hop header to remove.
func BenchmarkRemoveHop(b *testing.B) {
	var resp fasthttp.Response
	raw := "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Mon, 30 Nov 2026 19:23:55 GMT\r\nContent-Type: text/plain\r\nContent-Length: 24\r\n\r\n"
	if err := resp.Header.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		removeHopResponse(&resp.Header)
	}
}
