package http1

import "testing"

func TestEqualName(t *testing.T) {
	for _, c := range []struct {
		k, name string
		want    bool
	}{
		{"Host", "Host", true}, {"host", "Host", true}, {"CONTENT-length", "Content-Length", true},
		{"Hos", "Host", false}, {"Hosts", "Host", false}, {"Ho-t", "Host", false},
		// Only letters match in any case: '@' is '`' with 0x20 set, '[' is '{'.
		{"@", "`", false}, {"[", "{", false}, {"X-1", "x-1", true},
	} {
		if got := EqualName([]byte(c.k), c.name); got != c.want {
			t.Errorf("EqualName(%q, %q) = %v, want %v", c.k, c.name, got, c.want)
		}
	}
}

func TestHasToken(t *testing.T) {
	for _, c := range []struct {
		v, tok string
		want   bool
	}{
		{"close", "close", true}, {"keep-alive, Close", "close", true}, {" \tclose\t ,x", "close", true},
		{"closed", "close", false}, {"", "close", false}, {"x,,y", "close", false}, {"upgrade", "Upgrade", true},
	} {
		if got := HasToken([]byte(c.v), c.tok); got != c.want {
			t.Errorf("HasToken(%q, %q) = %v, want %v", c.v, c.tok, got, c.want)
		}
	}
}

func TestTrimSpace(t *testing.T) {
	for v, want := range map[string]string{"": "", " \t a b \t ": "a b", "x": "x", " \t ": "", "\u00a0x": "\u00a0x"} {
		if got := string(TrimSpace([]byte(v))); got != want {
			t.Errorf("TrimSpace(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestOneList(t *testing.T) {
	one := []byte("a, b")
	if got := OneList([][]byte{one}); &got[0] != &one[0] {
		t.Error("one value copied")
	}
	if got := OneList(nil); got != nil {
		t.Errorf("no value: %q", got)
	}
	if got := string(OneList([][]byte{[]byte("1.1.1.1"), []byte("2.2.2.2, 3.3.3.3")})); got != "1.1.1.1, 2.2.2.2, 3.3.3.3" {
		t.Errorf("two values: %q", got)
	}
}
