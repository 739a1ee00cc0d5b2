package main

import (
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2CoreCases aim at an HTTP/2 server's own reading of frames and header
// blocks, beyond what h2Cases send: pseudo-header fields duplicated,
// missing or in upper case, fields RFC 9113 section 8.2 makes malformed,
// content-length against the DATA, and frames sections 5 and 6 make a
// stream or connection error (DATA on stream 0 or an idle stream, HEADERS
// after END_STREAM, CONTINUATION without HEADERS, a dynamic table size
// update past the setting, a stream depending on itself, padding longer
// than its frame, windows of zero or past 2^31-1).
func h2CoreCases() []testCase {
	h2 := func(name string, r *h2Request) testCase { return testCase{name: "h2 " + name, h2: r} }
	req := func(kv ...string) *h2Request { return &h2Request{fields: fields(kv...)} }
	withTrailer := func(r *h2Request, kv ...string) *h2Request { r.trailer = fields(kv...); return r }
	before := func(r *h2Request, note string, f func(fr *http2.Framer) error) *h2Request {
		r.note, r.before = note, f
		return r
	}
	after := func(r *h2Request, note string, f func(fr *http2.Framer, encode func([]hpack.HeaderField) []byte) error) *h2Request {
		r.note, r.after = note, f
		return r
	}
	headers := func(r *h2Request, note string, f func(fr *http2.Framer, block []byte, endStream bool) error) *h2Request {
		r.note, r.headers = note, f
		return r
	}
	// open writes stream 1's HEADERS without END_STREAM, then the frames
	// of f, then DATA "hello" ending the stream.
	open := func(r *h2Request, note string, f func(fr *http2.Framer) error) *h2Request {
		return headers(r, note, func(fr *http2.Framer, block []byte, _ bool) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true}); err != nil {
				return err
			}
			if err := f(fr); err != nil {
				return err
			}
			return fr.WriteData(1, true, []byte("hello"))
		})
	}
	post := func() *h2Request { return h2req("POST", "/a", nil, "content-length", "5") }
	const maxWindow = 1<<31 - 1
	return []testCase{
		// Pseudo-header fields.
		h2("duplicate :path", req(":method", "GET", ":scheme", "https", ":authority", "x", ":path", "/a", ":path", "/evil")),
		h2("duplicate :method", req(":method", "GET", ":method", "DELETE", ":scheme", "https", ":authority", "x", ":path", "/a")),
		h2("duplicate :authority", req(":method", "GET", ":scheme", "https", ":authority", "x", ":authority", "evil", ":path", "/a")),
		h2("upper-case pseudo", req(":method", "GET", ":scheme", "https", ":authority", "x", ":PATH", "/a")),
		h2("missing :scheme", req(":method", "GET", ":authority", "x", ":path", "/a")),
		h2("missing :path", req(":method", "GET", ":scheme", "https", ":authority", "x")),
		h2("missing :method", req(":scheme", "https", ":authority", "x", ":path", "/a")),
		h2("empty :authority", req(":method", "GET", ":scheme", "https", ":authority", "", ":path", "/a")),
		h2("empty :authority, host", req(":method", "GET", ":scheme", "https", ":authority", "", ":path", "/a", "host", "x")),
		h2("host with userinfo", req(":method", "GET", ":scheme", "https", ":path", "/a", "host", "evil@x")),
		h2("two hosts", req(":method", "GET", ":scheme", "https", ":path", "/a", "host", "x", "host", "evil")),
		h2(":status in request", h2get("/a", ":status", "200")),
		h2("pseudo in trailer", withTrailer(h2req("POST", "/a", []string{"hello"}), ":path", "/evil")),
		// Regular fields.
		h2("te trailers, gzip", h2get("/a", "te", "trailers, gzip")),
		h2("transfer-encoding in trailer", withTrailer(h2req("POST", "/a", []string{"hello"}), "transfer-encoding", "chunked")),
		h2("NUL in name", h2get("/a", "x-\x00a", "1")),
		h2("DEL in name", h2get("/a", "x-\x7fa", "1")),
		h2("high byte in name", h2get("/a", "x-\xffa", "1")),
		h2("DEL in value", h2get("/a", "x-a", "a\x7fb")),
		h2("high bytes in value", h2get("/a", "x-a", "caf\xc3\xa9\xff")),
		h2("tab in value", h2get("/a", "x-a", "a\tb")),
		h2("trailing space in value", h2get("/a", "x-a", "1 ")),
		h2("cookie crumbs apart", h2get("/a", "cookie", "a=1", "x-b", "2", "cookie", "b=2; c=3")),
		h2("empty cookie crumb", h2get("/a", "cookie", "", "cookie", "a=1")),
		// content-length against DATA.
		h2("content-length without data", h2req("POST", "/a", nil, "content-length", "5")),
		h2("content-length over data frames", h2req("POST", "/a", []string{"hel", "lo!"}, "content-length", "5")),
		h2("content-length negative", h2req("POST", "/a", []string{"hello"}, "content-length", "-5")),
		h2("content-length plus", h2req("POST", "/a", []string{"hello"}, "content-length", "+5")),
		h2("content-length on GET", h2req("GET", "/a", []string{"hello"}, "content-length", "5")),
		h2("content-length on HEAD", h2req("HEAD", "/a", nil, "content-length", "5")),
		// Frames on the wrong stream or in the wrong state.
		h2("DATA on stream 0", before(h2get("/a"), "DATA on stream 0 first", func(fr *http2.Framer) error {
			return fr.WriteData(0, false, []byte("hello"))
		})),
		h2("DATA on an idle stream", after(h2get("/a"), "then DATA on idle stream 3", func(fr *http2.Framer, _ func([]hpack.HeaderField) []byte) error {
			return fr.WriteData(3, true, []byte("hello"))
		})),
		h2("HEADERS after END_STREAM", after(h2get("/a"), "then HEADERS on stream 1 again", func(fr *http2.Framer, encode func([]hpack.HeaderField) []byte) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: encode(fields("x-a", "1")), EndHeaders: true, EndStream: true})
		})),
		h2("DATA after END_STREAM", after(h2get("/a"), "then DATA on stream 1", func(fr *http2.Framer, _ func([]hpack.HeaderField) []byte) error {
			return fr.WriteData(1, true, []byte("hello"))
		})),
		h2("CONTINUATION without HEADERS", before(h2get("/a"), "CONTINUATION on stream 1 first", func(fr *http2.Framer) error {
			return fr.WriteContinuation(1, true, []byte{0x82})
		})),
		h2("CONTINUATION after END_HEADERS", after(h2req("POST", "/a", []string{"hello"}), "then CONTINUATION on stream 1", func(fr *http2.Framer, _ func([]hpack.HeaderField) []byte) error {
			return fr.WriteContinuation(1, true, []byte{0x82})
		})),
		h2("RST_STREAM on an idle stream", before(h2get("/a"), "RST_STREAM on stream 1 first", func(fr *http2.Framer) error {
			return fr.WriteRSTStream(1, http2.ErrCodeCancel)
		})),
		h2("even stream", headers(h2get("/a"), "HEADERS on stream 2", func(fr *http2.Framer, block []byte, _ bool) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: block, EndHeaders: true, EndStream: true})
		})),
		// HPACK.
		h2("hpack table size update past the setting", headers(h2get("/a"), "the block starts with a table size update to 1 MiB", func(fr *http2.Framer, block []byte, endStream bool) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: append(tableSizeUpdate(1<<20), block...), EndHeaders: true, EndStream: endStream})
		})),
		h2("hpack table size update after a field", headers(h2get("/a"), "the block ends with a table size update to 0", func(fr *http2.Framer, block []byte, endStream bool) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: append(block, tableSizeUpdate(0)...), EndHeaders: true, EndStream: endStream})
		})),
		h2("hpack index past the table", headers(h2get("/a"), "the block ends with index 200", func(fr *http2.Framer, block []byte, endStream bool) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: append(block, 0xff, 200-127), EndHeaders: true, EndStream: endStream})
		})),
		// Priority.
		h2("HEADERS depending on itself", headers(h2get("/a"), "HEADERS with priority on stream 1 itself", func(fr *http2.Framer, block []byte, endStream bool) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true, EndStream: endStream,
				Priority: http2.PriorityParam{StreamDep: 1, Weight: 15}})
		})),
		h2("PRIORITY depending on itself", before(h2get("/a"), "PRIORITY of stream 1 on itself first", func(fr *http2.Framer) error {
			return fr.WritePriority(1, http2.PriorityParam{StreamDep: 1, Weight: 15})
		})),
		// Padding.
		h2("HEADERS padding past the frame", headers(h2get("/a"), "HEADERS PADDED, pad length 200 in a shorter frame", func(fr *http2.Framer, block []byte, _ bool) error {
			return fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersPadded|http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream, 1,
				append([]byte{200}, block...))
		})),
		h2("DATA padding past the frame", open(post(), "DATA PADDED, pad length 200 in a 6-byte frame", func(fr *http2.Framer) error {
			return fr.WriteRawFrame(http2.FrameData, http2.FlagDataPadded, 1, append([]byte{200}, "hello"...))
		})),
		// Flow control.
		h2("WINDOW_UPDATE 0 on the connection", before(h2get("/a"), "WINDOW_UPDATE 0 on stream 0 first", func(fr *http2.Framer) error {
			return fr.WriteWindowUpdate(0, 0)
		})),
		h2("WINDOW_UPDATE 0 on the stream", open(post(), "WINDOW_UPDATE 0 on stream 1 before its DATA", func(fr *http2.Framer) error {
			return fr.WriteWindowUpdate(1, 0)
		})),
		h2("WINDOW_UPDATE past 2^31-1 on the connection", before(h2get("/a"), "WINDOW_UPDATE 2^31-1 on stream 0 first", func(fr *http2.Framer) error {
			return fr.WriteWindowUpdate(0, maxWindow)
		})),
		h2("WINDOW_UPDATE past 2^31-1 on the stream", open(post(), "WINDOW_UPDATE 2^31-1 on stream 1 before its DATA", func(fr *http2.Framer) error {
			return fr.WriteWindowUpdate(1, maxWindow)
		})),
		h2("SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1", before(h2get("/a"), "SETTINGS INITIAL_WINDOW_SIZE 2^31 first", func(fr *http2.Framer) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
		})),
		h2("SETTINGS raising a stream window past 2^31-1", open(post(), "WINDOW_UPDATE stream 1 to 2^31-1, then SETTINGS INITIAL_WINDOW_SIZE 65536", func(fr *http2.Framer) error {
			if err := fr.WriteWindowUpdate(1, maxWindow-65535); err != nil {
				return err
			}
			return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536})
		})),
		h2("SETTINGS_MAX_FRAME_SIZE too small", before(h2get("/a"), "SETTINGS MAX_FRAME_SIZE 100 first", func(fr *http2.Framer) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100})
		})),
		h2("SETTINGS_ENABLE_PUSH 2", before(h2get("/a"), "SETTINGS ENABLE_PUSH 2 first", func(fr *http2.Framer) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2})
		})),
	}
}

// tableSizeUpdate is an HPACK dynamic table size update to n (RFC 7541
// section 6.3: the 001 prefix and n as a 5-bit prefix integer).
func tableSizeUpdate(n uint32) []byte {
	if n < 31 {
		return []byte{0x20 | byte(n)}
	}
	b := []byte{0x3f}
	for n -= 31; n >= 128; n >>= 7 {
		b = append(b, byte(n%128)|0x80)
	}
	return append(b, byte(n))
}
