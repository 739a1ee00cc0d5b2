package http1

import (
	"slices"
	"testing"
)

func TestCGIName(t *testing.T) {
	for _, tt := range []struct {
		k    string
		want bool
	}{
		{"X-Api-Key", true}, {"x-api-key", true}, {"X_API_KEY", true}, {"x_Api-key", true},
		{"X-Api-Keys", false}, {"X-Api-Ke", false}, {"X.Api.Key", false}, {"X-Api-Kez", false},
		{"X@Api-Key", false}, // '@'|0x20 is '`': only letters match in any case
	} {
		if got := CGIName([]byte(tt.k), "X-Api-Key"); got != tt.want {
			t.Errorf("CGIName(%q, X-Api-Key) = %v, want %v", tt.k, got, tt.want)
		}
	}
}

func TestCGINames(t *testing.T) {
	got := CGINames("X-Api_Key")
	want := []string{"X-Api_Key", "X_Api_Key", "X-Api-Key", "X_Api-Key"}
	if !slices.Equal(got, want) {
		t.Errorf("CGINames = %q, want %q", got, want)
	}
	if got := CGINames("Authorization"); !slices.Equal(got, []string{"Authorization"}) {
		t.Errorf("CGINames(Authorization) = %q", got)
	}
}
