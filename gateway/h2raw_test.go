package gateway_test

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2raw is a hand-made HTTP/2 client connection (h2c by prior knowledge),
// to send what Go's client never would: a Host header beside :authority,
// a method and a Content-Type that disagree.
type h2raw struct {
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
	dec *hpack.Decoder
	hdr map[string]string // the last response's header fields
}

// dialH2 connects to addr and sends the preface and empty settings; the
// connection closes when the test ends.
func dialH2(t *testing.T, addr string) *h2raw {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	return newH2(t, c)
}

// newH2 speaks HTTP/2 on c, a connection to the gateway (TCP, or TLS with
// h2 negotiated): it sends the preface and empty settings; c closes when
// the test ends.
func newH2(t *testing.T, c net.Conn) *h2raw {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	h := &h2raw{c: c, fr: http2.NewFramer(c, bufio.NewReader(c)), hdr: map[string]string{}}
	h.enc = hpack.NewEncoder(&h.hb)
	h.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) { h.hdr[f.Name] = f.Value })
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// headers sends a HEADERS frame on stream id with fields (name, value
// pairs, in order); end ends the stream.
func (h *h2raw) headers(t *testing.T, id uint32, end bool, fields ...string) {
	t.Helper()
	h.hb.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hb.Bytes(), EndStream: end, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// read reads stream id's answer and returns its :status and body; the
// status is "RST code" when the stream was reset, "GOAWAY code" when the
// connection was, and "ERR ..." when it broke.
func (h *h2raw) read(t *testing.T, id uint32) (status, body string) {
	t.Helper()
	clear(h.hdr)
	var b strings.Builder
	for range 1000 {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return "ERR " + err.Error(), b.String()
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamID == id {
				_, _ = h.dec.Write(f.HeaderBlockFragment())
				if f.StreamEnded() {
					return h.hdr[":status"], b.String()
				}
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				b.Write(f.Data())
				if f.StreamEnded() {
					return h.hdr[":status"], b.String()
				}
			}
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String(), b.String()
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "RST " + f.ErrCode.String(), b.String()
			}
		}
	}
	t.Fatalf("stream %d did not end in 1000 frames", id)
	return "", ""
}
