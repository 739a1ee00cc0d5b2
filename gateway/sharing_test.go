package gateway

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func TestPrivateCacheControl(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{
		{"private", true},
		{"PRIVATE", true},
		{"no-store", true},
		{"max-age=60,no-store", true},
		{" public ,\tPrivate ", true},
		{`private="Set-Cookie, X-A"`, true},
		{`no-cache="a", no-store`, true},
		{`x="\"", private`, true},          // an escaped quote inside the argument
		{`x = "a, b" , private = 1`, true}, // spaces around "="
		{"", false},
		{"public, max-age=60", false},
		{"no-cache", false},
		{"privates, no-storage, x-private", false},
		{`x="private, no-store"`, false},
		{`x="unterminated, private`, false}, // all of it is the quoted argument
		{"x=private", false},                // a token argument, not a directive
		{"=private", false},
	} {
		if got := privateCacheControl([]byte(tt.v)); got != tt.want {
			t.Errorf("privateCacheControl(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestCoalescingKeyUnambiguous checks that moving bytes from one field of
// the key to the next changes the key.
func TestCoalescingKeyUnambiguous(t *testing.T) {
	key := func(uri, auth, limitKey string, vary ...string) string {
		var h fasthttp.RequestHeader
		h.SetMethod("GET")
		h.SetHost("example.com")
		h.SetRequestURI(uri)
		if auth != "" {
			h.Set("Authorization", auth)
		}
		h.Set("X-Tenant", "t")
		return coalescingKey(&h, limitKey, vary)
	}
	keys := map[string]string{}
	for name, k := range map[string]string{
		"base":              key("/a", "", ""),
		"auth":              key("/a", "b", ""),
		"uri":               key("/ab", "", ""),
		"limit key":         key("/a", "", "b"),
		"auth and limit":    key("/a", "b", "b"),
		"vary":              key("/a", "", "", "X-Tenant"),
		"vary, other names": key("/a", "", "", "X-Other"),
	} {
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s have the same key %q", name, other, k)
		}
		keys[k] = name
	}
}
