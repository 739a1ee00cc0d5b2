package gateway

import (
	"bytes"
	"maps"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/sluicehq/sluice/config"
)

// routeRules are a route's changes to its requests and their upstream
// responses (config.Route's rewrite, headers and preserve_host), applied
// after routing and after the hop-by-hop headers are dropped.
type routeRules struct {
	strip, add   []byte // the path's prefixes to strip, then to add; nil when none
	request      headerEdit
	response     headerEdit
	preserveHost bool // the upstream sees the client's Host
}

// headerEdit is a config.HeaderEdit ready to apply: remove, then set, then
// add.
type headerEdit struct {
	remove   [][]byte
	set, add [][2][]byte // name and value
}

// newRouteRules returns rc's rules, or nil when it has none.
func newRouteRules(rc *config.Route) *routeRules {
	if rc.Rewrite == nil && rc.Headers == nil && !rc.PreserveHost {
		return nil
	}
	r := &routeRules{preserveHost: rc.PreserveHost}
	if rw := rc.Rewrite; rw != nil {
		r.strip, r.add = nonEmpty(rw.StripPrefix), nonEmpty(rw.AddPrefix)
	}
	if h := rc.Headers; h != nil {
		r.request, r.response = newHeaderEdit(&h.Request), newHeaderEdit(&h.Response)
	}
	return r
}

func nonEmpty(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func newHeaderEdit(e *config.HeaderEdit) headerEdit {
	var he headerEdit
	for _, n := range e.Remove {
		he.remove = append(he.remove, []byte(n))
	}
	for _, n := range slices.Sorted(maps.Keys(e.Set)) {
		he.set = append(he.set, [2][]byte{[]byte(n), []byte(e.Set[n])})
	}
	for _, n := range slices.Sorted(maps.Keys(e.Add)) {
		he.add = append(he.add, [2][]byte{[]byte(n), []byte(e.Add[n])})
	}
	return he
}

// editable is the methods of fasthttp's request and response headers that
// a headerEdit uses.
type editable interface {
	DelBytes(key []byte)
	SetBytesKV(key, value []byte)
	AddBytesKV(key, value []byte)
}

var (
	_ editable = (*fasthttp.RequestHeader)(nil)
	_ editable = (*fasthttp.ResponseHeader)(nil)
)

// apply makes e's changes to h.
func (e *headerEdit) apply(h editable) {
	for _, k := range e.remove {
		h.DelBytes(k)
	}
	for _, kv := range e.set {
		h.SetBytesKV(kv[0], kv[1])
	}
	for _, kv := range e.add {
		h.AddBytesKV(kv[0], kv[1])
	}
}

// rewrite returns path with the rules' prefixes stripped and added (path
// itself when there are none). The strip prefix comes off only at a segment
// boundary: /v1 strips /v1 and /v1/x, not /v10.
func (r *routeRules) rewrite(path []byte) []byte {
	if r.strip == nil && r.add == nil {
		return path
	}
	if rest, ok := bytes.CutPrefix(path, r.strip); r.strip != nil && ok && (len(rest) == 0 || rest[0] == '/') {
		path = rest
		if len(path) == 0 {
			path = []byte("/")
		}
	}
	if r.add == nil {
		return path
	}
	return append(append(make([]byte, 0, len(r.add)+len(path)), r.add...), path...)
}
