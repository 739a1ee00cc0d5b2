package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSchedPasses bounds the passes batchScheduling makes over the
// process's threads.
const maxSchedPasses = 5

// batchScheduling moves every thread of the process that runs under the
// kernel's normal policy (SCHED_OTHER) to SCHED_BATCH, keeping its nice
// value, and reports how many it moved. A thread under another policy (a
// real-time or idle one that chrt set, say) is left as it is. The threads
// the Go runtime starts later inherit the policy of the thread that starts
// them; a thread started during a pass by one not moved yet is moved by the
// next pass.
//
// Under SCHED_BATCH a thread that wakes does not preempt the one running
// on its CPU: an event loop woken by one ready socket runs a little later,
// with the sockets that became ready meanwhile, instead of taking the CPU
// from the client or the upstream that made it ready, and waking again for
// the next one. On a CPU shared with the load, the loops then make fewer
// context switches and spend less CPU time per request.
func batchScheduling() (int, error) {
	moved := 0
	for range maxSchedPasses {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return moved, fmt.Errorf("listing the threads: %w", err)
		}
		n := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			attr, err := unix.SchedGetAttr(tid, 0)
			if errors.Is(err, unix.ESRCH) {
				continue // the thread ended
			}
			if err != nil {
				return moved, fmt.Errorf("reading thread %d's scheduling policy: %w", tid, err)
			}
			if attr.Policy != unix.SCHED_NORMAL {
				continue
			}
			attr.Policy = unix.SCHED_BATCH
			// Since Linux 6.12, sched_getattr reports the thread's time
			// slice in Runtime; given back, it would pin the slice to the
			// base slice of today instead of following the system's.
			attr.Runtime = 0
			if err := unix.SchedSetAttr(tid, attr, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return moved, fmt.Errorf("setting thread %d's scheduling policy: %w", tid, err)
			}
			n++
		}
		moved += n
		if n == 0 {
			break
		}
	}
	return moved, nil
}
