package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// adminGet sends GET /healthz on c and reads the answer.
func adminGet(c net.Conn, br *bufio.Reader) error {
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

// TestAdminTimeouts: the admin listener closes a keep-alive connection
// idle for server.idle_timeout, and one that sends no request for
// server.read_header_timeout.
func TestAdminTimeouts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, "listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\nupstreams: {up: {targets: [\"http://127.0.0.1:9\"]}}\nroutes: [{name: all, upstream: up}]\nserver: {idle_timeout: 200ms, read_header_timeout: 200ms}\n")
	p, err := startServe(t, "--config", path, "--watch=false")
	if err != nil {
		t.Fatal(err)
	}
	for _, first := range []bool{true, false} {
		c, err := net.DialTimeout("tcp", p.admin, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if first {
			if err := adminGet(c, br); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("after a request %v: read %v, want the connection closed", first, err)
		}
	}
}

// TestAdminConnsBounded: the admin listener serves at most adminMaxConns
// connections at once; one more is served once another closes.
func TestAdminConnsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeFile(t, path, "listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\nupstreams: {up: {targets: [\"http://127.0.0.1:9\"]}}\nroutes: [{name: all, upstream: up}]\n")
	p, err := startServe(t, "--config", path, "--watch=false")
	if err != nil {
		t.Fatal(err)
	}
	held := make([]net.Conn, adminMaxConns)
	for i := range held {
		c, err := net.DialTimeout("tcp", p.admin, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(waitLimit))
		if err := adminGet(c, bufio.NewReader(c)); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		held[i] = c
	}
	c, err := net.DialTimeout("tcp", p.admin, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if err := adminGet(c, br); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection %d: %v, want no answer while %d are open", adminMaxConns+1, err, adminMaxConns)
	}
	held[0].Close()
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connection %d once another closed: %v", adminMaxConns+1, err)
	}
	resp.Body.Close()
}
