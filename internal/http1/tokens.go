package http1

import "bytes"

// TrimSpace returns v without leading and trailing spaces and tabs.
func TrimSpace(v []byte) []byte {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// EqualName reports whether header name k is name, in any case.
func EqualName(k []byte, name string) bool {
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

// HasToken reports whether the comma-separated list v holds tok, in any
// case.
func HasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		item := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if EqualName(TrimSpace(item), tok) {
			return true
		}
	}
	return false
}

// OneList returns the values of the headers of one name as one list:
// several headers of a name are one comma-separated list (RFC 9110
// section 5.3). One header's value is returned as it is, without copying;
// several are joined into a new slice.
func OneList(values [][]byte) []byte {
	switch len(values) {
	case 0:
		return nil
	case 1:
		return values[0]
	}
	return bytes.Join(values, []byte(", "))
}
