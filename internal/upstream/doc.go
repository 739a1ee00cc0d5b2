// Package upstream reaches the targets of one upstream: it keeps their
// connection pools (HTTP/1.1 over fasthttp's HostClient, or an HTTP/2
// transport for h2 and h2c upstreams), picks the target of each attempt
// (round robin, least in-flight or power of two choices), takes targets
// out while they fail (a passive-health breaker per target) or fail their
// active health checks, and runs the exchange with a target: the request
// out, the response's head in, its body whole when small or as a stream.
//
// It is given what it needs as values (the upstream's configuration, a
// clock, a logger, a metrics hook) and knows nothing of routes, engines
// or the client's side of a request.
package upstream
