package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// strictEnv names the environment variable that, when set, runs the cases
// marked knownBug instead of skipping them.
const strictEnv = "SLUICE_CONFORMANCE_STRICT"

// skipKnownBug skips the test, giving reason, unless strictEnv is set. It is
// the one place where a known bug may turn a failure into a skip.
func skipKnownBug(t *testing.T, reason string) {
	t.Helper()
	if reason != "" && os.Getenv(strictEnv) == "" {
		t.Skipf("known bug (set %s=1 to run): %s", strictEnv, reason)
	}
}

// confCase is raw bytes a client sends to the gateway, the answers it must
// get, and the messages a raw upstream must read from what the gateway
// forwards.
type confCase struct {
	name string
	req  string // sent in one write
	// want holds one entry per answer, in order; an entry lists the
	// acceptable answers separated by "|", each "CODE" or "CODE TARGET"
	// (the answer's X-Up-Target, naming the message the raw upstream
	// answered); "HEAD " before an entry reads an answer to HEAD.
	want []string
	// body, when not empty, is the first answer's body if it is a 200;
	// answerAbsent lists headers the first answer must not have.
	body         string
	answerAbsent []string
	// up lists the messages the upstream must read, and no others. When
	// the gateway refuses the first request itself (an answer of 400,
	// 405, 413, 414, 431, 501 or 505 not from the upstream), where want
	// allows it, the upstream must read nothing instead.
	up []upWant
	// keep: the client connection stays open after the answers (the
	// sentinel request is answered). Otherwise it may close; after an
	// answer of 400, 414, 431, 501 or 505 it must (the rest of the bytes
	// cannot be read in step).
	keep bool
	// respond, when not nil, gives the raw upstream's answers; closeAfter:
	// it closes its connection after each.
	respond    func(m upMsg) string
	closeAfter bool
	// trusted makes 127.0.0.1, the test client, a trusted proxy.
	trusted bool
	// knownBug, by engine ("*": both), is why the case fails now; the case
	// is skipped unless strictEnv is set.
	knownBug map[string]string
}

// upWant is a message the raw upstream must read.
type upWant struct {
	method, body string
	target       string // or targets separated by "|"
	// hdr lists "Name: value" lines: for each name, the upstream's values
	// must be exactly these, in order. absent lists names it must not see.
	hdr    []string
	absent []string
}

// confConfig is the gateway of the conformance cases: one route to the raw
// upstream.
const confConfig = `
server: {engine: %s}
trusted_proxies: [%s]
upstreams:
  up: {targets: ["http://%s"]}
routes:
  - name: all
    upstream: up
`

func TestConformance(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		for _, c := range conformanceCases() {
			// No "/" in a subtest's name: -run splits its pattern there.
			t.Run(strings.ReplaceAll(c.name, "/", " "), func(t *testing.T) {
				skipKnownBug(t, c.knownBug[engine]+c.knownBug["*"])
				runConformance(t, engine, c)
			})
		}
	})
}

// runConformance sends c's request to a gateway on engine, then the
// sentinel request, and checks the answers and what the upstream read.
func runConformance(t *testing.T, engine string, c confCase) {
	up := startRecordingUpstream(t)
	up.answerWith(c.respond, c.closeAfter)
	trusted := ""
	if c.trusted {
		trusted = "127.0.0.1"
	}
	gw := startGateway(t, parseConfig(t, confConfig, engine, trusted, up.Addr))
	conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(conn, c.req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var got []string // the answers read, for messages
	report := func() string {
		up.settle(waitLimit)
		msgs, errs := up.since(0)
		return fmt.Sprintf("answers %q\nupstream read:%s", got, describeUp(msgs, errs))
	}
	mustClose, refused := false, false
	for i, want := range c.want {
		method := http.MethodGet
		if w, ok := strings.CutPrefix(want, "HEAD "); ok {
			method, want = http.MethodHead, w
		}
		a, err := readAnswer(br, method)
		if err != nil {
			t.Fatalf("answer %d: %v\n%s", i, err, report())
		}
		got = append(got, a.String())
		if !a.matches(want) {
			t.Fatalf("answer %d is %s, want %s\n%s", i, a, want, report())
		}
		if i == 0 && c.body != "" && a.code == 200 && a.body != c.body {
			t.Errorf("answer %d body %q, want %q", i, a.body, c.body)
		}
		for _, name := range c.answerAbsent {
			if i == 0 && a.header.Get(name) != "" {
				t.Errorf("answer %d has %s: %q, want it dropped", i, name, a.header.Values(name))
			}
		}
		mustClose = slices.Contains([]int{400, 414, 431, 501, 505}, a.code)
		if i == 0 {
			refused = a.index < 0 && c.respond == nil && slices.Contains([]int{400, 405, 413, 414, 431, 501, 505}, a.code)
		}
	}
	answered := checkSentinel(t, conn, br, c.keep, mustClose, report)

	if !up.settle(waitLimit) {
		t.Fatalf("the upstream was left holding part of a message\n%s", report())
	}
	msgs, errs := up.since(0)
	if answered && len(msgs) > 0 && msgs[len(msgs)-1].Target == sentinelTarget {
		msgs = msgs[:len(msgs)-1]
	}
	want := c.up
	if refused {
		want = nil
	}
	checkUpstream(t, want, msgs, errs, up.Addr, report)
}

// checkSentinel sends the sentinel request on conn and reads its answer: it
// must be its own. It reports whether the sentinel was answered; keep
// requires it to be, mustClose requires the connection to be closed.
func checkSentinel(t *testing.T, conn net.Conn, br *bufio.Reader, keep, mustClose bool, report func() string) bool {
	t.Helper()
	_, werr := io.WriteString(conn, sentinelRequest)
	a, err := readAnswer(br, http.MethodGet)
	switch {
	case werr != nil || err != nil:
		if keep {
			t.Errorf("the connection closed before the sentinel request was answered (%v, %v)\n%s", werr, err, report())
		}
		return false
	case !a.matches("200 " + sentinelTarget):
		t.Errorf("the sentinel request got %s: the connection is out of step\n%s", a, report())
	case mustClose:
		t.Errorf("the connection stayed open after a refusal: the sentinel request was answered\n%s", report())
	}
	return true
}

// checkUpstream compares what the upstream read (msgs, errs) with want, and
// checks that every message is strictly well-formed, names the upstream in
// Host, and carries exactly one of each X-Forwarded-* header and no
// hop-by-hop header.
func checkUpstream(t *testing.T, want []upWant, msgs []upMsg, errs []upError, addr string, report func() string) {
	t.Helper()
	for _, e := range errs {
		if !e.cut() {
			t.Errorf("the upstream could not read what the gateway sent: %v: %q", e.Err, e.Raw)
		}
	}
	if len(msgs) != len(want) {
		t.Fatalf("the upstream read %d messages, want %d\n%s", len(msgs), len(want), report())
	}
	for i, m := range msgs {
		w := want[i]
		if m.Method != w.method || !slices.Contains(strings.Split(w.target, "|"), m.Target) || string(m.Body) != w.body {
			t.Errorf("upstream message %d is %s %s with body %q, want %s %s with body %q",
				i, m.Method, m.Target, m.Body, w.method, w.target, w.body)
		}
		if m.Proto != "HTTP/1.1" {
			t.Errorf("upstream message %d is %s, want the gateway's own HTTP/1.1", i, m.Proto)
		}
		for _, f := range m.Flaws {
			t.Errorf("upstream message %d: %s", i, f)
		}
		if hosts := m.values("Host"); len(hosts) != 1 || hosts[0] != addr {
			t.Errorf("upstream message %d: Host %q, want [%s]", i, hosts, addr)
		}
		for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Proto"} {
			if vs := m.values(name); len(vs) != 1 {
				t.Errorf("upstream message %d: %s %q, want one", i, name, vs)
			}
		}
		if vs := m.values("X-Forwarded-Host"); len(vs) > 1 || len(vs) == 1 && vs[0] == "" {
			t.Errorf("upstream message %d: X-Forwarded-Host %q, want one with a value (none for a request without Host)", i, vs)
		}
		for _, name := range []string{"Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade", "Proxy-Authorization"} {
			if vs := m.values(name); len(vs) > 0 {
				t.Errorf("upstream message %d: hop-by-hop %s %q forwarded", i, name, vs)
			}
		}
		for _, v := range m.values("Connection") {
			for _, tok := range strings.Split(v, ",") {
				if tok = strings.TrimSpace(strings.ToLower(tok)); tok != "close" && tok != "keep-alive" {
					t.Errorf("upstream message %d: the client's Connection %q forwarded", i, v)
				}
			}
		}
		wantValues := map[string][]string{}
		var names []string
		for _, line := range w.hdr {
			name, value, _ := strings.Cut(line, ":")
			if _, ok := wantValues[name]; !ok {
				names = append(names, name)
			}
			wantValues[name] = append(wantValues[name], strings.TrimSpace(value))
		}
		for _, name := range names {
			if got := m.values(name); !slices.Equal(got, wantValues[name]) {
				t.Errorf("upstream message %d: %s %q, want %q", i, name, got, wantValues[name])
			}
		}
		for _, name := range w.absent {
			if vs := m.values(name); len(vs) > 0 {
				t.Errorf("upstream message %d: %s %q forwarded, want it dropped", i, name, vs)
			}
		}
	}
}

// answer is one answer read from the gateway.
type clientAnswer struct {
	code   int
	target string // X-Up-Target: the upstream message answered, if any
	index  int    // X-Up-Index, or -1
	header http.Header
	body   string
}

func (a clientAnswer) String() string {
	s := strconv.Itoa(a.code)
	if a.target != "" {
		s += " " + a.target
	}
	return s
}

// matches reports whether a is one of the answers in want ("|"-separated
// "CODE" or "CODE TARGET").
func (a clientAnswer) matches(want string) bool {
	for _, alt := range strings.Split(want, "|") {
		code, target, hasTarget := strings.Cut(alt, " ")
		if code == strconv.Itoa(a.code) && (!hasTarget || target == a.target) {
			return true
		}
	}
	return false
}

// readAnswer reads one answer to a request of method from br. An answer
// that a client cannot delimit (a body without Content-Length or chunked
// coding on a connection not closing) is an error: reading it would never
// end.
func readAnswer(br *bufio.Reader, method string) (clientAnswer, error) {
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return clientAnswer{}, err
	}
	defer resp.Body.Close()
	a := clientAnswer{code: resp.StatusCode, target: resp.Header.Get("X-Up-Target"), index: -1, header: resp.Header}
	if v := resp.Header.Get("X-Up-Index"); v != "" {
		a.index, _ = strconv.Atoi(v)
	}
	bodyless := method == http.MethodHead || resp.StatusCode == 204 || resp.StatusCode == 304 || resp.StatusCode < 200
	// (resp.Close is no help: net/http sets it for such a body.)
	closing := resp.ProtoAtLeast(1, 1) && headerHas(resp.Header, "Connection", "close") ||
		!resp.ProtoAtLeast(1, 1) && !headerHas(resp.Header, "Connection", "keep-alive")
	if !bodyless && resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && !closing {
		return a, fmt.Errorf("answer %s has a body of no length on a connection kept open: the client cannot find its end", a)
	}
	b, err := io.ReadAll(resp.Body)
	a.body = string(b)
	if err != nil {
		return a, fmt.Errorf("reading the body of answer %s: %w", a, err)
	}
	return a, nil
}

// headerHas reports whether the comma-separated values of h's header name
// hold tok, in any case.
func headerHas(h http.Header, name, tok string) bool {
	for _, v := range h.Values(name) {
		for _, item := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(item), tok) {
				return true
			}
		}
	}
	return false
}

// describeUp lists what the upstream read, for failure messages.
func describeUp(msgs []upMsg, errs []upError) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n  #%d conn %d: %q", m.Index, m.Conn, m.Raw)
	}
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  error on conn %d: %v: %q", e.Conn, e.Err, e.Raw)
	}
	if b.Len() == 0 {
		return " nothing"
	}
	return b.String()
}

// TestHalfClosedClientAnswered: a client that shuts down its writing side
// after its requests (as nc -N, some health checks and HTTP/1.0-style
// clients do) still gets an answer to each, in order, as nginx gives it;
// the gateway closes once they are sent.
func TestHalfClosedClientAnswered(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		up := startRecordingUpstream(t)
		gw := startGateway(t, parseConfig(t, confConfig, engine, "", up.Addr))
		conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(waitLimit))
		if _, err := io.WriteString(conn, crlfs("GET /1 HTTP/1.1\nHost: x\n\nGET /2 HTTP/1.1\nHost: x\n\n")); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		for _, want := range []string{"200 /1", "200 /2"} {
			a, err := readAnswer(br, http.MethodGet)
			if err != nil {
				t.Fatalf("waiting for %s: %v", want, err)
			}
			if !a.matches(want) {
				t.Fatalf("answer %s, want %s", a, want)
			}
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("after the answers: %v, want the connection closed", err)
		}
	})
}
