package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"
)

// message is one request as an upstream's parser read it from the bytes a
// proxy forwarded.
type message struct {
	Method, Target, Host string
	Body                 []byte
	Header               [][2]string // name and value of each header line, as the parser keeps them
}

// reading is what one parser read from one connection's bytes: its
// messages up to the first it refused (err then says why) or the end.
type reading struct {
	Parser string
	Msgs   []message
	Err    string
}

// summary names what matters to an upstream of each message: method,
// target, Host, body length and checksum; then the error, if any.
func (r reading) summary() string {
	var b strings.Builder
	for i, m := range r.Msgs {
		if i > 0 {
			b.WriteString(" ; ")
		}
		fmt.Fprintf(&b, "%s %q host=%q body=%d", m.Method, m.Target, m.Host, len(m.Body))
		if len(m.Body) > 0 {
			fmt.Fprintf(&b, "/%08x", crc32.ChecksumIEEE(m.Body))
		}
	}
	if r.Err != "" {
		fmt.Fprintf(&b, " ! %s", r.Err)
	}
	return b.String()
}

// messagesKey is summary without the error: parsers that read the same
// messages and refuse what follows for different reasons agree.
func (r reading) messagesKey() string { return reading{Msgs: r.Msgs}.summary() }

// parsers are the upstream parsers every connection's bytes are read with.
var parsers = []struct {
	name string
	read func([]byte) reading
}{
	{"net/http", readStrict},
	{"fasthttp", readFasthttp},
	{"lenient", readLenient},
}

// maxMessages bounds the messages read from one connection's bytes.
const maxMessages = 32

// readStrict reads b with net/http's server-side reader, as a Go upstream
// would.
func readStrict(b []byte) reading {
	out := reading{Parser: "net/http"}
	br := bufio.NewReader(bytes.NewReader(b))
	for len(out.Msgs) < maxMessages {
		if _, err := br.Peek(1); err != nil {
			return out
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			out.Err = err.Error()
			return out
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			out.Err = "body: " + err.Error()
			return out
		}
		m := message{Method: req.Method, Target: req.RequestURI, Host: req.Host, Body: body}
		for _, h := range []http.Header{req.Header, req.Trailer} { // an upstream may merge trailers into the header
			for k, vs := range h {
				for _, v := range vs {
					m.Header = append(m.Header, [2]string{k, v})
				}
			}
		}
		out.Msgs = append(out.Msgs, m)
	}
	return out
}

// readFasthttp reads b with fasthttp's request parser, as a fasthttp
// upstream would.
func readFasthttp(b []byte) reading {
	out := reading{Parser: "fasthttp"}
	br := bufio.NewReader(bytes.NewReader(b))
	for len(out.Msgs) < maxMessages {
		if _, err := br.Peek(1); err != nil {
			return out
		}
		var req fasthttp.Request
		err := req.Read(br)
		if err == nil && req.MayContinue() {
			err = req.ContinueReadBody(br, 0)
		}
		if err != nil {
			out.Err = err.Error()
			return out
		}
		m := message{Method: string(req.Header.Method()), Target: string(req.Header.RequestURI()),
			Host: string(req.Header.Host()), Body: append([]byte(nil), req.Body()...)}
		for k, v := range req.Header.All() {
			m.Header = append(m.Header, [2]string{string(k), string(v)})
		}
		out.Msgs = append(out.Msgs, m)
	}
	return out
}

// readLenient reads b as the forgiving parsers of older servers do (the
// lenient modes of llhttp and of many hand-written parsers): lines may end
// in a bare LF, a line starting with a space or tab continues the one
// before (obs-fold), spaces around a header's name are dropped and '_' in
// it reads as '-' (as older waitress and gunicorn versions did),
// Transfer-Encoding means chunked when "chunked" is anywhere in it (and
// then wins over Content-Length), the first Content-Length's leading
// digits are the length, and the first Host is the host.
func readLenient(b []byte) reading {
	out := reading{Parser: "lenient"}
	for len(out.Msgs) < maxMessages {
		for len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
			b = b[1:] // empty lines before a request
		}
		if len(b) == 0 {
			return out
		}
		m, rest, err := lenientMessage(b)
		if err != nil {
			out.Err = err.Error()
			return out
		}
		out.Msgs = append(out.Msgs, m)
		b = rest
	}
	return out
}

var errShort = errors.New("unexpected end")

// lenientLine splits the first line off b, without its LF or CRLF.
func lenientLine(b []byte) (line, rest []byte, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, errShort
	}
	return bytes.TrimSuffix(b[:i], []byte("\r")), b[i+1:], nil
}

func lenientMessage(b []byte) (message, []byte, error) {
	var m message
	line, b, err := lenientLine(b)
	if err != nil {
		return m, nil, fmt.Errorf("request line: %w", err)
	}
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return m, nil, fmt.Errorf("request line %q", line)
	}
	m.Method, m.Target = f[0], f[1]
	for {
		line, b, err = lenientLine(b)
		if err != nil {
			return m, nil, fmt.Errorf("header: %w", err)
		}
		if len(line) == 0 {
			break
		}
		if (line[0] == ' ' || line[0] == '\t') && len(m.Header) > 0 {
			last := &m.Header[len(m.Header)-1]
			last[1] += " " + strings.TrimSpace(string(line))
			continue
		}
		k, v, ok := strings.Cut(string(line), ":")
		if !ok {
			return m, nil, fmt.Errorf("header line %q", line)
		}
		m.Header = append(m.Header, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	chunked, length, hasHost := false, -1, false
	for _, kv := range m.Header {
		switch strings.ToLower(strings.ReplaceAll(kv[0], "_", "-")) { // '_' read as '-', as CGI-lineage servers did
		case "transfer-encoding":
			chunked = chunked || strings.Contains(strings.ToLower(kv[1]), "chunked")
		case "content-length":
			if length < 0 {
				length = leadingInt(kv[1], 10)
			}
		case "host":
			if !hasHost {
				m.Host, hasHost = kv[1], true
			}
		}
	}
	switch {
	case chunked:
		return lenientChunked(m, b)
	case length > 0:
		if len(b) < length {
			return m, nil, fmt.Errorf("body: %w", errShort)
		}
		m.Body = b[:length]
		return m, b[length:], nil
	}
	return m, b, nil
}

// lenientChunked reads a chunked body: a size's leading hex digits count,
// whatever follows them on its line (an extension, spaces) is ignored, and
// trailer lines are kept with the header lines.
func lenientChunked(m message, b []byte) (message, []byte, error) {
	for {
		line, rest, err := lenientLine(b)
		if err != nil {
			return m, nil, fmt.Errorf("chunk size: %w", err)
		}
		size := leadingInt(strings.TrimSpace(string(line)), 16)
		if size < 0 {
			return m, nil, fmt.Errorf("chunk size %q", line)
		}
		b = rest
		if size == 0 {
			break
		}
		if len(b) < size {
			return m, nil, fmt.Errorf("chunk: %w", errShort)
		}
		m.Body = append(m.Body, b[:size]...)
		b = b[size:]
		if _, b, err = lenientLine(b); err != nil {
			return m, nil, fmt.Errorf("chunk end: %w", err)
		}
	}
	for {
		line, rest, err := lenientLine(b)
		if err != nil {
			return m, nil, fmt.Errorf("trailer: %w", err)
		}
		b = rest
		if len(line) == 0 {
			return m, b, nil
		}
		if k, v, ok := strings.Cut(string(line), ":"); ok { // kept beside the header, as such parsers hand them on
			m.Header = append(m.Header, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
}

// leadingInt reads the leading digits of s in base 10 or 16; -1 when there
// are none or they pass 2^40 (as a parser with a bound would refuse).
func leadingInt(s string, base int) int {
	n, digits := 0, 0
	for _, c := range []byte(s) {
		d := -1
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case base == 16 && c|0x20 >= 'a' && c|0x20 <= 'f':
			d = int(c|0x20-'a') + 10
		}
		if d < 0 {
			break
		}
		n = n*base + d
		digits++
		if n > 1<<40 {
			return -1
		}
	}
	if digits == 0 {
		return -1
	}
	return n
}
