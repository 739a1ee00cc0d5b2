//go:build linux

package gateway_test

import (
	"bytes"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/net/http2"

	"github.com/sluicehq/sluice/gateway"
)

// TestH2LoopsBridgeSharedAnswerNotCopied has streams of one h2c
// connection on the loops, which opens no window, join one coalesced call
// whose answer is 4 MiB: while they wait for the window, the gateway holds
// the shared answer once, not once per stream. (The bridge's writer copied
// what the handler wrote whole before sending it 16 KiB at a time, so that
// a client holding its window shut made the gateway hold a copy of the
// coalesced answer, up to 8 MiB, per stream it opened.)
func TestH2LoopsBridgeSharedAnswerNotCopied(t *testing.T) {
	const size, streams = 4 << 20, 8
	body := bytes.Repeat([]byte("x"), size)
	g := newGate(1)
	up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		g.wait(r)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = w.Write(body)
	})
	tg := h2LoopsGateway(t, up, `  - name: co
    match: {path_prefix: /co/}
    upstream: up
    policies: {coalesce: true}
`)
	fr := h2Dial(t, tg.Addr)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	for i := range streams {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), EndHeaders: true, EndStream: true,
			BlockFragment: h2Headers(":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/co/big")})
		if i == 0 {
			g.awaitArrivals(t, 1)
		}
	}
	eventually(t, "every stream to join the call", func() bool {
		return gateway.CoalesceShared(tg.Gateway, "co") == streams-1
	})
	before := heapInUse()
	g.open()
	for headed := 0; headed < streams; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if h, ok := f.(*http2.HeadersFrame); ok {
			_, _ = fr.dec.Write(h.HeaderBlockFragment())
			headed++
		}
	}
	if held := heapInUse() - before; held > 3*size {
		t.Errorf("%d streams waiting for their window hold %d MiB of a %d MiB answer, want it held once",
			streams, held>>20, size>>20)
	}
}

// heapInUse is the heap's live bytes once garbage is collected.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
