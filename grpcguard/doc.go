// Package grpcguard runs gRPC calls behind a sluice.Guard: interceptors for
// servers and clients, unary and streaming. It is httpguard's twin for gRPC.
//
// UnaryServerInterceptor and StreamServerInterceptor admit each call through
// the guard before its handler runs. Options.Key sets the rate-limit key of
// the call (ByMethod, ByPeer, ByMetadata) and Options.GuardFor picks a guard
// per method. A call the guard refuses gets a gRPC status: a rate limit is
// RESOURCE_EXHAUSTED, an open circuit or overload is UNAVAILABLE, a timeout
// is DEADLINE_EXCEEDED; a known retry hint travels in the
// "grpc-retry-pushback-ms" trailer, which grpc-go's own retry honours.
//
// UnaryClientInterceptor runs each call through the whole guard (rate limit,
// breaker, concurrency limit, retry, timeout). Retries are opt-in per method
// and per code: a method not declared retryable (Options.RetryableMethods),
// or a call that ended with a code not declared retryable
// (Options.RetryableCodes, default UNAVAILABLE), is sent at most once, and
// the caller gets the status the server sent.
//
// Outcomes are classified from the status code (Options.IsFailure, default
// DefaultIsFailure): UNAVAILABLE, INTERNAL, RESOURCE_EXHAUSTED,
// DEADLINE_EXCEEDED, UNKNOWN and DATA_LOSS count against the downstream;
// NOT_FOUND, INVALID_ARGUMENT and the other codes that describe the
// caller's request do not; CANCELED is Ignored.
//
// Streams, on both sides, hold their admission for their whole life and
// pass only the guard's admission policies (rate limit, breaker,
// concurrency limit): flow policies (retry, timeout, hedge, fallback) apply
// to unary calls only. A stream's outcome is its final status, reported
// with a zero Latency (see StreamServerInterceptor).
package grpcguard
