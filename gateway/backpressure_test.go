package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPipelineFloodBounded has a client pipeline requests without reading
// a response: first enough of them that the answers fill every buffer on
// the way back, then 64 MiB more. The gateway must stop taking the
// client's input (the goroutine engine) or close the connection (the
// loops, once maxPendingIn bytes wait), and its heap must not grow by
// anything near what the client wrote. The answers the client then reads
// are the right ones, in order (the last one cut short when the loops
// closed); on the goroutine engine it gets them all.
func TestPipelineFloodBounded(t *testing.T) {
	const (
		first    = 512      // requests whose answers fill the buffers
		respBody = 64 << 10 // read whole, and sent from the loop
		flood    = 64 << 20
		check    = 64 // answers read and checked
	)
	forEngines(t, func(t *testing.T, engine string) {
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(respBody))
			fmt.Fprintf(w, "%-*s", respBody, r.URL.Path)
		})
		gw := gatewayTo(t, engine, up.addr())
		conn, err := net.DialTimeout("tcp", gw.Addr, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(2 * waitLimit))
		var batch bytes.Buffer
		for i := range first {
			fmt.Fprintf(&batch, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		if _, err := conn.Write(batch.Bytes()); err != nil {
			t.Fatal(err)
		}
		// Wait for the gateway to stop answering: its answers wait for the
		// client. (Should it only pause, the flood finds the request
		// upstream, which the loops bounded already.)
		for last, quiet := int64(-1), 0; quiet < 10; quiet++ {
			if n := up.calls.Load(); n != last {
				last, quiet = n, 0
			}
			time.Sleep(10 * time.Millisecond)
		}

		hw := newHeapWatch()
		blocked := make(chan struct{})
		var once sync.Once
		written := make(chan int, 1)
		go func() { // the flood, in 1 MiB writes, until the gateway closes
			batch.Reset()
			for i := 0; batch.Len() < 1<<20; i++ {
				fmt.Fprintf(&batch, "GET /flood/%d HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", i, strings.Repeat("p", 200))
			}
			n := 0
			for n < flood {
				err := writeAll(conn, batch.Bytes(), func() { once.Do(func() { close(blocked) }) })
				if err != nil {
					break
				}
				n += batch.Len()
				hw.sample()
			}
			once.Do(func() { close(blocked) })
			written <- n
		}()
		select {
		case <-blocked:
		case <-time.After(waitLimit):
			t.Fatal("the flood neither ended nor blocked")
		}
		hw.sample()

		br := bufio.NewReader(conn)
		read := 0
		for ; read < check; read++ {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				break // the connection closed in the middle of an answer
			}
			if want := fmt.Sprintf("%-*s", respBody, fmt.Sprintf("/%d", read)); resp.StatusCode != 200 || string(b) != want {
				t.Fatalf("answer %d: %d %.20q, want 200 %.20q", read, resp.StatusCode, b, want)
			}
		}
		hw.sample()
		conn.Close()
		n := <-written
		t.Logf("flooded %d KiB, read %d answers, heap growth %d KiB", n>>10, read, hw.growth()>>10)
		if g := hw.growth(); g > 32<<20 {
			t.Errorf("heap grew by %d MiB while a client pipelined %d MiB without reading", g>>20, n>>20)
		}
		if engine == "goroutine" && read != check {
			t.Errorf("read %d answers of %d", read, check)
		}
	})
}

// writeAll writes b to conn, calling stalled each time 100 ms pass without
// the write completing.
func writeAll(conn net.Conn, b []byte, stalled func()) error {
	for len(b) > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := conn.Write(b)
		b = b[n:]
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			stalled()
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}
