package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// fuzzLimit bounds each step of an execution of FuzzForward: the client's
// socket deadline, the wait for the gateway to have no request in flight,
// and the wait for the upstream to settle. A gateway that needs longer to
// answer a few requests on loopback is stuck, not slow.
const fuzzLimit = 5 * time.Second

// maxFuzzRequests bounds the requests read from one input.
const maxFuzzRequests = 32

// FuzzForward sends any bytes through the gateway, on both engines, to a raw
// upstream and checks that what the upstream reads is what the client sent:
//
//   - the upstream can read every byte the gateway forwards, strictly
//     (strictFlaws), as whole HTTP/1.1 messages;
//   - each message it reads is one of the client's requests, in order, with
//     the same method, target and body: nothing reaches it that the client
//     did not send as a request of its own (a smuggled request);
//   - the gateway's n-th answer, when the upstream gave it, is the
//     upstream's answer to the client's n-th request.
//
// The client's requests are what net/http's ReadRequest reads from the
// input, up to the first it cannot read or one that closes the
// connection. Seeds are the conformance cases and gateway/testdata/fuzz.
func FuzzForward(f *testing.F) {
	for _, c := range conformanceCases() {
		if c.respond == nil {
			f.Add([]byte(c.req))
		}
	}
	for _, seed := range corpusSeeds(f, "FuzzParseRequest") {
		f.Add(seed)
	}
	var rigs []forwardRig
	for _, engine := range []string{"loop", "goroutine"} {
		up := startRecordingUpstream(f)
		gw := startGateway(f, parseConfig(f, confConfig, engine, "", up.Addr))
		rigs = append(rigs, forwardRig{engine, gw, up})
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 64<<10 {
			return
		}
		refs := clientRequests(in)
		for _, r := range rigs {
			checkForward(t, r, in, refs)
		}
	})
}

// clientRequest is a request of the client's, as net/http reads it.
type clientRequest struct {
	method, target string
	body           []byte
}

// clientRequests reads the requests in b, up to the first net/http cannot
// read, or the one after which the connection closes. Empty lines before a
// request are skipped, as RFC 9112 section 2.2 asks of a server.
func clientRequests(b []byte) []clientRequest {
	var reqs []clientRequest
	br := bufio.NewReader(bytes.NewReader(b))
	for len(reqs) < maxFuzzRequests {
		for {
			if p, _ := br.Peek(1); len(p) == 1 && p[0] == '\n' {
				_, _ = br.Discard(1)
			} else if p, _ := br.Peek(2); string(p) == "\r\n" {
				_, _ = br.Discard(2)
			} else {
				break
			}
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return reqs
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return reqs
		}
		reqs = append(reqs, clientRequest{req.Method, req.RequestURI, body})
		if req.Close {
			return reqs
		}
	}
	return reqs
}

// forwardRig is a gateway on engine in front of a raw upstream.
type forwardRig struct {
	engine string
	gw     *testGateway
	up     *recordingUpstream
}

// idle reports whether no request is in flight in the gateway.
func (r forwardRig) idle() bool {
	for _, rt := range r.gw.Status().Routes {
		if rt.InFlight != 0 {
			return false
		}
	}
	return true
}

// checkForward sends in, whose requests are refs, to r's gateway, reads its
// answers, waits until the gateway and the upstream have settled, and
// checks what the upstream read.
func checkForward(t *testing.T, r forwardRig, in []byte, refs []clientRequest) {
	t.Helper()
	engine, up := r.engine, r.up
	start := up.count()
	answers := exchangeForward(t, r.gw.Addr, in, refs)
	deadline := time.Now().Add(fuzzLimit)
	for !r.idle() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	if !r.idle() || !up.settle(fuzzLimit) {
		t.Fatalf("%s: the gateway or the upstream did not settle: a request in flight or part of a message held\ninput %q", engine, in)
	}
	msgs, errs := up.since(start)
	report := func() string {
		return fmt.Sprintf("input %q\nclient requests %s\nanswers %q\nupstream read:%s", in, describeRefs(refs), answers, describeUp(msgs, nil))
	}
	for _, e := range errs {
		if !e.cut() {
			t.Fatalf("%s: the upstream could not read what the gateway sent: %v: %q\n%s", engine, e.Err, e.Raw, report())
		}
	}
	up.clearErrors()
	for _, m := range msgs {
		if len(m.Flaws) > 0 {
			t.Fatalf("%s: upstream message #%d is malformed: %s\n%s", engine, m.Index, m.Flaws, report())
		}
	}
	// Each upstream message is one of the client's requests, in order.
	j := 0
	for _, m := range msgs {
		for j < len(refs) && !refs[j].is(m) {
			j++
		}
		if j == len(refs) {
			t.Fatalf("%s: upstream message #%d (%s %s, %d bytes of body) is none of the client's requests, in order\n%s",
				engine, m.Index, m.Method, m.Target, len(m.Body), report())
		}
		j++
	}
	// The n-th answer, when from the upstream, answers the n-th request.
	byIndex := map[int]upMsg{}
	for _, m := range msgs {
		byIndex[m.Index] = m
	}
	for n, a := range answers {
		if a.index < 0 {
			continue
		}
		m, ok := byIndex[a.index]
		switch {
		case !ok:
			t.Fatalf("%s: answer %d is the upstream's answer to message #%d, which is not this client's\n%s", engine, n, a.index, report())
		case n >= len(refs):
			t.Fatalf("%s: answer %d comes from the upstream, but the client sent %d requests\n%s", engine, n, len(refs), report())
		case !refs[n].is(m):
			t.Fatalf("%s: answer %d answers upstream message #%d (%s %s), not the client's request %d\n%s", engine, n, m.Index, m.Method, m.Target, n, report())
		}
	}
}

// is reports whether upstream message m is r: the same method, target
// (both as fasthttp normalizes them, which the gateway may do) and body.
func (r clientRequest) is(m upMsg) bool {
	return r.method == m.Method && normalTarget(r.target) == normalTarget(m.Target) && bytes.Equal(r.body, m.Body)
}

// normalTarget is target as the gateway's server reads it: parsed with a
// Host (else "//a" would be read as an authority), the path normalized.
func normalTarget(target string) string {
	var u fasthttp.URI
	if err := u.Parse([]byte("x"), []byte(target)); err != nil {
		return target
	}
	return string(u.RequestURI())
}

// exchangeForward writes in to a new connection to addr, closes its writing
// side so that the gateway sees where the input ends (a gateway that waits
// for more would hold the connection until its timeout), and reads answers
// (to refs' methods, GET past them) until the connection ends, fuzzLimit
// passes or an answer cannot be read. (While the loop engine answers no
// half-closed client, see TestHalfClosedClientAnswered, only the
// goroutine engine's answers are checked.)
func exchangeForward(t *testing.T, addr string, in []byte, refs []clientRequest) []clientAnswer {
	conn, err := net.DialTimeout("tcp", addr, fuzzLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(fuzzLimit))
	if _, err := conn.Write(in); err != nil {
		return nil // the gateway refused and closed before reading it all
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	br := bufio.NewReader(conn)
	var answers []clientAnswer
	for len(answers) <= maxFuzzRequests {
		method := http.MethodGet
		if n := len(answers); n < len(refs) {
			method = refs[n].method
		}
		a, err := readAnswer(br, method)
		if err != nil {
			return answers
		}
		answers = append(answers, a)
	}
	return answers
}

func describeRefs(refs []clientRequest) string {
	var b strings.Builder
	for i, r := range refs {
		fmt.Fprintf(&b, "\n  %d: %s %s %q", i, r.method, r.target, r.body)
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// corpusSeeds reads the inputs of another fuzz test's corpus in
// testdata/fuzz/name (files in the "go test fuzz v1" form, one []byte).
func corpusSeeds(t testing.TB, name string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var seeds [][]byte
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, v, ok := strings.Cut(string(b), "\n[]byte(")
		if !ok {
			t.Fatalf("%s: not a corpus file of one []byte", file)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(v), ")"))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		seeds = append(seeds, []byte(s))
	}
	return seeds
}
