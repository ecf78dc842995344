// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package qemu

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Alive reports whether pid is still this VNF's QEMU (a recycled pid is not: the -uuid on its
// command line must match).
func Alive(pid int, vnfUUID string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "-uuid" && i+1 < len(args) {
			return args[i+1] == vnfUUID
		}
	}
	return false
}

// Find is the pid of the QEMU running VNF vnfUUID (its -uuid argument), or 0.
func Find(vnfUUID string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && Alive(pid, vnfUUID) {
			return pid
		}
	}
	return 0
}

// WaitGone waits until pid no longer runs this VNF (after SIGKILL of a process that is not our
// child).
func WaitGone(pid int, vnfUUID string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for Alive(pid, vnfUUID) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// KillForeign sends SIGKILL to pid, a QEMU that is not our child (left by a previous plugin
// process), and waits up to timeout for it to be gone.
func KillForeign(pid int, vnfUUID string, timeout time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	WaitGone(pid, vnfUUID, timeout)
}

// Kill kills a QEMU this process started and reaps it (nil or not started: nothing).
func Kill(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// Signal sends sig to a VNF's QEMU: through cmd when this process started it, else by pid
// while the pid still runs this VNF (a re-attached task).
func Signal(cmd *exec.Cmd, pid int, vnfUUID string, sig syscall.Signal) error {
	if cmd != nil {
		return cmd.Process.Signal(sig)
	}
	if !Alive(pid, vnfUUID) {
		return nil
	}
	return unix.Kill(pid, sig)
}

// WaitForeign waits with a pidfd for a process that is not our child (a re-attached task) to
// exit; false when it could not be watched (gone already).
func WaitForeign(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			break
		}
		if fds[0].Revents != 0 {
			break
		}
	}
	return true
}

// ProcStats reads CPU times (seconds) and RSS (bytes) of the QEMU process from /proc.
func ProcStats(pid int) (user, system float64, rss uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	// fields after the ")" that closes comm: state is field 3, utime 14, stime 15, rss 24
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return 0, 0, 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	const hz = 100.0 // USER_HZ
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	pages, _ := strconv.ParseUint(f[21], 10, 64)
	return ut / hz, st / hz, pages * uint64(os.Getpagesize()), nil
}
