package gateway_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHTTP2StreamsAnnouncingBodies opens one HTTP/2 connection whose
// streams, as many as server.http2.max_concurrent_streams lets it have,
// each announce a body of 1 MiB (a Content-Length small enough to be held
// for a retry) and send one byte of it: while the gateway waits for the
// rest, what it holds grows with what arrived, not with what was
// announced (its heap grows by less than 32 MiB). (Each stream's handler
// allocated its announced length at once: 256 MiB for a few bytes of
// headers, held until server.read_timeout.) server.max_held_body_bytes
// is raised so that every stream's body is held (past it, a body streams:
// TestHeldBodiesBound).
func TestHTTP2StreamsAnnouncingBodies(t *testing.T) {
	const streams, announced = 256, 1 << 20
	forH2Engines(t, func(t *testing.T, engine string) {
		u := startRecordingUpstream(t)
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, max_held_body_bytes: 1073741824, http2: {max_concurrent_streams: %d}}
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - {name: all, upstream: up}
`, engine, streams, u.Addr))
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		h := dialH2(t, gw.Addr)
		for i := range streams {
			id := uint32(2*i + 1)
			h.headers(t, id, false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/upload",
				"content-length", strconv.Itoa(announced))
			if err := h.fr.WriteData(id, false, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		// Every stream's handler waits for the rest of its body.
		buf := make([]byte, 64<<20)
		deadline := time.Now().Add(waitLimit)
		for {
			n := runtime.Stack(buf, true)
			if strings.Count(string(buf[:n]), "gateway.(*exchange).readBody(") >= streams {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the streams' handlers did not all wait for their bodies")
			}
			time.Sleep(10 * time.Millisecond)
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("the heap grew by %d KiB for %d streams", grew>>10, streams)
		if grew > 32<<20 {
			t.Errorf("the heap grew by %d MiB for %d streams that sent a byte each, want < 32", grew>>20, streams)
		}
		if n := u.count(); n != 0 {
			t.Errorf("the upstream saw %d requests, want none", n)
		}
		h.c.Close()
	})
}
