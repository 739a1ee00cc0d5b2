// Package redistest starts real redis-server processes for tests, on free
// ports of 127.0.0.1, and stops them when the test ends: a standalone server
// (Start, StartServer), a Redis Cluster (StartCluster), or a master with
// replicas monitored by Redis Sentinel (StartSentinel).
//
// When redis-server is not on PATH the test is skipped, unless the
// environment has SLUICE_REQUIRE_REDIS=1, in which case it fails: CI sets
// it so that a missing server cannot pass for a green run. Any other
// error (a server that exits at once, or never answers) fails the test:
// only a missing binary skips.
//
// Servers keep no data on disk (no RDB, no AOF) and write their log to the
// test's temporary directory; the log is printed when a server does not come
// up. Waiting is a bounded poll every 10ms, the only waiting these helpers
// do: for at most 10s for a server, a Cluster or a Sentinel deployment to
// come up, and 30s for a Sentinel failover.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing redis-server
// into a test failure instead of a skip when set to "1".
const RequireEnv = "SLUICE_REQUIRE_REDIS"

// readyTimeout bounds every wait for a server.
const readyTimeout = 10 * time.Second

// Server is one redis-server process. Its methods are safe for concurrent
// use.
type Server struct {
	// Addr is "127.0.0.1:port"; it stays the same across Restart.
	Addr string

	t    testing.TB
	bin  string
	port int
	dir  string
	args []string
	// conf, if set, is a sentinel's configuration file: the server runs
	// as "redis-server conf --sentinel", configured by the file alone.
	conf string

	mu  sync.Mutex // protects cmd
	cmd *exec.Cmd  // nil while stopped
}

// Start starts a standalone redis-server and returns its address. It is
// stopped when the test ends.
func Start(t testing.TB) string {
	t.Helper()
	return StartServer(t).Addr
}

// StartServer starts a redis-server with extra command-line arguments (for
// example "--cluster-enabled", "yes") and returns it, ready for commands. It
// is stopped when the test ends.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	return launch(t, hasCluster(args), func(s *Server) error {
		s.args = args
		return nil
	})
}

// launch starts a server on a free port, set up by setup (which may write
// files to s.dir), trying a few ports, and stops it when the test ends.
func launch(t testing.TB, clusterBus bool, setup func(s *Server) error) *Server {
	t.Helper()
	bin := binary(t)
	var lastErr error
	for range 5 { // a free port can be taken by another process before we bind it
		port, err := freePort(clusterBus)
		if err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			t:    t, bin: bin, port: port,
			dir: t.TempDir(),
		}
		if err := setup(s); err != nil {
			t.Fatalf("redistest: setting up redis-server: %v", err)
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: starting redis-server: %v", lastErr)
	return nil
}

// Stop kills the server (as a crash would: SIGKILL, nothing saved) and waits
// for the process to end. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill() // SIGKILL ends a paused process too
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port (after Stop) and waits
// until it answers. It starts empty.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restarting redis-server on %s: %v", s.Addr, err)
	}
}

// Do sends one command to the server on a new connection and returns the
// reply: a simple or bulk string, an integer as text, or an error for an
// error reply. Arrays are not supported: see DoStrings.
func (s *Server) Do(args ...string) (string, error) { return Do(s.Addr, args...) }

// log returns the server's log file, or the error reading it.
func (s *Server) log() string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("already running")
	}
	logPath := filepath.Join(s.dir, "redis.log")
	argv := []string{s.conf, "--sentinel"}
	if s.conf == "" {
		argv = append([]string{
			"--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1",
			"--dir", s.dir,
			"--save", "",
			"--appendonly", "no",
			"--logfile", logPath,
			"--daemonize", "no",
		}, s.args...)
	}
	cmd := exec.Command(s.bin, argv...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := waitReady(s.Addr, cmd); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("%w; log:\n%s", err, s.log())
	}
	if s.conf != "" {
		speedUpSentinel(s.Addr)
	}
	s.cmd = cmd
	return nil
}

// StartCluster starts n redis-server processes with cluster mode enabled,
// spreads the 16384 slots over them evenly (CLUSTER ADDSLOTS), joins them
// (CLUSTER MEET) and waits until every node reports cluster_state:ok. It
// returns the nodes; all are masters without replicas.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("redistest: StartCluster with %d nodes", n)
	}
	nodes := make([]*Server, n)
	for i := range nodes {
		nodes[i] = StartServer(t, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
	}
	const slots = 16384
	for i, node := range nodes {
		args := []string{"CLUSTER", "ADDSLOTS"}
		for slot := i * slots / n; slot < (i+1)*slots/n; slot++ {
			args = append(args, strconv.Itoa(slot))
		}
		if _, err := node.Do(args...); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTS on %s: %v", node.Addr, err)
		}
	}
	for _, node := range nodes[1:] {
		if _, err := nodes[0].Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(node.port)); err != nil {
			t.Fatalf("redistest: CLUSTER MEET %s: %v", node.Addr, err)
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for _, node := range nodes {
		for {
			info, err := node.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster not ok after %v: %q, %v", readyTimeout, info, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nodes
}

// Do sends one command to addr on a new connection and returns the reply as
// Server.Do does.
func Do(addr string, args ...string) (string, error) {
	v, err := command(addr, args...)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case nil:
		return "", errors.New("nil reply")
	}
	return "", fmt.Errorf("array reply to %s: use DoStrings", strings.Join(args, " "))
}

// DoStrings sends one command to addr on a new connection and returns an
// array reply of strings (bulk strings or integers as text; a nil element
// is ""). An error reply, a nil array or nested arrays are errors.
func DoStrings(addr string, args ...string) ([]string, error) {
	v, err := command(addr, args...)
	if err != nil {
		return nil, err
	}
	elems, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("reply to %s is %T, not an array", strings.Join(args, " "), v)
	}
	return strs(elems)
}

// strs converts the elements of an array reply to strings.
func strs(elems []any) ([]string, error) {
	out := make([]string, len(elems))
	for i, e := range elems {
		switch e := e.(type) {
		case string:
			out[i] = e
		case nil:
		default:
			return nil, fmt.Errorf("element %d is a nested array", i)
		}
	}
	return out, nil
}

// command sends one command to addr on a new connection and returns its
// reply as readReply does, or the error reply as an error.
func command(addr string, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(readyTimeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(conn))
}

// readReply reads one RESP2 reply: a simple or bulk string, or an integer as
// text, is a string; a nil bulk string or array is nil; an array is []any;
// an error reply is returned as an error.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case '$', '*':
		size, err := strconv.Atoi(line[1:])
		if err != nil || size < -1 {
			return nil, fmt.Errorf("bad reply %q", line)
		}
		if size == -1 {
			return nil, nil
		}
		if line[0] == '$' {
			buf := make([]byte, size+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				return nil, err
			}
			return string(buf[:size]), nil
		}
		elems := make([]any, size)
		for i := range elems {
			if elems[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return elems, nil
	}
	return nil, fmt.Errorf("unsupported reply %q", line)
}

// binary returns the path of redis-server, or skips (or fails) the test.
func binary(t testing.TB) string {
	t.Helper()
	return findBinary(t, exec.LookPath, os.Getenv(RequireEnv) == "1")
}

// findBinary returns the path of redis-server as lookPath finds it. When it
// is absent the test is skipped, or fails if require is set. This is the
// only skip of the package: once the binary is found, any error starting a
// server fails the test.
func findBinary(t testing.TB, lookPath func(string) (string, error), require bool) string {
	t.Helper()
	bin, err := lookPath("redis-server")
	if err == nil {
		return bin
	}
	if require {
		t.Fatalf("redistest: redis-server not found and %s=1: %v", RequireEnv, err)
	}
	t.Skipf("redistest: redis-server not found (set %s=1 to fail instead): %v", RequireEnv, err)
	return ""
}

// freePort returns a port of 127.0.0.1 that nothing listens on; with
// clusterBus, port+10000 (the cluster bus) is free too.
func freePort(clusterBus bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !clusterBus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
			bus.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port pair for a cluster node")
}

func hasCluster(args []string) bool {
	for i, a := range args {
		if a == "--cluster-enabled" && i+1 < len(args) && args[i+1] == "yes" {
			return true
		}
	}
	return false
}

// waitReady polls addr with PING until it answers PONG, the process exits,
// or readyTimeout passes.
func waitReady(addr string, cmd *exec.Cmd) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		reply, err := Do(addr, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		if cmd.ProcessState != nil || processGone(cmd) {
			return fmt.Errorf("redis-server exited: %v", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG from %s after %v: %v", addr, readyTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processGone reports whether the process has exited (a zombie counts),
// without reaping it.
func processGone(cmd *exec.Cmd) bool {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return false // no procfs: rely on the deadline
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state is the field after the command name in parentheses.
	if i := strings.LastIndexByte(string(data), ')'); i >= 0 && i+2 < len(data) {
		return data[i+2] == 'Z' || data[i+2] == 'X'
	}
	return false
}
