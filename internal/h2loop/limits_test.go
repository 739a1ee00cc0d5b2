package h2loop

import (
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

func TestMaxConcurrentStreams(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrentStreams: 2})
	h.headers(1, h.get("/"), true)
	h.headers(3, h.get("/"), true)
	h.headers(5, h.get("/", "x-a", "b"), true)
	rst(t, h.feed(), 5, http2.ErrCodeRefusedStream)
	h.c.Respond(h.served[0], 200, nil, nil)
	h.sent()
	// A slot is free again, and the refused stream's block went through
	// the decoder.
	h.headers(7, h.get("/", "x-a", "b"), true)
	if got := h.feed(); len(got) != 0 || len(h.served) != 3 || field(h.served[2].Header, "x-a") != "b" {
		t.Fatalf("sent %+v, served %d", got, len(h.served))
	}
}

func TestHeaderListTooLarge(t *testing.T) {
	h := newHarness(t, Config{MaxHeaderListSize: 2048})
	h.headers(1, h.get("/", "x-a", strings.Repeat("a", 1000), "x-b", strings.Repeat("b", 1000)), true)
	f := one(t, h.feed(), http2.FrameHeaders)
	if field(f.fields, ":status") != "431" || !f.end || len(h.served) != 0 {
		t.Fatalf("answer %+v, served %d", f, len(h.served))
	}
	h.headers(3, h.get("/next"), true)
	if h.feed(); len(h.served) != 1 {
		t.Fatal("the next request was not served")
	}
	// A single string past the bound is the decoder's error.
	h.headers(5, h.get("/", "x-a", strings.Repeat("a", 3000)), true)
	goAway(t, h, h.feed(), http2.ErrCodeCompression)
}

// TestContinuationFlood ends a connection whose header block has too many
// CONTINUATION frames, empty ones included (CVE-2024-27316), or too many
// bytes, though its decoded list is small.
func TestContinuationFlood(t *testing.T) {
	h := newHarness(t, Config{MaxContinuations: 4})
	b := h.get("/")
	_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b})
	for range 5 {
		_ = h.fr.WriteContinuation(1, false, nil)
	}
	goAway(t, h, h.feed(), http2.ErrCodeEnhanceYourCalm)

	h = newHarness(t, Config{MaxHeaderListSize: 1024, MaxContinuations: 1000})
	_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.get("/")})
	// Indexed fields of one byte each, decoded past the list's bound
	// (emitting stops) and then on past twice its bytes.
	one := []byte{0x82} // :method GET, from the static table
	for range 3000 {
		_ = h.fr.WriteContinuation(1, false, one)
	}
	goAway(t, h, h.feed(), http2.ErrCodeEnhanceYourCalm)
}

// TestRapidReset counts the client's resets of streams not yet answered
// (CVE-2023-44487): a request reset in the same read as its HEADERS never
// reaches the handler, one reset later is cancelled, and past MaxResets
// (net of the streams answered) the connection ends.
func TestRapidReset(t *testing.T) {
	h := newHarness(t, Config{MaxResets: 10})
	id := uint32(1)
	for range 5 {
		h.headers(id, h.get("/"), true)
		_ = h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		id += 2
	}
	if got := h.feed(); len(got) != 0 || len(h.served) != 0 {
		t.Fatalf("sent %+v, served %d", got, len(h.served))
	}
	h.headers(id, h.get("/"), true)
	h.feed()
	_ = h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	h.feed()
	if len(h.cancelled) != 1 || h.cancelled[0].ID != id {
		t.Fatalf("cancelled %+v", h.cancelled)
	}
	id += 2
	// Answered streams take resets off the count.
	h.onServe = func(s *Stream) { h.c.Respond(s, 200, nil, nil) }
	for range 3 {
		h.headers(id, h.get("/"), true)
		id += 2
	}
	h.feed()
	h.onServe = nil
	for range 7 { // 6 - 3 + 7 = 10: at the bound
		h.headers(id, h.get("/"), true)
		_ = h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		id += 2
	}
	for _, f := range h.feed() {
		if f.typ == http2.FrameGoAway {
			t.Fatal("GOAWAY at the bound")
		}
	}
	h.headers(id, h.get("/"), true)
	_ = h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	goAway(t, h, h.feed(), http2.ErrCodeEnhanceYourCalm)
}

// TestControlFlood ends a connection that sends more control frames than
// MaxControlFrames between two requests; a request starts the count anew.
func TestControlFlood(t *testing.T) {
	for name, send := range map[string]func(h *harness){
		"PING":     func(h *harness) { _ = h.fr.WritePing(false, [8]byte{}) },
		"SETTINGS": func(h *harness) { _ = h.fr.WriteSettings() },
		// Unsolicited: one acknowledges the server's only SETTINGS.
		"SETTINGS ACK": func(h *harness) { _ = h.fr.WriteSettingsAck() },
		"PRIORITY":     func(h *harness) { _ = h.fr.WritePriority(1, http2.PriorityParam{StreamDep: 3}) },
		"unknown":      func(h *harness) { _ = h.fr.WriteRawFrame(0x77, 0, 0, []byte("x")) },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{MaxControlFrames: 20}) // the client's first SETTINGS counts
			for range 19 {
				send(h)
			}
			h.headers(1, h.get("/"), true)
			for range 20 {
				send(h)
			}
			for _, f := range h.feed() {
				if f.typ == http2.FrameGoAway {
					t.Fatal("GOAWAY at the bound")
				}
			}
			send(h)
			goAway(t, h, h.feed(), http2.ErrCodeEnhanceYourCalm)
		})
	}
}

func TestEmptyDataFlood(t *testing.T) {
	h := newHarness(t, Config{MaxEmptyData: 5})
	h.headers(1, h.block(":method", "POST", ":scheme", "http", ":path", "/"), false)
	for range 5 {
		_ = h.fr.WriteData(1, false, nil)
	}
	if got := h.feed(); len(got) != 0 {
		t.Fatalf("sent %+v at the bound", got)
	}
	_ = h.fr.WriteData(1, false, nil)
	goAway(t, h, h.feed(), http2.ErrCodeEnhanceYourCalm)
}

// TestBlockedBytesBound refuses new streams while the answers that a
// client does not take (it opens no window) hold more than
// MaxBlockedBytes: the bound holds between two reads (Feed), whose
// requests are served at their end.
func TestBlockedBytesBound(t *testing.T) {
	h := newHarness(t, Config{MaxBlockedBytes: 1000}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	h.onServe = func(s *Stream) { h.c.Respond(s, 200, nil, make([]byte, 600)) }
	h.headers(1, h.get("/"), true)
	h.feed()
	h.headers(3, h.get("/"), true)
	h.feed()
	h.headers(5, h.get("/"), true)
	got := h.feed()
	if h.c.BlockedBytes() != 1200 || len(h.served) != 2 {
		t.Fatalf("blocked %d, served %d", h.c.BlockedBytes(), len(h.served))
	}
	if f := got[len(got)-1]; f.typ != http2.FrameRSTStream || f.id != 5 || f.code != http2.ErrCodeRefusedStream {
		t.Fatalf("got %+v, want stream 5 refused", got)
	}
	// A reset stream gives its bytes back.
	_ = h.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	h.headers(7, h.get("/"), true)
	h.feed()
	if h.c.BlockedBytes() != 1200 || len(h.served) != 3 {
		t.Fatalf("blocked %d, served %d", h.c.BlockedBytes(), len(h.served))
	}
}

// TestProvokedResets counts the streams the server resets for the
// client's fault before their answer (a WINDOW_UPDATE past the largest
// window, DATA after the request's end, a stream depending on itself) as
// the client's own resets: each cancels a request that went upstream, as
// RST_STREAM does, and must not escape MaxResets.
func TestProvokedResets(t *testing.T) {
	for name, provoke := range map[string]func(h *harness, id uint32){
		"window overflow": func(h *harness, id uint32) { _ = h.fr.WriteWindowUpdate(id, 1<<31-1) },
		"DATA after end":  func(h *harness, id uint32) { _ = h.fr.WriteData(id, true, nil) },
		"self-dependency": func(h *harness, id uint32) {
			_ = h.fr.WritePriority(id, http2.PriorityParam{StreamDep: id})
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{MaxResets: 10})
			id := uint32(1)
			for i := range 11 {
				h.headers(id, h.get("/"), true)
				h.feed()
				provoke(h, id)
				got := h.feed()
				if len(h.cancelled) != i+1 {
					t.Fatalf("stream %d not cancelled: sent %+v", id, got)
				}
				if i < 10 {
					for _, f := range got {
						if f.typ == http2.FrameGoAway {
							t.Fatalf("GOAWAY at reset %d", i+1)
						}
					}
				} else {
					goAway(t, h, got, http2.ErrCodeEnhanceYourCalm)
				}
				id += 2
			}
		})
	}
}

// TestResetBlockedStreamsForgotten resets, over and over, streams whose
// answers flow control holds back (the client gives no window), with
// answers without a body between them to keep the reset count down: the
// streams reset are not kept, with their requests, until the client
// opens a window it never opens.
func TestResetBlockedStreamsForgotten(t *testing.T) {
	h := newHarness(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	h.onServe = func(s *Stream) { h.c.Respond(s, 200, nil, make([]byte, 100)) }
	id := uint32(1)
	for range 1000 {
		h.headers(id, h.get("/"), true)
		h.feed()
		_ = h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		h.feed()
		h.onServe = func(s *Stream) { h.c.Respond(s, 204, nil, nil) }
		h.headers(id+2, h.get("/"), true)
		h.feed()
		h.onServe = func(s *Stream) { h.c.Respond(s, 200, nil, make([]byte, 100)) }
		id += 4
	}
	if h.c.Closed() {
		t.Fatalf("connection closed: %v", h.c.Err())
	}
	if n := len(h.c.blocked); n > 1 {
		t.Fatalf("%d streams kept in the blocked list, none blocked", n)
	}
}

// TestHeldBodies: a connection holds at most HeldBodies of bodies whole,
// each counted at its content-length from its HEADERS until the stream
// closes, answered or not; a stream past it is offered to Open as Crowded,
// and refused when not taken. (Bodies still arriving, and whole ones
// waiting for their answers, were bounded only by MaxConcurrentStreams ×
// StreamWindow: a client sending most of each body on every stream held
// tens of MiB per connection.)
func TestHeldBodies(t *testing.T) {
	h := newHarness(t, Config{HeldBodies: 250})
	var crowded []uint32
	h.onOpen = func(s *Stream) bool {
		if s.Crowded {
			crowded = append(crowded, s.ID)
		}
		return false
	}
	post := func(id uint32, length string) {
		h.headers(id, h.block(":method", "POST", ":scheme", "http", ":path", "/", "content-length", length), false)
	}
	post(1, "100")
	post(3, "100")
	_ = h.fr.WriteData(3, true, make([]byte, 100)) // whole, served, not answered yet
	if got := h.feed(); len(got) != 0 || len(h.served) != 1 {
		t.Fatalf("sent %+v, served %d", got, len(h.served))
	}
	post(5, "100") // 300 > 250
	rst(t, h.feed(), 5, http2.ErrCodeRefusedStream)
	post(7, "50") // 250: room still
	if got := h.feed(); len(got) != 0 {
		t.Fatalf("sent %+v", got)
	}
	h.c.Respond(h.served[0], 200, nil, nil) // stream 3 closes: its 100 are free
	h.sent()
	post(9, "100")
	_ = h.fr.WriteData(9, true, make([]byte, 100))
	if got := h.feed(); len(got) != 0 || len(h.served) != 2 || h.served[1].ID != 9 {
		t.Fatalf("sent %+v, served %d", got, len(h.served))
	}
	_ = h.fr.WriteRSTStream(1, http2.ErrCodeCancel) // and stream 1's
	post(11, "100")
	if got := h.feed(); len(got) != 0 {
		t.Fatalf("sent %+v", got)
	}
	if len(crowded) != 1 || crowded[0] != 5 {
		t.Fatalf("crowded streams %v, want [5]", crowded)
	}
}

// TestHeldBodyTakesItsLength: a body held whole takes its content-length,
// as HeldBodies counts it, however small its DATA frames (grown by append
// it took more: up to twice its length).
func TestHeldBodyTakesItsLength(t *testing.T) {
	const length, frame = 60000, 1000
	h := newHarness(t, Config{})
	h.headers(1, h.block(":method", "POST", ":scheme", "http", ":path", "/", "content-length", "60000"), false)
	for i := 0; i < length; i += frame {
		_ = h.fr.WriteData(1, i+frame == length, make([]byte, frame))
	}
	h.feed()
	if len(h.served) != 1 || len(h.served[0].Body) != length || cap(h.served[0].Body) != length {
		t.Fatalf("served %d; body %d bytes in a buffer of %d", len(h.served), len(h.served[0].Body), cap(h.served[0].Body))
	}
}
