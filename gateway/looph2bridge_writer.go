//go:build linux

package gateway

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

// bridgeWriter is a bridged stream's http.ResponseWriter, as net/http's
// HTTP/2 server's: the header is sent with the first flush (the status
// 200 unless WriteHeader said otherwise; Content-Type sniffed from the
// body when unset; Date when unset; Content-Length when the handler ends
// before a flush, a HEAD's from what the handler wrote), the body in DATA of at most 16 KiB as written past
// that much or flushed, and the trailers (declared in Trailer before
// WriteHeader, or named with http.TrailerPrefix) at the end. A write
// waits while the stream's answer bytes not yet sent reach bridgeAhead,
// until the write deadline (http.ResponseController.SetWriteDeadline;
// none unless set): past it the stream is reset and the write fails, as
// every write after the stream ended does. It is full duplex: the body
// can be read while the answer is written.
type bridgeWriter struct {
	b        *h2Bridge
	head     http.Header
	method   string
	status   int  // 0 until WriteHeader
	sent     bool // the HEADERS were handed over
	buf      []byte
	headLen  int      // the bytes written to a HEAD's answer: not sent, its Content-Length
	declared []string // the trailers declared before WriteHeader
	err      error    // the first failed write's
}

func (w *bridgeWriter) Header() http.Header { return w.head }

func (w *bridgeWriter) WriteHeader(code int) {
	if w.status != 0 || code < 200 || code > 999 {
		return // informational answers are not sent
	}
	w.status = code
	for _, v := range w.head["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
				w.declared = append(w.declared, k)
			}
		}
	}
}

// bodyAllowed reports whether the answer may have a body.
func (w *bridgeWriter) bodyAllowed() bool {
	return w.method != http.MethodHead && w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

func (w *bridgeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.status == http.StatusNoContent || w.status == http.StatusNotModified {
		return 0, http.ErrBodyNotAllowed
	}
	if w.method == http.MethodHead {
		w.headLen += len(p) // as net/http's server counts it
		return len(p), nil
	}
	// A chunk at a time: p may be a body held once for many streams (a
	// coalesced or last good answer), which a copy whole would hold again
	// for each while its client keeps its window shut.
	n := len(p)
	for len(w.buf)+len(p) >= bridgeChunk {
		k := bridgeChunk - len(w.buf)
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if err := w.flush(false); err != nil {
			return n - len(p) - k, err
		}
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

// Flush sends what was written.
func (w *bridgeWriter) Flush() { _ = w.FlushError() }

// FlushError sends what was written, and returns the error that failed
// it: it waits, until the write deadline, for the client to take it, as
// net/http's HTTP/2 server waits for the stream's window.
func (w *bridgeWriter) FlushError() error {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.flush(false); err != nil {
		return err
	}
	if err := w.b.waitSent(1); err != nil {
		w.err = err
		return err
	}
	return nil
}

// SetReadDeadline moves the request body's read deadline.
func (w *bridgeWriter) SetReadDeadline(t time.Time) error {
	w.b.setReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline of the answer's writes.
func (w *bridgeWriter) SetWriteDeadline(t time.Time) error {
	b := w.b
	b.mu.Lock()
	b.writeDL = t
	b.mu.Unlock()
	signal(b.writable)
	return nil
}

// EnableFullDuplex does nothing: the body and the answer are independent.
func (w *bridgeWriter) EnableFullDuplex() error { return nil }

// flush hands the HEADERS, unless sent, and the body written to the loop;
// with last, the answer ends with them (or with the trailers).
func (w *bridgeWriter) flush(last bool) error {
	if w.err != nil {
		return w.err
	}
	trailers := w.trailers(last)
	if !w.sent {
		w.sent = true
		end := last && len(w.buf) == 0 && trailers == nil
		w.b.push(h2Part{status: w.status, fields: w.fields(last), end: end})
		if end {
			return nil
		}
	}
	for len(w.buf) > 0 || (last && trailers == nil) {
		n := min(len(w.buf), bridgeChunk)
		if err := w.b.waitSent(bridgeAhead); err != nil {
			w.err = err
			return err
		}
		end := last && n == len(w.buf) && trailers == nil
		w.b.push(h2Part{data: append([]byte(nil), w.buf[:n]...), end: end})
		w.buf = w.buf[n:]
		if end {
			break
		}
	}
	w.buf = w.buf[:0]
	if trailers != nil {
		w.b.push(h2Part{trailers: true, fields: trailers})
	}
	return nil
}

// finish ends the answer once the handler returned.
func (w *bridgeWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyAllowed() {
		w.buf = w.buf[:0]
	}
	_ = w.flush(true)
}

// fields returns the answer's header fields: lower-case names, no
// connection-specific field (RFC 9113 section 8.2.2), no trailer.
func (w *bridgeWriter) fields(last bool) []hpack.HeaderField {
	h := w.head
	if _, ok := h["Content-Type"]; !ok && len(w.buf) > 0 && w.bodyAllowed() {
		h.Set("Content-Type", http.DetectContentType(w.buf))
	}
	if _, ok := h["Date"]; !ok {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	if _, ok := h["Content-Length"]; !ok && last {
		switch {
		case w.bodyAllowed():
			h.Set("Content-Length", strconv.Itoa(len(w.buf)))
		case w.headLen > 0 && w.status != http.StatusNoContent && w.status != http.StatusNotModified:
			h.Set("Content-Length", strconv.Itoa(w.headLen)) // what a GET's would be
		}
	}
	fs := make([]hpack.HeaderField, 0, len(h))
	for k, vs := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		name := strings.ToLower(k)
		switch name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			continue
		}
		for _, v := range vs {
			if httpguts.ValidHeaderFieldValue(v) {
				fs = append(fs, hpack.HeaderField{Name: name, Value: v})
			}
		}
	}
	return fs
}

// trailers returns the answer's trailer fields at its end (last), but
// those no HTTP/2 trailer section may carry (answerTrailer), as net/http's
// HTTP/2 server drops them; nil without any.
func (w *bridgeWriter) trailers(last bool) []hpack.HeaderField {
	if !last {
		return nil
	}
	var fs []hpack.HeaderField
	add := func(k string, vs []string) {
		name := strings.ToLower(k)
		if !httpguts.ValidHeaderFieldName(name) || !answerTrailer(k) {
			return
		}
		for _, v := range vs {
			if httpguts.ValidHeaderFieldValue(v) {
				fs = append(fs, hpack.HeaderField{Name: name, Value: v})
			}
		}
	}
	for _, k := range w.declared {
		add(k, w.head[k])
	}
	for k, vs := range w.head {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			add(name, vs)
		}
	}
	return fs
}

// waitSent waits while the answer bytes not yet sent reach limit; past
// the write deadline it resets the stream.
func (b *h2Bridge) waitSent(limit int) error {
	for {
		b.mu.Lock()
		gone, ahead, dl := b.gone, b.queued+b.pending, b.writeDL
		b.mu.Unlock()
		switch {
		case gone:
			return errStreamEnded
		case ahead < limit:
			return nil
		case !await(b.writable, dl):
			b.reset()
			return os.ErrDeadlineExceeded
		}
	}
}
