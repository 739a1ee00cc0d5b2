package http1

import "testing"

func TestOneValue(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "authorization": true, "Proxy_Authorization": true, "Cookie": true,
		"If-Modified-Since": true, "User-Agent": true,
		"X-Api-Key": false, "Accept": false, "X-Tier": false, "Authorizations": false, "": false,
	} {
		if got := OneValue([]byte(name)); got != want {
			t.Errorf("OneValue(%q) = %v, want %v", name, got, want)
		}
	}
}
