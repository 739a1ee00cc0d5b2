package h2loop

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// framesHandler keeps the streams it is given for the fuzzed client's
// handler actions: it takes the streams whose id is 1 modulo 4.
type framesHandler struct {
	c       *Conn
	waiting []*Stream // served or taken, not yet answered whole
}

func (f *framesHandler) Open(s *Stream) bool {
	if s.ID%4 != 1 {
		return false
	}
	f.waiting = append(f.waiting, s)
	return true
}

func (f *framesHandler) Data(s *Stream, p []byte, end bool) {}
func (f *framesHandler) Writable(s *Stream)                 {}
func (f *framesHandler) Serve(s *Stream)                    { f.waiting = append(f.waiting, s) }
func (f *framesHandler) Cancel(s *Stream)                   {}

// FuzzFrames plays a client of well-formed frames (requests, bodies,
// trailers, resets, windows, settings, GOAWAY) and a handler's actions
// (answers in parts, resets, consumed bodies), each picked by the input's
// bytes, and checks the connection's accounting after each: streams, held
// bodies, answer bytes held back, the receive window and the streams it
// remembers as ended.
func FuzzFrames(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 7, 1, 3, 1, 4, 2, 0, 9, 1, 0, 5, 1, 2, 7, 0, 3})
	f.Add([]byte{0, 4, 0, 5, 0, 6, 1, 9, 7, 7, 7, 2, 6, 1, 4, 0, 0, 8, 8, 1})
	f.Fuzz(playFrames)
}

// playFrames is FuzzFrames' run of data.
func playFrames(t *testing.T, data []byte) {
	cfg := Config{MaxConcurrentStreams: 4, MaxHeaderListSize: 1024, StreamWindow: 300, ConnWindow: 65535,
		HeldBodies: 700, MaxBlockedBytes: 1000, MaxResets: 8, MaxControlFrames: 50, MaxEmptyData: 5}
	h := &framesHandler{}
	c, err := NewConn(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	var in bytes.Buffer
	fr := http2.NewFramer(&in, nil)
	fr.AllowIllegalWrites = true
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(kv ...string) []byte {
		hb.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(hb.Bytes())
	}
	in.WriteString(Preface)
	_ = fr.WriteSettings()
	next := uint32(1)
	pick := func(b byte) uint32 { return uint32(b)%max(next/2, 1)*2 + 1 } // a stream used
	for i := 0; i+1 < len(data) && !c.Closed(); i += 2 {
		op, arg := data[i]%10, data[i+1]
		switch op {
		case 0: // a request: GET, or POST with or without a content-length
			fields := []string{":method", "GET", ":scheme", "http", ":path", "/"}
			if arg&1 != 0 {
				fields[1] = "POST"
				if arg&2 != 0 {
					fields = append(fields, "content-length", []string{"0", "10", "300", "500"}[arg>>2&3])
				}
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: next, BlockFragment: block(fields...), EndStream: arg&1 == 0, EndHeaders: true})
			next += 2
		case 1: // DATA
			_ = fr.WriteData(pick(arg), arg&1 != 0, make([]byte, int(arg)*3))
		case 2: // trailers
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: pick(arg), BlockFragment: block("x-t", "1"), EndStream: arg&1 != 0, EndHeaders: true})
		case 3:
			_ = fr.WriteRSTStream(pick(arg), http2.ErrCodeCancel)
		case 4:
			id := pick(arg)
			if arg&1 != 0 {
				id = 0
			}
			_ = fr.WriteWindowUpdate(id, uint32(arg)*37)
		case 5:
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(arg) * 11})
		case 6:
			_ = fr.WriteGoAway(next, http2.ErrCodeNo, nil)
		case 7, 8, 9: // the handler acts on a stream it was given
			if len(h.waiting) == 0 {
				break
			}
			k := int(arg) % len(h.waiting)
			s := h.waiting[k]
			switch {
			case op == 7 && arg&8 != 0:
				c.Respond(s, 200, nil, make([]byte, int(arg)*5))
			case op == 7:
				c.Reset(s, http2.ErrCodeInternal)
			case op == 8:
				c.WriteHeaders(s, 200, nil, false)
				c.WriteData(s, make([]byte, int(arg)*4), arg&1 != 0)
			default:
				c.Consumed(s, int(arg))
				c.WriteTrailers(s, nil)
			}
			if s.answered || s.state == stateClosed {
				h.waiting = append(h.waiting[:k], h.waiting[k+1:]...)
			}
		}
		b := in.Bytes()
		n := c.Feed(b)
		in.Next(n)
		c.Sent()
		if !c.Closed() {
			checkAccounts(t, c)
		}
	}
}

// checkAccounts checks c's accounting against its streams.
func checkAccounts(t *testing.T, c *Conn) {
	t.Helper()
	cfg := c.cfg
	if c.Active() > cfg.MaxConcurrentStreams {
		t.Fatalf("%d streams open", c.Active())
	}
	var held, unconsumed int64
	for _, s := range c.streams {
		held += s.held
		unconsumed += s.unconsumed
		if s.state == stateClosed {
			t.Fatalf("stream %d closed, still open", s.ID)
		}
	}
	if held != c.held || held < 0 || held > int64(cfg.HeldBodies) {
		t.Fatalf("held %d, streams hold %d", c.held, held)
	}
	if got := c.recvWindow + c.recvTaken + unconsumed; got != int64(cfg.ConnWindow) || c.recvWindow < 0 {
		t.Fatalf("window %d + to give back %d + unconsumed %d = %d, want %d", c.recvWindow, c.recvTaken, unconsumed, got, cfg.ConnWindow)
	}
	pending := 0
	for _, s := range c.blocked {
		if s.state != stateClosed {
			pending += len(s.pending)
		}
	}
	if pending != c.blockedBytes || c.pacedBytes < 0 || c.pacedBytes > c.blockedBytes {
		t.Fatalf("blocked %d (paced %d), streams hold %d", c.blockedBytes, c.pacedBytes, pending)
	}
	if len(c.gone.left) > cfg.MaxConcurrentStreams {
		t.Fatalf("%d ended streams remembered", len(c.gone.left))
	}
}
