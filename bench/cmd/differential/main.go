// Command differential sends the same hostile requests through several
// proxies (nginx and sluice's engines) in front of recording upstreams,
// then reads the bytes each upstream got with several parsers and reports
// where the proxies or the parsers disagree. scripts/differential.sh
// starts the proxies and runs it.
//
//	differential -proxy nginx=127.0.0.1:8080@127.0.0.1:9080 -proxy loop=127.0.0.1:8081@127.0.0.1:9081 \
//	    [-proxy name=tls://127.0.0.1:8443@127.0.0.1:9443] [-proxy name=h2c://127.0.0.1:8082@127.0.0.1:9082] \
//	    [-seeds dir,dir] [-run regexp] [-v]
//
// Each -proxy names a proxy, its listener and the loopback address of the
// recorder it forwards to (started here: a recorder per proxy, so that
// the proxies run side by side). The first proxy that runs a case is its
// reference (nginx, or nginx-tls for the HTTP/2 cases).
// For each case of the corpus (corpus.go, and the Go fuzz corpus files of
// -seeds) it writes the case's bytes on a new connection, reads the
// answers until the connection closes or stays idle (the HTTP/2 cases of
// h2.go go, as frames, to the TLS proxies with ALPN h2 and to the h2c
// proxies by prior knowledge; an h2c proxy takes no other case; every
// proxy must answer a plaintext or TLS HTTP/1.1 GET, with which the
// harness waits for it and probes it after each case), and takes the bytes
// the recorder got meanwhile, per upstream connection. Those are read by
// net/http's strict reader, by fasthttp's, and by a lenient reader of the
// older servers' kind (parsers.go). The report lists:
//
//	A  a proxy forwarded what the reference refused, or the reverse;
//	B  the parsers disagree on what a proxy forwarded: how many requests,
//	   their method, target, Host or body (a smuggling risk for some
//	   upstream);
//	C  the upstream can read a client's claim as the proxy's: X-Forwarded-*,
//	   X-Real-Ip, Forwarded, X-Request-Id (in any case, '_' for '-') or
//	   a Host or target carrying the corpus's "evil";
//	E  two proxies named sluice-* (the engines) answered or forwarded
//	   differently: on an HTTP/1.1 case the plaintext ones, compared by
//	   status and request lines; on an HTTP/2 case every one, compared by
//	   status, how the stream ended and the whole head the upstream got
//	   (the transport's own values masked: Host, a generated X-Request-Id,
//	   the scheme), the first that ran it the reference. A difference
//	   where an engine refused the stream (REFUSED_STREAM) and the
//	   reference did not is expected of the loops' HTTP/2 until it serves
//	   every stream, and counted apart as e;
//	R  a parser reads the requests another reads, then refuses what
//	   follows (an upstream of its kind answers an error and closes:
//	   no smuggling, but the client gets an error).
//
// A case is one line of the summary table: the statuses each proxy
// answered and, after '>', the requests its upstream read (by net/http).
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

type proxyFlags []string

func (p *proxyFlags) String() string     { return strings.Join(*p, " ") }
func (p *proxyFlags) Set(s string) error { *p = append(*p, s); return nil }

func main() {
	var specs proxyFlags
	flag.Var(&specs, "proxy", "name=[tls://|h2c://]host:port@recorder-host:port (repeated; the first is the reference)")
	seeds := flag.String("seeds", "", "comma-separated directories of Go fuzz corpus files to add as cases")
	run := flag.String("run", "", "only the cases whose name matches this regexp")
	verbose := flag.Bool("v", false, "print every case's upstream bytes and readings, not only divergent ones")
	flag.Parse()
	if len(specs) < 2 {
		fail("need at least two -proxy")
	}
	cases := append(append(builtinCases(), h2Cases()...), h2CoreCases()...)
	if *seeds != "" {
		more, err := seedCases(strings.Split(*seeds, ","))
		if err != nil {
			fail(err.Error())
		}
		cases = append(cases, more...)
	}
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fail(err.Error())
		}
		var kept []testCase
		for _, c := range cases {
			if re.MatchString(c.name) {
				kept = append(kept, c)
			}
		}
		cases = kept
	}
	var proxies []*proxy
	for _, s := range specs {
		p, err := parseProxy(s)
		if err != nil {
			fail(err.Error())
		}
		defer p.rec.close()
		proxies = append(proxies, p)
	}
	for _, p := range proxies {
		if err := p.await(); err != nil {
			fail(err.Error())
		}
	}
	results := make([][]outcome, len(proxies))
	var wg sync.WaitGroup
	for i, p := range proxies {
		wg.Go(func() { results[i] = p.runAll(cases) })
	}
	wg.Wait()
	report(os.Stdout, proxies, cases, results, *verbose)
}

func parseProxy(s string) (*proxy, error) {
	name, rest, ok := strings.Cut(s, "=")
	addr, recAddr, ok2 := strings.Cut(rest, "@")
	if !ok || !ok2 || name == "" {
		return nil, fmt.Errorf("-proxy %q: want name=[tls://|h2c://]host:port@recorder-host:port", s)
	}
	p := &proxy{name: name, addr: addr}
	if a, ok := strings.CutPrefix(addr, "tls://"); ok {
		p.addr, p.tls = a, true
	} else if a, ok := strings.CutPrefix(addr, "h2c://"); ok {
		p.addr, p.h2c = a, true
	}
	rec, err := listenRecorder(recAddr)
	if err != nil {
		return nil, fmt.Errorf("-proxy %s: %w", name, err)
	}
	p.rec = rec
	return p, nil
}

// await waits until p answers a plain GET with a 200 from its recorder,
// for at most ten seconds.
func (p *proxy) await() error {
	var last string
	for range 100 {
		a, err := p.exchange(get("/ready", ""))
		if err == nil && len(a.statuses) == 1 && a.statuses[0] == 200 {
			return nil
		}
		last = fmt.Sprint(a, err)
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s is not ready: %s", p.name, last)
}

// outcome is one case's result on one proxy.
type outcome struct {
	skipped  bool // an HTTP/2 case on a plaintext proxy, or an HTTP/1.1 one on an h2c proxy
	answer   answer
	conns    [][]byte    // the bytes each upstream connection got
	readings [][]reading // per connection, one reading per parser
}

// forwarded reports whether the upstream got any bytes.
func (o outcome) forwarded() bool { return len(o.conns) > 0 }

// settle is how long the recorder may still be receiving after the client
// is done.
const settle = 50 * time.Millisecond

func (p *proxy) runAll(cases []testCase) []outcome {
	out := make([]outcome, len(cases))
	for i, c := range cases {
		if (c.h2 != nil && !p.tls && !p.h2c) || (c.h2 == nil && p.h2c) {
			out[i] = outcome{skipped: true}
			continue
		}
		m := p.rec.mark()
		var a answer
		var err error
		if c.h2 != nil {
			a, err = p.exchangeH2(c.h2)
		} else {
			a, err = p.exchange(c.raw)
		}
		if err != nil {
			a.end = err.Error()
		}
		time.Sleep(settle)
		o := outcome{answer: a, conns: p.rec.since(m)}
		for _, b := range o.conns {
			var rs []reading
			for _, pr := range parsers {
				rs = append(rs, pr.read(b))
			}
			o.readings = append(o.readings, rs)
		}
		out[i] = o
		p.probe()
	}
	return out
}

// probe sends a plain GET after a case, so that a case the recorder
// refused counts as no failure in a row for a proxy's passive health, and
// a broken connection pool shows in the next case rather than hides. It
// waits (a second at most) until the recorder has answered it, so that it
// is not taken for the next case's.
func (p *proxy) probe() {
	n := p.rec.answered()
	_, _ = p.exchange(get("/probe", "Connection: close\n"))
	for i := 0; i < 100 && p.rec.answered() == n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "differential:", msg)
	os.Exit(2)
}
