package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/config"
)

// response returns an upstream response read whole with status code, the
// headers kv (name, value, ...) and body.
func response(code int, body string, kv ...string) *fasthttp.Response {
	var r fasthttp.Response
	r.SetStatusCode(code)
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	r.SetBodyString(body)
	return &r
}

func getRequest(kv ...string) *fasthttp.RequestHeader {
	var h fasthttp.RequestHeader
	h.SetMethod("GET")
	h.SetRequestURI("/a")
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &h
}

// TestKeepable checks which answers a last-good fallback may keep: a
// shareable 2xx read whole, to a GET; never a private one.
func TestKeepable(t *testing.T) {
	for _, tt := range []struct {
		name string
		resp *fasthttp.Response
		req  *fasthttp.RequestHeader
		keep bool
	}{
		{"200", response(200, "ok"), getRequest(), true},
		{"204", response(204, ""), getRequest(), true},
		{"206", response(206, "o"), getRequest(), false},
		{"404", response(404, "no"), getRequest(), false},
		{"503", response(503, "down"), getRequest(), false},
		{"set-cookie", response(200, "ok", "Set-Cookie", "id=1"), getRequest(), false},
		{"private", response(200, "ok", "Cache-Control", "max-age=5, private"), getRequest(), false},
		{"no-store", response(200, "ok", "Cache-Control", "No-Store"), getRequest(), false},
		{"vary star", response(200, "ok", "Vary", "*"), getRequest(), false},
		{"post", response(200, "ok"), func() *fasthttp.RequestHeader { h := getRequest(); h.SetMethod("POST"); return h }(), false},
	} {
		if got := keepable(tt.resp, tt.req) != nil; got != tt.keep {
			t.Errorf("%s: kept %v, want %v", tt.name, got, tt.keep)
		}
	}
	streamed := response(200, "")
	streamed.SetBodyStream(strings.NewReader("a long body"), -1)
	if keepable(streamed, getRequest()) != nil {
		t.Errorf("a streamed answer was kept")
	}
	sr := keepable(response(200, "ok", "RateLimit", `"r";r=1;t=1`, "RateLimit-Policy", `"r";q=2;w=1`, "X-Kept", "yes"), getRequest())
	for _, kv := range sr.headers {
		if strings.HasPrefix(string(kv[0]), "Ratelimit") || strings.HasPrefix(string(kv[0]), "RateLimit") {
			t.Errorf("kept the request's own header %s", kv[0])
		}
	}
}

// TestLastGoodBounds checks the age, entry and byte bounds of the answers
// kept, and that an answer goes only to requests whose Vary headers match.
func TestLastGoodBounds(t *testing.T) {
	fc := clock.NewFake(time.Time{})
	l := newLastGood(&config.LastGood{MaxAge: config.Duration(time.Minute), MaxEntries: 3, MaxBytes: 4 * 1024}, fc)
	ok := func(body string) *sharedResponse { return keepable(response(200, body), getRequest()) }

	l.keep("a", ok("A"))
	fc.Advance(time.Minute)
	if sr, age := l.answer("a", getRequest()); sr == nil || string(sr.body) != "A" || age != time.Minute {
		t.Fatalf("at max age: %v, %v; want A, 1m", sr, age)
	}
	fc.Advance(time.Nanosecond)
	if sr, _ := l.answer("a", getRequest()); sr != nil {
		t.Fatalf("past max age: answered %q", sr.body)
	}
	if n, b := l.len(); n != 0 || b != 0 {
		t.Fatalf("after expiry: %d answers, %d bytes kept; want none", n, b)
	}

	// Entries: the least recently used goes first.
	l.keep("a", ok("A"))
	l.keep("b", ok("B"))
	l.keep("c", ok("C"))
	l.answer("a", getRequest()) // a is now the most recently used
	l.keep("d", ok("D"))
	for key, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if sr, _ := l.answer(key, getRequest()); (sr != nil) != want {
			t.Errorf("after a fourth key: %s kept %v, want %v", key, sr != nil, want)
		}
	}

	// Bytes: a large answer pushes out others; one over the bound is not
	// kept, and drops the key's older answer.
	l.keep("big", ok(strings.Repeat("x", 3*1024)))
	if sr, _ := l.answer("big", getRequest()); sr == nil {
		t.Errorf("a 3 KiB answer was not kept")
	}
	if n, b := l.len(); n > 3 || b > 4*1024 {
		t.Errorf("with a 3 KiB answer: %d answers of %d bytes, want at most 3 within 4096", n, b)
	}
	l.keep("big2", ok(strings.Repeat("y", 3*1024)))
	if n, b := l.len(); n != 1 || b > 4*1024 {
		t.Errorf("with two 3 KiB answers: %d answers of %d bytes, want the last alone within 4096", n, b)
	}
	l.keep("big", ok(strings.Repeat("x", 5*1024)))
	if sr, _ := l.answer("big", getRequest()); sr != nil {
		t.Errorf("an answer over max_bytes was kept")
	}

	// Vary: the answer goes only to requests with the same values.
	l.keep("v", keepable(response(200, "fr", "Vary", "Accept-Language"), getRequest("Accept-Language", "fr")))
	if sr, _ := l.answer("v", getRequest("Accept-Language", "de")); sr != nil {
		t.Errorf("an answer that varies by Accept-Language went to a request for another language")
	}
	if sr, _ := l.answer("v", getRequest("Accept-Language", "fr")); sr == nil {
		t.Errorf("an answer was withheld from a request with the same Accept-Language")
	}
}
