package config_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestProtocolsRefused checks the TLS listener's and the upstream
// protocols' settings: each mistake is an error at its value that names the
// YAML path.
func TestProtocolsRefused(t *testing.T) {
	tests := []struct {
		name, src string
		at        string // the text the error's position points at (its last occurrence in src)
		want      string
	}{
		{"tls without listen", base + "tls: {certificates: [{cert_file: c.pem, key_file: k.pem}]}\n", "{certificates",
			`tls.listen: want host:port, got ""`},
		{"tls on the plaintext address", base + "listen: 127.0.0.1:8443\ntls: {listen: 127.0.0.1:8443, certificates: [{cert_file: c.pem, key_file: k.pem}]}\n", "127.0.0.1:8443,",
			`tls.listen: "127.0.0.1:8443" is the plaintext listen address too`},
		{"tls without certificates", base + "tls: {listen: 127.0.0.1:8443, certificates: []}\n", "[]",
			`tls.certificates: want at least one certificate (cert_file and key_file)`},
		{"certificate without key", base + "tls: {listen: 127.0.0.1:8443, certificates: [{cert_file: c.pem}]}\n", "{cert_file",
			`tls.certificates[0].key_file: want the path of a PEM private key file`},
		{"tls version", base + "tls: {listen: 127.0.0.1:8443, certificates: [{cert_file: c.pem, key_file: k.pem}], min_version: \"1.1\"}\n", "\"1.1\"",
			`tls.min_version: "1.1" is not one of 1.2, 1.3`},
		{"protocol", "upstreams:\n  a: {targets: [\"http://127.0.0.1:1\"], protocol: h3}\nroutes: [{name: r, upstream: a}]\n", "h3",
			`upstreams.a.protocol: "h3" is not one of http1, h2c, h2`},
		{"h2 to http", "upstreams:\n  a: {protocol: h2, targets: [\"http://127.0.0.1:1\"]}\nroutes: [{name: r, upstream: a}]\n", "\"http://",
			`upstreams.a.targets[0]: protocol h2 is HTTP/2 over TLS: want an https:// target, got "http://127.0.0.1:1"`},
		{"h2c to https", "upstreams:\n  a: {protocol: h2c, targets: [\"https://127.0.0.1:1\"]}\nroutes: [{name: r, upstream: a}]\n", "\"https://",
			`upstreams.a.targets[0]: protocol h2c is HTTP/2 without TLS: want an http:// target, got "https://127.0.0.1:1" (use h2 for https)`},
		{"tls to http", "upstreams:\n  a: {tls: {server_name: x}, targets: [\"http://127.0.0.1:1\"]}\nroutes: [{name: r, upstream: a}]\n", "\"http://",
			`upstreams.a.targets[0]: tls is set: want an https:// target, got "http://127.0.0.1:1"`},
		{"client cert without key", "upstreams:\n  a: {targets: [\"https://127.0.0.1:1\"], tls: {cert_file: c.pem}}\nroutes: [{name: r, upstream: a}]\n", "{cert_file",
			`upstreams.a.tls: a client certificate needs both cert_file and key_file`},
		{"streams", base + "server: {http2: {max_concurrent_streams: 0}}\n", "0}",
			`server.http2.max_concurrent_streams: want between 1 and 10000, got 0`},
		{"stream buffer", base + "server: {http2: {max_stream_buffer_bytes: 1024}}\n", "1024",
			`server.http2.max_stream_buffer_bytes: want between 65536 and 4194304 bytes, got 1024`},
		{"held bodies", base + "server: {max_held_body_bytes: -1}\n", "-1",
			`server.max_held_body_bytes: cannot be negative`},
		{"connections", base + "server: {max_connections: -1}\n", "-1",
			`server.max_connections: cannot be negative`},
		{"connections per client", base + "server: {max_connections_per_client: -1}\n", "-1",
			`server.max_connections_per_client: cannot be negative`},
		{"websockets per connection", base + "server: {http2: {max_websockets_per_connection: 0}}\n", "0}",
			`server.http2.max_websockets_per_connection: want between 1 and 10000, got 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("c.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.src)
			}
			if want := textPos(t, tc.src, tc.at) + tc.want; err.Error() != want {
				t.Errorf("error:\n%v\nwant:\n%s", err, want)
			}
		})
	}
}

// TestProtocolsDefaults checks the defaults of the TLS listener, HTTP/2
// limits and upstream protocol, and that relative file paths are read from
// the configuration file's directory.
func TestProtocolsDefaults(t *testing.T) {
	c, err := config.Parse(filepath.Join("/etc", "sluice", "s.yaml"), []byte(`
tls:
  listen: 127.0.0.1:8443
  certificates: [{cert_file: cert.pem, key_file: /abs/key.pem}]
upstreams:
  a: {targets: ["https://127.0.0.1:1"], tls: {ca_file: ca.pem}}
routes: [{name: r, upstream: a}]
`))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"min version", c.TLS.MinVersion, "1.2"},
		{"cert file", c.TLS.Certificates[0].CertFile, "/etc/sluice/cert.pem"},
		{"absolute key file", c.TLS.Certificates[0].KeyFile, "/abs/key.pem"},
		{"ca file", c.Upstreams["a"].TLS.CAFile, "/etc/sluice/ca.pem"},
		{"protocol", c.Upstreams["a"].Protocol, "http1"},
		{"streams", c.Server.HTTP2.MaxConcurrentStreams, 250},
		{"stream buffer", c.Server.HTTP2.MaxStreamBufferBytes, 1 << 20},
		{"websockets per connection", c.Server.HTTP2.MaxWebSocketsPerConnection, 100},
		{"held bodies", c.Server.MaxHeldBodyBytes, 64 << 20},
		{"connections", c.Server.MaxConnections, 10000},
		{"HTTP/2 on the loops", c.Server.HTTP2.Loops, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if got, want := c.Files(), []string{"/etc/sluice/cert.pem", "/abs/key.pem", "/etc/sluice/ca.pem"}; !slices.Equal(got, want) {
		t.Errorf("Files() = %q, want %q", got, want)
	}
	if c, err := config.Parse("c.yaml", []byte(base)); err != nil || c.TLS != nil {
		t.Errorf("no tls section: %v, %v; want no TLS listener", c, err)
	}
	for _, src := range []string{
		"upstreams:\n  a: {protocol: h2, targets: [\"https://127.0.0.1:1\"], tls: {insecure_skip_verify: true}}\nroutes: [{name: r, upstream: a}]\n",
		"upstreams:\n  a: {protocol: h2c, targets: [\"http://127.0.0.1:1\"]}\nroutes: [{name: r, upstream: a}]\n",
		base + "tls: {listen: 127.0.0.1:8443, min_version: \"1.3\", certificates: [{cert_file: c.pem, key_file: k.pem}, {cert_file: d.pem, key_file: e.pem}]}\n",
	} {
		if _, err := config.Parse("c.yaml", []byte(src)); err != nil {
			t.Errorf("refused:\n%s\n%v", src, err)
		}
	}
}

// textPos returns "c.yaml:line:col: " of the last occurrence of text in src.
func textPos(t *testing.T, src, text string) string {
	t.Helper()
	i := strings.LastIndex(src, text)
	if i < 0 {
		t.Fatalf("no %s in:\n%s", text, src)
	}
	line := strings.Count(src[:i], "\n") + 1
	col := i - strings.LastIndex(src[:i], "\n")
	return fmt.Sprintf("c.yaml:%d:%d: ", line, col)
}

// TestHTTP2LoopsDefault: server.http2.loops defaults to true with the loop
// engine and to false with the goroutine engine, and a value the file
// gives, false included, is kept.
func TestHTTP2LoopsDefault(t *testing.T) {
	cases := []struct {
		server string
		want   bool
	}{
		{"{}", true},
		{"{engine: loop}", true},
		{"{engine: goroutine}", false},
		{"{http2: {loops: false}}", false},
		{"{engine: loop, http2: {loops: false}}", false},
		{"{engine: loop, http2: {loops: true}}", true},
		{"{engine: loop, http2: {loops: null}}", true},
		{"{engine: goroutine, http2: {loops: true}}", true},
	}
	for _, tc := range cases {
		c, err := config.Parse("h2.yaml", []byte(`
server: `+tc.server+`
upstreams: {a: {targets: ["http://127.0.0.1:1"]}}
routes: [{name: r, upstream: a}]
`))
		if err != nil {
			t.Fatalf("server %s: %v", tc.server, err)
		}
		if got := c.Server.HTTP2.Loops; got != tc.want {
			t.Errorf("server %s: http2.loops = %v, want %v", tc.server, got, tc.want)
		}
	}
}
