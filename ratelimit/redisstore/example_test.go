package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// Dial connects to a standalone server (or finds a Cluster from any of its
// nodes); while Redis is unreachable each replica limits on its own.
func ExampleDial() {
	store, err := redisstore.Dial([]string{"127.0.0.1:6379"}, redisstore.Options{
		OnError:  redisstore.Local,
		Fallback: ratelimit.NewMemory(ratelimit.MemoryOptions{}),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	limit := ratelimit.Limit{Algorithm: ratelimit.GCRA, Limit: 100, Period: time.Minute, Burst: 20}
	d, err := store.AllowN(context.Background(), "client:42", limit, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Allowed, d.Remaining)
}

// New takes any rueidis client: here one that follows the master that
// Sentinel names, and fails closed while Redis cannot answer.
func ExampleNew_sentinel() {
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{"127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"},
		Sentinel: rueidis.SentinelOption{
			MasterSet: "mymaster",
			// Also check the master every 5s, in case a
			// +switch-master event is missed.
			TopologyRefreshInterval: 5 * time.Second,
		},
		DisableCache: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := redisstore.New(client, redisstore.Options{
		OnError: redisstore.FailClosed,
		Timeout: 20 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	limit := ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Limit: 5, Period: time.Second}
	if d, err := store.AllowN(context.Background(), "login:alice", limit, 1); err == nil && !d.Allowed {
		fmt.Println("retry after", d.RetryAfter)
	}
}
