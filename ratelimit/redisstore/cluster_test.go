package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestCluster runs every algorithm on many keys against a Redis Cluster of
// three masters: keys land on all three, each decision's key stays in its
// slot (hash tag), and the decisions are the same as on one server.
func TestCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	s := newStore(t, live, addrs...)
	const keys = 30
	for _, a := range allAlgorithms {
		l := ratelimit.Limit{Algorithm: a.alg, Limit: 2, Period: time.Hour}
		for k := range keys {
			key := "user:" + strconv.Itoa(k)
			for i, want := range []bool{true, true, false} {
				if d := allow(t, s, key, l, 1); d.Allowed != want {
					t.Fatalf("%s key %s request %d: %+v, want allowed=%v", a.alg, key, i, d, want)
				}
			}
		}
	}

	// The hash tag puts every algorithm's key for one user in one slot.
	slot := do(t, nodes[0].Addr, "CLUSTER", "KEYSLOT", redisKey("user:1", "tb"))
	for _, a := range allAlgorithms {
		if got := do(t, nodes[0].Addr, "CLUSTER", "KEYSLOT", redisKey("user:1", a.suffix)); got != slot {
			t.Errorf("slot of %s = %s, want %s", redisKey("user:1", a.suffix), got, slot)
		}
	}
	// And the users are spread over the masters.
	total := 0
	for _, n := range nodes {
		size, _ := strconv.Atoi(do(t, n.Addr, "DBSIZE"))
		if size == 0 {
			t.Errorf("node %s holds no keys", n.Addr)
		}
		total += size
	}
	if want := keys * len(allAlgorithms); total != want {
		t.Errorf("%d keys in the cluster, want %d", total, want)
	}
}
