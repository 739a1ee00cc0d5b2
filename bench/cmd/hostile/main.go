// Command hostile plays the hostile clients of the hardening issue against
// a gateway on loopback, each bounded in bytes, requests and time, and
// prints what it saw. scripts/hostile.sh runs it against `sluice serve` on
// each engine and reads the gateway's memory around each attack.
//
//	hostile -addr 127.0.0.1:8080 -attack pipeline -bytes 256MiB
//	hostile -addr 127.0.0.1:8080 -attack keyflood -keys 1000000 -header X-Api-Key -victim /ip/
//	hostile -addr 127.0.0.1:8080 -attack slowread -conns 64 -path /large
//
// Attacks:
//   - pipeline: one connection writes pipelined GETs and never reads, until
//     -bytes are written or a write has been blocked for -stall (the
//     gateway applied backpressure), then reads what it is answered.
//   - keyflood: -keys requests, each with its own value of -header, over
//     -conns keep-alive connections; a victim client with no such header
//     asks -victim (a route keyed by IP) between them and counts its 429s.
//   - slowread: -conns connections each ask -path (a large answer) and read
//     nothing for -hold, then close.
//
// With -upstream it is instead the upstream those attacks go through: it
// answers /large with 8 MiB and every other path with a few bytes.
//
//	hostile -upstream -addr 127.0.0.1:9000
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "", "the gateway's host:port (loopback)")
	attack := flag.String("attack", "", "pipeline, keyflood or slowread")
	size := flag.String("bytes", "256MiB", "pipeline: most bytes to write")
	stall := flag.Duration("stall", 2*time.Second, "pipeline: a write blocked this long means backpressure")
	keys := flag.Int("keys", 1000000, "keyflood: distinct keys")
	header := flag.String("header", "X-Api-Key", "keyflood: the header that carries the key")
	path := flag.String("path", "/", "the path the attack asks for")
	victim := flag.String("victim", "", "keyflood: a path keyed by IP that must never answer 429")
	conns := flag.Int("conns", 32, "keyflood, slowread: connections")
	hold := flag.Duration("hold", 10*time.Second, "slowread: how long to read nothing")
	limit := flag.Duration("timeout", 5*time.Minute, "the attack's whole time bound")
	upstream := flag.Bool("upstream", false, "serve as the upstream on -addr instead of attacking")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		fail("-addr must be a loopback host:port")
	}
	if *upstream {
		serveUpstream(*addr)
		return
	}
	deadline := time.Now().Add(*limit)
	switch *attack {
	case "pipeline":
		n, err := parseSize(*size)
		if err != nil {
			fail(err.Error())
		}
		pipeline(*addr, *path, n, *stall, deadline)
	case "keyflood":
		keyflood(*addr, *path, *header, *victim, *keys, *conns, deadline)
	case "slowread":
		slowread(*addr, *path, *conns, *hold, deadline)
	default:
		fail("-attack must be pipeline, keyflood or slowread")
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "hostile:", msg)
	os.Exit(2)
}

// parseSize reads a byte count such as 256MiB, 4KiB or 1000.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// pipeline writes requests without reading until max bytes are written or
// a write stalls, then reads the answers until the gateway stops sending.
func pipeline(addr, path string, max int64, stall time.Duration, deadline time.Time) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fail(err.Error())
	}
	defer c.Close()
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: hostile\r\n\r\n")
	batch := []byte(strings.Repeat(string(req), 64<<10/len(req)))
	var written int64
	stalled := false
	for written < max && time.Now().Before(deadline) {
		_ = c.SetWriteDeadline(time.Now().Add(stall))
		n, err := c.Write(batch)
		written += int64(n)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			stalled = true
			break
		}
		if err != nil {
			fmt.Printf("pipeline: written %d MiB, then the gateway closed: %v\n", written>>20, err)
			return
		}
	}
	fmt.Printf("pipeline: written %d MiB (%d requests), stalled by backpressure: %v\n",
		written>>20, written/int64(len(req)), stalled)
	// Read what the gateway answers now that the client reads.
	_ = c.SetReadDeadline(time.Now().Add(stall))
	br := bufio.NewReader(c)
	answers, codes := 0, map[int]int{}
	for time.Now().Before(deadline) {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answers++
		codes[resp.StatusCode]++
		_ = c.SetReadDeadline(time.Now().Add(stall))
	}
	fmt.Printf("pipeline: then read %d answers %v\n", answers, codes)
}

// keyflood sends keys requests with distinct key values over conns
// connections, while a victim without a key asks its own path.
func keyflood(addr, path, header, victim string, keys, conns int, deadline time.Time) {
	var next, sent atomic.Int64
	var mu sync.Mutex // protects codes
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var local = map[int]int{}
			defer func() {
				mu.Lock()
				for k, v := range local {
					codes[k] += v
				}
				mu.Unlock()
			}()
			c, br := dial(addr)
			if c == nil {
				return
			}
			defer func() { c.Close() }()
			for time.Now().Before(deadline) {
				i := next.Add(1)
				if i > int64(keys) {
					return
				}
				code, err := roundTrip(c, br, "GET "+path+" HTTP/1.1\r\nHost: hostile\r\n"+header+": k"+strconv.FormatInt(i, 10)+"\r\n\r\n")
				if err != nil {
					local[-1]++
					c.Close()
					if c, br = dial(addr); c == nil {
						return
					}
					continue
				}
				local[code]++
				sent.Add(1)
			}
		})
	}
	victimCodes := map[int]int{}
	if victim != "" {
		c, br := dial(addr)
		for c != nil && next.Load() < int64(keys) && time.Now().Before(deadline) {
			code, err := roundTrip(c, br, "GET "+victim+" HTTP/1.1\r\nHost: victim\r\n\r\n")
			if err != nil {
				victimCodes[-1]++
				c.Close()
				c, br = dial(addr)
				continue
			}
			victimCodes[code]++
			time.Sleep(10 * time.Millisecond)
		}
		if c != nil {
			c.Close()
		}
	}
	wg.Wait()
	fmt.Printf("keyflood: %d requests with distinct %s, answers %v (-1: connection errors)\n", sent.Load(), header, codes)
	if victim != "" {
		fmt.Printf("keyflood: victim on %s answers %v, 429s: %d\n", victim, victimCodes, victimCodes[429])
	}
}

// slowread opens conns connections that each ask path and read nothing for
// hold.
func slowread(addr, path string, conns int, hold time.Duration, deadline time.Time) {
	var open []net.Conn
	for range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Printf("slowread: dial: %v\n", err)
			break
		}
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: hostile\r\n\r\n"); err != nil {
			c.Close()
			continue
		}
		open = append(open, c)
	}
	end := time.Now().Add(hold)
	if end.After(deadline) {
		end = deadline
	}
	time.Sleep(time.Until(end))
	// How many did the gateway close meanwhile (write timeout)?
	closed := 0
	for _, c := range open {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := io.Copy(io.Discard, c); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
		c.Close()
	}
	fmt.Printf("slowread: %d connections held %v without reading; %d closed by the gateway\n", len(open), hold, closed)
}

func dial(addr string) (net.Conn, *bufio.Reader) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil
	}
	return c, bufio.NewReader(c)
}

// roundTrip writes req on c and reads one answer, body included.
func roundTrip(c net.Conn, br *bufio.Reader, req string) (int, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// serveUpstream answers /large with 8 MiB and anything else with a line.
func serveUpstream(addr string) {
	large := []byte(strings.Repeat("x", 8<<20))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/large" {
			_, _ = w.Write(large)
			return
		}
		_, _ = io.WriteString(w, "hello from the upstream\n")
	})
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fail(srv.ListenAndServe().Error())
}
