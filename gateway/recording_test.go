package gateway_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingUpstream is a loopback HTTP/1.1 origin server for tests of what the
// gateway forwards. It reads what it receives as a strict server would
// (net/http's ReadRequest, plus the checks of strictFlaws that net/http
// leaves out), keeps every message with its header lines in order and its
// raw bytes, and answers each with the default answer (see defaultAnswer)
// or the one respond returns. Bytes that hide a second message, in a body
// or after one, are read as that second message: nothing is skipped.
type recordingUpstream struct {
	ln   net.Listener
	Addr string // 127.0.0.1:port

	mu sync.Mutex
	// respond, when not nil, returns the raw answer to a message but the
	// sentinel request; "" means the default answer. closeAfter: the
	// connection is closed after an answer respond gave.
	respond    func(m upMsg) string
	closeAfter bool
	msgs       []upMsg          // every message read, in the order read
	errs       []upError        // bytes that could not be read as a message
	conns      map[*rawConn]int // open connections and their numbers
	nconns     int              // connections accepted
	handled    sync.WaitGroup
}

// upMsg is one message as the raw upstream read it.
type upMsg struct {
	Index                 int // 0 for the first message read by this upstream
	Conn                  int // the connection's number, from 0
	Method, Target, Proto string
	Header                []hdrLine // as received, in order, duplicates kept
	Body                  []byte    // with any chunked coding removed
	Raw                   []byte    // the message as received
	Flaws                 []string  // what a strict reader refuses (see strictFlaws)
}

// hdrLine is one header field line.
type hdrLine struct{ Name, Value string }

// values returns the values of the header lines named name (in any case),
// in order.
func (m upMsg) values(name string) []string {
	var vs []string
	for _, h := range m.Header {
		if strings.EqualFold(h.Name, name) {
			vs = append(vs, h.Value)
		}
	}
	return vs
}

// upError is input the raw upstream could not read as a message: Raw holds
// the bytes from where the message began.
type upError struct {
	Conn int
	Err  error
	Raw  []byte
}

// cut reports whether the error is a message cut short by the end of the
// connection, which is how a proxy abandons a request it forwarded in part
// (its client went away); the upstream discards it.
func (e upError) cut() bool {
	return errors.Is(e.Err, io.ErrUnexpectedEOF) || errors.Is(e.Err, io.EOF)
}

// startRecordingUpstream starts a raw upstream on 127.0.0.1; it stops when the
// test ends.
func startRecordingUpstream(t testing.TB) *recordingUpstream {
	t.Helper()
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &recordingUpstream{ln: ln, Addr: ln.Addr().String(), conns: map[*rawConn]int{}}
	u.handled.Add(1)
	go u.accept()
	t.Cleanup(u.close)
	return u
}

func (u *recordingUpstream) accept() {
	defer u.handled.Done()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		rc := &rawConn{Conn: c}
		u.mu.Lock()
		id := u.nconns
		u.nconns++
		u.conns[rc] = id
		u.handled.Add(1)
		u.mu.Unlock()
		go u.serve(rc, id)
	}
}

// close stops accepting, closes every connection and waits for their
// handlers.
func (u *recordingUpstream) close() {
	u.ln.Close()
	u.mu.Lock()
	for c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.handled.Wait()
}

// serve reads messages from c and answers each until c ends or a message
// cannot be read (answered 400, then closed, as a strict server does).
func (u *recordingUpstream) serve(c *rawConn, id int) {
	defer u.handled.Done()
	defer func() {
		c.Close()
		u.mu.Lock()
		delete(u.conns, c)
		u.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for {
		start := c.consumed(br)
		req, err := http.ReadRequest(br)
		if err == nil {
			var body []byte
			body, err = io.ReadAll(req.Body)
			if err == nil {
				raw := c.bytes(start, c.consumed(br))
				m := upMsg{Conn: id, Method: req.Method, Target: req.RequestURI, Proto: req.Proto,
					Body: body, Raw: raw}
				m.Header, m.Flaws = strictFlaws(raw)
				answer, closing := u.record(m)
				if _, err := io.WriteString(c, answer); err != nil || req.Close || closing {
					return
				}
				continue
			}
		}
		if errors.Is(err, io.EOF) && c.consumed(br) == start {
			return // the connection ended between messages
		}
		u.mu.Lock()
		u.errs = append(u.errs, upError{Conn: id, Err: err, Raw: c.bytes(start, c.total())})
		u.mu.Unlock()
		_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return
	}
}

// record numbers and keeps m and returns its answer, and whether to close
// the connection after it.
func (u *recordingUpstream) record(m upMsg) (string, bool) {
	u.mu.Lock()
	m.Index = len(u.msgs)
	u.msgs = append(u.msgs, m)
	respond, closeAfter := u.respond, u.closeAfter
	u.mu.Unlock()
	if respond != nil && m.Target != sentinelTarget {
		if a := respond(m); a != "" {
			return a, closeAfter
		}
	}
	return defaultAnswer(m), false
}

// answerWith makes respond the upstream's answerer (see recordingUpstream).
func (u *recordingUpstream) answerWith(respond func(m upMsg) string, closeAfter bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.respond, u.closeAfter = respond, closeAfter
}

// defaultAnswer is the raw upstream's answer to m: 200 with headers naming
// the message (X-Up-Index, X-Up-Method, X-Up-Target, X-Up-Body-Len) and the
// body "msg INDEX" (none to HEAD).
func defaultAnswer(m upMsg) string {
	body := fmt.Sprintf("msg %d", m.Index)
	a := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Up-Index: %d\r\nX-Up-Method: %s\r\n"+
		"X-Up-Target: %s\r\nX-Up-Body-Len: %d\r\n\r\n", len(body), m.Index, m.Method, m.Target, len(m.Body))
	if m.Method == http.MethodHead {
		return a
	}
	return a + body
}

// count returns how many messages have been read.
func (u *recordingUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.msgs)
}

// since returns the messages read from the n-th on, and every read error.
func (u *recordingUpstream) since(n int) ([]upMsg, []upError) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upMsg(nil), u.msgs[n:]...), append([]upError(nil), u.errs...)
}

// clearErrors forgets the read errors so far.
func (u *recordingUpstream) clearErrors() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.errs = nil
}

// settled reports whether every open connection has read all that reached
// it and waits, at a message boundary, for more. Bytes a proxy wrote before
// its client's answer left it are then read, and a message hidden in them
// is recorded. A connection holding part of a message is not settled: its
// proxy must finish or close it.
func (u *recordingUpstream) settled() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for c := range u.conns {
		if !c.idle() {
			return false
		}
	}
	return true
}

// settle waits (at most limit) until the upstream has settled. It reports
// false when it has not.
func (u *recordingUpstream) settle(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !u.settled() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// rawConn is a connection that keeps every byte read from it and knows
// whether its reader is waiting for more.
type rawConn struct {
	net.Conn
	mu     sync.Mutex
	buf    []byte // every byte read
	inRead bool   // a Read is waiting on the connection
	msgEnd int    // len(buf) at the end of the last whole message read
}

func (c *rawConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	c.inRead = true
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.inRead = false
	c.buf = append(c.buf, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// consumed returns how many bytes the reader br of c has consumed, and
// marks that as a message boundary.
func (c *rawConn) consumed(br *bufio.Reader) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgEnd = len(c.buf) - br.Buffered()
	return c.msgEnd
}

func (c *rawConn) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf)
}

func (c *rawConn) bytes(from, to int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf[from:to])
}

// idle reports whether c's reader waits at a message boundary with nothing
// read but not consumed and nothing queued in the kernel.
func (c *rawConn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inRead && c.msgEnd == len(c.buf) && queued(c.Conn) == 0
}

// strictFlaws splits the head of raw, a message net/http read, into its
// header lines, and lists what RFC 9112 forbids in it but net/http
// accepts: a line not ending in CRLF, a CR elsewhere, a folded line, a
// field name that is not a token, control characters in a value, and
// ambiguous framing (Content-Length twice, or with Transfer-Encoding).
func strictFlaws(raw []byte) ([]hdrLine, []string) {
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, []string{"head does not end in CRLF CRLF"}
	}
	head := string(raw[:end+2])
	var lines []hdrLine
	var flaws []string
	first := true
	for head != "" {
		line, rest, ok := strings.Cut(head, "\n")
		head = rest
		if !ok || !strings.HasSuffix(line, "\r") {
			flaws = append(flaws, fmt.Sprintf("line without CRLF: %q", line))
			continue
		}
		line = line[:len(line)-1]
		if strings.ContainsRune(line, '\r') {
			flaws = append(flaws, fmt.Sprintf("bare CR: %q", line))
		}
		if first {
			first = false
			continue
		}
		if line != "" && (line[0] == ' ' || line[0] == '\t') {
			flaws = append(flaws, fmt.Sprintf("folded line: %q", line))
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !isToken(name) {
			flaws = append(flaws, fmt.Sprintf("bad field name: %q", line))
			continue
		}
		if strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			flaws = append(flaws, fmt.Sprintf("control character in value: %q", line))
		}
		lines = append(lines, hdrLine{name, strings.Trim(value, " \t")})
	}
	m := upMsg{Header: lines}
	cl, te := m.values("Content-Length"), m.values("Transfer-Encoding")
	if len(cl) > 1 {
		flaws = append(flaws, fmt.Sprintf("Content-Length %d times", len(cl)))
	}
	if len(cl) > 0 && len(te) > 0 {
		flaws = append(flaws, "Content-Length with Transfer-Encoding")
	}
	return lines, flaws
}

// isToken reports whether s is a token (RFC 9110 section 5.6.2).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// sentinelTarget is the target of the request tests send last on a client
// connection to see whether the connection is still in step: its answer
// must be its own.
const sentinelTarget = "/sentinel"

const sentinelRequest = "GET " + sentinelTarget + " HTTP/1.1\r\nHost: x\r\n\r\n"
