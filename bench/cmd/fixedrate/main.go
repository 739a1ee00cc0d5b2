// Command fixedrate measures a server's latency at a fixed request rate:
// an open-loop load (requests leave on schedule whether or not earlier ones
// have been answered) spread over keep-alive connections, for a bounded
// time. Unlike wrk, which sends as fast as the server answers and so
// measures latency at saturation, it shows what a proxy adds to each
// request at a load every peer can carry. scripts/loadtest.sh runs it
// against nginx, sluice and the others.
//
//	fixedrate -url http://127.0.0.1:8080/ -rate 10000 -duration 5s -conns 64
//
// It prints the rate achieved, the errors and the latency quantiles (p50,
// p99, p99.9, max) from the moment each request was written to its
// answer. (Not from the moment it was due: Go's timers wake up to a
// millisecond late, which would drown sub-millisecond latencies. A stall
// still shows: the other connections keep sending into it.)
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	target := flag.String("url", "", "URL to GET (http only)")
	rate := flag.Int("rate", 10000, "requests per second, over all connections")
	duration := flag.Duration("duration", 5*time.Second, "how long to send")
	conns := flag.Int("conns", 64, "keep-alive connections")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Scheme != "http" || *rate <= 0 || *conns <= 0 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "usage: fixedrate -url http://HOST:PORT/PATH [-rate N] [-duration D] [-conns N]")
		os.Exit(2)
	}
	path := u.RequestURI()
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\n\r\n")

	// Connection i sends requests i, i+conns, i+2·conns, ... of one global
	// schedule, request n being due at start + n/rate.
	total := int(duration.Seconds() * float64(*rate))
	interval := time.Second / time.Duration(*rate)
	start := time.Now().Add(100 * time.Millisecond)
	lat := make([][]time.Duration, *conns)
	errs := make([]int, *conns)
	var wg sync.WaitGroup
	for i := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat[i], errs[i] = run(u.Host, req, start, interval, i, *conns, total)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	var all []time.Duration
	nerr := 0
	for i := range lat {
		all = append(all, lat[i]...)
		nerr += errs[i]
	}
	slices.Sort(all)
	q := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	fmt.Printf("rate %.0f/s  ok %d  errors %d  p50 %s  p99 %s  p99.9 %s  max %s\n",
		float64(len(all))/elapsed.Seconds(), len(all), nerr, ms(q(0.5)), ms(q(0.99)), ms(q(0.999)), ms(q(1)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond)) }

// run sends this connection's share of the schedule and returns the
// latency of each answered request and the number of failures. A failed
// connection is dialled again for the next request.
func run(addr string, req []byte, start time.Time, interval time.Duration, first, step, total int) ([]time.Duration, int) {
	lat := make([]time.Duration, 0, total/step+1)
	failed := 0
	var conn net.Conn
	var br *bufio.Reader
	var resp fasthttp.Response
	for n := first; n < total; n += step {
		due := start.Add(time.Duration(n) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if conn == nil {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				failed++
				continue
			}
			conn, br = c, bufio.NewReaderSize(c, 16<<10)
		}
		sent := time.Now()
		_ = conn.SetDeadline(sent.Add(5 * time.Second))
		err := exchange(conn, br, req, &resp)
		if err != nil {
			failed++
			conn.Close()
			conn = nil
			continue
		}
		lat = append(lat, time.Since(sent))
	}
	if conn != nil {
		conn.Close()
	}
	return lat, failed
}

var errStatus = errors.New("status is not 2xx")

// exchange sends req on conn and reads one response from br.
func exchange(conn net.Conn, br *bufio.Reader, req []byte, resp *fasthttp.Response) error {
	if _, err := conn.Write(req); err != nil {
		return err
	}
	resp.Reset()
	if err := resp.Read(br); err != nil {
		return err
	}
	if code := resp.StatusCode(); code < 200 || code > 299 {
		return errStatus
	}
	return nil
}
