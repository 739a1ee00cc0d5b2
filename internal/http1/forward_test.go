package http1

import "testing"

func TestForwardedAddr(t *testing.T) {
	for entry, want := range map[string]string{
		"192.0.2.1":            "192.0.2.1",
		" 192.0.2.1\t":         "192.0.2.1",
		"192.0.2.1:4711":       "192.0.2.1",
		"2001:db8::1":          "2001:db8::1",
		"[2001:db8::1]:4711":   "2001:db8::1",
		"[2001:db8::1]":        "2001:db8::1",
		"::ffff:192.0.2.1":     "192.0.2.1",
		"[::ffff:192.0.2.1]:1": "192.0.2.1",
		"fe80::1%eth0":         "fe80::1%eth0",
		"unknown":              "",
		"_hidden":              "",
		"":                     "",
		"192.0.2.1:99999":      "",
		"192.0.2.1:":           "",
		"[192.0.2.1]":          "",
		"[192.0.2.1]:1":        "",
		"[2001:db8::1":         "",
		"example.com":          "",
		"example.com:80":       "",
	} {
		a, ok := ForwardedAddr([]byte(entry))
		if got := a.String(); ok != (want != "") || ok && got != want {
			t.Errorf("ForwardedAddr(%q) = %s, %v; want %q", entry, got, ok, want)
		}
	}
}
