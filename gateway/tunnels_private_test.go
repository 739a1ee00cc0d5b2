package gateway

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/wstunnel"
)

// TestTunnelsGoAwayUnreadClients: clients that never read take their close
// frames' bounded writes at once, not one after another, so that
// shutdown's wait for them is one close frame's, whatever their number
// (sent away one by one, n clients held shutdown n seconds).
func TestTunnelsGoAwayUnreadClients(t *testing.T) {
	const n = 10
	var ts tunnels
	var runs sync.WaitGroup
	var peers []net.Conn
	for range n {
		client, clientPeer := net.Pipe() // the client never reads
		upstream, upstreamPeer := net.Pipe()
		peers = append(peers, clientPeer, upstreamPeer)
		tn := wstunnel.New(client, upstream, wstunnel.Options{})
		ts.begin()
		ts.carry(tn)
		runs.Add(1)
		go func() {
			defer runs.Done()
			tn.Run()
			ts.end(tn)
		}()
	}
	defer func() {
		for _, c := range peers {
			_ = c.Close()
		}
		runs.Wait()
	}()
	start := time.Now()
	if got := ts.goAway(); got != n {
		t.Fatalf("goAway sent %d tunnels away, want %d", got, n)
	}
	// One close frame's wait (a second) each, were they sent one by one.
	if took := time.Since(start); took > n/2*time.Second {
		t.Fatalf("goAway took %v for %d clients that never read", took, n)
	}
}
