package http1

import "testing"

// TestDrop lists every name a client could speak for the gateway, the
// connection or the framing with, and which of Drop's inputs let it pass.
func TestDrop(t *testing.T) {
	var (
		plain   = Drop{}
		trusted = Drop{Trusted: true}
		conn    = Drop{Connection: []byte("keep-alive, X-Secret, Content-Length, Host")}
		trace   = Drop{Trace: true}
		trailer = Drop{Trailer: true}
	)
	kinds := []Drop{plain, trusted, conn, trace, trailer}
	for name, want := range map[string][5]bool{ // plain, trusted, conn, trace, trailer
		"X-Forwarded-For": {true, true, true, true, true}, "x-forwarded-host": {true, true, true, true, true},
		"X-Forwarded-Proto": {true, true, true, true, true}, "X_Forwarded_For": {true, true, true, true, true},
		"x_forwarded-host": {true, true, true, true, true}, "X-Forwarded_Proto": {true, true, true, true, true},
		"X-Forwarded-Port": {true, false, true, true, true}, "X_Forwarded_Prefix": {true, false, true, true, true},
		"x-forwarded-ssl": {true, false, true, true, true},
		"X-Real-IP":       {true, true, true, true, true}, "x_real_ip": {true, true, true, true, true},
		"Forwarded":    {true, true, true, true, true},
		"X-Request-Id": {true, true, true, true, true}, "X_Request_Id": {true, true, true, true, true},
		"Connection": {true, true, true, true, true}, "Proxy-Connection": {true, true, true, true, true},
		"Keep-Alive": {true, true, true, true, true}, "Proxy-Authorization": {true, true, true, true, true},
		"Proxy-Authenticate": {true, true, true, true, true}, "TE": {true, true, true, true, true},
		"Trailer": {true, true, true, true, true}, "Transfer-Encoding": {true, true, true, true, true},
		"Upgrade":           {true, true, true, true, true},
		"Transfer_Encoding": {true, true, true, true, true}, "content_length": {true, true, true, true, true},
		"Content-Length": {false, false, false, false, true}, "Host": {false, false, false, false, false},
		"X-Secret":    {false, false, true, false, false},
		"Traceparent": {false, false, false, true, false}, "tracestate": {false, false, false, true, false},
		"X-Api-Key": {false, false, false, false, false}, "X_Api_Key": {false, false, false, false, false},
		"X-Forwarded": {false, false, false, false, false}, "Proxy": {false, false, false, false, false},
	} {
		for i, d := range kinds {
			if got := d.Drops([]byte(name)); got != want[i] {
				t.Errorf("%+v.Drops(%q) = %v, want %v", d, name, got, want[i])
			}
		}
	}
}

// BenchmarkAppendRequest forwards a browser-like request of a dozen
// header lines as the loops do.
func BenchmarkAppendRequest(b *testing.B) {
	raw := "GET /api/items?page=2 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\n" +
		"Accept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\nReferer: https://example.com/\r\n" +
		"Connection: keep-alive\r\nCookie: a=b; c=d\r\nSec-Fetch-Dest: empty\r\nSec-Fetch-Mode: cors\r\nX-Api-Key: k\r\n\r\n"
	var h Request
	if !ParseRequest([]byte(raw), &h) {
		b.Fatal("not plain")
	}
	f := &Forward{Addr: "10.0.0.1:8080", XFF: []byte("192.0.2.1"), ID: []byte("0123456789abcdef0123456789abcdef")}
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendRequest(dst[:0], &h, f, nil)
	}
}
