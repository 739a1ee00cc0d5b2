package grpcguard

import (
	"context"
	"net"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// ByMethod is a Key function that keys calls by their full method name, so
// that each method of a service has its own rate limit.
func ByMethod(_ context.Context, fullMethod string) string { return fullMethod }

// ByPeer is a Key function for servers that keys calls by the client's
// address without its port (the IP of a TCP peer), so that each client
// host has its own rate limit. A call whose context carries no peer gets
// the key "".
func ByPeer(ctx context.Context, _ string) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	addr := p.Addr.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// ByMetadata returns a Key function for servers that keys calls by the
// first value of the incoming metadata key name (an API key, a tenant),
// looked up case-insensitively as gRPC metadata is. Calls without it share
// the key "".
func ByMetadata(name string) func(ctx context.Context, fullMethod string) string {
	return func(ctx context.Context, _ string) string {
		if v := metadata.ValueFromIncomingContext(ctx, name); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}
