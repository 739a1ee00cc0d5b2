package http1

import (
	"errors"
	"strings"
	"testing"
)

func TestResponseBody(t *testing.T) {
	for _, c := range []struct {
		head     bool
		code, cl int
		want     BodyRead
	}{
		{true, 200, 5, BodyNone}, {false, 204, -1, BodyNone}, {false, 304, 100, BodyNone},
		{false, 200, 0, BodyWhole}, {false, 200, SmallBody, BodyWhole}, {false, 404, 12, BodyWhole},
		{false, 200, SmallBody + 1, BodyStream}, {false, 200, -1, BodyStream},
	} {
		if got := ResponseBody(c.head, c.code, c.cl); got != c.want {
			t.Errorf("ResponseBody(%v, %d, %d) = %d, want %d", c.head, c.code, c.cl, got, c.want)
		}
	}
}

func TestInterim(t *testing.T) {
	for _, c := range []struct {
		code, n int
		skip    bool
		err     error
	}{
		{100, 1, true, nil}, {103, MaxInterim, true, nil}, {199, 2, true, nil},
		{200, 1, false, nil}, {503, MaxInterim + 1, false, nil}, {599, 1, false, nil},
		{99, 1, false, ErrBadStatus}, {0, 1, false, ErrBadStatus}, {600, 1, false, ErrBadStatus}, {999, 1, false, ErrBadStatus},
		{101, 1, false, ErrUnexpected101}, {100, MaxInterim + 1, false, ErrTooManyInterim},
	} {
		skip, err := Interim(c.code, c.n)
		if skip != c.skip || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("Interim(%d, %d) = %v, %v; want %v, %v", c.code, c.n, skip, err, c.skip, c.err)
		}
	}
}

func TestBothFramings(t *testing.T) {
	for head, want := range map[string]bool{
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n":     true,
		"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nCONTENT-LENGTH: 3\r\n\r\n":     true,
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n":                                   false,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nContent-Length: 3\r\n\r\n": false, // after the section
		"HTTP/1.1 200 OK\r\nX-Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n":   false,
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked":             true, // the section not ended yet
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding : chunked\r\n\r\n":    true, // spaces before the colon
		"HTTP/1.1 200 OK\r\nContent-Length\t: 3\r\nTransfer-Encoding: chunked\r\n\r\n":   true,
		"HTTP/1.1 200 OK\r\nContent-Lengthy: 3\r\nTransfer-Encoding: chunked\r\n\r\n":    false,
	} {
		if got := BothFramings([]byte(head)); got != want {
			t.Errorf("BothFramings(%q) = %v, want %v", head, got, want)
		}
	}
}

func TestTokenNames(t *testing.T) {
	for names, want := range map[string]bool{
		"A,X-B,x_c": true, "A,X B": false, "": true, "A,": false, "X(A)": false,
	} {
		all := func(yield func(k, v []byte) bool) {
			if names == "" {
				return
			}
			for n := range strings.SplitSeq(names, ",") {
				if !yield([]byte(n), nil) {
					return
				}
			}
		}
		if got := TokenNames(all); got != want {
			t.Errorf("TokenNames(%q) = %v, want %v", names, got, want)
		}
	}
}
