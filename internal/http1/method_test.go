package http1

import "testing"

func TestIdempotent(t *testing.T) {
	for m, want := range map[string]bool{
		"GET": true, "HEAD": true, "OPTIONS": true, "PUT": true, "DELETE": true, "TRACE": true,
		"POST": false, "PATCH": false, "CONNECT": false, "get": false, "": false,
	} {
		if got := Idempotent([]byte(m)); got != want {
			t.Errorf("Idempotent(%q) = %v, want %v", m, got, want)
		}
	}
}
