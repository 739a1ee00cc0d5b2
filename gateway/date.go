package gateway

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Every answer of the gateway carries a Date of its own, the time it
// leaves (RFC 9110 section 6.6.1), whether it is the gateway's or a
// target's: nginx and fasthttp do the same, so both engines answer alike.

// dateLine is the Date header line for one second of the wall clock.
type dateLine struct {
	sec  int64
	line []byte // "Date: Tue, 01 Dec 2026 16:01:20 GMT\r\n"
}

var lastDate atomic.Pointer[dateLine] // the line of the last second asked for

// dateHeader returns the Date header line of now, CRLF included; the line
// is made at most once a second, and must not be changed.
func dateHeader(now time.Time) []byte {
	d := lastDate.Load()
	if d == nil || d.sec != now.Unix() {
		line := now.UTC().AppendFormat([]byte("Date: "), http.TimeFormat)
		d = &dateLine{sec: now.Unix(), line: append(line, "\r\n"...)}
		lastDate.Store(d)
	}
	return d.line
}
