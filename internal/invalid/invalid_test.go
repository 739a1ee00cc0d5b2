package invalid

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestProblemsMatchBothSentinels(t *testing.T) {
	errPkg := Sentinel("pkg: invalid options")
	if !errors.Is(errPkg, sluice.ErrInvalidOptions) {
		t.Fatal("a Sentinel does not match sluice.ErrInvalidOptions")
	}
	p := Problems{Prefix: "pkg: invalid options", Sentinel: errPkg}
	if p.Err() != nil {
		t.Fatalf("no problem: Err = %v, want nil", p.Err())
	}
	p.Addf("A %d is negative", -1)
	other := Problems{Prefix: "pkg: invalid other"}
	other.Addf("B is required")
	p.Add(other.Err())
	p.Add(nil)
	err := p.Err()
	want := "pkg: invalid options: A -1 is negative\npkg: invalid other: B is required"
	if err == nil || err.Error() != want {
		t.Fatalf("Err = %q, want %q", err, want)
	}
	if !errors.Is(err, errPkg) || !errors.Is(err, sluice.ErrInvalidOptions) {
		t.Errorf("Err does not match both sentinels")
	}
	if errors.Is(other.Err(), errPkg) || !errors.Is(other.Err(), sluice.ErrInvalidOptions) {
		t.Errorf("a Problems without Sentinel should match sluice.ErrInvalidOptions alone")
	}
}
