// Package sim is a deterministic discrete-event simulator of overload, in
// virtual time, for sluice's adaptive concurrency limits. It measures how an
// Algorithm (any limit.Algorithm, or an adapter of another library's limit)
// protects a downstream whose capacity is known, so every algorithm's error
// against the optimum can be measured. A full run of the standard scenarios
// takes a few seconds (go run ./sim/cmd/sluice-sim).
//
// # Model
//
// The downstream has C workers and an unbounded FIFO queue; a request
// occupies a worker for its work (a service time drawn from Dist, times its
// cost) and its response then travels for the network delay, which
// lengthens the round trip but occupies no worker. Arrivals are open loop
// (Poisson or bursty). Every user request has a deadline, Deadline after
// its first arrival.
//
// Admission is modelled as concurrency.Limiter does it, without its clock:
// an attempt is admitted while fewer than Algorithm.Limit() attempts are in
// flight (with priority classes, the Limiter's share rule), else rejected at
// once, or queued when the scenario has a ClientQueue. An admitted attempt
// ends at its response, or at its deadline if the response has not come by
// then: the client gives up (a timeout), while the downstream still serves
// the request unless SkipExpired. Each ended attempt is one Sample: now =
// Epoch + simulated time, rtt = end − admission, inflight = in flight at
// admission (itself included), dropped = timed out. Rejected attempts and
// attempts that timed out in the client queue produce no sample. Clients
// may retry rejections (Retry) within the deadline.
//
// All randomness comes from PCG streams seeded by Scenario.Seed: arrivals,
// per-request work, cost and class, and retry jitter have separate streams,
// so every algorithm sees the same requests (common random numbers) and a
// run is exactly reproducible.
//
// # Figures
//
// Time is cut into segments at the steps; figures exclude the Warmup and
// count user requests by the segment of their arrival.
//
//   - Goodput: requests that succeeded within their deadline, as a fraction
//     of capacity (C / mean work, per second, integrated over the measured
//     time). Served is the same as a fraction of the requests offered.
//   - p50, p99, p99.9: latency of admitted attempts, from the attempt's
//     arrival to its response, a timeout counting at its deadline. The
//     no-load p99 is the p99 of work + network delay of the same requests,
//     as if there were no queue; p99/nl is their ratio.
//   - Rejected: fraction of attempts rejected; t/o: fraction of requests
//     that timed out.
//   - Optimum: by Little's law, the calls in flight that keep every worker
//     busy without a queue: C × (1 + networkDelay / mean work). C calls
//     are at the workers; throughput × networkDelay = C/meanWork ×
//     networkDelay more are travelling back. At 16 workers, 20 ms and no
//     delay it is 16; after a +60 ms delay, 64. It is the knee, not the
//     best goodput: under Poisson arrivals a limit of exactly the optimum
//     loses the Erlang-B fraction (9% at 1.5×), and a little headroom
//     above it buys goodput for a little latency.
//   - Convergence of a segment: the limit is recorded every Tick. A tick is
//     in band when the limit is within ±Band (10%, at least ±1) of the
//     optimum, or, when the segment's load is below 1, at least optimum −
//     that (a limit above the optimum does not bind below capacity). The
//     convergence time is the time from the segment's start to the first
//     tick from which every centred window of ConvWindow (1 s) until the
//     segment's end has at least half its ticks in band: the limit entered
//     the band and stayed, ignoring excursions shorter than half the
//     window. ConvStrict allows no excursion at all. "never" when the limit
//     is not in band at the end.
//   - CV: standard deviation / mean of the limit over the steady part of a
//     segment (from Settle after its start).
//   - Drift: mean limit over the last tenth of the last segment's steady
//     part minus the mean over its second tenth, as a fraction of the
//     optimum.
//
// Goals lists the targets for sluice's Default and WriteGoals checks them.
//
// # Peers
//
// Algorithms from other libraries are run by the bench module (its own Go
// module, so that this one depends on no peer) through Factory values that
// adapt them to Algorithm.
package sim
