package gateway_test

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
)

// pathsUpstream is an upstream that answers "ok" and records the paths it
// was asked for, in order.
type pathsUpstream struct {
	*upstream
	mu    sync.Mutex
	paths []string
}

func startPathsUpstream(t *testing.T, before func(w http.ResponseWriter, r *http.Request)) *pathsUpstream {
	u := &pathsUpstream{}
	u.upstream = startUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.paths = append(u.paths, r.URL.Path)
		u.mu.Unlock()
		if before != nil {
			before(w, r)
		}
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	})
	return u
}

func (u *pathsUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.paths)
}
