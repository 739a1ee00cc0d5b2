package gateway_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestRawUpstream checks the raw upstream itself, sent bytes directly: a
// request hidden after a body is read as a message of its own and
// answered, header lines keep their order and duplicates, and what
// net/http lets through but RFC 9112 forbids is listed as a flaw.
func TestRawUpstream(t *testing.T) {
	up := startRecordingUpstream(t)
	conn, err := net.DialTimeout("tcp", up.Addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	in := "POST /a HTTP/1.1\r\nHost: u\r\nX-B: 1\r\nX-A: 2\r\nX-B: 3\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /hidden HTTP/1.1\r\nHost: u\r\nX-F: 1\r\n folded\r\n\r\n" +
		"POST /c HTTP/1.1\r\nHost: u\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	if _, err := io.WriteString(conn, in); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for i, want := range []string{"/a", "/hidden", "/c"} {
		a, err := readAnswer(br, http.MethodGet)
		if err != nil || a.target != want || a.index != i {
			t.Fatalf("answer %d: %v %v, want 200 %s #%d", i, a, err, want, i)
		}
	}
	if !up.settle(waitLimit) {
		t.Fatal("the raw upstream did not settle")
	}
	msgs, errs := up.since(0)
	if len(msgs) != 3 || len(errs) != 0 {
		t.Fatalf("read:%s", describeUp(msgs, errs))
	}
	if got := msgs[0].values("X-B"); !slices.Equal(got, []string{"1", "3"}) || msgs[0].Header[2].Name != "X-A" {
		t.Errorf("header lines %q, want X-B 1 and 3 around X-A", msgs[0].Header)
	}
	if string(msgs[0].Body) != "hello" || string(msgs[2].Body) != "abc" || len(msgs[0].Flaws) != 0 || len(msgs[2].Flaws) != 0 {
		t.Errorf("bodies %q %q, flaws %q %q", msgs[0].Body, msgs[2].Body, msgs[0].Flaws, msgs[2].Flaws)
	}
	if len(msgs[1].Flaws) != 1 {
		t.Errorf("flaws of a folded line %q, want one", msgs[1].Flaws)
	}
	if string(msgs[1].Raw) != "GET /hidden HTTP/1.1\r\nHost: u\r\nX-F: 1\r\n folded\r\n\r\n" {
		t.Errorf("raw bytes of message 1 %q", msgs[1].Raw)
	}
}
