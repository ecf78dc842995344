// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cpustats"
	cstructs "github.com/hashicorp/nomad/client/structs"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
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
	// qoe: the task's slots at the service's QoE, sent after configure (zero = none)
	qoe TaskQoE
	// configEcho: the launch's configuration is the job's own, the VNF's messages about it may
	// be shown (paths.go); set before the launch
	configEcho bool
	// limits: the cgroup, limits and pinned cores of the VNF (resources.go); set at launch/claim
	limits enforcement

	mu sync.Mutex
	// which configuration errors of the console this task's stdout shows (consoleLine): lines
	// at or after consoleFrom (where its part of a warm shell's console starts) quoting a
	// message the VNF gave this task about a configuration of its own (shown)
	consoleFrom int64
	shown       map[string]bool

	ctl         *control.Client
	ready       map[string]any
	state       drivers.TaskState
	startedAt   time.Time
	completedAt time.Time
	exitResult  *drivers.ExitResult
	stopping    bool
	failMsg     string     // why StartTask failed, for the task's stderr
	launchKind  string     // "warm" or "cold": how StartTask brought it up ("" after a recovery)
	power       *taskPower // its power by the last interval of the power meter (nil: none yet)
	lastFree    int        // free session slots at the last answered stats (freeKnown)
	freeKnown   bool

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

// waitForeign waits for a process that is not our child (a recovered task) to exit.
func waitForeign(pid int) *drivers.ExitResult {
	if !qemu.WaitForeign(pid) {
		return &drivers.ExitResult{ExitCode: -1, Err: fmt.Errorf("QEMU (pid %d) is gone", pid)}
	}
	return &drivers.ExitResult{ExitCode: -1, Err: fmt.Errorf("QEMU (pid %d, re-attached after "+
		"a plugin restart) exited; its exit status is not available", pid)}
}

func (h *taskHandle) stderrTail() string { return qemu.StderrTail(h.runDir) }

// signal sends sig to QEMU.
func (h *taskHandle) signal(sig syscall.Signal) error {
	return qemu.Signal(h.cmd, h.pid, h.spec.UUID, sig)
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

func (h *taskHandle) usage(compute cpustats.Compute) *cstructs.TaskResourceUsage {
	user, sys, rss, err := qemu.ProcStats(h.pid)
	if err != nil {
		return nil
	}
	now := time.Now()
	h.cpuMu.Lock()
	pct := 0.0
	if !h.prevCPUTime.IsZero() {
		if dt := now.Sub(h.prevCPUTime).Seconds(); dt > 0 {
			pct = (user + sys - h.prevCPU) / dt * 100
		}
	}
	h.prevCPU, h.prevCPUTime = user+sys, now
	h.cpuMu.Unlock()
	ticks := 0.0
	if compute.NumCores > 0 {
		ticks = pct / 100 * float64(compute.TotalCompute) / float64(compute.NumCores)
	}
	ru := &cstructs.ResourceUsage{
		MemoryStats: &cstructs.MemoryStats{RSS: rss, Measured: []string{"RSS"}},
		CpuStats: &cstructs.CpuStats{UserMode: user, SystemMode: sys, Percent: pct,
			TotalTicks: ticks, Measured: []string{"User Mode", "System Mode", "Percent", "Total Ticks"}},
	}
	return &cstructs.TaskResourceUsage{ResourceUsage: ru, Timestamp: now.UnixNano(),
		Pids: map[string]*cstructs.ResourceUsage{fmt.Sprint(h.pid): ru}}
}

// vnfStatsFile is where the plugin writes the VNF's counters, in the task directory.
const vnfStatsFile = "vnf-stats.json"

// vnfStatsEvery is how often the plugin rewrites a running task's vnf-stats.json. Not on
// TaskStats ticks: Nomad's client asks TaskStats only when it publishes allocation metrics
// (telemetry publish_allocation_metrics, off by default outside -dev), and the orchestrator's
// Nomad zone reads the file for slots and stats whatever the client's telemetry is.
const vnfStatsEvery = time.Second

// writeStatsEvery rewrites vnf-stats.json every period until the VNF is gone.
func (h *taskHandle) writeStatsEvery(period time.Duration) {
	tk := time.NewTicker(period)
	defer tk.Stop()
	for {
		select {
		case <-h.doneCh:
			return
		case <-tk.C:
			h.writeVNFStats()
		}
	}
}

// writeVNFStats replaces <task dir>/vnf-stats.json with the VNF's current counters, the time
// of this reading (`time`) and when the VNF was handed to Nomad configured and forwarding
// (`ready_at`) and how (`launch`: warm, cold), and its power by useful work once the power
// meter attributed it (`power`: watts, joules, components, source; powermeter.go). Written
// first by StartTask (the ready signal), then every vnfStatsEvery.
func (h *taskHandle) writeVNFStats() {
	cfg := h.taskConfig
	if cfg == nil || cfg.AllocDir == "" {
		return
	}
	st, err := h.stats(2 * time.Second)
	if err != nil {
		return
	}
	h.mu.Lock()
	readyAt, kind, power := h.startedAt, h.launchKind, h.power
	h.mu.Unlock()
	doc := map[string]any{"vnf_uuid": h.spec.UUID, "time": time.Now().UTC(),
		"ready_at": readyAt.UTC(), "stats": st}
	if kind != "" {
		doc["launch"] = kind
	}
	if power != nil {
		doc["power"] = power
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return
	}
	dir := cfg.TaskDir().Dir
	tmp := filepath.Join(dir, "."+vnfStatsFile+".tmp")
	if err := writeNoFollow(tmp, append(b, '\n')); err != nil {
		return
	}
	_ = os.Rename(tmp, filepath.Join(dir, vnfStatsFile))
}

// writeNoFollow creates path afresh and writes b to it. The task directory is the job's: a
// symlink planted at path must not make the client (root) write through it to a host file, so
// whatever is there is removed (os.Remove unlinks a symlink, not its target) and the file is
// created exclusively without following links. The rename after it replaces a link at the
// destination rather than following it.
func writeNoFollow(path string, b []byte) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (h *taskHandle) stats(timeout time.Duration) (map[string]any, error) {
	return h.request("stats", timeout)
}

// freeSlots is the VNF's free session slots from its `stats`; when it does not answer in time
// (a busy host), the last count it gave (a slow reply must not turn a full VNF into an empty
// one in the fingerprint), or all its slots if it never answered.
func (h *taskHandle) freeSlots() int {
	if st, err := h.stats(2 * time.Second); err == nil {
		if s, ok := st["slots"].(map[string]any); ok {
			if n, ok := s["free"].(json.Number); ok {
				if v, err := n.Int64(); err == nil {
					h.mu.Lock()
					h.lastFree, h.freeKnown = int(v), true
					h.mu.Unlock()
				}
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.freeKnown {
		return h.lastFree
	}
	if h.qoe.Set() {
		return min(h.spec.SessionSlots, h.qoe.Capacity)
	}
	return h.spec.SessionSlots
}

// request sends one request without fields (ping, stats) on the VNF's control channel.
func (h *taskHandle) request(op string, timeout time.Duration) (map[string]any, error) {
	h.mu.Lock()
	ctl := h.ctl
	h.mu.Unlock()
	if ctl == nil {
		return nil, errors.New("no control channel")
	}
	return ctl.Request(op, nil, timeout)
}

// configure sends a click config; macs (nil: none) gives NICs their addresses (§6.4).
func (h *taskHandle) configure(click string, slots int, macs []*string) (map[string]any, error) {
	h.mu.Lock()
	ctl := h.ctl
	h.mu.Unlock()
	if ctl == nil {
		return nil, errors.New("no control channel")
	}
	return ctl.ConfigureMACs(click, slots, macs, requestTimeout)
}

// claimedAt starts a new task's part of a (warm shell's) console at offset from: nothing the
// VNF said about earlier configurations is shown to it.
func (h *taskHandle) claimedAt(from int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.consoleFrom, h.shown = from, nil
}

// rejected records err, the VNF's answer to a configuration this task sent, as a message its
// console may show when the configuration was the job's own (echo).
func (h *taskHandle) rejected(err error, echo bool) {
	var ce *control.Error
	if !echo || !errors.As(err, &ce) || ce.Message == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shown == nil {
		h.shown = map[string]bool{}
	}
	h.shown[ce.Message] = true
}

// consoleLine is a line of the console log (starting at offset off) as the task's stdout shows
// it: the VNF's message about a rejected configuration is withheld unless this task was given
// that very message about a configuration of its own (rejected) and the line is in its part of
// the console. A line the follower copies before the answer is recorded is withheld too (the
// safe side); it is in the task's events either way.
func (h *taskHandle) consoleLine(line []byte, off int64) []byte {
	msg, ok := consoleConfigError(line)
	if !ok {
		return line
	}
	h.mu.Lock()
	show := off >= h.consoleFrom && h.shown[msg]
	h.mu.Unlock()
	if show {
		return line
	}
	return redactConsoleLine(line)
}
