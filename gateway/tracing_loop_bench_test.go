//go:build linux

package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkLoopTracing measures one request through the event loops, on
// one keep-alive connection, to a loopback target, with tracing off, on at
// sample 0 (nothing recorded, a context still sent upstream) and on at
// sample 1 (every request's spans exported to a collector that drops
// them). The client and the target allocate nothing per request, so
// allocs/op is the gateway's.
func BenchmarkLoopTracing(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	for _, tt := range []struct{ name, tracing string }{
		{"off", ""},
		{"sample=0", fmt.Sprintf(`tracing: {endpoint: "%s", sample: 0}`, collector.URL)},
		{"sample=1", fmt.Sprintf(`tracing: {endpoint: "%s", sample: 1}`, collector.URL)},
	} {
		b.Run(tt.name, func(b *testing.B) { benchLoop(b, tt.tracing, "") })
	}
}
