package answer

import (
	"strconv"
	"time"
)

// AppendPolicy appends a RateLimit-Policy value in the structured-field form
// of the IETF httpapi ratelimit-headers draft to dst, for example
// `"default";q=100;w=60`: the policy's name ("" means "default"; see
// AppendName), its quota q, and its window w in seconds rounded up, left
// out when window is zero or less. A negative q counts as zero.
func AppendPolicy(dst []byte, name string, q int, window time.Duration) []byte {
	dst = AppendName(dst, name)
	dst = strconv.AppendInt(append(dst, ";q="...), int64(max(q, 0)), 10)
	if window > 0 {
		dst = strconv.AppendInt(append(dst, ";w="...), CeilSeconds(window), 10)
	}
	return dst
}

// AppendRateLimit appends a RateLimit value to dst, for example
// `"default";r=42;t=30`: the policy's name (as AppendPolicy), the units r
// remaining, and the delay t until the quota is restored in seconds rounded
// up. A negative r counts as zero.
func AppendRateLimit(dst []byte, name string, r int, reset time.Duration) []byte {
	dst = AppendName(dst, name)
	dst = strconv.AppendInt(append(dst, ";r="...), int64(max(r, 0)), 10)
	return strconv.AppendInt(append(dst, ";t="...), CeilSeconds(reset), 10)
}

// AppendName appends a policy name as a structured-field string (RFC 9651,
// section 3.3.3): "default" for "", printable ASCII only (other bytes are
// dropped), '"' and '\' escaped. A name, such as a route's, can hold
// anything; what it appends is always one valid header value.
func AppendName(dst []byte, name string) []byte {
	if name == "" {
		name = "default"
	}
	dst = append(dst, '"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20 && c <= 0x7e:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
