package h2loop

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fuzzHandler answers some streams at once (with a body larger than the
// client's window, so that answers wait), resets others and leaves the
// rest waiting, as a loop whose upstreams answer later would.
// It takes every stream whose id is 1 modulo 4 before its body, consumes
// what comes, and answers it in parts at the body's end.
type fuzzHandler struct {
	c      *Conn
	open   map[*Stream]bool
	taken  map[*Stream]bool
	served int
}

func (f *fuzzHandler) Open(s *Stream) bool {
	if s.ID%4 != 1 {
		return false
	}
	f.taken[s] = true
	f.c.SetPaced(s, s.ID%8 == 1)
	return true
}

func (f *fuzzHandler) Data(s *Stream, p []byte, end bool) {
	if !f.taken[s] {
		panic("Data of a stream not taken")
	}
	f.c.Consumed(s, len(p))
	if end {
		f.c.WriteHeaders(s, 200, nil, false)
		f.c.WriteData(s, make([]byte, 150), false)
		f.c.WriteData(s, make([]byte, 150), false)
		f.c.WriteTrailers(s, []hpack.HeaderField{{Name: "x-t", Value: "1"}})
		f.c.SetPaced(s, false)
	}
}

func (f *fuzzHandler) Writable(s *Stream) {
	if !f.taken[s] {
		panic("Writable of a stream not taken")
	}
}

func (f *fuzzHandler) Serve(s *Stream) {
	f.served++
	switch s.ID % 3 {
	case 0:
		f.c.Respond(s, 200, []hpack.HeaderField{{Name: "x-a", Value: "b"}}, make([]byte, 300))
	case 1:
		f.c.Reset(s, http2.ErrCodeRefusedStream)
	default:
		f.open[s] = true
	}
}

func (f *fuzzHandler) Cancel(s *Stream) {
	if f.taken[s] {
		delete(f.taken, s)
		return
	}
	if !f.open[s] {
		panic("Cancel of a stream not waiting for its answer")
	}
	delete(f.open, s)
}

// FuzzConn feeds a connection random bytes after the preface, in pieces
// whose sizes the input's first byte picks: it never panics, reads every
// whole frame it is given, and holds a bounded number of streams, answer
// bytes and output.
func FuzzConn(f *testing.F) {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/a"}, {"content-length", "3"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
	for id := uint32(1); id < 12; id += 2 {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		_ = fr.WriteData(id, true, []byte("abc"))
	}
	_ = fr.WritePing(false, [8]byte{1})
	_ = fr.WriteWindowUpdate(0, 1000)
	_ = fr.WriteWindowUpdate(5, 1000)
	_ = fr.WriteRSTStream(11, http2.ErrCodeCancel)
	f.Add(append([]byte{7}, b.Bytes()...))
	f.Add(append([]byte{0}, b.Bytes()...))
	f.Add([]byte{3, 0, 0, 0, 4, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cfg := Config{MaxConcurrentStreams: 4, MaxHeaderListSize: 1024, StreamWindow: 200, MaxBlockedBytes: 1000,
			MaxResets: 8, MaxControlFrames: 50, MaxEmptyData: 5, MaxContinuations: 4, ConnectProtocol: true}
		h := &fuzzHandler{open: map[*Stream]bool{}, taken: map[*Stream]bool{}}
		c, err := NewConn(cfg, h)
		if err != nil {
			t.Fatal(err)
		}
		h.c = c
		c.Sent()
		piece := int(data[0])%64 + 1
		in := append([]byte(Preface), data[1:]...)
		var buf []byte
		for len(in) > 0 && !c.Closed() {
			k := min(piece, len(in))
			buf = append(buf, in[:k]...)
			in = in[k:]
			n := c.Feed(buf)
			if n < 0 || n > len(buf) {
				t.Fatalf("Feed read %d of %d", n, len(buf))
			}
			buf = buf[n:]
			if !c.Closed() && len(buf) > frameHeaderLen+maxFrame {
				t.Fatalf("%d bytes unread", len(buf))
			}
			if c.Active() > cfg.MaxConcurrentStreams {
				t.Fatalf("%d streams open", c.Active())
			}
			if c.StalledBytes() < 0 || c.StalledBytes() > c.BlockedBytes() {
				t.Fatalf("%d of %d answer bytes held back counted stalled", c.StalledBytes(), c.BlockedBytes())
			}
			if c.BlockedBytes() < 0 || c.BlockedBytes() > cfg.MaxBlockedBytes+cfg.MaxConcurrentStreams*300 {
				t.Fatalf("%d answer bytes held back", c.BlockedBytes())
			}
			if out := len(c.Output()); out > 64*k+4096 {
				t.Fatalf("%d bytes of output for %d of input", out, k)
			}
			c.Sent()
		}
		c.Close()
		if c.BlockedBytes() != 0 || c.StalledBytes() != 0 {
			t.Fatalf("after Close: %d bytes held back, %d stalled", c.BlockedBytes(), c.StalledBytes())
		}
		if len(h.open) != 0 || c.Active() != 0 {
			t.Fatalf("after Close: %d streams waiting, %d open", len(h.open), c.Active())
		}
	})
}
