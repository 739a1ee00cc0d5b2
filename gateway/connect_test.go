//go:build unix

package gateway_test

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestConnectTimeout has a target whose listener accepts nothing and
// whose backlog is full, so that connecting to it hangs: the attempt ends
// after the upstream's connect_timeout with a 504.
func TestConnectTimeout(t *testing.T) {
	addr := fullBacklog(t)
	forEngines(t, func(t *testing.T, engine string) {
		gw := startGateway(t, parseConfig(t, `
server: {engine: %s}
upstreams:
  up: {targets: ["http://%s"], connect_timeout: 100ms}
routes:
  - {name: all, upstream: up}
`, engine, addr))
		r := get(t, newClient(t), gw.URL+"/")
		if r.Code != 504 || r.errorBody(t).Error != "timeout" {
			t.Fatalf("%d %q, want 504 timeout", r.Code, r.Body)
		}
	})
}

// fullBacklog returns the loopback address of a listener that accepts
// nothing and whose queue is full: a connection to it hangs.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue: connections that complete until one cannot.
	for i := 0; i < 16; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("could not fill the listener's queue")
	return ""
}
