package upstream

import (
	"io"
	"testing"
)

// TestBodyEndCounts: a read counts once the next read comes, or at once
// when it reached the end; the last read before a failed write does not.
func TestBodyEndCounts(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reads []int
		errs  []error
		want  int64
	}{
		{"read to its end", []int{10, 20, 0}, []error{nil, nil, io.EOF}, 30},
		{"the end with the last bytes", []int{10, 20}, []error{nil, io.EOF}, 30},
		{"the writer stopped after the last read", []int{10, 20, 30}, []error{nil, nil, nil}, 30},
		{"the target broke off", []int{10, 5}, []error{nil, io.ErrUnexpectedEOF}, 10},
		{"nothing read", nil, nil, 0},
	} {
		var h BodyEnd
		for i, n := range tt.reads {
			h.Took(n, tt.errs[i])
		}
		if got := h.Sent(); got != tt.want {
			t.Errorf("%s: %d bytes sent, want %d", tt.name, got, tt.want)
		}
	}
}

// TestBodyEndRunsOnce: the function runs once at the end, or at once when
// given after it.
func TestBodyEndRunsOnce(t *testing.T) {
	var h BodyEnd
	runs := 0
	h.AtEnd(func() { runs++ })
	h.End()
	h.End()
	if runs != 1 {
		t.Errorf("ran %d times, want once", runs)
	}
	late := false
	h.AtEnd(func() { late = true })
	if !late {
		t.Error("a function given after the end did not run at once")
	}
}
