package gateway_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/hex"
	"hash"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testpki"
)

// TestLoopTLSKeyUpdatesUnread has a TLS 1.3 client that reads nothing
// send KeyUpdate messages that ask the server to update its keys too
// (crypto/tls answers each with one of its own, written on the loop),
// with a byte of a request's head between every fifteen (crypto/tls
// refuses more in a row). The loop must not keep those answers without
// bound, as it keeps no more than maxPendingOut of responses a client
// leaves unread: its connection closes, or what it holds for the client
// stays small. The gateway's socket has a small send buffer (the
// listener's, which its connections inherit), so that a few times
// maxPendingOut of answers are past what the kernel takes.
func TestLoopTLSKeyUpdatesUnread(t *testing.T) {
	ca := testpki.NewCA(t)
	up := startUpstream(t, "up", nil)
	tg := tlsGateway(t, "loop", "read_header_timeout: 1h, write_timeout: 1h", certList(ca.Server("127.0.0.1")), up.URL)
	// Small buffers on both sides, set before the connection opens, keep
	// the kernel from taking much of what the gateway sends.
	lc := net.ListenConfig{Control: sockBuffer(syscall.SO_SNDBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLSOn(t, tg, ln)
	d := net.Dialer{Timeout: waitLimit, Control: sockBuffer(syscall.SO_RCVBUF)}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var keys bytes.Buffer
	sc := tls.Client(nc, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		NextProtos: []string{"http/1.1"}, KeyLogWriter: &keys})
	_ = nc.SetDeadline(time.Now().Add(waitLimit))
	if err := sc.Handshake(); err != nil {
		t.Fatal(err)
	}
	w := newRecordWriter(t, sc.ConnectionState().CipherSuite, keys.String())

	const limit = 512 << 10 // maxPendingOut, and room for one read event's answers
	var out []byte
	out = w.seal(out, 23, []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Pad: "))
	// 60000 KeyUpdates, each answered with a record of 27 bytes: 1.6 MB,
	// six times maxPendingOut, past what the kernel's buffers of 4 KiB
	// take.
	for range 4000 {
		for range 15 {
			out = w.keyUpdate(out)
		}
		out = w.seal(out, 23, []byte("a"))
		if len(out) >= 64<<10 {
			if _, err := nc.Write(out); err != nil {
				break // closed by the gateway
			}
			out = out[:0]
		}
	}
	deadline := time.Now().Add(waitLimit)
	for {
		conns, held, ok := gateway.LoopTLSOutbound(tg.Gateway, waitLimit)
		if !ok {
			t.Fatal("the loops did not answer")
		}
		if held > limit {
			t.Fatalf("a loop holds %d bytes for a client that reads nothing, want at most %d", held, limit)
		}
		if conns == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sockBuffer is a dialer's or listener's Control that sets the socket's
// option opt (SO_SNDBUF or SO_RCVBUF) to 4 KiB.
func sockBuffer(opt int) func(_, _ string, rc syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// recordWriter writes a TLS 1.3 client's records itself, after
// crypto/tls's handshake, with the client's application traffic secret
// taken from the key log: application data and KeyUpdate messages.
type recordWriter struct {
	t      *testing.T
	hash   func() hash.Hash
	keyLen int
	secret []byte
	aead   cipher.AEAD
	iv     []byte
	seq    uint64
}

func newRecordWriter(t *testing.T, suite uint16, keyLog string) *recordWriter {
	w := &recordWriter{t: t}
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		w.hash, w.keyLen = sha256.New, 16
	case tls.TLS_AES_256_GCM_SHA384:
		w.hash, w.keyLen = sha512.New384, 32
	default:
		t.Fatalf("cipher suite %s: the test writes AES-GCM records only", tls.CipherSuiteName(suite))
	}
	for line := range strings.Lines(keyLog) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "CLIENT_TRAFFIC_SECRET_0" {
			s, err := hex.DecodeString(f[2])
			if err != nil {
				t.Fatal(err)
			}
			w.rekey(s)
			return w
		}
	}
	t.Fatal("no client traffic secret in the key log")
	return nil
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context.
func (w *recordWriter) expandLabel(secret []byte, label string, n int) []byte {
	label = "tls13 " + label
	info := append([]byte{byte(n >> 8), byte(n), byte(len(label))}, label...)
	info = append(info, 0)
	b, err := hkdf.Expand(w.hash, secret, string(info), n)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

func (w *recordWriter) rekey(secret []byte) {
	w.secret = secret
	block, err := aes.NewCipher(w.expandLabel(secret, "key", w.keyLen))
	if err != nil {
		w.t.Fatal(err)
	}
	if w.aead, err = cipher.NewGCM(block); err != nil {
		w.t.Fatal(err)
	}
	w.iv, w.seq = w.expandLabel(secret, "iv", 12), 0
}

// seal appends to b a record of content type typ holding content.
func (w *recordWriter) seal(b []byte, typ byte, content []byte) []byte {
	inner := append(bytes.Clone(content), typ)
	hdr := []byte{23, 3, 3, byte((len(inner) + 16) >> 8), byte(len(inner) + 16)}
	nonce := bytes.Clone(w.iv)
	for i := range 8 {
		nonce[4+i] ^= byte(w.seq >> (56 - 8*i))
	}
	w.seq++
	return w.aead.Seal(append(b, hdr...), nonce, inner, hdr)
}

// keyUpdate appends a KeyUpdate that asks the server to update its keys
// too, and updates the client's.
func (w *recordWriter) keyUpdate(b []byte) []byte {
	b = w.seal(b, 22, []byte{24, 0, 0, 1, 1})
	w.rekey(w.expandLabel(w.secret, "traffic upd", w.hash().Size()))
	return b
}
