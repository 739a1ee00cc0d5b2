// Package requestid reads and makes request ids: the X-Request-Id a
// client sends is kept when it is well formed, and a new one is made
// otherwise, so that the log line, the span and the upstream all name a
// request the same way.
package requestid

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// Header is the request header that carries the id, to the gateway and
// from it to the upstream.
const Header = "X-Request-Id"

// MaxLen is the longest id kept from a client.
const MaxLen = 128

// Valid reports whether id, a client's X-Request-Id, is kept: 1 to MaxLen
// bytes of visible ASCII (0x21 to 0x7E) but '"', '\\' and ',', so that it
// needs no quoting in a log and is one value of one header.
func Valid[T string | []byte](id T) bool {
	if len(id) == 0 || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' || c == ',' {
			return false
		}
	}
	return true
}

// Len is the length of a new id.
const Len = 32

// Append appends a new id to dst and returns the extended slice: Len
// lowercase hex digits of 128 random bits. It allocates only to grow dst.
func Append(dst []byte) []byte {
	var b [Len / 2]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.AppendEncode(dst, b[:])
}

// New returns a new id as a string.
func New() string {
	var b [Len]byte
	return string(Append(b[:0]))
}
