package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxKeyLen is the longest key, in bytes, that a Limiter hands its Store
// as it is. A longer key is handed as its first MaxKeyLen-63 bytes and the
// hex SHA-256 of the whole key: MaxKeyLen+1 bytes, longer than any key
// handed as it is, so that two keys never share a state (short of a
// SHA-256 collision), and a key's memory, in a Memory store or in Redis,
// does not grow with the key, which may come from a client (a header's
// value, say).
const MaxKeyLen = 128

// storeKey returns the key a Limiter hands its Store for key (see
// MaxKeyLen).
func storeKey(key string) string {
	if len(key) <= MaxKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	b := make([]byte, 0, MaxKeyLen+1)
	b = append(b, key[:MaxKeyLen+1-2*sha256.Size]...)
	return string(hex.AppendEncode(b, sum[:]))
}
