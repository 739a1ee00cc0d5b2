package http1

import "bytes"

// PlainPath reports whether p is an absolute path that needs no
// normalizing: only unreserved characters, sub-delimiters, ':', '@' and
// '/', and no empty, "." or ".." segment.
func PlainPath(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !pathChar[c] {
			return false
		}
		if c != '/' || i+1 == len(p) {
			continue
		}
		seg := p[i+1:]
		if j := bytes.IndexByte(seg, '/'); j >= 0 {
			seg = seg[:j]
		}
		if len(seg) == 0 || string(seg) == "." || string(seg) == ".." {
			return false
		}
	}
	return true
}

// ipLiteralEnd returns the index of the ']' that ends the bracketed IPv6
// address v starts with (hex digits, ':' and '.' inside), or -1 when v
// does not start with one.
func ipLiteralEnd(v []byte) int {
	end := bytes.IndexByte(v, ']')
	if len(v) == 0 || v[0] != '[' || end < 2 {
		return -1
	}
	for _, c := range v[1:end] {
		if !hexChar[c] && c != ':' && c != '.' {
			return -1
		}
	}
	return end
}

// PlainHost reports whether v is a host name, an IPv4 address or a
// bracketed IPv6 address, with an optional port.
func PlainHost(v []byte) bool {
	var rest []byte // the port with its colon
	if len(v) > 0 && v[0] == '[' {
		end := ipLiteralEnd(v)
		if end < 0 {
			return false
		}
		rest = v[end+1:]
	} else {
		name := v
		if i := bytes.IndexByte(v, ':'); i >= 0 {
			name, rest = v[:i], v[i:]
		}
		if len(name) == 0 {
			return false
		}
		for _, c := range name {
			if !hostChar[c] {
				return false
			}
		}
	}
	return len(rest) == 0 || (rest[0] == ':' && len(rest) <= 6 && ContentLength(rest[1:]) >= 0)
}

// PlainQuery reports whether q has only the characters a query may have.
func PlainQuery(q []byte) bool {
	for _, c := range q {
		if !pathChar[c] && c != '?' && c != '%' {
			return false
		}
	}
	return true
}

// PercentEncoded reports whether every '%' in target is followed by two
// hex digits.
func PercentEncoded(target []byte) bool {
	for i := bytes.IndexByte(target, '%'); i >= 0; i = bytes.IndexByte(target, '%') {
		if len(target) < i+3 || !hexChar[target[i+1]] || !hexChar[target[i+2]] {
			return false
		}
		target = target[i+3:]
	}
	return true
}
