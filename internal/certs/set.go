// Package certs loads the gateway's TLS material from PEM files: the
// server's certificates, chosen by SNI (set.go), and the client side of
// connections to https upstreams (client.go). Files are read once, when a
// configuration is built; a reload builds a new Set, so that a broken file
// leaves the Set in use untouched.
package certs

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// Set is a server's certificates, indexed by the names of their leaves. It
// is never changed once made, and is safe for concurrent use.
type Set struct {
	certs  []*tls.Certificate
	byName map[string]*tls.Certificate // lower-case DNS name or wildcard → the first certificate naming it
}

// Load reads a certificate chain and its private key from PEM files and
// checks that they match.
func Load(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading %s and %s: %w", certFile, keyFile, err)
	}
	return &c, nil
}

// NewSet indexes certs by the DNS names of their leaves; the first is the
// default. It needs at least one certificate, each with its leaf parsed (as
// Load leaves it).
func NewSet(certs []*tls.Certificate) (*Set, error) {
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate")
	}
	s := &Set{certs: certs, byName: map[string]*tls.Certificate{}}
	for i, c := range certs {
		if c.Leaf == nil {
			return nil, fmt.Errorf("certificate %d has no parsed leaf", i)
		}
		for _, name := range c.Leaf.DNSNames {
			name = strings.ToLower(name)
			if s.byName[name] == nil {
				s.byName[name] = c
			}
		}
	}
	return s, nil
}

// Get returns the certificate for a client's hello: the one whose leaf
// names the SNI server name exactly (case aside), else one whose wildcard
// covers it (*.example.com covers a.example.com, not a.b.example.com nor
// example.com), else the first. It fits tls.Config.GetCertificate.
func (s *Set) Get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.TrimSuffix(strings.ToLower(hello.ServerName), ".")
	if name != "" {
		if c := s.byName[name]; c != nil {
			return c, nil
		}
		if i := strings.IndexByte(name, '.'); i > 0 {
			if c := s.byName["*"+name[i:]]; c != nil {
				return c, nil
			}
		}
	}
	return s.certs[0], nil
}
