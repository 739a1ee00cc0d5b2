package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// proxy is one proxy under test and the recorder it forwards to.
type proxy struct {
	name string
	addr string // host:port
	tls  bool
	h2c  bool // an h2c listener (prior knowledge): the HTTP/2 cases alone
	rec  *recorder
}

// answer is what the client got on its connection: the status of each
// response it could read, and how the connection ended.
type answer struct {
	statuses []int
	end      string // "closed", "open" (still open at the idle bound) or "garbled: ..." (bytes that are no response)
}

func (a answer) String() string {
	s := make([]string, len(a.statuses))
	for i, c := range a.statuses {
		s[i] = fmt.Sprint(c)
	}
	if len(s) == 0 {
		return "-" + " (" + a.end + ")"
	}
	return strings.Join(s, ",") + " (" + a.end + ")"
}

// Bounds of one exchange: the client stops reading after idle without a
// byte, or after whole in all.
const (
	idle  = 250 * time.Millisecond
	whole = 3 * time.Second
)

func (p *proxy) dial() (net.Conn, error) {
	d := net.Dialer{Timeout: whole}
	if p.tls {
		return tls.DialWithDialer(&d, "tcp", p.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	}
	return d.Dial("tcp", p.addr)
}

// exchange writes raw on a new connection to p and reads what comes back
// until the connection closes or stays idle.
func (p *proxy) exchange(raw string) (answer, error) {
	c, err := p.dial()
	if err != nil {
		return answer{}, fmt.Errorf("%s: %w", p.name, err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetWriteDeadline(start.Add(whole))
	if _, err := io.WriteString(c, raw); err != nil {
		return answer{end: "write: " + err.Error()}, nil
	}
	var got []byte
	buf := make([]byte, 64<<10)
	end := "open"
	for time.Since(start) < whole {
		_ = c.SetReadDeadline(minTime(time.Now().Add(idle), start.Add(whole)))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				end = "closed"
			}
			break
		}
	}
	return readAnswer(got, end, strings.HasPrefix(raw, "HEAD ")), nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// readAnswer reads the responses in b.
func readAnswer(b []byte, end string, head bool) answer {
	a := answer{end: end}
	br := bufio.NewReader(bytes.NewReader(b))
	for {
		if _, err := br.Peek(1); err != nil {
			return a
		}
		var req *http.Request
		if head {
			req = &http.Request{Method: http.MethodHead}
			head = false
		}
		resp, err := http.ReadResponse(br, req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
		}
		if err != nil {
			a.end = "garbled: " + err.Error()
			return a
		}
		a.statuses = append(a.statuses, resp.StatusCode)
	}
}
