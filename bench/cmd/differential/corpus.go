package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// testCase is one client connection's bytes, sent at once, or with h2 an
// HTTP/2 request, sent to the TLS proxies alone.
type testCase struct {
	name string
	raw  string
	h2   *h2Request
}

// crlf turns the line feeds of s into CRLF; cases about bare LF and CR
// spell their line ends out.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// smuggled is a request hidden in a body: an upstream that reads it as a
// request of its own is out of step with the proxy.
const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

// post is a POST of /a with the header lines (LF ends) and body.
func post(headers, body string) string {
	return crlf("POST /a HTTP/1.1\nHost: x\n"+headers+"\n") + body
}

// get is a GET of target with the header lines (LF ends).
func get(target, headers string) string {
	return crlf("GET " + target + " HTTP/1.1\nHost: x\n" + headers + "\n")
}

// next is a plain request pipelined after a case's first one.
const next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"

// builtinCases is the corpus: request smuggling and the other requests a
// proxy and its upstream may read differently. Values that claim to be
// the client's address, host or id carry "evil", so that report can tell
// a spoofed header from the proxy's own.
func builtinCases() []testCase {
	te := "Transfer-Encoding: chunked\n"
	hidden := fmt.Sprint(len(smuggled))
	long := strings.Repeat("a", 9000)
	return rawCases([]struct{ name, raw string }{
		// Framing: Content-Length and Transfer-Encoding.
		{"plain get", get("/a", "")},
		{"content-length", post("Content-Length: 5\n", "hello")},
		{"chunked", post(te, "5\r\nhello\r\n0\r\n\r\n")},
		{"cl+te", post("Content-Length: 4\n"+te, "5\r\nhello\r\n0\r\n\r\n")},
		{"te+cl", post(te+"Content-Length: 4\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"cl.te smuggle", post("Content-Length: 6\n"+te, "0\r\n\r\nG"+next)},
		{"te.cl smuggle", post(te+"Content-Length: 3\n", "8\r\nSMUGGLED\r\n0\r\n\r\n")},
		{"two content-lengths", post("Content-Length: 5\nContent-Length: 6\n", "hello!")},
		{"two equal content-lengths", post("Content-Length: 5\nContent-Length: 5\n", "hello")},
		{"content-length list", post("Content-Length: 5, 5\n", "hello")},
		{"content-length plus", post("Content-Length: +5\n", "hello")},
		{"content-length leading zeros", post("Content-Length: 005\n", "hello")},
		{"content-length overflow", post("Content-Length: 18446744073709551621\n", "hello")},
		{"content-length hex", post("Content-Length: 0x5\n", "hello")},
		{"content-length trailing junk", post("Content-Length: 5x\n", "hello")},
		{"content-length tab", post("Content-Length:\t5\t\n", "hello")},
		{"content-length empty", post("Content-Length:\n", "")},
		{"te chunked, identity", post("Transfer-Encoding: chunked, identity\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te identity, chunked", post("Transfer-Encoding: identity, chunked\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te identity", post("Transfer-Encoding: identity\nContent-Length: 5\n", "hello")},
		{"te chunked twice", post("Transfer-Encoding: chunked\nTransfer-Encoding: chunked\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te chunked + gzip lines", post(te+"Transfer-Encoding: gzip\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te xchunked", post("Transfer-Encoding: xchunked\nContent-Length: 5\n", "hello")},
		{"te chunked-false", post("Transfer-Encoding: chunked-false\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te space before colon", post("Transfer-Encoding : chunked\nContent-Length: 5\n", "0\r\n\r\n")},
		{"te tab before value", post("Transfer-Encoding:\tchunked\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te vertical tab", post("Transfer-Encoding: \vchunked\nContent-Length: 5\n", "0\r\n\r\n")},
		{"te obs-fold", post("Transfer-Encoding:\n chunked\nContent-Length: 5\n", "0\r\n\r\n")},
		{"te quoted", post("Transfer-Encoding: \"chunked\"\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te upper", post("Transfer-Encoding: CHUNKED\n", "5\r\nhello\r\n0\r\n\r\n")},
		{"te on http/1.0", crlf("POST /a HTTP/1.0\nHost: x\n"+te+"\n") + "5\r\nhello\r\n0\r\n\r\n"},
		{"te_ underscore", post("Transfer_Encoding: chunked\nContent-Length: 5\n", "0\r\n\r\n")},
		{"te_ underscore smuggle", post("Transfer_Encoding: chunked\nContent-Length: "+fmt.Sprint(5+len(smuggled))+"\n", "0\r\n\r\n"+smuggled)},
		{"content_length underscore", crlf("GET /a HTTP/1.1\nHost: x\nContent_Length: "+hidden+"\n\n") + smuggled},

		// Chunks.
		{"chunk extension", post(te, "5;a=b\r\nhello\r\n0;c\r\n\r\n")},
		{"chunk extension quoted", post(te, "5;a=\"b;c\"\r\nhello\r\n0\r\n\r\n")},
		{"chunk extension bare LF", post(te, "5;a\nhello\r\n0\r\n\r\n")},
		{"chunk size leading zeros", post(te, "0005\r\nhello\r\n0000\r\n\r\n")},
		{"chunk size overflow", post(te, "10000000000000005\r\nhello\r\n0\r\n\r\n")},
		{"chunk size 0x", post(te, "0x5\r\nhello\r\n0\r\n\r\n")},
		{"chunk size space", post(te, "5 \r\nhello\r\n0\r\n\r\n")},
		{"chunk size tab", post(te, "5\t\r\nhello\r\n0\r\n\r\n")},
		{"chunk size negative", post(te, "-5\r\nhello\r\n0\r\n\r\n")},
		{"chunk data longer", post(te, "3\r\nhello\r\n0\r\n\r\n")},
		{"chunk end bare LF", post(te, "5\r\nhello\n0\r\n\r\n")},
		{"chunk end missing", post(te, "5\r\nhello0\r\n\r\n")},
		{"chunk size bare LF", post(te, "5\nhello\r\n0\n\n")},
		{"trailer", post(te, "5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n")},
		{"trailer content-length", post(te, "5\r\nhello\r\n0\r\nContent-Length: 40\r\n\r\n"+next)},
		{"trailer obs-fold", post(te, "5\r\nhello\r\n0\r\nX-T: 1\r\n folded\r\n\r\n")},
		{"trailer bare LF", post(te, "5\r\nhello\r\n0\r\nX-T: 1\n\r\n")},
		{"chunked smuggle in body", post(te, fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled))},
		{"last chunk then more", post(te, "0\r\n\r\n"+smuggled)},

		// Header lines.
		{"space before colon", get("/a", "X-A : 1\n")},
		{"host space before colon", crlf("GET /a HTTP/1.1\nHost : evil\n\n")},
		{"obs-fold", get("/a", "X-A: 1\n 2\n")},
		{"obs-fold first line", crlf("GET /a HTTP/1.1\n X-A: 1\nHost: x\n\n")},
		{"bare LF", "GET /a HTTP/1.1\nHost: x\nX-A: 1\n\n"},
		{"bare CR", "GET /a HTTP/1.1\rHost: x\r\n\r\n"},
		{"bare CR in value", get("/a", "X-A: 1\rX-B: 2\n")},
		{"NUL in value", get("/a", "X-A: a\x00b\n")},
		{"NUL in name", get("/a", "X-\x00A: 1\n")},
		{"DEL in value", get("/a", "X-A: a\x7fb\n")},
		{"control in value", get("/a", "X-A: a\x01b\n")},
		{"high bytes in value", get("/a", "X-A: caf\xc3\xa9\xff\n")},
		{"empty name", get("/a", ": 1\n")},
		{"name with space", get("/a", "X A: 1\n")},
		{"name with slash", get("/a", "X/A: 1\n")},
		{"no colon", get("/a", "X-A 1\n")},
		{"underscore name", get("/a", "X_A: 1\n")},
		{"long header line", get("/a", "X-Long: "+long+"\n")},
		{"long target", get("/"+long, "")},
		{"many headers", get("/a", strings.Repeat("X-Many: 1\n", 150))},

		// Host.
		{"duplicate host", crlf("GET /a HTTP/1.1\nHost: x\nHost: evil\n\n")},
		{"no host", crlf("GET /a HTTP/1.1\n\n")},
		{"empty host", crlf("GET /a HTTP/1.1\nHost:\n\n")},
		{"host with path", crlf("GET /a HTTP/1.1\nHost: x/evil\n\n")},
		{"host with userinfo", crlf("GET /a HTTP/1.1\nHost: evil@x\n\n")},
		{"host with space", crlf("GET /a HTTP/1.1\nHost: x evil\n\n")},
		{"host bad port", crlf("GET /a HTTP/1.1\nHost: x:evil\n\n")},
		{"absolute-form", crlf("GET http://evil/a HTTP/1.1\nHost: x\n\n")},
		{"absolute-form https", crlf("GET https://evil/a?q=1 HTTP/1.1\nHost: x\n\n")},
		{"absolute-form no host", crlf("GET http://evil/a HTTP/1.1\n\n")},
		{"absolute-form http/1.0", crlf("GET http://evil/a HTTP/1.0\n\n")},
		{"authority-form get", crlf("GET evil:80 HTTP/1.1\nHost: x\n\n")},
		{"double slash target", crlf("GET //evil/a HTTP/1.1\nHost: x\n\n")},
		{"host_ underscore", crlf("GET /a HTTP/1.1\nHost: x\nHost_: evil\n\n")},

		// Request line.
		{"http/1.0", crlf("GET /a HTTP/1.0\nHost: x\n\n")},
		{"http/1.0 keep-alive", crlf("GET /a HTTP/1.0\nHost: x\nConnection: keep-alive\n\n") + next},
		{"http/0.9", "GET /a\r\n\r\n"},
		{"http/2.0 line", crlf("GET /a HTTP/2.0\nHost: x\n\n")},
		{"http/1.2", crlf("GET /a HTTP/1.2\nHost: x\n\n")},
		{"lower-case method", crlf("get /a HTTP/1.1\nHost: x\n\n")},
		{"unknown method", crlf("PURGE /a HTTP/1.1\nHost: x\n\n")},
		{"method with body GET", crlf("GET /a HTTP/1.1\nHost: x\nContent-Length: "+hidden+"\n\n") + smuggled},
		{"HEAD with body", crlf("HEAD /a HTTP/1.1\nHost: x\nContent-Length: "+hidden+"\n\n") + smuggled},
		{"DELETE with body", crlf("DELETE /a HTTP/1.1\nHost: x\nContent-Length: 5\n\n") + "hello"},
		{"OPTIONS *", crlf("OPTIONS * HTTP/1.1\nHost: x\n\n")},
		{"CONNECT", crlf("CONNECT evil:443 HTTP/1.1\nHost: evil:443\n\n")},
		{"TRACE", crlf("TRACE /a HTTP/1.1\nHost: x\n\n")},
		{"two spaces", crlf("GET  /a HTTP/1.1\nHost: x\n\n")},
		{"tab separator", crlf("GET\t/a\tHTTP/1.1\nHost: x\n\n")},
		{"space in target", crlf("GET /a b HTTP/1.1\nHost: x\n\n")},
		{"fragment in target", crlf("GET /a#frag HTTP/1.1\nHost: x\n\n")},
		{"bad percent", crlf("GET /a%zz HTTP/1.1\nHost: x\n\n")},
		{"encoded slash", crlf("GET /a%2f..%2fb HTTP/1.1\nHost: x\n\n")},
		{"dot segments", crlf("GET /a/../b HTTP/1.1\nHost: x\n\n")},
		{"backslash", crlf("GET /a\\..\\b HTTP/1.1\nHost: x\n\n")},
		{"NUL in target", crlf("GET /a\x00b HTTP/1.1\nHost: x\n\n")},
		{"high byte in target", crlf("GET /caf\xc3\xa9 HTTP/1.1\nHost: x\n\n")},
		{"leading empty lines", "\r\n\r\n" + get("/a", "")},

		// Connection, Expect, Upgrade.
		{"connection close + cl", post("Connection: close, Content-Length\nContent-Length: "+hidden+"\n", smuggled) + next},
		{"connection names host", post("Connection: Host\nContent-Length: 5\n", "hello")},
		{"connection names x-forwarded-for", get("/a", "Connection: X-Forwarded-For\nX-Forwarded-For: evil\n")},
		{"connection close pipelined", get("/a", "Connection: close\n") + next},
		{"expect 100-continue", post("Expect: 100-continue\nContent-Length: 5\n", "hello")},
		{"expect unknown", post("Expect: evil\nContent-Length: 5\n", "hello")},
		{"upgrade h2c", get("/a", "Connection: Upgrade, HTTP2-Settings\nUpgrade: h2c\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\n")},
		{"upgrade h2c then request", get("/a", "Connection: Upgrade\nUpgrade: h2c\n") + next},
		{"upgrade websocket no key", get("/a", "Connection: Upgrade\nUpgrade: websocket\n") + next},
		{"upgrade without connection", get("/a", "Upgrade: websocket\n") + next},
		{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},

		// Pipelining.
		{"pipelined", get("/a", "") + next},
		{"pipelined after refusal", post("Content-Length: 5\nContent-Length: 6\n", "hello!") + next},
		{"pipelined after bad chunk", post(te, "g\r\nhello\r\n0\r\n\r\n") + next},
		{"pipelined after 505", crlf("GET /a HTTP/3.0\nHost: x\n\n") + next},
		{"pipelined body exact", post("Content-Length: 5\n", "hello") + next},

		// Headers an upstream reads as the proxy's.
		{"x-forwarded-for", get("/a", "X-Forwarded-For: evil\n")},
		{"x-forwarded-for twice", get("/a", "X-Forwarded-For: evil\nX-Forwarded-For: evil2\n")},
		{"x_forwarded_for", get("/a", "X_Forwarded_For: evil\n")},
		{"x-forwarded-for case", get("/a", "x-FORWARDED-for: evil\n")},
		{"x-forwarded-host", get("/a", "X-Forwarded-Host: evil\n")},
		{"x_forwarded_host", get("/a", "X_Forwarded_Host: evil\n")},
		{"x-forwarded-proto", get("/a", "X-Forwarded-Proto: evil\n")},
		{"x_forwarded_proto", get("/a", "X_Forwarded_Proto: evil\n")},
		{"x-real-ip", get("/a", "X-Real-IP: evil\n")},
		{"x_real_ip", get("/a", "X_Real_IP: evil\n")},
		{"forwarded", get("/a", "Forwarded: for=evil;host=evil\n")},
		{"x-request-id", get("/a", "X-Request-Id: evil\n")},
		{"x_request_id", get("/a", "X_Request_Id: evil\n")},
		{"x-request-id twice", get("/a", "X-Request-Id: a\nX-Request-Id: evil\n")},
		{"x-forwarded-for obs-fold", get("/a", "X-Forwarded-For: 1.2.3.4\n evil\n")},
		{"x-forwarded-for space before colon", get("/a", "X-Forwarded-For : evil\n")},
		{"x-original-url", get("/a", "X-Original-URL: /evil\nX-Rewrite-URL: /evil\n")},
		{"x-forwarded-port prefix", get("/a", "X-Forwarded-Port: 6666\nX-Forwarded-Prefix: /evil\n")},
		{"trailer x-forwarded-for", post(te, "5\r\nhello\r\n0\r\nX-Forwarded-For: evil\r\n\r\n")},
		{"trailer host", post(te, "5\r\nhello\r\n0\r\nHost: evil\r\n\r\n")},
		{"trailer x-request-id", post(te, "5\r\nhello\r\n0\r\nX-Request-Id: evil\r\n\r\n")},
		{"trailer transfer-encoding", post(te, "5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n"+next)},
		{"announced trailer x-forwarded-for", post(te+"Trailer: X-Forwarded-For\n", "5\r\nhello\r\n0\r\nX-Forwarded-For: evil\r\n\r\n")},

		// More of the same families.
		{"http/1.0 no host", "GET /a HTTP/1.0\r\n\r\n"},
		{"http/1.0 keep-alive body", crlf("POST /a HTTP/1.0\nConnection: keep-alive\nContent-Length: 5\n\n") + "hello" + next},
		{"content-length obs-fold", post("Content-Length:\n 5\n", "hello")},
		{"content-length space before colon", post("Content-Length : 5\n", "hello")},
		{"content-length zero get smuggle", crlf("GET /a HTTP/1.1\nHost: x\nContent-Length: 0\n\n") + smuggled},
		{"chunk extension CR", post(te, "5;a\rb\r\nhello\r\n0\r\n\r\n")},
		{"chunk extension long", post(te, "5;"+strings.Repeat("a", 5000)+"\r\nhello\r\n0\r\n\r\n")},
		{"chunk extension NUL", post(te, "5;a\x00\r\nhello\r\n0\r\n\r\n")},
		{"expect without body", get("/a", "Expect: 100-continue\n")},
		{"host trailing dot", crlf("GET /a HTTP/1.1\nHost: x.\n\n")},
		{"host underscore", crlf("GET /a HTTP/1.1\nHost: x_y\n\n")},
		{"host tab", crlf("GET /a HTTP/1.1\nHost:\tx\n\n")},
		{"host percent", crlf("GET /a HTTP/1.1\nHost: x%2fevil\n\n")},
		{"host ipv6", crlf("GET /a HTTP/1.1\nHost: [::1]:80\n\n")},
		{"host comma", crlf("GET /a HTTP/1.1\nHost: x, evil\n\n")},
		{"host quote", crlf("GET /a HTTP/1.1\nHost: x\"evil\n\n")},
		{"host backslash", crlf("GET /a HTTP/1.1\nHost: x\\evil\n\n")},
		{"connection close keep-alive", get("/a", "Connection: close, keep-alive\n") + next},
		{"proxy-connection", get("/a", "Proxy-Connection: keep-alive\nKeep-Alive: timeout=5\nTE: trailers\n")},
		{"connection names te", get("/a", "Connection: TE\nTE: trailers\n")},
		{"upgrade with body", post("Connection: Upgrade\nUpgrade: websocket\nContent-Length: "+hidden+"\n", smuggled)},
		{"method long", crlf("GETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGETGET /a HTTP/1.1\nHost: x\n\n")},
		{"method override", get("/a", "X-HTTP-Method-Override: DELETE\n")},
	})
}

func rawCases(cs []struct{ name, raw string }) []testCase {
	out := make([]testCase, len(cs))
	for i, c := range cs {
		out[i] = testCase{name: c.name, raw: c.raw}
	}
	return out
}

// seedCases reads the Go fuzz corpus files under dirs (go test fuzz v1,
// one []byte or string value) as cases named after their file.
func seedCases(dirs []string) ([]testCase, error) {
	var cases []testCase
	for _, dir := range dirs {
		files, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("seeds: %w", err)
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				return nil, fmt.Errorf("seeds: %w", err)
			}
			lines := strings.SplitN(string(b), "\n", 3)
			if len(lines) < 2 || lines[0] != "go test fuzz v1" {
				continue
			}
			v := strings.TrimSpace(lines[1])
			v = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(v, "[]byte("), "string("), ")")
			raw, err := strconv.Unquote(v)
			if err != nil {
				continue
			}
			cases = append(cases, testCase{name: "seed " + filepath.Base(dir) + "/" + f.Name(), raw: raw})
		}
	}
	return cases, nil
}
