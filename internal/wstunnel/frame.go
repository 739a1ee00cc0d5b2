package wstunnel

import (
	"crypto/rand"
	"encoding/binary"
)

// CloseGoingAway is the WebSocket close code 1001 (RFC 6455 section
// 7.4.1): the endpoint is going away, as a server that shuts down.
const CloseGoingAway = 1001

// frames follows the WebSocket frames (RFC 6455 section 5.2) of one
// direction of a connection as its bytes pass, without keeping them, so
// that a frame of the tunnel's own is only ever sent between two frames.
// The zero value is at the start of a frame.
type frames struct {
	hdr  [14]byte // the header read so far: at most 2 + 8 + 4 bytes
	n    int      // bytes of hdr read
	left uint64   // payload bytes still to pass of the current frame
	// closed: a close frame began; nothing may follow it.
	closed bool
}

// feed follows p, the next bytes of the direction.
func (f *frames) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			k := min(uint64(len(p)), f.left)
			f.left -= k
			p = p[k:]
			continue
		}
		f.hdr[f.n] = p[0]
		f.n++
		p = p[1:]
		if f.n >= 2 && f.n == f.headerLen() {
			f.left, f.n = f.payloadLen(), 0
			f.closed = f.closed || f.hdr[0]&0x0f == 0x8
		}
	}
}

// between reports whether the bytes so far end a frame.
func (f *frames) between() bool { return f.n == 0 && f.left == 0 }

// headerLen is the length of the current frame's header, read from its
// second byte: the mask bit and the 7-bit length (126: 16 bits follow;
// 127: 64 bits follow).
func (f *frames) headerLen() int {
	n := 2
	switch f.hdr[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if f.hdr[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// payloadLen is the current frame's payload length, once its header is
// whole.
func (f *frames) payloadLen() uint64 {
	switch l := f.hdr[1] & 0x7f; l {
	case 126:
		return uint64(binary.BigEndian.Uint16(f.hdr[2:4]))
	case 127:
		return binary.BigEndian.Uint64(f.hdr[2:10])
	default:
		return uint64(l)
	}
}

// closeFrame returns a close frame with code and no reason: masked, as a
// client sends it, when masked is true (to the upstream); plain, as a
// server sends it, otherwise (to the client).
func closeFrame(code uint16, masked bool) []byte {
	if !masked {
		return []byte{0x88, 2, byte(code >> 8), byte(code)}
	}
	var key [4]byte
	_, _ = rand.Read(key[:]) // never fails (crypto/rand)
	return []byte{0x88, 0x80 | 2, key[0], key[1], key[2], key[3], byte(code>>8) ^ key[0], byte(code) ^ key[1]}
}
