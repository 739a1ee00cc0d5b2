package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// startCoalescing starts a gateway on engine with one route "co" that
// coalesces, its policies completed by extra (YAML flow-mapping entries,
// each starting with ", "), in front of up.
func startCoalescing(t *testing.T, engine string, up *upstream, extra string) *testGateway {
	t.Helper()
	return routedGateway(t, engine, up, `
  - name: co
    upstream: up
    policies: {coalesce: true%s}
`, extra)
}

// callUpstream starts an upstream that numbers its calls from 1, holds each
// at g, then sets the headers answer returns for the call and answers
// "call N" followed by the request's value of each header in echo.
func callUpstream(t *testing.T, g *gate, answer func(call int64) http.Header, echo ...string) *upstream {
	t.Helper()
	var calls atomic.Int64
	return startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		call := calls.Add(1)
		g.wait(r)
		if answer != nil {
			for k, vs := range answer(call) {
				w.Header()[k] = vs
			}
		}
		fmt.Fprintf(w, "call %d", call)
		for _, h := range echo {
			fmt.Fprintf(w, " %s=%q", h, r.Header.Get(h))
		}
	})
}

// sendOverlapping sends one GET /same per header set, each once the one
// before it has reached the upstream or joined a coalesced call under way
// (so that every request overlaps the first, held at g), then opens g and
// returns the answers in the order sent.
func sendOverlapping(t *testing.T, gw *testGateway, up *upstream, g *gate, headers ...http.Header) []result {
	t.Helper()
	c := newClient(t)
	results := make([]result, len(headers))
	var wg sync.WaitGroup
	for i, h := range headers {
		wg.Go(func() {
			r, err := tryDo(c, "GET", gw.URL+"/same", h, nil)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		})
		eventually(t, fmt.Sprintf("request %d to reach the upstream or join a call", i+1), func() bool {
			return up.calls.Load()+int64(gateway.CoalesceShared(gw.Gateway, "co")) == int64(i+1)
		})
	}
	g.open()
	wg.Wait()
	return results
}

// TestCoalescingKeepsCallersApart sends two requests for the same URL at
// once that differ only in who is asking: each must get the upstream's
// answer to its own request, so the upstream is called twice.
func TestCoalescingKeepsCallersApart(t *testing.T) {
	for _, tt := range []struct {
		name, header, extra string
	}{
		{"api-key", "X-Api-Key", ""},
		{"api-key-underscore", "X_api_key", ""}, // CGI-style servers read it as X-Api-Key
		{"cookie", "Cookie", ""},
		{"authorization", "Authorization", ""},
		{"rate-limit-key", "X-Client", `, rate_limit: {limit: 1000, key: "header:X-Client"}`},
		{"coalesce-vary", "X-Tenant", ", coalesce_vary: [X-Tenant]"},
		// Under a name with '_' for '-', which CGI-style servers read as
		// the name: they were one caller to the key.
		{"coalesce-vary-underscore", "X_tenant", ", coalesce_vary: [X-Tenant]"},
		{"accept-encoding-underscore", "Accept_encoding", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				g := newGate(2)
				up := callUpstream(t, g, nil, tt.header)
				gw := startCoalescing(t, engine, up, tt.extra)
				rs := sendOverlapping(t, gw, up, g,
					http.Header{tt.header: {"id=alice"}}, http.Header{tt.header: {"id=bob"}})
				for i, who := range []string{"alice", "bob"} {
					if want := fmt.Sprintf(" %s=%q", tt.header, "id="+who); rs[i].Code != 200 || !strings.HasSuffix(rs[i].Body, want) {
						t.Errorf("%s's answer: %d %q, want one ending in %q", who, rs[i].Code, rs[i].Body, want)
					}
				}
				if n := up.calls.Load(); n != 2 {
					t.Errorf("upstream called %d times, want 2 (one per caller)", n)
				}
			})
		})
	}
}

// TestCoalescingKeepsConditionsApart sends a conditional or partial GET
// and, while it is at the upstream, the same GET without its condition
// (or with another): the upstream answers the first 304, 412 or 206, and
// the second must get its own answer, the whole body. (They joined one
// call: a client that asked for the whole got a 304 without a body or
// another client's range.)
func TestCoalescingKeepsConditionsApart(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first http.Header
		code  int         // the first request's answer
		other http.Header // the second request's headers
		want  string      // its answer: 200 "whole", else 206 with the range as body
	}{
		{"if-none-match", http.Header{"If-None-Match": {`"v1"`}}, 304, nil, ""},
		{"if-none-match-underscore", http.Header{"If_none_match": {`"v1"`}}, 304, nil, ""},
		{"if-modified-since", http.Header{"If-Modified-Since": {"Wed, 01 Jan 2025 00:00:00 GMT"}}, 304, nil, ""},
		{"if-match", http.Header{"If-Match": {`"v0"`}}, 412, nil, ""},
		{"if-unmodified-since", http.Header{"If-Unmodified-Since": {"Wed, 01 Jan 2020 00:00:00 GMT"}}, 412, nil, ""},
		{"range", http.Header{"Range": {"bytes=0-1"}}, 206, nil, ""},
		{"other-range", http.Header{"Range": {"bytes=0-1"}}, 206, http.Header{"Range": {"bytes=2-3"}}, "bytes=2-3"},
		{"if-range", http.Header{"Range": {"bytes=0-1"}, "If-Range": {`"v1"`}}, 206, http.Header{"Range": {"bytes=0-1"}, "If-Range": {`"v0"`}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				g := newGate(2)
				up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
					g.wait(r)
					w.Header().Set("ETag", `"v1"`)
					w.Header().Set("Last-Modified", "Tue, 01 Jan 2019 00:00:00 GMT")
					// A condition, under any name a CGI-style server reads
					// as it, makes the answer one the whole body is not.
					for k := range r.Header {
						if name := strings.ReplaceAll(http.CanonicalHeaderKey(k), "_", "-"); strings.HasPrefix(name, "If-") && name != "If-Range" {
							w.WriteHeader(tt.code)
							return
						}
					}
					rg := r.Header.Get("Range")
					if ir := r.Header.Get("If-Range"); rg == "" || (ir != "" && ir != `"v1"`) {
						io.WriteString(w, "whole")
						return
					}
					w.Header().Set("Content-Range", strings.Replace(rg, "=", " ", 1)+"/5")
					w.WriteHeader(206)
					io.WriteString(w, rg)
				})
				gw := startCoalescing(t, engine, up, "")
				rs := sendOverlapping(t, gw, up, g, tt.first, tt.other)
				if rs[0].Code != tt.code {
					t.Errorf("first answer: %d %q, want %d", rs[0].Code, rs[0].Body, tt.code)
				}
				want, wantCode := "whole", 200
				if tt.want != "" {
					want, wantCode = tt.want, 206
				}
				if rs[1].Code != wantCode || rs[1].Body != want {
					t.Errorf("second answer: %d %q, want %d %q", rs[1].Code, rs[1].Body, wantCode, want)
				}
				if n := up.calls.Load(); n != 2 {
					t.Errorf("upstream called %d times, want 2", n)
				}
			})
		})
	}
}

// TestCoalescingLongAnswer sends two requests at once for an answer whose
// Content-Length is past what coalesced requests share (8 MiB): each gets
// the whole answer, the first its own call's, streamed, the second from a
// call of its own. (Every request of the call got a 502: a coalescing
// route could not serve such an answer at all.)
func TestCoalescingLongAnswer(t *testing.T) {
	const size = 8<<20 + 1
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(2)
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			g.wait(r)
			w.Header().Set("Content-Length", fmt.Sprint(size))
			w.Write(make([]byte, size))
		})
		gw := startCoalescing(t, engine, up, "")
		rs := sendOverlapping(t, gw, up, g, nil, nil)
		for i, r := range rs {
			if r.Code != 200 || len(r.Body) != size {
				t.Errorf("answer %d: %d, %d bytes, want 200 and %d", i+1, r.Code, len(r.Body), size)
			}
		}
		if n := up.calls.Load(); n != 2 {
			t.Errorf("upstream called %d times, want 2", n)
		}
	})
}

// TestCoalescingDoesNotSharePrivateAnswers sends two identical requests at
// once to an upstream whose answer is meant for one client: the second
// request, which joined the first's call, must not get that answer but go
// upstream itself. A Cache-Control that only mentions "private" inside a
// quoted argument is shared as usual.
func TestCoalescingDoesNotSharePrivateAnswers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header http.Header
		shared bool
	}{
		{"set-cookie", http.Header{"Set-Cookie": {"session=SECRET"}}, false},
		{"cache-control-private", http.Header{"Cache-Control": {"max-age=60, private"}}, false},
		{"cache-control-no-store", http.Header{"Cache-Control": {`no-cache="X-A, X-B", No-Store`}}, false},
		{"cache-control-second-line", http.Header{"Cache-Control": {"public", "PRIVATE"}}, false},
		{"vary-star", http.Header{"Vary": {"*"}}, false},
		{"quoted-private", http.Header{"Cache-Control": {`public, x-note="private, no-store"`}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, engine string) {
				g := newGate(2)
				up := callUpstream(t, g, func(call int64) http.Header {
					h := tt.header.Clone()
					if h.Get("Set-Cookie") != "" {
						h.Set("Set-Cookie", fmt.Sprintf("session=%d", call))
					}
					return h
				})
				gw := startCoalescing(t, engine, up, "")
				rs := sendOverlapping(t, gw, up, g, nil, nil)
				want := []string{"call 1", "call 2"}
				calls := int64(2)
				if tt.shared {
					want, calls = []string{"call 1", "call 1"}, 1
				}
				for i, r := range rs {
					if r.Code != 200 || r.Body != want[i] {
						t.Errorf("request %d: %d %q, want %q", i+1, r.Code, r.Body, want[i])
					}
					if c := r.Header.Get("Set-Cookie"); c != "" && c != "session="+want[i][len("call "):] {
						t.Errorf("request %d got Set-Cookie %q with %q", i+1, c, r.Body)
					}
				}
				if n := up.calls.Load(); n != calls {
					t.Errorf("upstream called %d times, want %d", n, calls)
				}
			})
		})
	}
}

// TestCoalescingHonoursVary sends three requests at once whose X-Tenant is
// a, b, a to an upstream that answers with Vary: X-Tenant: the first
// answer goes to both requests of tenant a, and tenant b's request goes
// upstream itself.
func TestCoalescingHonoursVary(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(3)
		up := callUpstream(t, g, func(int64) http.Header {
			return http.Header{"Vary": {"Accept-Language, x-tenant"}}
		}, "X-Tenant")
		gw := startCoalescing(t, engine, up, "")
		rs := sendOverlapping(t, gw, up, g,
			http.Header{"X-Tenant": {"a"}}, http.Header{"X-Tenant": {"b"}}, http.Header{"X-Tenant": {"a"}})
		for i, want := range []string{`call 1 X-Tenant="a"`, `call 2 X-Tenant="b"`, `call 1 X-Tenant="a"`} {
			if rs[i].Code != 200 || rs[i].Body != want {
				t.Errorf("request %d: %d %q, want %q", i+1, rs[i].Code, rs[i].Body, want)
			}
		}
		if n := up.calls.Load(); n != 2 {
			t.Errorf("upstream called %d times, want 2", n)
		}
	})
}

// TestCoalescingHonoursVaryCGINames: an answer with Vary: X-Tenant is not
// shared between requests that send X_Tenant (which a CGI-style upstream
// reads as X-Tenant) with different values. (They sent no X-Tenant, and
// shared the first tenant's answer.)
func TestCoalescingHonoursVaryCGINames(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		g := newGate(3)
		up := callUpstream(t, g, func(int64) http.Header {
			return http.Header{"Vary": {"x-tenant"}}
		}, "X_tenant")
		gw := startCoalescing(t, engine, up, "")
		rs := sendOverlapping(t, gw, up, g,
			http.Header{"X_tenant": {"a"}}, http.Header{"X_tenant": {"b"}}, http.Header{"X_tenant": {"a"}})
		for i, want := range []string{`call 1 X_tenant="a"`, `call 2 X_tenant="b"`, `call 1 X_tenant="a"`} {
			if rs[i].Code != 200 || rs[i].Body != want {
				t.Errorf("request %d: %d %q, want %q", i+1, rs[i].Code, rs[i].Body, want)
			}
		}
		if n := up.calls.Load(); n != 2 {
			t.Errorf("upstream called %d times, want 2", n)
		}
	})
}

// TestCoalescingSharesAnonymousAnswers checks that identical requests
// without credentials still share one upstream call on both engines.
func TestCoalescingSharesAnonymousAnswers(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		const n = 8
		g := newGate(n)
		up := callUpstream(t, g, func(int64) http.Header {
			return http.Header{"Cache-Control": {"public, max-age=5"}, "Vary": {"Accept-Encoding"}}
		})
		gw := startCoalescing(t, engine, up, "")
		rs := sendOverlapping(t, gw, up, g, make([]http.Header, n)...)
		for i, r := range rs {
			if r.Code != 200 || r.Body != "call 1" {
				t.Errorf("request %d: %d %q, want the shared %q", i+1, r.Code, r.Body, "call 1")
			}
		}
		if calls := up.calls.Load(); calls != 1 {
			t.Errorf("%d identical requests made %d upstream calls, want 1", n, calls)
		}
	})
}

// TestCoalescingEventStream: an event stream (text/event-stream, of no
// length) on a coalescing route reaches its client as it is written, not
// when it ends: it is not shared, as an answer too long to share is not.
func TestCoalescingEventStream(t *testing.T) {
	forEngines(t, func(t *testing.T, engine string) {
		release := make(chan struct{})
		up := startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		gw := startCoalescing(t, engine, up, "")
		defer close(release)
		resp, err := newClient(t).Get(gw.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "data: 1\n" {
			t.Fatalf("first event: %q, %v; want it before the stream ends", line, err)
		}
	})
}
