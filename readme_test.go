package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/chain"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/grpcguard"
	"github.com/sluicehq/sluice/httpguard"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/timeout"
)

// inference stands for the client of a slow, fragile service: its first
// call fails.
type inference struct{ calls int }

func (c *inference) Infer(ctx context.Context, prompt string) (string, error) {
	if c.calls++; c.calls == 1 {
		return "", errors.New("connection reset")
	}
	return "echo: " + prompt, nil
}

// libraryDoor is the Go block of README.md's library section, which
// doc.go's and package chain's comments show too (TestSnippetsCompile).
func libraryDoor(ctx context.Context, client *inference, prompt string) error {
	g, err := chain.New().
		RateLimit(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}}).
		Retry(retry.Options{}).
		Breaker(breaker.Options{Name: "inference"}).
		Bulkhead(concurrency.BulkheadOptions{MaxConcurrent: 32}).
		Timeout(timeout.Options{Timeout: 2 * time.Second}).
		Guard()
	if err != nil {
		return err // every unusable option of every policy, each matching sluice.ErrInvalidOptions
	}
	answer, err := sluice.Do(ctx, g, func(ctx context.Context) (string, error) {
		return client.Infer(ctx, prompt)
	})
	if errors.Is(err, sluice.ErrRejected) {
		return err // rate limited, breaker open or overloaded; sluice.RetryAfter(err) says when to come back
	}
	fmt.Println(answer)
	return err
}

// middlewareDoors is the Go block of README.md's "One scenario, three
// doors": it hands what it built to use.
func middlewareDoors(g *sluice.Guard, inferHandler http.Handler, use func(http.Handler, *grpc.Server, *http.Client)) error {
	admit, err := chain.New().
		RateLimit(ratelimit.Options{Limit: ratelimit.Limit{Limit: 100, Period: time.Second}}).
		Breaker(breaker.Options{Name: "inference"}).
		Bulkhead(concurrency.BulkheadOptions{MaxConcurrent: 32}).
		Timeout(timeout.Options{Timeout: 2 * time.Second}).
		Guard()
	if err != nil {
		return err
	}
	// HTTP: one limit per client address (behind proxies: httpguard.ByClientIP(trusted...)); 429/503 with Retry-After.
	handler := httpguard.Middleware(admit, httpguard.Options{})(inferHandler)
	// gRPC: the same admission per call, one limit per peer; RESOURCE_EXHAUSTED/UNAVAILABLE with pushback.
	server := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcguard.UnaryServerInterceptor(admit, grpcguard.Options{Key: grpcguard.ByPeer})))
	// A client: retries only what may be sent twice (never a POST without an Idempotency-Key).
	client := &http.Client{Transport: httpguard.Transport(g, nil, httpguard.Options{})}
	use(handler, server, client)
	return nil
}

// README.md's library door: the failed first call is retried.
func Example_libraryDoor() {
	if err := libraryDoor(context.Background(), &inference{}, "hello"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// echo: hello
}

// README.md's middleware doors, served on loopback: the handler answers
// through the guard, and the client calls it through its own.
func Example_middlewareDoors() {
	g, err := chain.New().Retry(retry.Options{}).Guard()
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	err = middlewareDoors(g, hello, func(h http.Handler, s *grpc.Server, c *http.Client) {
		defer s.Stop()
		srv := httptest.NewServer(h)
		defer srv.Close()
		resp, err := c.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Content-Length"))
	})
	fmt.Println(err)
	// Output:
	// 200 5
	// <nil>
}
