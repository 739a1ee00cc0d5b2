package h2loop

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// nopHandler answers every request at once.
type nopHandler struct {
	c      *Conn
	fields []hpack.HeaderField
	body   []byte
}

func (h *nopHandler) Serve(s *Stream) { h.c.Respond(s, 200, h.fields, h.body) }
func (h *nopHandler) Cancel(*Stream)  {}

// BenchmarkRequest reads a GET request of a few fields and answers it with
// three fields and a short body, on one connection.
func BenchmarkRequest(b *testing.B) {
	h := &nopHandler{fields: []hpack.HeaderField{{Name: "content-type", Value: "text/plain"},
		{Name: "date", Value: "Tue, 01 Dec 2026 23:00:00 GMT"}, {Name: "content-length", Value: "24"}},
		body: []byte("hello from the upstream\n")}
	c, _ := NewConn(Config{}, h)
	h.c = c
	var in bytes.Buffer
	fr := http2.NewFramer(&in, nil)
	in.WriteString(Preface)
	_ = fr.WriteSettings()
	c.Feed(in.Bytes())
	c.Sent()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	reqs := make([][]byte, 1000)
	for i := range reqs {
		hb.Reset()
		for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "127.0.0.1:8080"}, {":path", "/"},
			{"user-agent", "h2load nghttp2/1.52.0"}, {"accept", "*/*"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		in.Reset()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		reqs[i] = bytes.Clone(in.Bytes())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(reqs) == 0 && i > 0 {
			b.StopTimer()
			c, _ = NewConn(Config{}, h) // stream ids start again
			h.c = c
			in.Reset()
			in.WriteString(Preface)
			_ = fr.WriteSettings()
			c.Feed(in.Bytes())
			c.Sent()
			b.StartTimer()
		}
		r := reqs[i%len(reqs)]
		if c.Feed(r) != len(r) || c.Closed() {
			b.Fatal("request not read")
		}
		c.Sent()
	}
}
