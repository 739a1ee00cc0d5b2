package gateway

import (
	"bytes"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/http1"
)

// routeRules are a route's changes to its requests and their upstream
// responses (config.Route's rewrite, headers and preserve_host), applied
// after routing and after the hop-by-hop headers are dropped, alike on
// both engines: exchange.prepare and sendResponse apply them to fasthttp's
// messages, http1.AppendRequest and http1.AppendResponse to the loops'
// bytes.
type routeRules struct {
	strip, add   string // the path's prefixes to strip, then to add; "" when none
	request      headerEdit
	response     headerEdit
	preserveHost bool // the upstream sees the client's Host
}

// headerEdit is a config.HeaderEdit ready to apply: remove, then set, then
// add.
type headerEdit struct {
	remove   []string
	set, add [][2]string // name and value, by name
	// cgi says that the names removed and set are taken out under the
	// names CGI-style servers read as them too (any case, '_' for '-':
	// X_Secret for X-Secret, see http1.CGIName), as a request's are: such
	// an upstream reads the client's X_Secret as the X-Secret the route
	// removed, or its X_User beside or in place of the X-User the route
	// set.
	cgi bool
}

// newRouteRules returns rc's rules, or nil when it has none.
func newRouteRules(rc *config.Route) *routeRules {
	if rc.Rewrite == nil && rc.Headers == nil && !rc.PreserveHost {
		return nil
	}
	r := &routeRules{preserveHost: rc.PreserveHost}
	if rw := rc.Rewrite; rw != nil {
		r.strip, r.add = rw.StripPrefix, rw.AddPrefix
	}
	if h := rc.Headers; h != nil {
		r.request, r.response = newHeaderEdit(&h.Request), newHeaderEdit(&h.Response)
		r.request.cgi = true
	}
	return r
}

func newHeaderEdit(e *config.HeaderEdit) headerEdit {
	he := headerEdit{remove: e.Remove}
	for _, n := range slices.Sorted(maps.Keys(e.Set)) {
		he.set = append(he.set, [2]string{n, e.Set[n]})
	}
	for _, n := range slices.Sorted(maps.Keys(e.Add)) {
		he.add = append(he.add, [2]string{n, e.Add[n]})
	}
	return he
}

// editable is the methods of fasthttp's request and response headers that
// a headerEdit uses.
type editable interface {
	Del(key string)
	Set(key, value string)
	Add(key, value string)
}

var (
	_ editable = (*fasthttp.RequestHeader)(nil)
	_ editable = (*fasthttp.ResponseHeader)(nil)
	_ editable = http.Header(nil)
)

// apply makes e's changes to h.
func (e *headerEdit) apply(h editable) {
	if e.cgi {
		e.removeForms(h)
	}
	for _, k := range e.remove {
		h.Del(k)
	}
	for _, kv := range e.set {
		h.Set(kv[0], kv[1])
	}
	for _, kv := range e.add {
		h.Add(kv[0], kv[1])
	}
}

// removeForms deletes from h, a request's header, every field e takes out
// (see cgi and drops), under whichever of its names it came.
func (e *headerEdit) removeForms(h editable) {
	var names []string
	switch h := h.(type) {
	case *fasthttp.RequestHeader:
		for k := range h.All() {
			if e.drops(k) {
				names = append(names, string(k))
			}
		}
	case http.Header:
		for k := range h {
			if e.drops([]byte(k)) {
				delete(h, k)
			}
		}
	}
	for _, k := range names {
		h.Del(k)
	}
}

// drops reports whether e takes out the header named k: it removes or
// sets it (under one of the names CGI-style servers read as it, with
// cgi).
func (e *headerEdit) drops(k []byte) bool {
	same := http1.EqualName
	if e.cgi {
		same = http1.CGIName
	}
	for _, n := range e.remove {
		if same(k, n) {
			return true
		}
	}
	for _, kv := range e.set {
		if same(k, kv[0]) {
			return true
		}
	}
	return false
}

// appendLines appends the header lines e sets and adds, but for the
// RateLimit headers when rateLimited (the rate limit's own replace them, as
// sendResponse keeps them on the goroutine engine).
func (e *headerEdit) appendLines(dst []byte, rateLimited bool) []byte {
	for _, kvs := range [2][][2]string{e.set, e.add} {
		for _, kv := range kvs {
			if !rateLimited || !(strings.EqualFold(kv[0], "RateLimit") || strings.EqualFold(kv[0], "RateLimit-Policy")) {
				dst = append(append(append(append(dst, kv[0]...), ": "...), kv[1]...), "\r\n"...)
			}
		}
	}
	return dst
}

// rewrite returns path with the rules' prefixes stripped and added (path
// itself when there are none).
func (r *routeRules) rewrite(path []byte) []byte {
	if r.strip == "" && r.add == "" {
		return path
	}
	return r.appendPath(make([]byte, 0, len(r.add)+len(path)), path)
}

// appendPath appends path with the rules' prefixes stripped and added. The
// strip prefix comes off only at a segment boundary: /v1 strips /v1 and
// /v1/x, not /v10; a path that was the prefix alone becomes "/".
func (r *routeRules) appendPath(dst, path []byte) []byte {
	if n := len(r.strip); n > 0 && len(path) >= n && string(path[:n]) == r.strip && (len(path) == n || path[n] == '/') {
		path = path[n:]
		if len(path) == 0 {
			path = slash
		}
	}
	return append(append(dst, r.add...), path...)
}

var slash = []byte("/")

// setRewrittenPath makes u's path, decoded and normalized as the route
// matched it, the rules' rewrite of it. fasthttp's SetPathBytes decodes
// the path it is given, and RequestURI encodes it again: given the
// rewrite itself, a path whose encoding encodes a '%'
// (/pub/%252e%252e/admin, matched as /pub/%2e%2e/admin) was decoded
// twice, and went upstream as /admin. It is given the rewrite with each
// '%' encoded, which it decodes to the rewrite (a normalized path that
// normalizing leaves as it is); a path without one is given as it is.
func setRewrittenPath(u *fasthttp.URI, r *routeRules) {
	p := r.rewrite(u.Path())
	if bytes.IndexByte(p, '%') >= 0 {
		p = bytes.ReplaceAll(p, percent, percentEncoded)
	}
	u.SetPathBytes(p)
}

var percent, percentEncoded = []byte("%"), []byte("%25")

// lineEdit is a headerEdit as the loops' http1.AppendRequest and
// http1.AppendResponse take it.
type lineEdit headerEdit

func (e *lineEdit) Drops(k []byte) bool { return (*headerEdit)(e).drops(k) }
func (e *lineEdit) AppendLines(dst []byte, rateLimited bool) []byte {
	return (*headerEdit)(e).appendLines(dst, rateLimited)
}

// pathRewrite is routeRules as http1.AppendRequest takes them.
type pathRewrite routeRules

func (r *pathRewrite) AppendPath(dst, path []byte) []byte {
	return (*routeRules)(r).appendPath(dst, path)
}
func (r *pathRewrite) KeepHost() bool { return r.preserveHost }

var (
	_ http1.Edit    = (*lineEdit)(nil)
	_ http1.Rewrite = (*pathRewrite)(nil)
)
