package gateway_test

import (
	"fmt"
	"strings"
)

// The cases of TestConformance, by family. Where RFC 9112 lets a server
// choose, the expected answer is nginx's (1.22, proxying; see the notes on
// a case). A request the gateway refuses must reach the upstream not at
// all; one it accepts must reach it once, whole, as one message.

// crlfs turns the line feeds of a raw message into CRLF; only the cases
// about bare LF and CR spell their line ends out.
func crlfs(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// smuggled is a whole request hidden in a body: an upstream that reads it as
// a request of its own is out of step with the gateway.
const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

func conformanceCases() []confCase {
	var cases []confCase
	for _, family := range [][]confCase{framingCases(), hopCases(), forwardedCases(), smugglingCases(),
		requestLineCases(), pipeliningCases(), responseCases()} {
		cases = append(cases, family...)
	}
	return cases
}

// post is a POST of /a with the given header lines and body (LF line ends).
func post(headers, body string) string {
	return crlfs("POST /a HTTP/1.1\nHost: x\n"+headers+"\n") + body
}

// bodyA is the upstream message of a POST of /a with body.
func bodyA(body string) []upWant { return []upWant{{method: "POST", target: "/a", body: body}} }

func framingCases() []confCase {
	chunked := "Transfer-Encoding: chunked\n"
	refused := "400|501"
	return []confCase{
		{name: "content-length", req: post("Content-Length: 5\n", "hello"), want: []string{"200 /a"}, up: bodyA("hello"), keep: true},
		{name: "content-length OWS", req: post("Content-Length:  5 \n", "hello"), want: []string{"200 /a"}, up: bodyA("hello"), keep: true},
		{name: "content-length zero", req: post("Content-Length: 0\n", ""), want: []string{"200 /a"}, up: bodyA(""), keep: true},
		{name: "chunked", req: post(chunked, "5\r\nhello\r\n0\r\n\r\n"), want: []string{"200 /a"}, up: bodyA("hello"), keep: true},
		{name: "chunked in pieces", req: post(chunked, "3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n"), want: []string{"200 /a"}, up: bodyA("hello"), keep: true},
		{name: "chunked upper-case hex", req: post(chunked, "A\r\n0123456789\r\n0\r\n\r\n"), want: []string{"200 /a"}, up: bodyA("0123456789"), keep: true},
		{name: "chunked coding in any case", req: post("Transfer-Encoding: ChUnKeD\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{"200 /a"}, up: bodyA("hello"), keep: true},
		{name: "chunk extension", req: post(chunked, "5;ext=1\r\nhello\r\n0;last\r\n\r\n"), want: []string{"200 /a"}, up: bodyA("hello"), keep: true},
		{name: "trailer", req: post(chunked, "5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"), want: []string{"200 /a"}, up: bodyA("hello"), keep: true},
		{name: "chunked GET", req: crlfs("GET /a HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n\n") + "5\r\nhello\r\n0\r\n\r\n",
			want: []string{"200 /a"}, up: []upWant{{method: "GET", target: "/a", body: "hello"}}, keep: true},

		{name: "content-length and chunked", req: post("Content-Length: 5\n"+chunked, "5\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "chunked and content-length", req: post(chunked+"Content-Length: 5\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "two equal content-lengths", req: post("Content-Length: 5\nContent-Length: 5\n", "hello"), want: []string{"400"}},
		{name: "two content-lengths", req: post("Content-Length: 5\nContent-Length: 6\n", "hello!"), want: []string{"400"}},
		{name: "content-length list", req: post("Content-Length: 5, 5\n", "hello"), want: []string{"400"}},
		{name: "content-length plus sign", req: post("Content-Length: +5\n", "hello"), want: []string{"400"}},
		{name: "content-length minus sign", req: post("Content-Length: -5\n", "hello"), want: []string{"400"}},
		{name: "content-length inner space", req: post("Content-Length: 5 5\n", "hello"), want: []string{"400"}},
		{name: "content-length hex", req: post("Content-Length: 0x5\n", "hello"), want: []string{"400"}},
		{name: "content-length empty", req: post("Content-Length:\n", "hello"), want: []string{"400"}},
		{name: "content-length overflow", req: post("Content-Length: 99999999999999999999999\n", "hello"), want: []string{"400|413"}},

		{name: "transfer-encoding gzip", req: post("Transfer-Encoding: gzip\n", "hello"), want: []string{refused}},
		{name: "transfer-encoding identity", req: post("Transfer-Encoding: identity\n", "hello"), want: []string{refused}},
		{name: "transfer-encoding identity with length", req: post("Transfer-Encoding: identity\nContent-Length: 5\n", "hello"), want: []string{refused}},
		{name: "chunked not last", req: post("Transfer-Encoding: chunked, gzip\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{refused}},
		{name: "gzip then chunked", req: post("Transfer-Encoding: gzip, chunked\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{refused}},
		{name: "chunked twice", req: post("Transfer-Encoding: chunked, chunked\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{refused}},
		{name: "two transfer-encodings", req: post(chunked+"Transfer-Encoding: identity\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{refused}},
		{name: "chunked on HTTP/1.0", req: crlfs("POST /a HTTP/1.0\nHost: x\nTransfer-Encoding: chunked\n\n") + "5\r\nhello\r\n0\r\n\r\n", want: []string{"400"}},

		{name: "bad chunk size", req: post(chunked, "g\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "chunk size with sign", req: post(chunked, "+5\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "chunk size 0x", req: post(chunked, "0x5\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "chunk size with space", req: post(chunked, " 5\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "chunk size overflow", req: post(chunked, "fffffffffffffffff5\r\nhello\r\n0\r\n\r\n"), want: []string{"400|413"}},
		{name: "chunk data too long", req: post(chunked, "5\r\nhello!\r\n0\r\n\r\n"), want: []string{"400"}},
		// Found by FuzzForward.
		{name: "chunk data ends without CRLF", req: post(chunked, "5\r\nhelloXX0\r\n\r\n"), want: []string{"400"}},
		{name: "empty chunk size", req: post(chunked, "5\r\nhello\r\n\r\n"), want: []string{"400"}},
		{name: "junk after chunk data", req: post(chunked, "5\r\nhello00\r\n\r\n"), want: []string{"400"}},
		{name: "chunk size line glued to chunk data",
			req: post(chunked, "5\r\nhello3\r\nabc\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "chunk without CRLF", req: post(chunked, "5\r\nhello0\r\n\r\n"), want: []string{"400"}},
	}
}

func hopCases() []confCase {
	return []confCase{
		{name: "connection names a header", req: crlfs("GET /a HTTP/1.1\nHost: x\nConnection: X-Secret\nX-Secret: 1\nX-Other: 2\n\n"),
			want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-Other: 2"}, absent: []string{"X-Secret"}}}},
		{name: "connection names a header in another case", req: crlfs("GET /a HTTP/1.1\nHost: x\nConnection: x-secret\nX-SECRET: 1\n\n"),
			want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", absent: []string{"X-Secret"}}}},
		{name: "two connection headers", req: crlfs("GET /a HTTP/1.1\nHost: x\nConnection: X-A\nConnection: X-B\nX-A: 1\nX-B: 2\n\n"),
			want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", absent: []string{"X-A", "X-B"}}}},
		{name: "connection names content-length", req: post(fmt.Sprintf("Connection: Content-Length\nContent-Length: %d\n", len(smuggled)), smuggled),
			want: []string{"200 /a"}, keep: true, up: bodyA(smuggled)},
		{name: "connection names content-length after it", req: post(fmt.Sprintf("Content-Length: %d\nConnection: keep-alive, content-length\n", len(smuggled)), smuggled),
			want: []string{"200 /a"}, keep: true, up: bodyA(smuggled)},
		{name: "connection names transfer-encoding", req: post("Connection: Transfer-Encoding\nTransfer-Encoding: chunked\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled)),
			want: []string{"200 /a"}, keep: true, up: bodyA(smuggled)},
		{name: "connection names host", req: crlfs("GET /a HTTP/1.1\nHost: x\nConnection: Host\n\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-Forwarded-Host: x"}}}},
		{name: "connection names x-forwarded-for", req: crlfs("GET /a HTTP/1.1\nHost: x\nConnection: X-Forwarded-For\nX-Forwarded-For: 1.2.3.4\n\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-Forwarded-For: 127.0.0.1"}}}},
		{name: "keep-alive", req: crlfs("GET /a HTTP/1.1\nHost: x\nConnection: keep-alive\nKeep-Alive: timeout=5\n\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a"}}},
		{name: "te trailers", req: crlfs("GET /a HTTP/1.1\nHost: x\nTE: trailers\n\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a"}}},
		{name: "upgrade without connection upgrade", req: crlfs("GET /a HTTP/1.1\nHost: x\nUpgrade: foo\n\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a"}}},
		{name: "proxy-connection", req: crlfs("GET /a HTTP/1.1\nHost: x\nProxy-Connection: keep-alive\n\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a"}}},
		{name: "proxy-authorization", req: crlfs("GET /a HTTP/1.1\nHost: x\nProxy-Authorization: Basic eDp5\n\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a"}}},
		{name: "connection close", req: crlfs("GET /a HTTP/1.1\nHost: x\nConnection: close\n\n"),
			want: []string{"200 /a"}, up: []upWant{{method: "GET", target: "/a"}}},
	}
}

func forwardedCases() []confCase {
	ours := []string{"X-Forwarded-For: 127.0.0.1", "X-Forwarded-Proto: http", "X-Forwarded-Host: x"}
	get := func(headers string) string { return crlfs("GET /a HTTP/1.1\nHost: x\n" + headers + "\n") }
	return []confCase{
		{name: "forwarded headers set", req: get(""), want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", hdr: ours}}},
		{name: "forwarded headers replaced", req: get("X-Forwarded-For: 1.2.3.4\nX-Forwarded-Proto: https\nX-Forwarded-Host: evil\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a", hdr: ours}}},
		{name: "duplicate x-forwarded-for", req: get("X-Forwarded-For: 1.2.3.4\nX-Forwarded-For: 5.6.7.8\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a", hdr: ours}}},
		{name: "duplicate x-forwarded-proto", req: get("X-Forwarded-Proto: https\nX-Forwarded-Proto: https\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a", hdr: ours}}},
		{name: "duplicate x-forwarded-host", req: get("X-Forwarded-Host: evil\nX-Forwarded-Host: evil2\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a", hdr: ours}}},
		{name: "forwarded headers in mixed case", req: get("x-forwarded-for: 1.2.3.4\nX-FORWARDED-FOR: 5.6.7.8\nx-Forwarded-proto: https\nX-forwarded-HOST: evil\n"),
			want: []string{"200 /a"}, keep: true, up: []upWant{{method: "GET", target: "/a", hdr: ours}}},
		{name: "x-forwarded-for from a trusted proxy", req: get("X-Forwarded-For: 1.1.1.1\n"), trusted: true,
			want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-Forwarded-For: 1.1.1.1, 127.0.0.1"}}}},
		// RFC 9110 section 5.3: field lines of one name are one list.
		// A trusted proxy in front (one that terminated TLS, say) says how
		// the client reached it; anyone else's say is replaced (above).
		{name: "x-forwarded-proto and -host from a trusted proxy", req: get("X-Forwarded-Proto: https\nX-Forwarded-Host: api.example.com\n"), trusted: true,
			want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-Forwarded-Proto: https", "X-Forwarded-Host: api.example.com"}}}},
		{name: "two x-forwarded-proto from a trusted proxy", req: get("X-Forwarded-Proto: https\nX-Forwarded-Proto: http\n"), trusted: true,
			want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-Forwarded-Proto: https, http", "X-Forwarded-Host: x"}}}},
		{name: "two x-forwarded-for from a trusted proxy", req: get("X-Forwarded-For: 1.1.1.1\nX-Forwarded-For: 2.2.2.2\n"), trusted: true,
			want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-Forwarded-For: 1.1.1.1, 2.2.2.2, 127.0.0.1"}}}},
	}
}

func smugglingCases() []confCase {
	te := func(line string) string { return post(line+"Content-Length: 4\n", "5\r\nhello\r\n0\r\n\r\n") }
	refused := []string{"400|501"}
	return []confCase{
		// CL.TE and TE.CL: the classic pair, refused outright (RFC 9112
		// section 6.3 allows it; nginx 1.21.1 and later do it).
		{name: "CL.TE", req: post("Content-Length: 6\nTransfer-Encoding: chunked\n", "0\r\n\r\nG"), want: refused},
		{name: "TE.CL", req: post("Transfer-Encoding: chunked\nContent-Length: 3\n", "8\r\nSMUGGLED\r\n0\r\n\r\n"), want: refused},
		// TE.TE: an obfuscated Transfer-Encoding that one reader takes for
		// chunked and another does not.
		{name: "TE xchunked", req: te("Transfer-Encoding: xchunked\n"), want: refused},
		{name: "TE chunked after a tab, with CL", req: te("Transfer-Encoding:\tchunked\n"), want: refused},
		{name: "TE chunked, identity", req: te("Transfer-Encoding: chunked, identity\n"), want: refused},
		{name: "TE space before colon", req: te("Transfer-Encoding : chunked\n"), want: []string{"400"}},
		{name: "TE tab before colon", req: te("Transfer-Encoding\t: chunked\n"), want: []string{"400"}},
		{name: "TE name with a space", req: te("Transfer Encoding: chunked\n"), want: []string{"400"}},
		{name: "TE folded", req: te("X: y\n Transfer-Encoding: chunked\n"), want: []string{"400"}},
		{name: "TE value folded", req: te("Transfer-Encoding:\n chunked\n"), want: []string{"400"}},
		{name: "TE with CR in name", req: post("Transfer-Encoding\r: chunked\nContent-Length: 4\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "TE leading space", req: post(" Transfer-Encoding: chunked\nContent-Length: 4\n", "5\r\nhello\r\n0\r\n\r\n"), want: []string{"400"}},
		{name: "CL space before colon", req: post(fmt.Sprintf("Content-Length : %d\n", len(smuggled)), smuggled), want: []string{"400"}},
		{name: "header name with a space", req: crlfs("GET /a HTTP/1.1\nHost: x\nFoo Bar: 1\n\n"), want: []string{"400"}},
		{name: "obs-fold", req: crlfs("GET /a HTTP/1.1\nHost: x\nX-A: 1\n  2\n\n"), want: []string{"400"}},
		// nginx takes a bare LF for a line end (RFC 9112 section 2.2 lets a
		// recipient do so); what goes upstream must still be CRLF.
		{name: "bare LF", req: "GET /a HTTP/1.1\nHost: x\nX-A: 1\n\n", want: []string{"200 /a|400"},
			up: []upWant{{method: "GET", target: "/a", hdr: []string{"X-A: 1"}}}},
		{name: "bare CR in value", req: crlfs("GET /a HTTP/1.1\nHost: x\nX-A: 1\rTransfer-Encoding: chunked\n\n"), want: []string{"400"}},
		{name: "bare CR line end", req: "GET /a HTTP/1.1\rHost: x\r\n\r\n", want: []string{"400"}},
		{name: "NUL in value", req: crlfs("GET /a HTTP/1.1\nHost: x\nX-A: 1\x002\n\n"), want: []string{"400"}},
		{name: "NUL in name", req: crlfs("GET /a HTTP/1.1\nHost: x\nX-\x00A: 1\n\n"), want: []string{"400"}},
		{name: "NUL in target", req: crlfs("GET /a\x00b HTTP/1.1\nHost: x\n\n"), want: []string{"400"}},
		{name: "control character in name", req: crlfs("GET /a HTTP/1.1\nHost: x\nX-\x01A: 1\n\n"), want: []string{"400"}},
	}
}

func requestLineCases() []confCase {
	long := strings.Repeat("a", 40<<10)
	return []confCase{
		// nginx refuses a method that is not upper-case letters (400).
		{name: "lower-case method", req: crlfs("get /a HTTP/1.1\nHost: x\n\n"), want: []string{"400"}},
		{name: "mixed-case method", req: crlfs("Get /a HTTP/1.1\nHost: x\n\n"), want: []string{"400"}},
		// nginx 1.22 answers CONNECT with 400; 405 says the same.
		{name: "CONNECT", req: crlfs("CONNECT x:443 HTTP/1.1\nHost: x:443\n\n"), want: []string{"400|405"}},
		{name: "absolute form", req: crlfs("GET http://x/a?q=1 HTTP/1.1\nHost: x\n\n"), want: []string{"200 /a?q=1"}, keep: true,
			up: []upWant{{method: "GET", target: "/a?q=1"}}},
		// nginx refuses it (400); forwarded, it must stay "*".
		{name: "asterisk", req: crlfs("OPTIONS * HTTP/1.1\nHost: x\n\n"), want: []string{"400|200 *"},
			up: []upWant{{method: "OPTIONS", target: "*"}}},
		{name: "HTTP/1.0", req: crlfs("GET /a HTTP/1.0\n\n"), want: []string{"200 /a"}, up: []upWant{{method: "GET", target: "/a"}}},
		{name: "HTTP/1.0 keep-alive", req: crlfs("GET /a HTTP/1.0\nConnection: keep-alive\n\n"), want: []string{"200 /a"},
			up: []upWant{{method: "GET", target: "/a"}}},
		// nginx answers HTTP/0.9 in kind; the gateway need not speak it.
		{name: "HTTP/0.9", req: "GET /a\r\n", want: []string{"400|505"}},
		{name: "HTTP/2.0 in the request line", req: crlfs("GET /a HTTP/2.0\nHost: x\n\n"), want: []string{"400|505"}},
		// RFC 9112 section 2.3: a later 1.x minor version is served as 1.1
		// (nginx does); a proxy forwards its own version (RFC 9110
		// section 6.2), which checkUpstream checks.
		{name: "HTTP/1.2", req: crlfs("GET /a HTTP/1.2\nHost: x\n\n"), want: []string{"200 /a"}, keep: true,
			up: []upWant{{method: "GET", target: "/a"}}},
		{name: "HTTP/0.0", req: crlfs("GET /a HTTP/0.0\nHost: x\n\n"), want: []string{"400|505"}},
		{name: "HTTP/0.0 without host", req: crlfs("GET /a HTTP/0.0\n\n"), want: []string{"400|505"}},
		// Found by FuzzForward. nginx forwards the target as it came; the
		// gateway normalizes paths (//a is /a when a Host is sent), and
		// refuses //a without a Host, which fasthttp reads as an authority.
		{name: "HTTP/1.0 double-slash target", req: crlfs("GET //a HTTP/1.0\n\n"), want: []string{"400"}},
		{name: "HTTP/1.0 with host", req: crlfs("GET /a HTTP/1.0\nHost: x\n\n"), want: []string{"200 /a"}, up: []upWant{{method: "GET", target: "/a"}}},
		// Found by FuzzForward.
		{name: "HTTP/0.0 POST", req: "POST /a HTTP/0.0\r\nX: 1\r\n\r\n", want: []string{"400|505"}},
		{name: "bad percent-encoding", req: crlfs("GET /a%zz HTTP/1.1\nHost: x\n\n"), want: []string{"400"}},
		{name: "lone percent", req: crlfs("GET /a% HTTP/1.1\nHost: x\n\n"), want: []string{"400"}},
		{name: "lower-case version", req: crlfs("GET /a http/1.1\nHost: x\n\n"), want: []string{"400"}},
		{name: "no host", req: crlfs("GET /a HTTP/1.1\n\n"), want: []string{"400"}},
		{name: "two hosts", req: crlfs("GET /a HTTP/1.1\nHost: x\nHost: y\n\n"), want: []string{"400"}},
		{name: "host with a space", req: crlfs("GET /a HTTP/1.1\nHost: x y\n\n"), want: []string{"400"}},
		// nginx reads several spaces as one (RFC 9112 section 3 lets it).
		{name: "two spaces", req: crlfs("GET  /a HTTP/1.1\nHost: x\n\n"), want: []string{"200 /a|400"},
			up: []upWant{{method: "GET", target: "/a"}}},
		{name: "a fourth word", req: crlfs("GET /a HTTP/1.1 x\nHost: x\n\n"), want: []string{"400"}},
		{name: "space in target", req: crlfs("GET /a b HTTP/1.1\nHost: x\n\n"), want: []string{"400"}},
		{name: "long target", req: crlfs("GET /" + long + " HTTP/1.1\nHost: x\n\n"), want: []string{"414|431"}},
		{name: "long header", req: crlfs("GET /a HTTP/1.1\nHost: x\nX-Long: " + long + "\n\n"), want: []string{"431|400"}},
	}
}

func pipeliningCases() []confCase {
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }
	return []confCase{
		{name: "three GETs in one write", req: get("/1") + get("/2") + get("/3"),
			want: []string{"200 /1", "200 /2", "200 /3"}, keep: true,
			up: []upWant{{method: "GET", target: "/1"}, {method: "GET", target: "/2"}, {method: "GET", target: "/3"}}},
		{name: "bodies in one write", req: post("Content-Length: 5\n", "hello") + get("/2") +
			post("Transfer-Encoding: chunked\n", "3\r\nabc\r\n0\r\n\r\n") + get("/4"),
			want: []string{"200 /a", "200 /2", "200 /a", "200 /4"}, keep: true,
			up: []upWant{{method: "POST", target: "/a", body: "hello"}, {method: "GET", target: "/2"},
				{method: "POST", target: "/a", body: "abc"}, {method: "GET", target: "/4"}}},
		{name: "HEAD between GETs", req: get("/1") + "HEAD /2 HTTP/1.1\r\nHost: x\r\n\r\n" + get("/3"),
			want: []string{"200 /1", "HEAD 200 /2", "200 /3"}, keep: true,
			up: []upWant{{method: "GET", target: "/1"}, {method: "HEAD", target: "/2"}, {method: "GET", target: "/3"}}},
		{name: "a bad request after a good one", req: get("/1") + "GET /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab" + get("/3"),
			want: []string{"200 /1", "400"}, up: []upWant{{method: "GET", target: "/1"}}},
		{name: "close ends the pipeline", req: get("/1") + "GET /2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + get("/3"),
			want: []string{"200 /1", "200 /2"}, up: []upWant{{method: "GET", target: "/1"}, {method: "GET", target: "/2"}}},
	}
}

func responseCases() []confCase {
	get := crlfs("GET /a HTTP/1.1\nHost: x\n\n")
	upGet := []upWant{{method: "GET", target: "/a"}}
	answer := func(raw string) func(upMsg) string { return func(upMsg) string { return raw } }
	return []confCase{
		{name: "response connection names content-length", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nConnection: Content-Length\nContent-Length: 5\n\n") + "hello"),
			want:    []string{"200|502"}, up: upGet},
		{name: "response connection names transfer-encoding", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nConnection: Transfer-Encoding\nTransfer-Encoding: chunked\n\n") + "5\r\nhello\r\n0\r\n\r\n"),
			want:    []string{"200|502"}, up: upGet},
		{name: "response content-length and chunked", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nContent-Length: 100\nTransfer-Encoding: chunked\n\n") + "5\r\nhello\r\n0\r\n\r\n"),
			want:    []string{"200|502"}, up: upGet},
		{name: "response two content-lengths", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nContent-Length: 5\nContent-Length: 7\n\n") + "hello"),
			want:    []string{"502"}, up: upGet},
		{name: "response bad content-length", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nContent-Length: +5\n\n") + "hello"),
			want:    []string{"502"}, up: upGet},
		{name: "response bytes after the body", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nContent-Length: 5\n\n") + "hello" + crlfs("HTTP/1.1 200 OK\nContent-Length: 4\nX-Up-Target: /evil\n\n") + "evil"),
			want:    []string{"200"}, body: "hello", up: upGet},
		{name: "response hop-by-hop headers", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nConnection: X-Secret\nX-Secret: 1\nKeep-Alive: timeout=5\nContent-Length: 5\n\n") + "hello"),
			want:    []string{"200"}, body: "hello", up: upGet, keep: true, answerAbsent: []string{"X-Secret", "Keep-Alive"}},
		// The route has no retry policy: one attempt (the loop makes one).
		{name: "broken response not retried", req: get, respond: answer("0"), closeAfter: true,
			want: []string{"502"}, up: upGet},
		{name: "response obs-fold", req: get,
			respond: answer(crlfs("HTTP/1.1 200 OK\nX-A: 1\n 2\nContent-Length: 5\n\n") + "hello"),
			want:    []string{"200|502"}, up: upGet},
	}
}
