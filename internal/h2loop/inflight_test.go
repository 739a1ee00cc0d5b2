package h2loop

import (
	"testing"

	"golang.org/x/net/http2"
)

// TestFramesInFlightAfterReset: the DATA frames and trailers a client sent
// before it learnt that the server ended its stream (an answer before the
// body's end, a stream refused at its HEADERS) are ignored, as RFC 9113
// section 5.1 requires, within what the stream's window let it send: each
// got RST_STREAM and counted as a control frame, so that a client sending
// its body in small frames lost its connection (ENHANCE_YOUR_CALM) for
// frames it could not withdraw. Past the window, a frame is the client's
// fault again.
func TestFramesInFlightAfterReset(t *testing.T) {
	const frames = 100 // 10 bytes each: 1000 of the 65536 the window allows
	noFrames := func(t *testing.T, h *harness, got []frame) {
		t.Helper()
		if len(got) != 0 || h.c.Closed() {
			t.Fatalf("sent %+v, closed %v", got, h.c.Closed())
		}
	}
	t.Run("answered early", func(t *testing.T) {
		h := newHarness(t, Config{MaxControlFrames: 20})
		h.onOpen = func(*Stream) bool { return true }
		h.headers(1, h.post("/"), false)
		_ = h.fr.WriteData(1, false, make([]byte, 10))
		h.feed()
		h.c.Respond(h.opened[0], 200, nil, nil)
		if got := h.sent(); len(got) != 2 || got[1].typ != http2.FrameRSTStream || got[1].code != http2.ErrCodeNo {
			t.Fatalf("got %+v, want the answer and RST_STREAM NO_ERROR", got)
		}
		for range frames {
			_ = h.fr.WriteData(1, false, make([]byte, 10))
		}
		_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block("x-t", "1"), EndStream: true, EndHeaders: true})
		noFrames(t, h, h.feed())
		// The stream's trailers went through the decoder: the next
		// request's fields are read right.
		h.headers(3, h.get("/", "x-t", "1"), true)
		noFrames(t, h, h.feed())
		if len(h.served) != 1 || field(h.served[0].Header, "x-t") != "1" {
			t.Fatalf("served %d", len(h.served))
		}
	})
	t.Run("refused", func(t *testing.T) {
		h := newHarness(t, Config{MaxControlFrames: 20, MaxConcurrentStreams: 1})
		h.headers(1, h.post("/"), false)
		h.headers(3, h.post("/"), false)
		rst(t, h.feed(), 3, http2.ErrCodeRefusedStream)
		for range frames {
			_ = h.fr.WriteData(3, false, make([]byte, 10))
		}
		_ = h.fr.WriteData(3, true, nil)
		noFrames(t, h, h.feed())
		// After its END_STREAM, a frame of the stream is the client's
		// fault.
		_ = h.fr.WriteData(3, false, make([]byte, 10))
		rst(t, h.feed(), 3, http2.ErrCodeStreamClosed)
	})
	t.Run("past the window", func(t *testing.T) {
		h := newHarness(t, Config{MaxControlFrames: 20, MaxConcurrentStreams: 1, StreamWindow: 100})
		h.headers(1, h.post("/"), false)
		h.headers(3, h.post("/"), false)
		rst(t, h.feed(), 3, http2.ErrCodeRefusedStream)
		_ = h.fr.WriteData(3, false, make([]byte, 100))
		noFrames(t, h, h.feed())
		_ = h.fr.WriteData(3, false, make([]byte, 1))
		rst(t, h.feed(), 3, http2.ErrCodeStreamClosed)
	})
}

// TestFramesAfterGoAway: after the server's GOAWAY, the streams the client
// opens past its last stream are dropped, and their DATA and trailers are
// ignored (RFC 9113 section 6.8), while the streams before it go on: they
// got RST_STREAM and counted as control frames, and the trailers ended the
// connection (STREAM_CLOSED), so that a client with bodies in flight when
// the gateway drains lost the streams it was still being served.
func TestFramesAfterGoAway(t *testing.T) {
	h := newHarness(t, Config{MaxControlFrames: 20})
	h.headers(1, h.post("/"), false)
	h.feed()
	h.c.Shutdown()
	if f := one(t, h.sent(), http2.FrameGoAway); f.last != 1 {
		t.Fatalf("GOAWAY names stream %d, want 1", f.last)
	}
	h.headers(3, h.post("/"), false) // sent before the client read the GOAWAY
	for range 100 {
		_ = h.fr.WriteData(3, false, make([]byte, 10))
	}
	_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: h.block("x-t", "1"), EndStream: true, EndHeaders: true})
	if got := h.feed(); len(got) != 0 || h.c.Closed() {
		t.Fatalf("sent %+v, closed %v", got, h.c.Closed())
	}
	_ = h.fr.WriteData(1, true, []byte("body"))
	h.feed()
	if len(h.served) != 1 || string(h.served[0].Body) != "body" {
		t.Fatalf("served %d", len(h.served))
	}
	h.c.Respond(h.served[0], 200, nil, nil)
	if !h.c.Closed() {
		t.Fatal("not closed once the last stream ended")
	}
}

// TestFramesAfterGoAwayBounded: the frames of a stream dropped after the
// server's GOAWAY are ignored only as those of a stream the server ended
// are (see TestFramesInFlightAfterReset): within the stream's window, one
// trailers block, and no empty DATA frame. They were ignored without any
// bound, so that a client that sent GOAWAY itself (answered by the
// server's) and held one stream open could send empty DATA frames (the
// flood MaxEmptyData bounds), DATA past the stream's window (its
// connection window given back each time) and header blocks to decode,
// without end and uncounted.
func TestFramesAfterGoAwayBounded(t *testing.T) {
	start := func(t *testing.T, cfg Config) *harness {
		h := newHarness(t, cfg)
		h.headers(1, h.post("/"), false) // held open
		_ = h.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
		h.headers(3, h.post("/"), false) // dropped
		one(t, h.feed(), http2.FrameGoAway)
		return h
	}
	t.Run("empty DATA", func(t *testing.T) {
		h := start(t, Config{MaxControlFrames: 20, MaxEmptyData: 20})
		for range 50 {
			_ = h.fr.WriteData(3, false, nil)
		}
		goAway(t, h, h.feed(), http2.ErrCodeEnhanceYourCalm)
	})
	t.Run("past the window", func(t *testing.T) {
		h := start(t, Config{MaxControlFrames: 20, StreamWindow: 100})
		_ = h.fr.WriteData(3, false, make([]byte, 100))
		if got := h.feed(); len(got) != 0 || h.c.Closed() {
			t.Fatalf("sent %+v, closed %v", got, h.c.Closed())
		}
		_ = h.fr.WriteData(3, false, make([]byte, 1))
		rst(t, h.feed(), 3, http2.ErrCodeStreamClosed)
	})
	t.Run("header blocks", func(t *testing.T) {
		h := start(t, Config{})
		for range 2 {
			_ = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: h.block("x-t", "1"), EndStream: true, EndHeaders: true})
		}
		goAway(t, h, h.feed(), http2.ErrCodeStreamClosed)
	})
}
