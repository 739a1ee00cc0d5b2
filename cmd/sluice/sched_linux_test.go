package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBatchScheduling runs batchScheduling in a process of its own (this
// test binary, run again), so that the other tests keep the normal policy.
func TestBatchScheduling(t *testing.T) {
	if os.Getenv("SLUICE_SCHED_CHILD") == "1" {
		batchSchedulingChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBatchScheduling$", "-test.v")
	cmd.Env = append(os.Environ(), "SLUICE_SCHED_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// batchSchedulingChild checks that every thread ends under SCHED_BATCH,
// those started afterwards too, but for one that chrt -i would have put
// under SCHED_IDLE; and that a thread's nice value stays.
func batchSchedulingChild(t *testing.T) {
	idle, niced := lockedThread(t), lockedThread(t)
	attr, err := unix.SchedGetAttr(idle.tid, 0)
	if err != nil {
		t.Fatal(err)
	}
	attr.Policy = unix.SCHED_IDLE
	if err := unix.SchedSetAttr(idle.tid, attr, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, niced.tid, 3); err != nil {
		t.Fatal(err)
	}
	n, err := batchScheduling()
	if err != nil || n == 0 {
		t.Fatalf("batchScheduling() = %d, %v; want threads moved", n, err)
	}
	// Threads started now, while these hold theirs, inherit the policy.
	more := make([]*thread, 4)
	for i := range more {
		more[i] = lockedThread(t)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // ended
		}
		switch {
		case tid == idle.tid && a.Policy != unix.SCHED_IDLE:
			t.Errorf("the idle thread's policy is %d, want SCHED_IDLE (%d) kept", a.Policy, unix.SCHED_IDLE)
		case tid == niced.tid && (a.Policy != unix.SCHED_BATCH || a.Nice != 3):
			t.Errorf("the niced thread: policy %d nice %d, want SCHED_BATCH (%d) nice 3", a.Policy, a.Nice, unix.SCHED_BATCH)
		case tid != idle.tid && a.Policy != unix.SCHED_BATCH:
			t.Errorf("thread %d: policy %d, want SCHED_BATCH (%d)", tid, a.Policy, unix.SCHED_BATCH)
		}
	}
	for _, th := range append(more, idle, niced) {
		th.end()
	}
}

// thread is a goroutine locked to its OS thread until end, which lets the
// thread exit.
type thread struct {
	tid  int
	stop chan struct{}
	done sync.WaitGroup
}

func lockedThread(t *testing.T) *thread {
	th := &thread{stop: make(chan struct{})}
	ready := make(chan int)
	th.done.Add(1)
	go func() {
		defer th.done.Done()
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		ready <- unix.Gettid()
		<-th.stop
	}()
	th.tid = <-ready
	return th
}

func (th *thread) end() {
	close(th.stop)
	th.done.Wait()
}
