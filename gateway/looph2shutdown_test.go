//go:build linux

package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"golang.org/x/net/http2"
)

// TestH2LoopsShutdownWaitsForBridgedStreams shuts the gateway down past
// its deadline while a bridged stream (a POST of unknown length, its body
// still coming) is at the upstream: Shutdown returns once the stream's
// goroutine, which the loops' stop cancelled, has ended. (It returned as
// soon as the loops had stopped, the goroutine still running.)
func TestH2LoopsShutdownWaitsForBridgedStreams(t *testing.T) {
	arrived := make(chan struct{})
	var once sync.Once
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		_, _ = io.Copy(io.Discard, r.Body)
	})
	tg := h2LoopsGateway(t, up, "")
	fr := h2Dial(t, tg.Addr)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: h2Headers(":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/upload")})
	_ = fr.WriteData(1, false, []byte("the body goes on"))
	select {
	case <-arrived:
	case <-time.After(waitLimit):
		t.Fatal("the POST did not reach the upstream")
	}
	tg.stopped.Store(true) // stopped here
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	if err := tg.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want the deadline's error", err)
	}
	if n := gateway.BridgedStreams(tg.Gateway); n != 0 {
		t.Errorf("Shutdown returned with %d bridged streams' goroutines at work", n)
	}
	// The goroutine, done, returns soon after Shutdown does.
	eventually(t, "the bridged stream's goroutine to end", func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*h2Bridge).serve")
	})
	if err := <-tg.served; err != nil {
		t.Errorf("Serve = %v", err)
	}
}
