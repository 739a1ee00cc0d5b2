package requestid_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/requestid"
)

func TestValid(t *testing.T) {
	for _, id := range []string{
		"a", "0d9c8f0e-4b1a-4e5f-9a3b-2c1d0e9f8a7b", "Root=1-67891233-abcdef012345678912345678;Parent=53995c3f42cd8ad8",
		"req_01HZX:abc/def+ghi=", strings.Repeat("x", requestid.MaxLen),
	} {
		if !requestid.Valid(id) || !requestid.Valid([]byte(id)) {
			t.Errorf("Valid(%q) = false, want true", id)
		}
	}
	for _, id := range []string{
		"", strings.Repeat("x", requestid.MaxLen+1), "a b", "a\tb", "a\r\nX-Evil: 1", "a\x00", "caf\xc3\xa9",
		`say "hi"`, `back\slash`, "one,two", "\x7f",
	} {
		if requestid.Valid(id) {
			t.Errorf("Valid(%q) = true, want false", id)
		}
	}
}

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := requestid.New()
		if len(id) != requestid.Len || strings.Trim(id, "0123456789abcdef") != "" || !requestid.Valid(id) {
			t.Fatalf("New() = %q, want %d lowercase hex digits", id, requestid.Len)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q within 1000 ids", id)
		}
		seen[id] = true
	}
}

func TestAppendAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = requestid.Append(buf[:0]) }); n != 0 {
		t.Errorf("Append into a large enough buffer: %v allocations, want 0", n)
	}
}

func BenchmarkAppend(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = requestid.Append(buf[:0])
	}
}
