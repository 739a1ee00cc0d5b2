package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkHandleTracing is BenchmarkHandle with tracing off, on at sample
// 0 (no trace recorded, a context still sent upstream) and on at sample 1
// (every request's spans exported, to a collector that drops them), so
// that tracing's cost per request and its allocations show side by side.
func BenchmarkHandleTracing(b *testing.B) {
	addr := benchUpstream(b)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	for _, tt := range []struct{ name, tracing string }{
		{"off", ""},
		{"sample=0", fmt.Sprintf(`tracing: {endpoint: "%s", sample: 0}`, collector.URL)},
		{"sample=1", fmt.Sprintf(`tracing: {endpoint: "%s", sample: 1}`, collector.URL)},
	} {
		b.Run(tt.name, func(b *testing.B) { benchHandle(b, addr, tt.tracing) })
	}
}
