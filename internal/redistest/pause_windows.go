package redistest

import (
	"fmt"
	"syscall"
)

// ntdll's NtSuspendProcess and NtResumeProcess stop and continue every
// thread of a process: what SIGSTOP and SIGCONT do on Unix.
var (
	ntdll            = syscall.NewLazyDLL("ntdll.dll")
	ntSuspendProcess = ntdll.NewProc("NtSuspendProcess")
	ntResumeProcess  = ntdll.NewProc("NtResumeProcess")
)

// processSuspendResume is the access right NtSuspendProcess and
// NtResumeProcess need (PROCESS_SUSPEND_RESUME).
const processSuspendResume = 0x0800

// Pause suspends every thread of the server process (NtSuspendProcess)
// without closing its connections: it accepts nothing and answers nothing,
// as a hung server would, until Resume.
func (s *Server) Pause() { s.suspend(ntSuspendProcess) }

// Resume continues a paused server (NtResumeProcess).
func (s *Server) Resume() { s.suspend(ntResumeProcess) }

func (s *Server) suspend(proc *syscall.LazyProc) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: %s of a stopped server", proc.Name)
	}
	if err := callOnProcess(proc, s.cmd.Process.Pid); err != nil {
		s.t.Fatalf("redistest: %s: %v", proc.Name, err)
	}
}

// callOnProcess calls proc (an ntdll function of one process handle that
// returns an NTSTATUS) on the process pid.
func callOnProcess(proc *syscall.LazyProc, pid int) error {
	h, err := syscall.OpenProcess(processSuspendResume, false, uint32(pid))
	if err != nil {
		return fmt.Errorf("OpenProcess %d: %w", pid, err)
	}
	defer syscall.CloseHandle(h)
	if err := proc.Find(); err != nil {
		return err
	}
	if status, _, _ := proc.Call(uintptr(h)); status != 0 {
		return fmt.Errorf("NTSTATUS %#x", status)
	}
	return nil
}
