package redistest

import (
	"slices"
	"testing"
)

// TestStartSentinel checks that the sentinels name the master, that a write
// to the master survives a Failover to its replica, and that afterwards the
// old master is a replica of the new one, which takes writes.
func TestStartSentinel(t *testing.T) {
	d := StartSentinel(t, SentinelOptions{Sentinels: 3, Replicas: 1})
	if got := len(d.Addrs()); got != 3 {
		t.Fatalf("%d sentinels, want 3", got)
	}
	old := d.Master()
	for _, s := range d.Sentinels() {
		if addr, err := masterAddr(s.Addr); err != nil || addr != old.Addr {
			t.Fatalf("sentinel %s names %q, %v; want %s", s.Addr, addr, err, old.Addr)
		}
	}
	if _, err := old.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}

	promoted := d.Failover()
	if promoted == old || promoted != d.Master() {
		t.Fatalf("Failover returned %s, Master is %s, old master %s", promoted.Addr, d.Master().Addr, old.Addr)
	}
	if got := d.Replicas(); !slices.Equal(got, []*Server{old}) {
		t.Errorf("replicas after the failover: %v, want the old master", got)
	}
	if addr, err := d.MasterAddr(); err != nil || addr != promoted.Addr {
		t.Errorf("MasterAddr = %q, %v; want %s", addr, err, promoted.Addr)
	}
	if v, err := promoted.Do("GET", "k"); err != nil || v != "v" {
		t.Errorf("GET k on the new master = %q, %v; want v", v, err)
	}
	if _, err := old.Do("SET", "k", "w"); err == nil {
		t.Errorf("the old master took a write after the failover")
	}
	if _, err := promoted.Do("SET", "k", "w"); err != nil {
		t.Errorf("SET on the new master: %v", err)
	}
}

// TestDoStrings checks the array replies DoStrings reads, and that Do
// refuses them.
func TestDoStrings(t *testing.T) {
	addr := Start(t)
	if _, err := Do(addr, "RPUSH", "l", "a", "", "c"); err != nil {
		t.Fatal(err)
	}
	got, err := DoStrings(addr, "LRANGE", "l", "0", "-1")
	if err != nil || !slices.Equal(got, []string{"a", "", "c"}) {
		t.Errorf("LRANGE = %q, %v", got, err)
	}
	if _, err := Do(addr, "LRANGE", "l", "0", "-1"); err == nil {
		t.Errorf("Do accepted an array reply")
	}
	if _, err := DoStrings(addr, "GET", "l"); err == nil {
		t.Errorf("DoStrings accepted an error reply")
	}
	if _, err := Do(addr, "GET", "missing"); err == nil {
		t.Errorf("Do accepted a nil reply")
	}
}
