package gateway

import "bytes"

// Helpers for the tokens and lists of HTTP headers (RFC 9110 section 5.6),
// whose names and list items are ASCII and compared in any case.

// trimSpace returns v without leading and trailing spaces and tabs.
func trimSpace(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// equalName reports whether header name k is name, in any case.
func equalName(k []byte, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := range len(k) {
		if c, d := k[i], name[i]; c != d && (c|0x20 != d|0x20 || c|0x20 < 'a' || c|0x20 > 'z') {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v holds tok, in any
// case.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		item := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if equalName(trimSpace(item), tok) {
			return true
		}
	}
	return false
}
