// Package concurrency bounds how many calls run at once, so that a slow
// downstream makes callers wait or fail fast instead of piling up until
// memory, connections or threads run out.
//
// It offers two admission policies, both sluice.Admitter, sluice.Releaser
// and sluice.Policy, so that they work alone or inside a sluice.Guard:
//
//   - Bulkhead is a static limit: at most MaxConcurrent calls at once, with
//     an optional bounded FIFO queue. Use it to isolate a resource whose
//     capacity you know (a connection pool, a worker pool, a licence count),
//     or as a hard ceiling under an adaptive limit. It ignores outcomes.
//   - Limiter is an adaptive limit: a limit.Algorithm moves the limit from
//     the latency of the calls that ran, so that the limit follows the
//     downstream's real capacity as it changes. It adds an optional FIFO or
//     LIFO queue and priority classes, which share the limit with guaranteed
//     fractions and borrow each other's idle share, so that under overload
//     the least important calls are shed first.
//
// Both reject with a *sluice.Rejection whose Reason is sluice.Overloaded
// (errors.Is(err, sluice.ErrRejected) holds), and both return the context's
// error, wrapped, when the caller gives up while queued: that is not a
// rejection. Neither consults the context when a slot is free.
//
// Accounting cannot drift: a rejected call takes no slot and releases none,
// a slot freed while calls wait goes straight to a waiter (no overtaking, no
// lost wake-up), and a waiter whose context ends at the moment it is handed
// a slot passes the slot on. Only calls that ran (sluice.Class.Ran) feed a
// Limiter's algorithm.
//
// The priority of a call comes from its context: WithPriority sets it and
// PriorityFrom reads it; a context without one is Normal.
//
// The hot path, a call admitted below the limit and released with no one
// waiting, is a compare-and-swap each way, takes no lock and allocates
// nothing. Only queued calls take a mutex and allocate.
package concurrency
