// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

// Package qemu is the QEMU mechanics of the Nomad driver, as vnf/backends.py's QemuBackend is the
// Python core's: a VNF's run directory, booting its QEMU microvm from the spec's argv
// (spec.VNF.QemuArgv, checked against contract/vectors/spec.json) with the control and QMP sockets
// as inherited fds, waiting for the VNF's `ready` on the control channel, taps and bridges,
// finding and killing QEMU processes, the accelerator and the memory flags QEMU inherits.
// It knows nothing of Nomad: package unikernel drives it from the task driver contract.
package qemu

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The files of a VNF's run directory (<run_dir>/<uuid>/).
const (
	ControlSocketFile = "ctl.sock"
	QMPSocketFile     = "qmp.sock"
	ConsoleLogFile    = "console.log"
	StderrFile        = "qemu.stderr"  // QEMU's stdout and stderr
	VhostStderrFile   = "vhost.stderr" // fluidvim-vhost-net's (net_backend vhost-user)
	SpecFile          = "spec.json"    // the spec QEMU was started from
)

// NewSpec is the part of a VNF spec shared by cold launches and pool shells: identity, the
// accelerator, and the sockets and console log in the VNF's run directory under runRoot.
func NewSpec(vid, name, runRoot, accel string, tsc *int) spec.VNF {
	runDir := filepath.Join(runRoot, vid)
	qmp := filepath.Join(runDir, QMPSocketFile)
	s := spec.New()
	s.UUID, s.Name = vid, name
	s.ControlSocket, s.ConsoleLog, s.QMPSocket = filepath.Join(runDir, ControlSocketFile),
		filepath.Join(runDir, ConsoleLogFile), &qmp
	s.Accel, s.TSCkHz = accel, tsc
	return s
}

// StderrPath is the file that holds QEMU's output for the VNF run directory runDir.
func StderrPath(runDir string) string { return filepath.Join(runDir, StderrFile) }

// WriteSpec replaces runDir/spec.json with s (best effort: it is for people and reapers).
func WriteSpec(runDir string, s *spec.VNF) {
	if b, err := json.Marshal(s); err == nil {
		_ = os.WriteFile(filepath.Join(runDir, SpecFile), b, 0o640)
	}
}

// VM is a QEMU this process started whose VNF has said `ready`.
type VM struct {
	Cmd   *exec.Cmd
	Pid   int
	Ctl   *control.Client
	Ready map[string]any // the VNF's `ready` message
}

// Boot runs a VNF up to its `ready`: run directory and spec.json, sockets, argv, QEMU (in its own
// session, so it survives a plugin restart), control connection, `ready` within bootTimeout.
// phases gets the milliseconds of "spec", "spawn" and "boot". On error no QEMU runs and no
// connection is open; the caller removes the taps and the run directory.
// cg (nil: none) is the cgroup QEMU is moved into as soon as it has started.
// With s.NetBackend vhost-user, fluidvim-vhost-net (vhostNet) is started first on the NICs'
// listening sockets; it exits when QEMU hangs up.
func Boot(qemuPath, vhostNet string, s *spec.VNF, runDir string, bootTimeout time.Duration,
	phases map[string]float64, cg *Cgroup) (*VM, error) {
	ms := func(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
	t := time.Now()
	if err := os.MkdirAll(runDir, 0o750); err != nil {
		return nil, err
	}
	WriteSpec(runDir, s)
	vm := &VM{}
	var vhost *exec.Cmd
	fail := func(err error) (*VM, error) {
		Kill(vm.Cmd)
		if vhost != nil && vm.Cmd == nil {
			_ = vhost.Process.Kill() // QEMU never connected: it would wait for it forever
		}
		if vm.Ctl != nil {
			vm.Ctl.Close()
		}
		return nil, err
	}
	ctlF, err := listenFile(s.ControlSocket)
	if err != nil {
		return fail(err)
	}
	defer ctlF.Close()
	qmpF, err := listenFile(*s.QMPSocket)
	if err != nil {
		return fail(err)
	}
	defer qmpF.Close()
	errF, err := os.Create(StderrPath(runDir))
	if err != nil {
		return fail(err)
	}
	defer errF.Close()
	if s.NetBackend == spec.NetVhostUser && len(s.Nics) > 0 {
		if vhost, err = startVhost(vhostNet, s, runDir); err != nil {
			return fail(err)
		}
	}
	// ExtraFiles[i] becomes fd 3+i in QEMU: control = 3, QMP = 4 (as in contract/vectors/spec.json)
	argv, err := s.QemuArgv(qemuPath, 3, 4)
	if err != nil {
		return fail(fmt.Errorf("invalid config: %w", err))
	}
	phases["spec"] = ms(t)
	t = time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{ctlF, qmpF}
	cmd.Stdout, cmd.Stderr = errF, errF
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // survives a plugin restart
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("cannot start QEMU: %w", err))
	}
	vm.Cmd, vm.Pid = cmd, cmd.Process.Pid
	if cg != nil { // before the guest touches its memory: QEMU maps guest RAM lazily
		if err := cg.Add(vm.Pid); err != nil {
			return fail(err)
		}
	}
	ctlF.Close()
	qmpF.Close()
	ctl, err := control.Dial(s.ControlSocket)
	if err != nil {
		return fail(fmt.Errorf("cannot connect to the control socket: %w", err))
	}
	vm.Ctl = ctl
	phases["spawn"] = ms(t)
	t = time.Now()
	ready, err := ctl.WaitReady(bootTimeout)
	if err != nil {
		Kill(vm.Cmd) // first, so that its stderr is complete
		return fail(fmt.Errorf("VNF %s did not become ready: %v; QEMU: %s; console: %s",
			s.Name, err, StderrTail(runDir), Tail(s.ConsoleLog, 500)))
	}
	vm.Ready = ready
	phases["boot"] = ms(t)
	return vm, nil
}

// SetVcpuNice gives every thread of QEMU pid but its main thread (the vCPUs; QEMU's RCU and
// worker threads do little) nice: the main thread moves the frames (vnf/backends.py
// set_vcpu_nice, vnf/limits.py VCPU_NICE_DEFAULT). Best effort.
func SetVcpuNice(pid, nice int) {
	if pid <= 0 || nice == 0 {
		return
	}
	for _, tid := range vcpuThreads(pid) {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
	}
}

// vcpuThreads lists the threads of QEMU pid but its main thread: the vCPUs (and QEMU's RCU and
// worker threads, which do little).
func vcpuThreads(pid int) []int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var tids []int
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pid {
			continue
		}
		tids = append(tids, tid)
	}
	return tids
}

// startVhost starts fluidvim-vhost-net on listening sockets for s's NICs (spec.VhostSocket, the
// Python launcher's vnf/backends.py _start_vhost): it creates the taps and serves QEMU, which
// connects next; a goroutine reaps it when it exits with QEMU.
func startVhost(bin string, s *spec.VNF, runDir string) (*exec.Cmd, error) {
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	args := make([]string, 0, len(s.Nics))
	for i, n := range s.Nics {
		f, err := listenFile(s.VhostSocket(i))
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		args = append(args, fmt.Sprintf("%d:%s", 3+i, n.Tap)) // ExtraFiles[i] is fd 3+i
	}
	errF, err := os.Create(filepath.Join(runDir, VhostStderrFile))
	if err != nil {
		return nil, err
	}
	defer errF.Close()
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = errF, errF
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // lives as long as its QEMU
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("invalid config: vhost_net_binary: cannot start %s: %w", bin, err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

// listenFile binds and listens on a unix socket and returns it as a file to hand to QEMU.
func listenFile(path string) (*os.File, error) {
	_ = os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	l.Close()
	return f, err
}

// Tail is the last n bytes of a file, trimmed ("" if unreadable).
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// StderrTail is the end of QEMU's output for the run directory runDir, for error messages.
func StderrTail(runDir string) string {
	b, _ := os.ReadFile(runDir + "/" + StderrFile)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(no message)"
	}
	return s
}

// RemoveLeftovers deletes a VNF's taps that are still there (normally gone with QEMU) and its run
// directory; warn hears about a tap that could not be deleted.
func RemoveLeftovers(s *spec.VNF, runDir string, warn func(tap string, err error)) {
	for _, n := range s.Nics {
		if err := DeleteLink(n.Tap); err != nil && warn != nil {
			warn(n.Tap, err)
		}
	}
	_ = os.RemoveAll(runDir)
}
