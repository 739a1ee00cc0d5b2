package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// recorder is the upstream every proxy forwards to: it keeps the raw bytes
// each connection brought, and answers each request that net/http's strict
// reader reads in them with a 200 naming its index on the recorder (or a
// 400, closing the connection, when the reader refuses what came). It never
// answers a 5xx, so that a proxy's passive health never takes it out.
type recorder struct {
	ln net.Listener

	mu    sync.Mutex // protects conns, n
	conns []*recConn
	n     int // requests answered
}

// recConn is one connection's bytes.
type recConn struct {
	mu  sync.Mutex // protects buf
	buf []byte
}

// mark is where every connection of a recorder stood at one instant.
type mark []int

func listenRecorder(addr string) (*recorder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r := &recorder{ln: ln}
	go r.serve()
	return r, nil
}

func (r *recorder) close() { r.ln.Close() }

func (r *recorder) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		rc := &recConn{}
		r.mu.Lock()
		r.conns = append(r.conns, rc)
		r.mu.Unlock()
		go r.handle(c, rc)
	}
}

// handle copies what c sends into rc and, through a pipe, to the reader
// that answers it.
func (r *recorder) handle(c net.Conn, rc *recConn) {
	pr, pw := io.Pipe()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				rc.mu.Lock()
				rc.buf = append(rc.buf, buf[:n]...)
				rc.mu.Unlock()
				_, _ = pw.Write(buf[:n]) // fails once the reader has given up; the bytes are still kept
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	defer c.Close()
	defer pr.CloseWithError(errors.New("recorder: connection done"))
	br := bufio.NewReader(pr)
	for {
		req, err := http.ReadRequest(br)
		if err == nil {
			_, err = io.Copy(io.Discard, req.Body)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}
			return
		}
		r.mu.Lock()
		r.n++
		body := fmt.Sprintf("upstream request %d\n", r.n)
		r.mu.Unlock()
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
		if req.Close {
			return
		}
	}
}

// mark returns how many bytes each connection has brought so far.
func (r *recorder) mark() mark {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(mark, len(r.conns))
	for i, rc := range r.conns {
		rc.mu.Lock()
		m[i] = len(rc.buf)
		rc.mu.Unlock()
	}
	return m
}

// since returns the bytes each connection brought after m, leaving out
// the connections that brought none.
func (r *recorder) since(m mark) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for i, rc := range r.conns {
		from := 0
		if i < len(m) {
			from = m[i]
		}
		rc.mu.Lock()
		if len(rc.buf) > from {
			out = append(out, append([]byte(nil), rc.buf[from:]...))
		}
		rc.mu.Unlock()
	}
	return out
}

// answered returns how many requests r has answered.
func (r *recorder) answered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
