package concurrency

import "context"

// Priority is the class of a call for a Limiter with priority classes: a
// small integer where a lower value is more important. The zero value is
// Critical; a context without a priority means Normal.
type Priority uint8

const (
	// Critical calls are shed last.
	Critical Priority = iota
	// Normal is the priority of a call whose context carries none.
	Normal
	// BestEffort calls are shed first.
	BestEffort
)

// NumPriorities is the number of priority classes.
const NumPriorities = int(BestEffort) + 1

// String returns the priority in lower case ("critical", "normal",
// "best_effort").
func (p Priority) String() string {
	switch p {
	case Critical:
		return "critical"
	case Normal:
		return "normal"
	case BestEffort:
		return "best_effort"
	}
	return "unknown"
}

// priorityKey is the context key of a call's Priority.
type priorityKey struct{}

// WithPriority returns a copy of ctx that carries priority p. A p beyond
// BestEffort is stored as BestEffort. Storing a Priority does not allocate
// beyond the context itself.
func WithPriority(ctx context.Context, p Priority) context.Context {
	if p > BestEffort {
		p = BestEffort
	}
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority that ctx carries, or Normal if it carries
// none.
func PriorityFrom(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	return Normal
}

// Share is the part of a Limiter's limit guaranteed to one priority class.
type Share struct {
	// Fraction of the limit guaranteed to the class, in [0, 1]: the class
	// may always hold floor(Fraction*limit) calls in flight while the
	// limiter as a whole is below its limit, and may borrow capacity that
	// other classes leave idle.
	Fraction float64
}
