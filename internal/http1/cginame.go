package http1

// Header names as CGI-style servers read them. WSGI, Rack, PHP and other
// servers of CGI's lineage hand a handler each request header as a
// variable, HTTP_ and the name upper-cased with every '-' made '_': to
// them X-Api-Key, x-api-key and X_Api_Key are one header, whichever of
// their lines wins. Where the gateway tells requests apart by a header, or
// drops a client's header for its own, it reads the name as they do.

// CGINames returns the names a header named name is read under where it
// tells requests apart: name with each '-' or '_' in it either one (name
// first), 2^n names for n of them: the caller bounds n (the gateway's
// configuration allows at most config.MaxKeyHeaderSeparators).
func CGINames(name string) []string {
	names := []string{name}
	for i := range len(name) {
		if name[i] != '-' && name[i] != '_' {
			continue
		}
		for _, n := range names {
			b := []byte(n)
			b[i] = '-' + '_' - b[i] // the other one
			names = append(names, string(b))
		}
	}
	return names
}

// CGIName reports whether header name k is name as CGI-style servers read
// it: in any case, and with '-' and '_' alike.
func CGIName(k []byte, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := range len(k) {
		c, d := k[i], name[i]
		switch {
		case c == d:
		case (c == '-' || c == '_') && (d == '-' || d == '_'):
		case c|0x20 == d|0x20 && c|0x20 >= 'a' && c|0x20 <= 'z':
		default:
			return false
		}
	}
	return true
}
