package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MasterName is the name of the master set that StartSentinel's sentinels
// monitor: the rueidis.SentinelOption.MasterSet of a client.
const MasterName = "mymaster"

// failoverTimeout bounds Failover. With the short periods set by
// speedUpSentinel a failover takes about 5s; without them (Redis before
// 7.0) the old master is turned into a replica only after 8 to 18s.
const failoverTimeout = 30 * time.Second

// Sentinel timings, in milliseconds, written to each sentinel's
// configuration: the master is subjectively down after 2s without an
// answer, and a failover that makes no progress is aborted after 5s.
const (
	downAfterMillis       = 2000
	failoverTimeoutMillis = 5000
)

// SentinelOptions says how many processes StartSentinel starts.
type SentinelOptions struct {
	// Sentinels is the number of sentinels. Zero means 1.
	Sentinels int
	// Replicas is the number of replicas of the master. Zero means none
	// (which leaves nothing to fail over to).
	Replicas int
}

// Sentinel is a master monitored by Redis Sentinel, with its replicas, as
// StartSentinel made it. Its methods are safe for concurrent use, but
// Failover must not run concurrently with itself.
type Sentinel struct {
	t         testing.TB
	sentinels []*Server

	mu       sync.Mutex // protects master and replicas
	master   *Server
	replicas []*Server
}

// StartSentinel starts a master, opts.Replicas replicas of it and
// opts.Sentinels sentinels ("redis-server CONF --sentinel") that monitor it
// as MasterName with a quorum of 1, all on free ports of 127.0.0.1. It
// returns when the deployment has settled: every replica is in sync, and
// every sentinel names the master, sees every replica as healthy and knows
// the other sentinels. Everything is stopped when the test ends.
//
// The sentinels use shorter periods than Redis's defaults (INFO and hello
// messages every 1s, set with SENTINEL DEBUG where the server has it), so
// that they notice changes within about a second, and Failover takes about
// 5s; the data servers start a full sync without delay.
func StartSentinel(t testing.TB, opts SentinelOptions) *Sentinel {
	t.Helper()
	if opts.Sentinels < 0 || opts.Replicas < 0 {
		t.Fatalf("redistest: StartSentinel with %+v", opts)
	}
	if opts.Sentinels == 0 {
		opts.Sentinels = 1
	}
	// A master waits 5s by default for more replicas before it starts a
	// full sync; here a replica needs one at once, and after a failover
	// every server may be a master.
	noDelay := []string{"--repl-diskless-sync-delay", "0"}
	d := &Sentinel{t: t, master: StartServer(t, noDelay...)}
	for range opts.Replicas {
		r := StartServer(t, append(noDelay, "--replicaof", "127.0.0.1", strconv.Itoa(d.master.port))...)
		d.replicas = append(d.replicas, r)
	}
	for _, r := range d.replicas {
		poll(t, readyTimeout, "replica "+r.Addr+" in sync", func() (bool, string) {
			return replicaOf(r.Addr, d.master.Addr)
		})
	}
	for range opts.Sentinels {
		d.sentinels = append(d.sentinels, launch(t, false, func(s *Server) error {
			s.conf = filepath.Join(s.dir, "sentinel.conf")
			return os.WriteFile(s.conf, []byte(sentinelConf(s, d.master.port)), 0o600)
		}))
	}
	for _, s := range d.sentinels {
		poll(t, readyTimeout, "sentinel "+s.Addr+" ready", func() (bool, string) {
			ok, why := sentinelSees(s.Addr, d.master.Addr, len(d.replicas), len(d.sentinels)-1)
			if !ok {
				why += "; log:\n" + s.log()
			}
			return ok, why
		})
	}
	return d
}

// sentinelConf is the configuration file of sentinel s monitoring the
// master on masterPort. The sentinel rewrites it as its state changes.
func sentinelConf(s *Server, masterPort int) string {
	return fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile %s
daemonize no
sentinel monitor %s 127.0.0.1 %d 1
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
`, s.port, s.dir, filepath.Join(s.dir, "redis.log"),
		MasterName, masterPort, MasterName, downAfterMillis, MasterName, failoverTimeoutMillis)
}

// speedUpSentinel shortens the periods of the sentinel at addr: INFO to
// the monitored servers and hello messages every 1s (Redis defaults: 10s
// and 2s), so that a sentinel learns of the other sentinels and of a new
// master within about a second and turns an old master into a replica
// within about 5s instead of 8 to 18s; and TILT mode lasts 1s instead of
// 30s. Shorter periods break failovers on a loaded machine: a sentinel
// judges unfit for promotion a replica whose INFO is older than three INFO
// periods (and writing its configuration file alone can take 300ms), and
// one that sees a replica report itself master for four hello periods
// before it hears of the failover that promoted it (which takes about a
// second) turns it back into a replica. SENTINEL DEBUG exists since Redis
// 7.0; on an older server it fails and the defaults stay, which only makes
// things slower.
func speedUpSentinel(addr string) {
	_, _ = Do(addr, "SENTINEL", "DEBUG", "info-period", "1000", "publish-period", "1000", "tilt-period", "1000")
}

// Addrs returns the sentinels' addresses: the InitAddress of a client.
func (d *Sentinel) Addrs() []string {
	addrs := make([]string, len(d.sentinels))
	for i, s := range d.sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// Sentinels returns the sentinel processes.
func (d *Sentinel) Sentinels() []*Server { return slices.Clone(d.sentinels) }

// Master returns the current master: the one StartSentinel started, or the
// replica the last Failover promoted.
func (d *Sentinel) Master() *Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.master
}

// Replicas returns the current replicas of Master.
func (d *Sentinel) Replicas() []*Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.replicas)
}

// MasterAddr asks the first sentinel for the master's address
// (SENTINEL get-master-addr-by-name).
func (d *Sentinel) MasterAddr() (string, error) { return masterAddr(d.sentinels[0].Addr) }

// Failover makes the first sentinel fail the master over to a replica
// (SENTINEL FAILOVER, which needs no agreement) while the master is up, and
// waits until it is done: every sentinel names the promoted replica, which
// answers as a master, and the old master has become its replica, in sync.
// Before that it waits until every replica has all the writes the master
// had when Failover was called, so that the failover loses none of them.
// It returns the new master. It fails the test after about 30s, or when
// there is no replica.
func (d *Sentinel) Failover() *Server {
	d.t.Helper()
	old, replicas := d.Master(), d.Replicas()
	if len(replicas) == 0 {
		d.t.Fatalf("redistest: Failover with no replica")
	}
	done := false
	defer func() { // after a failure (t.Fatalf) the logs tell what the sentinels did
		if !done {
			for _, s := range d.sentinels {
				d.t.Logf("redistest: log of sentinel %s:\n%s", s.Addr, s.log())
			}
		}
	}()
	deadline := time.Now().Add(failoverTimeout)
	offset, err := replOffset(old.Addr, "master_repl_offset")
	if err != nil {
		d.t.Fatalf("redistest: INFO replication on %s: %v", old.Addr, err)
	}
	for _, r := range replicas {
		poll(d.t, time.Until(deadline), "replica "+r.Addr+" at offset "+strconv.FormatInt(offset, 10), func() (bool, string) {
			got, err := replOffset(r.Addr, "slave_repl_offset")
			return err == nil && got >= offset, fmt.Sprintf("offset %d, %v", got, err)
		})
	}
	sentinel := d.sentinels[0].Addr
	d.startFailover(sentinel, deadline)
	var promoted *Server
	poll(d.t, time.Until(deadline), "sentinels naming a new master", func() (bool, string) {
		// The address and the flag come from one reply: read apart,
		// a failover could end between them, and this would start
		// another, back to the old master.
		addr, inProgress, err := failoverState(sentinel)
		if err == nil && addr == old.Addr && !inProgress {
			// The failover was aborted (a sentinel that gets no
			// fresh INFO from a replica in time judges it unfit):
			// try again.
			d.startFailover(sentinel, deadline)
		}
		if err != nil || addr == old.Addr {
			return false, fmt.Sprintf("master %q, %v", addr, err)
		}
		i := slices.IndexFunc(replicas, func(r *Server) bool { return r.Addr == addr })
		if i < 0 {
			d.t.Fatalf("redistest: sentinel %s promoted %s, which is not a replica of %s", sentinel, addr, old.Addr)
		}
		promoted = replicas[i]
		for _, s := range d.sentinels[1:] {
			if got, err := masterAddr(s.Addr); err != nil || got != addr {
				return false, fmt.Sprintf("sentinel %s names %q, %v", s.Addr, got, err)
			}
		}
		return true, ""
	})
	poll(d.t, time.Until(deadline), "new master "+promoted.Addr+" and its replicas in sync", func() (bool, string) {
		if ok, why := isMaster(promoted.Addr); !ok {
			return false, why
		}
		for _, r := range replicas {
			if r == promoted {
				continue
			}
			if ok, why := replicaOf(r.Addr, promoted.Addr); !ok {
				return false, why
			}
		}
		return replicaOf(old.Addr, promoted.Addr)
	})
	done = true
	d.mu.Lock()
	defer d.mu.Unlock()
	d.master = promoted
	d.replicas = append(slices.DeleteFunc(replicas, func(r *Server) bool { return r == promoted }), old)
	return promoted
}

// startFailover sends SENTINEL FAILOVER to sentinel until it accepts it,
// or reports one in progress. It may first judge no replica good enough
// (NOGOODSLAVE): one it has had no fresh INFO from.
func (d *Sentinel) startFailover(sentinel string, deadline time.Time) {
	d.t.Helper()
	poll(d.t, time.Until(deadline), "SENTINEL FAILOVER accepted", func() (bool, string) {
		_, err := Do(sentinel, "SENTINEL", "FAILOVER", MasterName)
		if err != nil && strings.HasPrefix(err.Error(), "INPROG") {
			return true, ""
		}
		if err != nil && !strings.HasPrefix(err.Error(), "NOGOODSLAVE") {
			d.t.Fatalf("redistest: SENTINEL FAILOVER on %s: %v", sentinel, err)
		}
		return err == nil, fmt.Sprint(err)
	})
}

// failoverState asks the sentinel at addr, in one command (SENTINEL
// MASTER), for the master's host:port and whether it has a failover of the
// master in progress.
func failoverState(addr string) (master string, inProgress bool, err error) {
	info, err := DoStrings(addr, "SENTINEL", "MASTER", MasterName)
	if err != nil {
		return "", false, err
	}
	return net.JoinHostPort(field(info, "ip"), field(info, "port")),
		strings.Contains(field(info, "flags"), "failover_in_progress"), nil
}

// poll calls cond every 10ms until it reports true, failing t if it has
// not after limit; why, from cond's last call, goes in the failure message.
func poll(t testing.TB, limit time.Duration, what string, cond func() (ok bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: no %s after %v: %s", what, limit, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// masterAddr asks the sentinel at addr for the master's host:port.
func masterAddr(sentinel string) (string, error) {
	hp, err := DoStrings(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME: %q", hp)
	}
	return hp[0] + ":" + hp[1], nil
}

// sentinelSees reports whether the sentinel at addr names master as the
// master, sees exactly replicas healthy replicas (flags "slave", link to
// the master ok) and knows others other sentinels.
func sentinelSees(addr, master string, replicas, others int) (bool, string) {
	got, err := masterAddr(addr)
	if err != nil || got != master {
		return false, fmt.Sprintf("master %q, %v", got, err)
	}
	info, err := DoStrings(addr, "SENTINEL", "MASTER", MasterName)
	if err != nil {
		return false, err.Error()
	}
	if n := field(info, "num-other-sentinels"); n != strconv.Itoa(others) {
		return false, fmt.Sprintf("%s other sentinels, want %d", n, others)
	}
	v, err := command(addr, "SENTINEL", "REPLICAS", MasterName)
	if err != nil {
		return false, err.Error()
	}
	list, _ := v.([]any)
	healthy := 0
	for _, r := range list {
		elems, _ := r.([]any)
		kv, err := strs(elems)
		if err == nil && field(kv, "flags") == "slave" && field(kv, "master-link-status") == "ok" {
			healthy++
		}
	}
	if healthy != replicas {
		return false, fmt.Sprintf("%d healthy replicas of %d, want %d", healthy, len(list), replicas)
	}
	return true, ""
}

// field returns the value after name in a flat list of names and values.
func field(kv []string, name string) string {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == name {
			return kv[i+1]
		}
	}
	return ""
}

// infoField returns a field of INFO replication on addr.
func infoField(addr, name string) (string, error) {
	info, err := Do(addr, "INFO", "replication")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %s in INFO replication of %s", name, addr)
}

// replOffset returns a replication offset from INFO replication on addr.
func replOffset(addr, name string) (int64, error) {
	v, err := infoField(addr, name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// isMaster reports whether the server at addr has the master role.
func isMaster(addr string) (bool, string) {
	role, err := infoField(addr, "role")
	if err != nil || role != "master" {
		return false, fmt.Sprintf("%s: role %q, %v", addr, role, err)
	}
	return true, ""
}

// replicaOf reports whether the server at addr is a replica of master with
// its link up.
func replicaOf(addr, master string) (bool, string) {
	var got [4]string
	for i, name := range []string{"role", "master_host", "master_port", "master_link_status"} {
		v, err := infoField(addr, name)
		if err != nil {
			return false, err.Error()
		}
		got[i] = v
	}
	if got != [4]string{"slave", "127.0.0.1", master[strings.LastIndexByte(master, ':')+1:], "up"} {
		return false, fmt.Sprintf("%s: role %s of %s:%s, link %s", addr, got[0], got[1], got[2], got[3])
	}
	return true, ""
}
