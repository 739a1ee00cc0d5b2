package config

import (
	"fmt"
	"strings"
)

// Source is where a route reads something of each request, decoded once
// from its text: "ip" (the client's address), "route" (the route itself:
// one value for all of its requests) or "header:NAME" (a request header).
// rate_limit.key and priority.from are Sources.
type Source struct {
	Kind SourceKind
	// Header is the header's name, an RFC 9110 token, when Kind is
	// SourceHeader; "" otherwise.
	Header string
}

// SourceKind says which of a Source's forms it is.
type SourceKind uint8

// The forms of a Source.
const (
	SourceIP SourceKind = iota
	SourceRoute
	SourceHeader
)

// UnmarshalText decodes "ip", "route" or "header:NAME".
func (s *Source) UnmarshalText(b []byte) error {
	text := string(b)
	switch name, header := strings.CutPrefix(text, "header:"); {
	case header && !isToken(name):
		return fmt.Errorf("%q is not a header name (RFC 9110 token: letters, digits and !#$%%&'*+-.^_`|~)", name)
	case header:
		*s = Source{Kind: SourceHeader, Header: name}
	case text == "ip":
		*s = Source{Kind: SourceIP}
	case text == "route":
		*s = Source{Kind: SourceRoute}
	default:
		return fmt.Errorf(`want "ip", "route" or "header:NAME", got %q`, text)
	}
	return nil
}

// MarshalText is UnmarshalText's inverse.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// String is the Source's text as a configuration gives it.
func (s Source) String() string {
	switch s.Kind {
	case SourceRoute:
		return "route"
	case SourceHeader:
		return "header:" + s.Header
	}
	return "ip"
}
