// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The warm pool is vnf/manager.py's: shells are booted ahead (same spec → argv → QEMU code as a
// cold launch, taps created by QEMU and left unattached, no `configure`), and a task claims one
// of the same shape: attach the taps to the task's bridges, send `configure`. A rejected
// configuration gives the shell back (taps detached, still unconfigured); any other failure
// after the claim destroys it. A refill goroutine boots replacements in the background.
//
// Shells outlive the plugin process (QEMU runs in its own session, as tasks do): each one has
// <run_dir>/<uuid>/pool.json, and the next plugin process adopts the shells whose shape is still
// configured (control channel answers, VNF unconfigured) and kills the rest, as well as shells
// a killed plugin left half-booted or half-claimed (pool.booting / pool.claiming markers).
//
// Nomad's plugin loader starts short-lived plugin processes that get SetConfig and are killed
// ~30 ms later (config validation); so SetConfig only records the targets, and the pool
// starts (adoption, then refill) with the first Fingerprint call, which only the client's
// driver manager makes.
//
// This file is the pool's lifecycle; its contract (shapes, key, states, claim rules) is
// pool_contract.go.

const (
	poolMarker     = "pool.json"     // a ready shell (adoptable)
	bootingMarker  = "pool.booting"  // a shell being booted
	claimingMarker = "pool.claiming" // a shell being claimed by a task
	startingMarker = "task.starting" // a task's VNF whose handle the client may not have yet
	refillBackoff  = 5 * time.Second // a failed refill boot is retried no sooner
)

// shell is a booted, unconfigured VNF waiting in the pool.
type shell struct {
	h        *taskHandle
	shape    poolShape
	kernelID string
	slots    int
	key      string // its pool key (§6.2)
	state    string // §6.3, guarded by warmPool.mu
}

func newShell(h *taskHandle, sh poolShape, kid string, slots int) *shell {
	return &shell{h: h, shape: sh, kernelID: kid, slots: slots, state: stReady,
		key: poolKey(poolBackendName, kid, sh.MemoryMB, sh.Vcpus, sh.Nics, sh.FlowTimeoutMS)}
}

// move applies event to s (p.mu held); an impossible transition is a bug, logged, not fatal.
func (p *warmPool) move(s *shell, event string) {
	to, err := transition(s.state, event)
	if err != nil {
		p.logger.Error("warm pool state machine", "vnf", s.h.spec.UUID, "error", err)
		return
	}
	s.state = to
}

// poolRecord is <run_dir>/<uuid>/pool.json, for adoption after a plugin restart.
type poolRecord struct {
	Spec     spec.VNF
	Pid      int
	Shape    poolShape
	KernelID string
	Slots    int
	Ready    map[string]any
}

type warmPool struct {
	d      *Driver
	logger hclog.Logger

	mu      sync.Mutex
	targets map[poolShape]PoolConfig
	ready   map[poolShape][]*shell
	booting map[poolShape]int
	backoff map[poolShape]time.Time
	lastErr map[poolShape]string
	started bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	cond *sync.Cond // broadcast when a shell is added or removed
}

func newWarmPool(d *Driver) *warmPool {
	p := &warmPool{d: d, logger: d.logger.Named("pool"), targets: map[poolShape]PoolConfig{},
		ready: map[poolShape][]*shell{}, booting: map[poolShape]int{},
		backoff: map[poolShape]time.Time{}, lastErr: map[poolShape]string{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *warmPool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// configure sets the pool targets (shells beyond a smaller target are killed).
func (p *warmPool) configure(pools []PoolConfig) {
	targets := map[poolShape]PoolConfig{}
	for _, pc := range pools {
		targets[pc.shape()] = pc
	}
	p.mu.Lock()
	p.targets = targets
	var surplus []*shell
	for sh, list := range p.ready {
		want := targets[sh].Size
		for len(list) > want {
			surplus = append(surplus, list[len(list)-1])
			list = list[:len(list)-1]
		}
		p.ready[sh] = list
	}
	p.mu.Unlock()
	for _, s := range surplus {
		p.destroy(s, "surplus", "pool size reduced")
	}
	p.kick()
}

// start adopts or kills the shells a previous plugin process left in runDir, then starts the
// refill goroutine; only the first call does anything.
func (p *warmPool) start(runDir string) {
	p.mu.Lock()
	first := !p.started && !p.isStopped()
	p.started = true
	p.mu.Unlock()
	if first {
		p.adopt(runDir)
		go p.loop()
		p.kick()
	}
}

// adopt takes over the shells a previous plugin process booted (their pool.json): kept when
// their shape is still configured and they answer as unconfigured shells, killed otherwise.
func (p *warmPool) adopt(runDir string) {
	entries, _ := os.ReadDir(runDir)
	for _, e := range entries {
		dir := filepath.Join(runDir, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, poolMarker))
		if err != nil {
			p.reapHalfBooted(dir)
			continue
		}
		var rec poolRecord
		if err := json.Unmarshal(b, &rec); err != nil || rec.Spec.UUID != e.Name() {
			p.logger.Warn("unreadable pool record: removing the directory", "dir", dir, "error", err)
			_ = os.RemoveAll(dir)
			continue
		}
		h := &taskHandle{logger: p.logger.With("vnf", rec.Spec.UUID), spec: rec.Spec, pid: rec.Pid,
			runDir: dir, ready: rec.Ready, state: drivers.TaskStateUnknown, doneCh: make(chan struct{})}
		reason := ""
		p.mu.Lock()
		pc, wanted := p.targets[rec.Shape]
		have := len(p.ready[rec.Shape])
		p.mu.Unlock()
		switch {
		case !qemu.Alive(rec.Pid, rec.Spec.UUID):
			reason = "its QEMU is gone"
		case !wanted || have >= pc.Size:
			reason = "no warm_pool block wants it any more"
		case kernelID(rec.Shape.Kernel) != rec.KernelID:
			reason = "the kernel file changed"
		}
		if reason == "" {
			ctl, err := control.Dial(rec.Spec.ControlSocket)
			if err != nil {
				reason = "control socket: " + err.Error()
			} else if res, err := ctl.Ping(5 * time.Second); err != nil || truthyResult(res, "configured") {
				ctl.Close()
				reason = fmt.Sprintf("does not answer as an unconfigured shell (%v)", err)
			} else {
				h.ctl = ctl
			}
		}
		if reason != "" {
			p.logger.Info("killing a shell left by a previous plugin process", "vnf", rec.Spec.UUID,
				"reason", reason)
			if qemu.Alive(rec.Pid, rec.Spec.UUID) {
				qemu.KillForeign(rec.Pid, rec.Spec.UUID, 10*time.Second)
			}
			p.d.cleanup(h)
			continue
		}
		go h.run()
		s := newShell(h, rec.Shape, rec.KernelID, rec.Slots)
		p.mu.Lock()
		p.ready[rec.Shape] = append(p.ready[rec.Shape], s)
		p.cond.Broadcast()
		p.mu.Unlock()
		go p.watch(s)
		p.logger.Info("adopted a shell left by a previous plugin process", "vnf", rec.Spec.UUID,
			"shape", rec.Shape.String())
	}
}

// reapHalfBooted kills the QEMU of a shell a killed plugin left while booting or claiming it (a
// claim that did not finish never reached Nomad), or of a cold launch it left before handing
// the task's handle to Nomad (the client starts such a task again), and removes its taps and
// files. Directories without these markers are tasks' VNFs: RecoverTask re-attaches to them.
func (p *warmPool) reapHalfBooted(dir string) {
	if !fileExists(filepath.Join(dir, bootingMarker)) && !fileExists(filepath.Join(dir, claimingMarker)) &&
		!fileExists(filepath.Join(dir, startingMarker)) {
		return
	}
	vid := filepath.Base(dir)
	var s spec.VNF
	if b, err := os.ReadFile(filepath.Join(dir, qemu.SpecFile)); err == nil {
		_ = json.Unmarshal(b, &s)
	}
	if s.UUID != vid {
		s = spec.VNF{UUID: vid} // booted no further than the directory: no taps yet
	}
	h := &taskHandle{logger: p.logger.With("vnf", vid), spec: s, runDir: dir}
	if pid := qemu.Find(vid); pid > 0 {
		qemu.KillForeign(pid, s.UUID, 10*time.Second)
	}
	p.logger.Info("removed a shell a previous plugin process left half-booted", "vnf", s.UUID)
	p.d.cleanup(h)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func truthyResult(res map[string]any, key string) bool {
	v, _ := res[key].(bool)
	return v
}

func (p *warmPool) loop() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-t.C:
		}
		for {
			pc, ok := p.nextToBoot()
			if !ok {
				break
			}
			p.bootOne(pc)
			select {
			case <-p.stop:
				return
			default:
			}
		}
	}
}

// removeStale destroys the ready shells booted from a kernel file that has changed since
// (§6.1, event kernel_changed): they are never claimed, and the refill replaces them. async:
// kill them in the background (on a task's claim path).
func (p *warmPool) removeStale(async bool) {
	p.mu.Lock()
	var stale []*shell
	for sh, list := range p.ready {
		current := kernelID(sh.Kernel)
		keep := list[:0:0]
		for _, s := range list {
			if s.kernelID != current {
				stale = append(stale, s)
			} else {
				keep = append(keep, s)
			}
		}
		p.ready[sh] = keep
	}
	if len(stale) > 0 {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
	for _, s := range stale {
		if async {
			go p.destroy(s, "kernel_changed", "the kernel file changed")
		} else {
			p.destroy(s, "kernel_changed", "the kernel file changed")
		}
	}
}

// nextToBoot picks a shape below its target (not in back-off) and counts the boot as started.
func (p *warmPool) nextToBoot() (PoolConfig, bool) {
	p.removeStale(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]poolShape, 0, len(p.targets))
	for k := range p.targets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		pc := p.targets[k]
		if len(p.ready[k])+p.booting[k] < pc.Size && time.Now().After(p.backoff[k]) {
			p.booting[k]++
			return pc, true
		}
	}
	return PoolConfig{}, false
}

// bootOne boots a shell of pc's shape (d.launch: same spec/argv/QEMU code as a cold launch).
func (p *warmPool) bootOne(pc PoolConfig) {
	sh := pc.shape()
	err := p.bootShell(pc)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.booting[sh]--
	if err != nil {
		p.lastErr[sh] = err.Error()
		p.backoff[sh] = time.Now().Add(refillBackoff)
		p.logger.Error("warm pool refill failed; retrying later", "shape", sh.String(), "error", err,
			"backoff", refillBackoff)
		return
	}
	delete(p.lastErr, sh)
}

func (p *warmPool) bootShell(pc PoolConfig) error {
	d := p.d
	set := d.settings()
	cfg := set.config
	if set.qemuPath == "" {
		return fmt.Errorf("QEMU binary %q not found", cfg.Qemu)
	}
	sh := pc.shape()
	kid := kernelID(sh.Kernel)
	if kid == "" {
		return fieldErr("warm_pool.kernel", "%s does not exist: build it with `make -C unikernel`", sh.Kernel)
	}
	vid := newUUID()
	s := qemu.NewSpec(vid, "pool-"+vid[:8], cfg.RunDir, set.accel, set.tscKHz)
	s.Kernel, s.MemoryMB, s.Vcpus = sh.Kernel, sh.MemoryMB, sh.Vcpus
	s.Firmware = spec.FirmwareFor(s.Machine, s.Kernel, cfg.Firmware, fileExists)
	s.NetBackend = cfg.NetBackend
	s.SessionSlots, s.FlowTimeoutMS = pc.SessionSlots, sh.FlowTimeoutMS
	for i := 0; i < sh.Nics; i++ {
		s.Nics = append(s.Nics, spec.NIC{Tap: spec.TapFor(vid, i), MAC: spec.MACFor(vid, i)})
	}
	if err := s.Validate(); err != nil {
		return err
	}
	h := &taskHandle{logger: p.logger.With("vnf", vid), spec: s, runDir: filepath.Join(cfg.RunDir, vid),
		state: drivers.TaskStateUnknown, doneCh: make(chan struct{})}
	// marked before QEMU exists: a plugin killed mid-boot leaves a shell the next one reaps
	if err := os.MkdirAll(h.runDir, 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.runDir, bootingMarker), nil, 0o640); err != nil {
		_ = os.RemoveAll(h.runDir)
		return err
	}
	if _, err := d.launch(h, set.qemuPath, set.bootTimeout); err != nil {
		return err
	}
	rec := poolRecord{Spec: s, Pid: h.pid, Shape: sh, KernelID: kid, Slots: pc.SessionSlots, Ready: h.ready}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(h.runDir, poolMarker), b, 0o640); err != nil {
		qemu.Kill(h.cmd)
		d.cleanup(h)
		return err
	}
	_ = os.Remove(filepath.Join(h.runDir, bootingMarker))
	go h.run()
	s2 := newShell(h, sh, kid, pc.SessionSlots)
	p.mu.Lock()
	if _, still := p.targets[sh]; !still || p.isStopped() {
		p.mu.Unlock()
		p.destroy(s2, "surplus", "pool no longer configured")
		return nil
	}
	p.ready[sh] = append(p.ready[sh], s2)
	p.cond.Broadcast()
	p.mu.Unlock()
	go p.watch(s2)
	p.logger.Debug("shell booted", "vnf", vid, "shape", sh.String())
	return nil
}

func (p *warmPool) isStopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// watch removes a shell whose QEMU dies while it waits in the pool (and refills).
func (p *warmPool) watch(s *shell) {
	<-s.h.doneCh
	if p.remove(s) {
		p.logger.Warn("a pooled shell died; refilling", "vnf", s.h.spec.UUID, "qemu", s.h.stderrTail())
		p.d.cleanup(s.h)
		p.kick()
	}
}

// remove takes s out of the ready list; false if it was not there (claimed or destroyed).
func (p *warmPool) remove(s *shell) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.ready[s.shape]
	for i, x := range list {
		if x == s {
			p.ready[s.shape] = append(list[:i:i], list[i+1:]...)
			p.move(s, "died")
			p.cond.Broadcast()
			return true
		}
	}
	return false
}

// take claims the oldest ready shell of pool key (§6.2) that fits (nil if none): shells of
// every warm_pool block whose shape has that key (two blocks may name copies of one kernel).
func (p *warmPool) take(key string, fits func(*shell) bool) *shell {
	p.removeStale(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	shapes := make([]poolShape, 0, len(p.ready))
	for sh := range p.ready {
		shapes = append(shapes, sh)
	}
	sort.Slice(shapes, func(i, j int) bool { return shapes[i].String() < shapes[j].String() })
	for _, sh := range shapes {
		for i := 0; i < len(p.ready[sh]); i++ {
			list := p.ready[sh]
			s := list[i]
			if s.key != key || !fits(s) {
				continue
			}
			select {
			case <-s.h.doneCh:
				continue // died: its watcher removes it
			default:
			}
			p.ready[sh] = append(list[:i:i], list[i+1:]...)
			p.move(s, "claim")
			p.cond.Broadcast()
			// claimed: not adoptable as a shell after a plugin restart, reaped if the claim
			// does not finish (the plugin dies before StartTask returns)
			_ = os.Rename(filepath.Join(s.h.runDir, poolMarker), filepath.Join(s.h.runDir, claimingMarker))
			return s
		}
	}
	return nil
}

// giveBack returns an intact, unconfigured shell (event: config_rejected) to the front of its
// list: it keeps its place as the oldest.
func (p *warmPool) giveBack(s *shell, event string) {
	rec := poolRecord{Spec: s.h.spec, Pid: s.h.pid, Shape: s.shape, KernelID: s.kernelID, Slots: s.slots,
		Ready: s.h.ready}
	b, _ := json.Marshal(rec)
	_ = os.WriteFile(filepath.Join(s.h.runDir, poolMarker), b, 0o640)
	_ = os.Remove(filepath.Join(s.h.runDir, claimingMarker))
	p.mu.Lock()
	p.move(s, event)
	_, wanted := p.targets[s.shape]
	if wanted && !p.isStopped() {
		p.ready[s.shape] = append([]*shell{s}, p.ready[s.shape]...)
		p.cond.Broadcast()
		p.mu.Unlock()
		go p.watch(s)
		return
	}
	p.mu.Unlock()
	p.destroy(s, "surplus", "pool no longer configured")
}

// destroy kills a shell's QEMU and removes its taps and run directory; event is what removes it
// (§6.3).
func (p *warmPool) destroy(s *shell, event, why string) {
	p.mu.Lock()
	p.move(s, event)
	p.mu.Unlock()
	p.logger.Debug("destroying shell", "vnf", s.h.spec.UUID, "reason", why)
	s.h.mu.Lock()
	s.h.stopping = true
	s.h.mu.Unlock()
	s.h.stop(syscall.SIGKILL, 0)
	p.d.cleanup(s.h)
}

// counts returns (ready, booting, target) summed over all shapes.
func (p *warmPool) counts() (int, int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, b, t := 0, 0, 0
	for k, pc := range p.targets {
		t += pc.Size
		r += len(p.ready[k])
		b += p.booting[k]
	}
	return r, b, t
}

// lastError is the latest refill failure of any shape ("" when every refill worked).
func (p *warmPool) lastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, len(p.lastErr))
	for k, e := range p.lastErr {
		keys = append(keys, k.String()+": "+e)
	}
	sort.Strings(keys)
	return strings.Join(keys, "; ")
}

// waitReady blocks until n shells of this shape are ready (tests, benchmarks).
func (p *warmPool) waitReady(sh poolShape, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() { p.mu.Lock(); p.cond.Broadcast(); p.mu.Unlock() })
	defer timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready[sh]) < n {
		if time.Now().After(deadline) {
			return false
		}
		p.cond.Wait()
	}
	return true
}

// shutdown stops the refill and kills every pooled shell (tests; a plugin process that is
// killed leaves them to be adopted by the next one).
func (p *warmPool) shutdown() {
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if !p.isStopped() {
		close(p.stop)
		if started {
			<-p.done
		}
	}
	p.mu.Lock()
	var all []*shell
	for k, list := range p.ready {
		all = append(all, list...)
		delete(p.ready, k)
	}
	p.mu.Unlock()
	for _, s := range all {
		p.destroy(s, "surplus", "plugin shutdown")
	}
}

// startWarm claims a ready shell of the task's shape: attach its taps to the task's bridges,
// send `configure` (manager._launch_warm). claimed is false when no shell was used (the caller
// boots cold). A configuration the VNF rejects gives the shell back to the pool; any other
// failure after the claim destroys it. Nothing is left attached or running on error.
func (d *Driver) startWarm(cfg *drivers.TaskConfig, tc *TaskConfig, click string, t0 time.Time) (
	*drivers.TaskHandle, bool, error) {
	kid := kernelID(tc.Kernel)
	if kid == "" {
		return nil, false, nil
	}
	key := poolKey(poolBackendName, kid, tc.MemoryMB, tc.Vcpus, len(tc.NIC), tc.FlowTimeoutMS)
	macs := tc.fixedMACs()
	anyMAC := macs != nil
	s := d.pool.take(key, func(s *shell) bool {
		// nothing to configure: the slots given at boot stay and no MAC can be given, so only
		// a shell booted with the task's slots fits, and only without MACs (§6.2)
		return click != "" || (tc.SessionSlots == s.slots && !anyMAC)
	})
	if s == nil {
		return nil, false, nil
	}
	ms := func(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
	phases := map[string]float64{"claim": ms(t0)}
	h := s.h
	vid := h.spec.UUID
	fail := func(err error) (*drivers.TaskHandle, bool, error) {
		d.pool.destroy(s, "failed", "claim failed: "+err.Error())
		d.pool.kick()
		return nil, true, err
	}
	// §6.4: the task's MACs replace the shell's (this driver renames no taps)
	configureMACs, nics, err := claimNICs(h.spec.Nics, macs, nil)
	if err != nil {
		return fail(fieldErr(map[bool]string{true: "macs", false: "nic"}[tc.oldNICs], "%v", err))
	}
	t := time.Now()
	for i, nic := range tc.NIC {
		if nic.Bridge == "" {
			continue
		}
		if err := d.plugNIC(h.spec.Nics[i].Tap, nic.Bridge); err != nil {
			return fail(fieldErr(tc.nicKey(i, "bridge"), "%v", err))
		}
	}
	phases["net"] = ms(t)
	// the console from here on is this task's; what it says about the configuration is shown
	// only when the configuration is the job's own (paths.go)
	h.claimedAt(fileSize(h.spec.ConsoleLog))
	if click != "" {
		t = time.Now()
		if _, err := h.configure(click, tc.SessionSlots, configureMACs); err != nil {
			field := "click_config"
			if tc.ClickFile != "" {
				field = "click_file"
			}
			h.rejected(err, tc.configEcho)
			msg := vnfMessage(err, tc.configEcho)
			var ce *control.Error
			if errors.As(err, &ce) && ce.Code == "config" {
				// the shell is intact and still unconfigured: detach its taps, give it back
				for _, n := range h.spec.Nics {
					if err := qemu.UnplugTap(n.Tap); err != nil {
						return fail(fieldErr(field, "the VNF rejected the configuration: %v (and "+
							"its tap could not be detached: %v)", msg, err))
					}
				}
				d.pool.giveBack(s, "config_rejected")
				d.pool.kick()
				return nil, true, fieldErr(field, "the VNF rejected the configuration: %v", msg)
			}
			return fail(fmt.Errorf("configure on a warm shell failed: %w", msg))
		}
		phases["configure"] = ms(t)
	}
	h.mu.Lock()
	ctl := h.ctl
	h.mu.Unlock()
	if err := sendQoE(ctl, tc.QoE); err != nil {
		return fail(err) // a claimed (maybe configured) shell: it goes, as any failure here
	}
	// the task's limits: the shell's QEMU moves into the task's cgroup, its vCPUs onto the cores
	lim, err := d.newEnforcement(cfg, vid, h.spec.MemoryMB)
	if err == nil && lim.cgroup != nil {
		err = lim.cgroup.Add(h.pid)
	}
	if err == nil {
		err = lim.pin(h.pid)
	}
	if err != nil {
		return fail(err)
	}
	h.limits = lim

	t = time.Now()
	h.mu.Lock()
	h.logger = d.logger.With("task_id", cfg.ID, "vnf", vid)
	h.taskConfig, h.click, h.clickFromFile, h.qoe = cfg, click, tc.ClickFile != "", tc.QoE
	h.spec.Name = vnfName(tc, cfg, vid)
	h.spec.SessionSlots = tc.SessionSlots
	for i, nic := range tc.NIC {
		h.spec.Nics[i].MAC = nics[i].MAC
		h.spec.Nics[i].Bridge = nil
		if nic.Bridge != "" {
			b := nic.Bridge
			h.spec.Nics[i].Bridge = &b
		}
	}
	h.spec.ClickConfig = nil
	if click != "" {
		c := click
		h.spec.ClickConfig = &c
	}
	exited := h.state == drivers.TaskStateExited
	if !exited {
		h.state = drivers.TaskStateRunning
	}
	h.startedAt = time.Now().Round(time.Millisecond)
	st := &taskState{TaskConfig: cfg, Spec: h.spec, Pid: h.pid, StartedAt: h.startedAt,
		ClickConfig: click, Ready: h.ready}
	h.mu.Unlock()
	if exited {
		return fail(fmt.Errorf("the warm shell's QEMU exited during the claim: %s", h.stderrTail()))
	}
	qemu.WriteSpec(h.runDir, &h.spec)
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(st); err != nil {
		return fail(fmt.Errorf("failed to set driver state: %v", err))
	}
	d.pool.mu.Lock()
	d.pool.move(s, "configured")
	d.pool.mu.Unlock()
	d.tasks.Set(cfg.ID, h)
	// now a task: WaitTask or RecoverTask unmarks it once the client has its handle
	_ = os.Rename(filepath.Join(h.runDir, claimingMarker), filepath.Join(h.runDir, startingMarker))
	d.startLogs(h, 0, 0)
	phases["record"] = ms(t)
	total := ms(t0)
	d.recordLaunch("warm", total)
	d.pool.kick() // refill after serving the request
	ann := map[string]string{"launch": "warm", "launch_ms": fmt.Sprintf("%.2f", total), "vnf_uuid": vid}
	for k, v := range lim.annotations() {
		ann[k] = v
	}
	for k, v := range phases {
		ann[k+"_ms"] = fmt.Sprintf("%.2f", v)
	}
	if v, ok := h.ready["boot_us"]; ok {
		ann["boot_us"] = fmt.Sprint(v)
	}
	d.emit(cfg, fmt.Sprintf("VNF %s configured on a warm shell (warm launch %.2f ms)", h.spec.Name, total), ann)
	return handle, true, nil
}
