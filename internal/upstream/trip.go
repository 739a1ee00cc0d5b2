package upstream

import "time"

// Trip bounds one exchange with a target. The zero Trip has no bounds.
type Trip struct {
	// Head is when the response's head must have come (connecting and
	// sending the request included); zero means no limit.
	Head time.Time
	// Deadline is the exchange's end, a streamed body included; zero means
	// none.
	Deadline time.Time
	// Wait bounds each wait between two reads of a streamed body (a
	// target's Wait); zero means none.
	Wait time.Duration
	// Cut, when not nil, ends the exchange when its client leaves.
	Cut *Interrupt
}

// waitUntil returns when a wait for a streamed body's next bytes that
// starts now ends.
func (tr *Trip) waitUntil(now time.Time) time.Time {
	if tr.Wait <= 0 {
		return tr.Deadline
	}
	w := now.Add(tr.Wait)
	if tr.Deadline.IsZero() || w.Before(tr.Deadline) {
		return w
	}
	return tr.Deadline
}
