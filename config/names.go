package config

import (
	"net/netip"
	"sort"
	"strings"
)

// isToken reports whether s is an RFC 9110 token (§5.6.2), the syntax of
// header names and methods: one or more of letters, digits and
// !#$%&'*+-.^_`|~.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isHeaderValue reports whether s can be a header's value as a request
// carries it (RFC 9110 §5.5): no control characters but tab, and no space or
// tab at either end, which a request's value never has.
func isHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return strings.Trim(s, " \t") == s
}

// checkHost returns why h cannot be a route's match.host, or "" if it can:
// a DNS name (letters, digits, '-' and '_' in dot-separated labels of 1 to
// 63 characters), an IPv4 address, or an IPv6 address in brackets. The host
// is matched without the request's port, so it has none.
func checkHost(h string) string {
	if strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "a host name has no spaces or control characters"
	}
	if strings.HasPrefix(h, "[") {
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		if err != nil || !strings.HasSuffix(h, "]") || !a.Is6() {
			return "want an IPv6 address in brackets such as [::1]"
		}
		return ""
	}
	if _, err := netip.ParseAddr(h); err == nil {
		if strings.Contains(h, ":") {
			return "an IPv6 address is written in brackets, as in a Host header: [::1]"
		}
		return ""
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		return "the host is matched without the request's port: give the name alone"
	}
	if len(h) > 253 {
		return "a host name has at most 253 characters"
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return "want a host name of dot-separated labels of 1 to 63 characters"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "a host name has only letters, digits, '-', '_' and dots"
			}
		}
	}
	return ""
}

// isLoopback reports whether the host of a listen address is on the
// loopback interface: localhost or a loopback IP. An empty host is every
// interface.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// isToken68 reports whether s has the syntax of a bearer token (RFC 6750
// §2.1, token68 in RFC 9110 §11.2): letters, digits and -._~+/, then
// optional '=' padding.
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}
