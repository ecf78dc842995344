// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// taskHandle is one running VNF: its QEMU process and control channel.
type taskHandle struct {
	logger        hclog.Logger
	taskConfig    *drivers.TaskConfig
	spec          spec.VNF
	pid           int
	cmd           *exec.Cmd // nil for a recovered task (not our child)
	runDir        string
	click         string
	clickFromFile bool

	mu          sync.Mutex
	ctl         *control.Client
	ready       map[string]any
	state       drivers.TaskState
	startedAt   time.Time
	completedAt time.Time
	exitResult  *drivers.ExitResult
	stopping    bool
	failMsg     string // why StartTask failed, for the task's stderr

	doneCh chan struct{} // closed when QEMU has exited

	cpuMu       sync.Mutex
	prevCPU     float64 // seconds of CPU time at prevCPUTime
	prevCPUTime time.Time
}

func (h *taskHandle) status() *drivers.TaskStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	attrs := map[string]string{
		"pid":            strconv.Itoa(h.pid),
		"vnf_uuid":       h.spec.UUID,
		"control_socket": h.spec.ControlSocket,
		"console_log":    h.spec.ConsoleLog,
	}
	for i, n := range h.spec.Nics {
		attrs[fmt.Sprintf("nic%d.tap", i)] = n.Tap
		attrs[fmt.Sprintf("nic%d.mac", i)] = n.MAC
	}
	if v, ok := h.ready["boot_us"]; ok {
		attrs["boot_us"] = fmt.Sprint(v)
	}
	return &drivers.TaskStatus{
		ID:               h.taskConfig.ID,
		Name:             h.taskConfig.Name,
		State:            h.state,
		StartedAt:        h.startedAt,
		CompletedAt:      h.completedAt,
		ExitResult:       h.exitResult,
		DriverAttributes: attrs,
	}
}

func (h *taskHandle) isRunning() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == drivers.TaskStateRunning
}

// run waits for QEMU to exit and records how it ended.
func (h *taskHandle) run() {
	var res *drivers.ExitResult
	if h.cmd != nil {
		err := h.cmd.Wait()
		res = exitResultOf(h.cmd.ProcessState, err)
	} else {
		res = waitForeign(h.pid)
	}
	h.mu.Lock()
	if !h.stopping && res.Err == nil && res.Successful() {
		// a VNF never exits on its own: QEMU ending by itself is a failure
		res.Err = fmt.Errorf("QEMU exited on its own: %s", h.stderrTail())
		res.ExitCode = 1
	}
	h.state = drivers.TaskStateExited
	h.completedAt = time.Now()
	h.exitResult = res
	if h.ctl != nil {
		h.ctl.Close()
	}
	h.mu.Unlock()
	close(h.doneCh)
}

func exitResultOf(ps *os.ProcessState, err error) *drivers.ExitResult {
	if ps == nil {
		return &drivers.ExitResult{ExitCode: -1, Err: err}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return &drivers.ExitResult{ExitCode: ps.ExitCode()}
	}
	if ws.Signaled() {
		return &drivers.ExitResult{ExitCode: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
	}
	return &drivers.ExitResult{ExitCode: ws.ExitStatus()}
}

// waitForeign waits for a process that is not our child (a recovered task) with a pidfd.
func waitForeign(pid int) *drivers.ExitResult {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return &drivers.ExitResult{ExitCode: -1, Err: fmt.Errorf("QEMU (pid %d) is gone", pid)}
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
	return &drivers.ExitResult{ExitCode: -1, Err: fmt.Errorf("QEMU (pid %d, re-attached after "+
		"a plugin restart) exited; its exit status is not available", pid)}
}

// alive reports whether pid is still this VNF's QEMU (a recycled pid is not: the -uuid on its
// command line must match).
func alive(pid int, vnfUUID string) bool {
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

func (h *taskHandle) stderrTail() string {
	b, _ := os.ReadFile(h.runDir + "/qemu.stderr")
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(no message)"
	}
	return s
}

// signal sends sig to QEMU.
func (h *taskHandle) signal(sig syscall.Signal) error {
	if h.cmd != nil {
		return h.cmd.Process.Signal(sig)
	}
	if !alive(h.pid, h.spec.UUID) {
		return nil
	}
	return unix.Kill(h.pid, sig)
}

// stop asks QEMU to quit with sig, then kills it after timeout.
func (h *taskHandle) stop(sig syscall.Signal, timeout time.Duration) {
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	select {
	case <-h.doneCh:
		return
	default:
	}
	_ = h.signal(sig)
	select {
	case <-h.doneCh:
		return
	case <-time.After(timeout):
	}
	_ = h.signal(syscall.SIGKILL)
	select {
	case <-h.doneCh:
	case <-time.After(30 * time.Second):
		h.logger.Error("QEMU did not die after SIGKILL", "pid", h.pid)
	}
}

// procStats reads CPU times (seconds) and RSS (bytes) of the QEMU process from /proc.
func procStats(pid int) (user, system float64, rss uint64, err error) {
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

// follow copies a growing file (the console log, QEMU's stderr) into a Nomad log FIFO until
// done is closed, then drains it.
func follow(path string, off int64, w io.Writer, done <-chan struct{}, final func() string) {
	buf := make([]byte, 32*1024)
	copyNew := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				off += int64(n)
			}
			if err != nil || n == 0 {
				return
			}
		}
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			copyNew()
			if final != nil {
				if msg := final(); msg != "" {
					_, _ = io.WriteString(w, msg+"\n")
				}
			}
			return
		case <-t.C:
			copyNew()
		}
	}
}
