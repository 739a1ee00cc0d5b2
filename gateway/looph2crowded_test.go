//go:build linux

package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
)

// TestH2LoopsCrowdedBodiesBridged: past what one connection may hold of
// bodies whole (h2loop's HeldBodies, 1 MiB), the loops take the next
// streams with bodies to the bridge, which reads them as the upstream
// does, instead of holding them too: forty 60 KiB uploads on one
// connection all reach an upstream that answers none before all have
// come, and each is answered with its own body's length.
func TestH2LoopsCrowdedBodiesBridged(t *testing.T) {
	const streams, size = 40, 60 << 10
	g := newGate(streams)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		g.wait(r)
		fmt.Fprintf(w, "%s %d", r.URL.Path, n)
	})
	defer g.open()
	tg := h2LoopsGateway(t, up, "")
	c := protoClient(t, "h2c", nil, "")
	var wg sync.WaitGroup
	results := make([]result, streams)
	errs := make([]error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = tryDo(c, "POST", fmt.Sprintf("%s/u%d", tg.URL, i), nil, bytes.NewReader(make([]byte, size)))
		}()
	}
	g.awaitArrivals(t, streams)
	g.open()
	wg.Wait()
	for i := range streams {
		if errs[i] != nil || results[i].Code != 200 || results[i].Body != fmt.Sprintf("/u%d %d", i, size) {
			t.Fatalf("upload %d: %v %d %q", i, errs[i], results[i].Code, results[i].Body)
		}
	}
}
