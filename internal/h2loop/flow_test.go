package h2loop

import (
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// dataBytes returns the DATA bytes of stream id in got, and whether one
// ended the stream.
func dataBytes(got []frame, id uint32) (n int, end bool) {
	for _, f := range got {
		if f.typ == http2.FrameData && f.id == id {
			n += len(f.data)
			end = end || f.end
		}
	}
	return n, end
}

// TestAnswerFlowControl sends an answer as the client's windows allow:
// the stream's (SETTINGS_INITIAL_WINDOW_SIZE, then WINDOW_UPDATE, and a
// change of the setting while the answer waits) and the connection's.
func TestAnswerFlowControl(t *testing.T) {
	h := newHarness(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	h.headers(1, h.get("/"), true)
	h.feed()
	h.c.Respond(h.served[0], 200, nil, []byte(strings.Repeat("a", 100)))
	if n, end := dataBytes(h.sent(), 1); n != 10 || end {
		t.Fatalf("sent %d bytes (end %v), want the window's 10", n, end)
	}
	if h.c.BlockedBytes() != 90 {
		t.Fatalf("blocked %d, want 90", h.c.BlockedBytes())
	}
	_ = h.fr.WriteWindowUpdate(1, 30)
	if n, end := dataBytes(h.feed(), 1); n != 30 || end {
		t.Fatalf("sent %d bytes (end %v), want 30", n, end)
	}
	// The setting grows from 10 to 70: the stream's window by 60.
	_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 70})
	if n, end := dataBytes(h.feed(), 1); n != 60 || !end {
		t.Fatalf("sent %d bytes (end %v), want the last 60", n, end)
	}
	if h.c.BlockedBytes() != 0 || h.c.Active() != 0 {
		t.Fatalf("blocked %d, active %d after the answer", h.c.BlockedBytes(), h.c.Active())
	}
}

func TestAnswerConnectionWindow(t *testing.T) {
	h := newHarness(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	body := []byte(strings.Repeat("b", 70000))
	h.headers(1, h.get("/"), true)
	h.feed()
	h.c.Respond(h.served[0], 200, nil, body)
	if n, _ := dataBytes(h.sent(), 1); n != 65535 {
		t.Fatalf("sent %d bytes, want the connection's initial 65535", n)
	}
	_ = h.fr.WriteWindowUpdate(0, 10000)
	if n, end := dataBytes(h.feed(), 1); n != 70000-65535 || !end {
		t.Fatalf("sent %d bytes (end %v), want the rest", n, end)
	}
}

// TestAnswerFrameSize splits DATA at the client's SETTINGS_MAX_FRAME_SIZE.
func TestAnswerFrameSize(t *testing.T) {
	h := newHarness(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	h.headers(1, h.get("/"), true)
	h.feed()
	h.c.Respond(h.served[0], 200, nil, []byte(strings.Repeat("c", 40000)))
	got := h.sent()
	for _, f := range got {
		if f.typ == http2.FrameData && len(f.data) > 16384 {
			t.Fatalf("a DATA frame of %d bytes", len(f.data))
		}
	}
	if n, end := dataBytes(got, 1); n != 40000 || !end {
		t.Fatalf("sent %d (end %v)", n, end)
	}
}

func TestWindowOverflow(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	h.feed()
	_ = h.fr.WriteWindowUpdate(1, 1<<31-1)
	rst(t, h.feed(), 1, http2.ErrCodeFlowControl)
	_ = h.fr.WriteWindowUpdate(0, 1<<31-1)
	goAway(t, h, h.feed(), http2.ErrCodeFlowControl)
}

func TestSettingOverflowsStreamWindow(t *testing.T) {
	h := newHarness(t, Config{})
	h.headers(1, h.get("/"), true)
	h.feed()
	_ = h.fr.WriteWindowUpdate(1, 1<<31-1-65535)
	_ = h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536})
	goAway(t, h, h.feed(), http2.ErrCodeFlowControl)
}

// TestRequestFlowControl holds the client to the windows it was given:
// the stream's (a body past it is refused, as the connection never
// extends it) and the connection's.
func TestRequestFlowControl(t *testing.T) {
	h := newHarness(t, Config{StreamWindow: 100})
	post := func(id uint32, more ...string) {
		h.headers(id, h.block(append([]string{":method", "POST", ":scheme", "http", ":path", "/"}, more...)...), false)
	}
	post(1)
	_ = h.fr.WriteData(1, false, make([]byte, 101))
	rst(t, h.feed(), 1, http2.ErrCodeFlowControl)
	post(3)
	_ = h.fr.WriteData(3, false, make([]byte, 100)) // the whole window, and more to come
	rst(t, h.feed(), 3, http2.ErrCodeRefusedStream)
	post(5, "content-length", "101")
	rst(t, h.feed(), 5, http2.ErrCodeRefusedStream)
	// Padding counts.
	post(7)
	_ = h.fr.WriteDataPadded(7, false, make([]byte, 50), make([]byte, 60))
	rst(t, h.feed(), 7, http2.ErrCodeFlowControl)
	post(9)
	_ = h.fr.WriteData(9, true, make([]byte, 100))
	h.feed()
	if len(h.served) != 1 || h.served[0].ID != 9 || len(h.served[0].Body) != 100 {
		t.Fatalf("served %+v", h.served)
	}
}

// connUpdates returns the sum of the connection's WINDOW_UPDATE increments
// in got.
func connUpdates(got []frame) (inc uint32) {
	for _, f := range got {
		if f.typ == http2.FrameWindowUpdate && f.id == 0 {
			inc += f.inc
		}
	}
	return inc
}

// TestTakenBodiesHoldTheConnectionWindow: the bytes of taken streams'
// bodies open the connection's window again only as the handler consumes
// them, or as their stream ends, so that a connection holds at most
// ConnWindow of unconsumed bodies; other DATA opens it as it arrives.
// (The window was given back as every body arrived: a client could make
// the handlers hold a stream window of bytes on every stream.)
func TestTakenBodiesHoldTheConnectionWindow(t *testing.T) {
	const conn = 1 << 16
	h := newHarness(t, Config{StreamWindow: 1 << 16, ConnWindow: conn, MaxConcurrentStreams: 10})
	h.onOpen = func(*Stream) bool { return true }
	post := func(id uint32) {
		h.headers(id, h.block(":method", "POST", ":scheme", "http", ":path", "/"), false)
	}
	for _, id := range []uint32{1, 3} {
		post(id)
		_ = h.fr.WriteData(id, false, make([]byte, conn/4))
	}
	if got := h.feed(); connUpdates(got) != 0 {
		t.Fatalf("half the window unconsumed on taken streams: sent %+v, want no connection WINDOW_UPDATE", got)
	}
	s1, s3 := h.opened[0], h.opened[1]
	h.c.Consumed(s1, conn/4)
	if got := h.sent(); connUpdates(got) != 0 {
		t.Fatalf("a quarter consumed: sent %+v, want no connection WINDOW_UPDATE yet", got)
	}
	h.c.Reset(s3, http2.ErrCodeCancel) // its unconsumed quarter is free again
	if inc := connUpdates(h.sent()); inc != conn/2 {
		t.Fatalf("consumed and ended half: connection WINDOW_UPDATE %d, want %d", inc, conn/2)
	}
	h.c.Consumed(s3, conn/4) // the ended stream's bytes are not counted twice
	post(5)
	for range 4 {
		_ = h.fr.WriteData(5, false, make([]byte, conn/4))
	}
	if got := h.feed(); connUpdates(got) != 0 {
		t.Fatalf("the whole window unconsumed: sent %+v, want no connection WINDOW_UPDATE", got)
	}
	_ = h.fr.WriteData(5, false, make([]byte, 1))
	if got := h.feed(); len(got) != 1 || got[0].typ != http2.FrameGoAway || got[0].code != http2.ErrCodeFlowControl {
		t.Fatalf("a byte past the connection window: sent %+v, want GOAWAY FLOW_CONTROL_ERROR", got)
	}
}

// TestHeldBodiesLeaveTheRestOfTheWindow: while taken streams hold more
// than half the connection's window unconsumed, the bytes other streams
// send still open it again, once what is to be given back is at least
// the window left. (They waited for half the window, which the bytes not
// held could never make: the connection stalled, every other stream with
// it, until the handler consumed.)
func TestHeldBodiesLeaveTheRestOfTheWindow(t *testing.T) {
	const conn, frame = 1 << 16, 1 << 14
	h := newHarness(t, Config{StreamWindow: 1 << 16, ConnWindow: conn, MaxConcurrentStreams: 10})
	h.onOpen = func(s *Stream) bool { return s.ID == 1 }
	post := func(id uint32) {
		h.headers(id, h.block(":method", "POST", ":scheme", "http", ":path", "/"), false)
	}
	post(1)
	for range 3 { // held, unconsumed: three quarters
		_ = h.fr.WriteData(1, false, make([]byte, frame))
	}
	post(3) // held whole, and served: the last quarter
	_ = h.fr.WriteData(3, true, make([]byte, frame))
	got := h.feed()
	if inc := connUpdates(got); inc != frame {
		t.Fatalf("a quarter of the window left and given back: connection WINDOW_UPDATE %d (sent %+v), want %d", inc, got, frame)
	}
	post(5)
	_ = h.fr.WriteData(5, true, make([]byte, frame))
	if got := h.feed(); connUpdates(got) != frame {
		t.Fatalf("the quarter sent again: sent %+v, want a connection WINDOW_UPDATE %d", got, frame)
	}
	if len(h.served) != 2 {
		t.Fatalf("served %d requests, want 2", len(h.served))
	}
}
