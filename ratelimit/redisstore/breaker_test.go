package redisstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// TestCircuit steps the circuit through a table of events on a fake clock.
func TestCircuit(t *testing.T) {
	type step struct {
		advance time.Duration
		event   string // "allow", "ok", "fail", "failOld" (a call started at 0), "abandon"
		// for "allow": the expected answer
		ok, probe bool
		wait      time.Duration
		open      bool // isOpen after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"closed passes", []step{
			{event: "allow", ok: true},
			{event: "fail"}, {event: "fail"},
			{event: "ok"}, // resets the count
			{event: "fail"}, {event: "fail"},
			{event: "allow", ok: true},
		}},
		{"opens on the third consecutive failure", []step{
			{advance: time.Millisecond, event: "fail"},
			{advance: time.Millisecond, event: "fail"},
			{advance: time.Millisecond, event: "fail", open: true},
			{event: "allow", ok: false, wait: 10 * time.Second, open: true},
			{advance: 4 * time.Second, event: "allow", ok: false, wait: 6 * time.Second, open: true},
		}},
		{"overlapping failures count once", []step{
			{advance: time.Millisecond, event: "fail"},
			{advance: time.Millisecond, event: "failOld"},
			{event: "failOld"},
			{event: "failOld"},
			{event: "allow", ok: true},
			{event: "fail"},
			{event: "fail", open: true},
		}},
		{"one probe at a time; success closes", []step{
			{event: "fail"}, {event: "fail"}, {event: "fail", open: true},
			{advance: 10 * time.Second, event: "allow", ok: true, probe: true, open: true},
			{event: "allow", ok: false, open: true}, // the probe is in flight
			{event: "okProbe"},
			{event: "allow", ok: true},
		}},
		{"failed probe reopens", []step{
			{event: "fail"}, {event: "fail"}, {event: "fail", open: true},
			{advance: 10 * time.Second, event: "allow", ok: true, probe: true, open: true},
			{event: "failProbe", open: true},
			{advance: 9 * time.Second, event: "allow", ok: false, wait: time.Second, open: true},
			{advance: time.Second, event: "allow", ok: true, probe: true, open: true},
			{event: "abandon", open: true}, // the caller gave up: probe again
			{event: "allow", ok: true, probe: true, open: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Time{})
			c := &circuit{clock: fake, threshold: 3, openFor: int64(10 * time.Second)}
			for i, st := range tc.steps {
				fake.Advance(st.advance)
				switch st.event {
				case "allow":
					ok, probe, wait := c.allow()
					if ok != st.ok || probe != st.probe || time.Duration(wait) != st.wait {
						t.Fatalf("step %d: allow = %v, %v, %v; want %v, %v, %v", i, ok, probe, time.Duration(wait), st.ok, st.probe, st.wait)
					}
				case "ok":
					c.success(false)
				case "okProbe":
					c.success(true)
				case "fail":
					c.failure(false, fake.Nanotime())
				case "failOld":
					c.failure(false, 0)
				case "failProbe":
					c.failure(true, fake.Nanotime())
				case "abandon":
					c.abandon(true)
				}
				if c.isOpen() != st.open {
					t.Fatalf("step %d (%s): open = %v, want %v", i, st.event, c.isOpen(), st.open)
				}
			}
		})
	}
}
