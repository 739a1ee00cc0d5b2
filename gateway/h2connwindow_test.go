package gateway_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestHTTP2ConnectionHoldsOneWindowOfBodies opens one HTTP/2 connection
// with 100 streams whose bodies, of unknown length, wait unread in a
// route's queue (its one slot held by a GET the upstream does not answer),
// and sends on them all that flow control lets it: the gateway gives the
// client no more than the connection's window, 1 MiB, while nothing is
// read, however large the streams' windows (server.http2
// max_stream_buffer_bytes, 1 MiB each), and its heap grows by far less
// than the 100 MiB those windows add up to. (The loops gave the
// connection's window back as bytes arrived: the client could make a
// connection hold every stream's window.)
func TestHTTP2ConnectionHoldsOneWindowOfBodies(t *testing.T) {
	const streams, connWindow = 100, 1 << 20
	forH2Engines(t, func(t *testing.T, engine string) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		released := false
		defer func() {
			if !released {
				close(release)
			}
		}()
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s, http2: {max_concurrent_streams: %d, max_stream_buffer_bytes: 1048576}}
upstreams:
  up: {targets: ["%s"]}
routes:
  - {name: all, upstream: up, policies: {concurrency: {max: 1, queue: %d}}}
`, engine, streams+1, up.URL, streams))
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		h := dialH2(t, gw.Addr)
		h.headers(t, 1, true, ":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/hold")
		select {
		case <-arrived:
		case <-time.After(waitLimit):
			t.Fatal("the GET did not reach the upstream")
		}
		ids := make([]uint32, streams)
		for i := range ids {
			ids[i] = uint32(3 + 2*i)
			h.headers(t, ids[i], false, ":method", "POST", ":scheme", "http", ":authority", "a.test", ":path", "/upload")
		}
		// Rounds: send what the windows allow, then a PING; the frames
		// before its ACK tell every window the gateway opened for what
		// it read. A round that opens no connection window ends it.
		connCredit, streamWindow := int64(65535), int64(65535)
		streamCredit := map[uint32]int64{}
		var sent int64
		chunk := make([]byte, 16<<10)
		for round := 0; ; round++ {
			if round == 1000 {
				t.Fatalf("still sending after %d rounds, %d bytes", round, sent)
			}
			for _, id := range ids {
				for connCredit > 0 {
					n := min(int64(len(chunk)), connCredit, streamWindow+streamCredit[id])
					if n <= 0 {
						break
					}
					if err := h.fr.WriteData(id, false, chunk[:n]); err != nil {
						t.Fatal(err)
					}
					connCredit -= n
					streamCredit[id] -= n
					sent += n
				}
			}
			if err := h.fr.WritePing(false, [8]byte{byte(round)}); err != nil {
				t.Fatal(err)
			}
			opened := int64(0)
			for acked := false; !acked; {
				f, err := h.fr.ReadFrame()
				if err != nil {
					t.Fatalf("round %d, %d bytes sent: %v", round, sent, err)
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
						streamWindow = int64(v)
					}
					if !f.IsAck() {
						_ = h.fr.WriteSettingsAck()
					}
				case *http2.WindowUpdateFrame:
					if f.StreamID == 0 {
						opened += int64(f.Increment)
					} else {
						streamCredit[f.StreamID] += int64(f.Increment)
					}
				case *http2.PingFrame:
					acked = f.IsAck() && f.Data[0] == byte(round)
				case *http2.GoAwayFrame, *http2.RSTStreamFrame, *http2.HeadersFrame:
					t.Fatalf("round %d, %d bytes sent: %v", round, sent, f)
				}
			}
			connCredit += opened
			if (round > 0 && opened == 0) || sent >= streams*streamWindow {
				break
			}
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("sent %d KiB on %d streams, the heap grew by %d KiB", sent>>10, streams, grew>>10)
		if sent > connWindow {
			t.Errorf("the gateway let the client send %d bytes that nothing read, want at most the connection's window, %d", sent, connWindow)
		}
		if grew > 24<<20 {
			t.Errorf("the heap grew by %d MiB, want < 24", grew>>20)
		}
		if n := up.calls.Load(); n != 1 {
			t.Errorf("the upstream saw %d requests, want the GET alone", n)
		}
		close(release)
		released = true
	})
}
