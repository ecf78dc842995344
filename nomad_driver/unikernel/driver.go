// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

// Package unikernel is the Nomad task driver for fluidvim VNFs: each task is one unikernel in
// a QEMU microvm, launched like the Python core (vnf/backends.py QemuBackend, vnf/manager.py):
// spec → argv → QEMU with the control and QMP sockets as inherited fds → connect → the VNF's
// own `ready` → plug taps into bridges → `configure`.
//
// This file is the Nomad driver contract (fingerprint, StartTask, WaitTask, StopTask,
// DestroyTask, InspectTask, TaskStats, RecoverTask, ...); the QEMU mechanics are package qemu,
// the warm pool pool.go, a running task handle.go, its logs logs.go, the launch history behind
// the queuing delay launches.go, `nomad alloc exec` exec.go.
package unikernel

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cpustats"
	cstructs "github.com/hashicorp/nomad/client/structs"
	"github.com/hashicorp/nomad/drivers/shared/eventer"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/drivers/fsisolation"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"
	"golang.org/x/sys/unix"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

const (
	// PluginName is the driver name used in job files (`driver = "unikernel"`); the client's
	// plugin block is named after the binary instead: `plugin "fluidvim-unikernel"`.
	PluginName = "unikernel"

	requestTimeout = 10 * time.Second
)

// PluginVersion is fluidvim's version (fluidvim/__init__.py; a test keeps the two equal). A
// variable so a release build stamps it: `make dist` links with
// -ldflags "-X github.com/fluidvim/fluidvim/nomad_driver/unikernel.PluginVersion=<version>".
var PluginVersion = "0.1.0"

var pluginInfo = &base.PluginInfoResponse{
	Type:              base.PluginTypeDriver,
	PluginApiVersions: []string{drivers.ApiVersion010},
	PluginVersion:     PluginVersion,
	Name:              PluginName,
}

var capabilities = &drivers.Capabilities{
	SendSignals:       true,
	Exec:              true,
	FSIsolation:       fsisolation.None,
	NetIsolationModes: []drivers.NetIsolationMode{drivers.NetIsolationModeHost},
	MountConfigs:      drivers.MountConfigSupportNone,
}

// Driver runs fluidvim VNFs as Nomad tasks.
type Driver struct {
	eventer *eventer.Eventer
	ctx     context.Context
	cancel  context.CancelFunc
	logger  hclog.Logger
	tasks   *taskStore

	mu          sync.RWMutex
	config      *Config
	qemuPath    string
	accel       string
	accelWhy    string
	tscKHz      *int
	bootTimeout time.Duration
	fpPeriod    time.Duration
	compute     cpustats.Compute

	pool  *warmPool
	power *powerMeter // per-task power by useful work (powermeter.go)
	// powerOnce starts the power meter with the first Fingerprint (as the pool)
	powerOnce sync.Once
	// sweepOnce removes orphaned empty cgroups with the first Fingerprint (qemu.SweepCgroups)
	sweepOnce sync.Once

	launchMu    sync.Mutex
	launchTimes map[string][]float64 // recent launch durations (ms) by kind: StartTask → configured

	bridgeMu    sync.Mutex
	privMu      sync.Mutex      // private bridges (privnet.go)
	privUsed    map[string]bool // the private bridges this plugin made or recovered
	bridgesSeen map[string]bool // every bridge ever fingerprinted, to report the vanished ones as ""
}

// NewPlugin returns a driver with the default configuration.
func NewPlugin(logger hclog.Logger) drivers.DriverPlugin {
	ctx, cancel := context.WithCancel(context.Background())
	logger = logger.Named(PluginName)
	d := &Driver{
		eventer: eventer.NewEventer(ctx, logger),
		ctx:     ctx,
		cancel:  cancel,
		logger:  logger,
		tasks:   newTaskStore(),
	}
	d.pool = newWarmPool(d)
	d.power = newPowerMeter()
	_ = d.applyConfig(defaultConfig())
	return d
}

func (d *Driver) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }
func (d *Driver) ConfigSchema() (*hclspec.Spec, error)          { return configSpec, nil }
func (d *Driver) TaskConfigSchema() (*hclspec.Spec, error)      { return taskConfigSpec, nil }
func (d *Driver) Capabilities() (*drivers.Capabilities, error)  { return capabilities, nil }

// SetConfig applies the plugin block of the client config.
func (d *Driver) SetConfig(c *base.Config) error {
	var cfg Config
	if len(c.PluginConfig) != 0 {
		if err := base.MsgPackDecode(c.PluginConfig, &cfg); err != nil {
			return err
		}
	}
	if c.AgentConfig != nil {
		d.mu.Lock()
		d.compute = c.AgentConfig.Compute()
		d.mu.Unlock()
	}
	if err := d.applyConfig(&cfg); err != nil {
		return err
	}
	d.mu.RLock()
	pools := d.config.WarmPool
	d.mu.RUnlock()
	d.pool.configure(pools)
	return nil
}

func (d *Driver) applyConfig(cfg *Config) error {
	cfg.fillDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	bt, err := time.ParseDuration(cfg.BootTimeout)
	if err != nil || bt <= 0 {
		return fieldErr("boot_timeout", "%q is not a positive duration like 30s", cfg.BootTimeout)
	}
	fpp, err := time.ParseDuration(cfg.FingerprintPeriod)
	if err != nil || fpp < time.Second {
		return fieldErr("fingerprint_period", "%q is not a duration of at least 1s, like 30s", cfg.FingerprintPeriod)
	}
	accel, why, err := qemu.DetectAccel(cfg.Accel)
	if err != nil {
		return fieldErr("accel", "%v", err)
	}
	// every VNF of this plugin is a microvm on this accelerator: one binary for all of them
	installed := func(name string) bool { _, err := exec.LookPath(name); return err == nil }
	qemuPath, _ := exec.LookPath((&spec.VNF{Machine: "microvm", Accel: accel}).QemuBinary(cfg.Qemu, installed))
	var tsc *int
	if accel == "tcg" {
		tsc = qemu.HostTSCkHz()
	}
	if err := qemu.ShareVNFMemory(*cfg.ShareMemory); err != nil {
		d.logger.Warn("VNF memory sharing", "error", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.config, d.qemuPath, d.accel, d.accelWhy, d.tscKHz, d.bootTimeout = cfg, qemuPath, accel, why, tsc, bt
	d.fpPeriod = fpp
	return nil
}

// Fingerprint reports health and attributes now and every fingerprint_period (30 s).
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	d.startPool()
	ch := make(chan *drivers.Fingerprint)
	go func() {
		defer close(ch)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			case <-t.C:
				d.mu.RLock()
				period := d.fpPeriod
				d.mu.RUnlock()
				t.Reset(period)
			}
			select {
			case ch <- d.buildFingerprint():
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// startPool starts the warm pool (adoption of a previous process's shells, refill): the
// driver manager's instance calls Fingerprint (and then StartTask/RecoverTask), the plugin
// loader's short-lived validation instances do not.
func (d *Driver) startPool() {
	d.mu.RLock()
	runDir := d.config.RunDir
	d.mu.RUnlock()
	d.pool.start(runDir)
	d.powerOnce.Do(func() { go d.runPowerMeter() })
	d.sweepOnce.Do(d.sweepCgroups)
}

// sweepCgroups removes the empty cgroups of VNFs no plugin or launch core on this host runs any
// more (qemu.SweepCgroups), once, when this plugin starts for real (not the loader's throw-away
// processes, which only get SetConfig).
func (d *Driver) sweepCgroups() {
	mine := map[string]bool{}
	for _, h := range d.tasks.All() {
		mine[h.spec.UUID] = true
	}
	keep := func(name string) bool { return mine[name] }
	if gone := qemu.SweepCgroups(keep, qemu.SweepMinAge); len(gone) > 0 {
		d.logger.Warn("removed the empty cgroups of VNFs no longer running", "dirs", gone)
	}
}

func (d *Driver) buildFingerprint() *drivers.Fingerprint {
	d.mu.RLock()
	cfg, qemuPath, accel, why := d.config, d.qemuPath, d.accel, d.accelWhy
	d.mu.RUnlock()
	fp := &drivers.Fingerprint{Attributes: map[string]*pstructs.Attribute{},
		Health: drivers.HealthStateHealthy, HealthDescription: drivers.DriverHealthy}
	if qemuPath == "" {
		fp.Health = drivers.HealthStateUndetected
		fp.HealthDescription = fmt.Sprintf("QEMU binary %q not found", cfg.Qemu)
		return fp
	}
	pre := "driver." + PluginName + "."
	a := fp.Attributes
	a[pre+"version"] = pstructs.NewStringAttribute(PluginVersion)
	a[pre+"proto"] = pstructs.NewIntAttribute(control.ProtoVersion, "")
	a[pre+"qemu"] = pstructs.NewStringAttribute(qemuPath)
	a[pre+"accel"] = pstructs.NewStringAttribute(accel)
	a[pre+"accel_reason"] = pstructs.NewStringAttribute(why)
	a[pre+"kernel"] = pstructs.NewStringAttribute(cfg.Kernel)
	_, kerr := os.Stat(cfg.Kernel)
	a[pre+"kernel_present"] = pstructs.NewBoolAttribute(kerr == nil)
	ready, booting, size := d.pool.counts()
	a[pre+"warm_pool.size"] = pstructs.NewIntAttribute(int64(size), "")
	a[pre+"warm_pool.ready"] = pstructs.NewIntAttribute(int64(ready), "")
	a[pre+"warm_pool.booting"] = pstructs.NewIntAttribute(int64(booting), "")
	if e := d.pool.lastError(); e != "" {
		a[pre+"warm_pool.error"] = pstructs.NewStringAttribute(e)
	}
	total, free, running := 0, 0, 0
	for _, h := range d.tasks.All() {
		if !h.isRunning() {
			continue
		}
		running++
		total += h.spec.SessionSlots
		free += h.freeSlots()
	}
	a[pre+"vnfs"] = pstructs.NewIntAttribute(int64(running), "")
	a[pre+"session_slots.total"] = pstructs.NewIntAttribute(int64(total), "")
	a[pre+"session_slots.free"] = pstructs.NewIntAttribute(int64(free), "")
	cold, coldOK := d.medianLaunch("cold")
	warm, warmOK := d.medianLaunch("warm")
	if coldOK {
		a[pre+"queuing_delay_cold_ms"] = pstructs.NewFloatAttribute(cold, "ms")
	}
	if warmOK {
		a[pre+"queuing_delay_warm_ms"] = pstructs.NewFloatAttribute(warm, "ms")
	}
	d.bridgeAttributes(a, pre+"bridge.")
	if p := d.settings().config.PrivateBridges; p != "" {
		a[pre+"private_bridges"] = pstructs.NewStringAttribute(p)
	}
	d.powerAttributes(a, pre)
	// what the next launch costs: a warm claim while a shell is ready (§6.5)
	if ms, basis, ok := d.queuingDelay(); ok {
		a[pre+"queuing_delay_ms"] = pstructs.NewFloatAttribute(ms, "ms")
		a[pre+"queuing_delay_basis"] = pstructs.NewStringAttribute(basis)
	}
	return fp
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var badNameChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func vnfName(tc *TaskConfig, cfg *drivers.TaskConfig, vid string) string {
	if tc.Name != "" {
		return tc.Name
	}
	n := strings.TrimLeft(badNameChars.ReplaceAllString(cfg.Name, "-"), "-_.")
	if len(n) > 63 {
		n = n[:63]
	}
	if n == "" {
		n = "vnf-" + vid[:8]
	}
	return n
}

// StartTask is a cold launch: spec → argv → QEMU → connect → ready → plug taps → configure.
//
// The moment the VNF forwards, before StartTask returns, the task's vnf-stats.json is written
// with its `ready_at`: the plugin's own ready signal, which a launcher reads through the
// client's fs API (orchestrator/zones/nomad.py) long before the client reports the allocation
// running to the servers (its allocation updates go out on a 200 ms tick, most only every 5th).
func (d *Driver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	handle, logsOpen, err := d.startTask(cfg)
	if err != nil && !logsOpen {
		reportToFIFOs(cfg, "fluidvim unikernel driver: "+err.Error())
	}
	if err == nil {
		if h, ok := d.tasks.Get(cfg.ID); ok {
			h.writeVNFStats()
			go h.writeStatsEvery(vnfStatsEvery)
		}
	}
	return handle, nil, err
}

// settings is the part of the plugin config a launch uses, read once per launch.
type settings struct {
	config      *Config
	qemuPath    string
	accel       string
	tscKHz      *int
	bootTimeout time.Duration
}

func (d *Driver) settings() settings {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return settings{d.config, d.qemuPath, d.accel, d.tscKHz, d.bootTimeout}
}

// startTask chains the launch: validate the task → claim a warm shell, or build a spec → launch
// it cold → hand the running VNF to Nomad. logsOpen: the task's log FIFOs have been opened (a
// failure is reported there).
func (d *Driver) startTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, bool, error) {
	t0 := time.Now()
	set := d.settings()
	tc, click, err := d.validateTask(cfg, set)
	if err != nil {
		return nil, false, err
	}
	if tc.Warm == nil || *tc.Warm {
		handle, claimed, err := d.startWarm(cfg, tc, click, t0)
		if claimed {
			d.markLaunch(cfg.ID, "warm", err)
			return handle, false, err
		}
		if tc.Warm != nil {
			d.emit(cfg, "warm launch requested but no shell of this shape is ready: cold launch", nil)
		}
	}
	s, err := buildSpec(cfg, tc, click, set)
	if err != nil {
		return nil, false, err
	}
	handle, logsOpen, err := d.startCold(cfg, tc, s, t0, set)
	d.markLaunch(cfg.ID, "cold", err)
	return handle, logsOpen, err
}

// markLaunch records how a started task was launched (warm, cold), for its ready signal.
func (d *Driver) markLaunch(taskID, kind string, err error) {
	if h, ok := d.tasks.Get(taskID); ok && err == nil {
		h.mu.Lock()
		h.launchKind = kind
		h.mu.Unlock()
	}
}

// bridgeAttributes sets prefix+<name> = true for each Linux bridge on the host now, so a job
// constrains on the bridges its nics name (etc/nomad/vnf-firewall.nomad.hcl). A bridge seen by
// an earlier fingerprint and gone now is reported as "": the Nomad client only merges the
// attributes a fingerprint names, and deletes a node attribute when its new value is empty.
func (d *Driver) bridgeAttributes(a map[string]*pstructs.Attribute, prefix string) {
	names, err := qemu.Bridges()
	if err != nil {
		d.logger.Warn("cannot list bridges for the fingerprint", "error", err)
		return
	}
	d.bridgeMu.Lock()
	defer d.bridgeMu.Unlock()
	if d.bridgesSeen == nil {
		d.bridgesSeen = map[string]bool{}
	}
	for name := range d.bridgesSeen {
		a[prefix+name] = pstructs.NewStringAttribute("")
	}
	for _, name := range names {
		d.bridgesSeen[name] = true
		a[prefix+name] = pstructs.NewBoolAttribute(true)
	}
}

// validateTask decodes and checks the task's driver config against the plugin's and returns it
// with the click configuration text ("" when none). The files it names are confined to the task
// directory and image_paths (paths.go) before anything is created.
func (d *Driver) validateTask(cfg *drivers.TaskConfig, set settings) (*TaskConfig, string, error) {
	if _, ok := d.tasks.Get(cfg.ID); ok {
		return nil, "", fmt.Errorf("task with ID %q already started", cfg.ID)
	}
	var tc TaskConfig
	if err := cfg.DecodeDriverConfig(&tc); err != nil {
		return nil, "", fmt.Errorf("failed to decode driver config: %v", err)
	}
	if err := tc.fromReservation(cfg.Resources); err != nil {
		return nil, "", err
	}
	paths := taskPaths(cfg, set.config)
	if err := tc.validate(paths); err != nil {
		return nil, "", err
	}
	click, echo, err := paths.clickText(&tc)
	if err != nil {
		return nil, "", err
	}
	tc.configEcho = echo
	if set.qemuPath == "" {
		return nil, "", fmt.Errorf("QEMU binary %q not found", set.config.Qemu)
	}
	for i, nic := range tc.NIC {
		if br := nic.Bridge; br != "" && !qemu.LinkExists(br) && !set.config.privateBridge(br) {
			return nil, "", fieldErr(tc.nicKey(i, "bridge"), "bridge %q does not exist: create "+
				"it first (ip link add %s type bridge) or pick an existing one", br, br)
		}
	}
	return &tc, click, nil
}

// buildSpec is a cold launch's VNF spec: a new UUID, the task's shape, NICs with their taps,
// MACs and bridges, the click configuration.
func buildSpec(cfg *drivers.TaskConfig, tc *TaskConfig, click string, set settings) (spec.VNF, error) {
	vid := newUUID()
	s := qemu.NewSpec(vid, vnfName(tc, cfg, vid), set.config.RunDir, set.accel, set.tscKHz)
	s.Kernel = tc.Kernel
	fw, err := taskPaths(cfg, set.config).firmware(s.Machine, tc.kernelFile, set.config.Firmware)
	if err != nil {
		return s, err
	}
	s.Firmware = fw
	s.NetBackend = set.config.NetBackend
	s.MemoryMB, s.Vcpus, s.SessionSlots, s.FlowTimeoutMS = tc.MemoryMB, tc.Vcpus, tc.SessionSlots, tc.FlowTimeoutMS
	for i, nic := range tc.NIC {
		n := spec.NIC{Tap: spec.TapFor(vid, i), MAC: spec.MACFor(vid, i)}
		if nic.MAC != "" {
			n.MAC = nic.MAC // a cold launch boots with the asked-for MACs (§6.4)
		}
		if nic.Bridge != "" {
			b := nic.Bridge
			n.Bridge = &b
		}
		s.Nics = append(s.Nics, n)
	}
	if click != "" {
		s.ClickConfig = &click
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("invalid config: %w", err)
	}
	return s, nil
}

// startCold launches the spec's VNF and, once it forwards, hands it to Nomad.
func (d *Driver) startCold(cfg *drivers.TaskConfig, tc *TaskConfig, s spec.VNF, t0 time.Time, set settings) (
	*drivers.TaskHandle, bool, error) {
	click := ""
	if s.ClickConfig != nil {
		click = *s.ClickConfig
	}
	h := &taskHandle{logger: d.logger.With("task_id", cfg.ID, "vnf", s.UUID), taskConfig: cfg,
		spec: s, runDir: filepath.Join(set.config.RunDir, s.UUID), click: click,
		clickFromFile: tc.ClickFile != "", configEcho: tc.configEcho, qoe: tc.QoE,
		state: drivers.TaskStateUnknown, doneCh: make(chan struct{})}
	d.startLogs(h, 0, 0) // open both FIFOs now: a failed start reports on stderr
	// marked before QEMU exists, unmarked by WaitTask (the client has stored the handle by
	// then): a client or plugin killed before leaves a VNF no RecoverTask will claim (the
	// client starts the task again); the next plugin process reaps it (warmPool.reapHalfBooted)
	var phases map[string]float64
	err := markStarting(h.runDir)
	if err == nil {
		phases, err = d.launch(h, set.qemuPath, set.bootTimeout)
	}
	if err != nil {
		h.mu.Lock()
		h.failMsg = "fluidvim unikernel driver: " + err.Error()
		h.mu.Unlock()
		close(h.doneCh)
		return nil, true, err
	}
	total := float64(time.Since(t0).Microseconds()) / 1000
	d.recordLaunch("cold", total)
	handle, err := d.handOver(h)
	if err != nil {
		return nil, true, err
	}
	ann := map[string]string{"launch": "cold", "launch_ms": fmt.Sprintf("%.1f", total), "vnf_uuid": s.UUID}
	for k, v := range h.limits.annotations() {
		ann[k] = v
	}
	for k, v := range phases {
		ann[k+"_ms"] = fmt.Sprintf("%.1f", v)
	}
	if v, ok := h.ready["boot_us"]; ok {
		ann["boot_us"] = fmt.Sprint(v)
	}
	d.emit(cfg, fmt.Sprintf("VNF %s ready and configured (cold launch %.1f ms)", s.Name, total), ann)
	return handle, true, nil
}

// handOver marks a freshly launched VNF running, stores its state in Nomad's task handle and
// starts watching its QEMU; on failure the VNF is removed.
func (d *Driver) handOver(h *taskHandle) (*drivers.TaskHandle, error) {
	cfg := h.taskConfig
	h.state = drivers.TaskStateRunning
	h.startedAt = time.Now().Round(time.Millisecond)
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(&taskState{TaskConfig: cfg, Spec: h.spec, Pid: h.pid,
		StartedAt: h.startedAt, ClickConfig: h.click, Ready: h.ready}); err != nil {
		qemu.Kill(h.cmd)
		d.cleanup(h)
		close(h.doneCh)
		return nil, fmt.Errorf("failed to set driver state: %v", err)
	}
	d.tasks.Set(cfg.ID, h)
	go h.run()
	return handle, nil
}

// markStarting creates a cold launch's run directory with its startingMarker.
func markStarting(runDir string) error {
	if err := os.MkdirAll(runDir, 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(runDir, startingMarker), nil, 0o640); err != nil {
		_ = os.RemoveAll(runDir)
		return err
	}
	return nil
}

// launch boots the VNF's QEMU and brings the VNF to forwarding (taps plugged, configured); on
// failure it removes everything.
func (d *Driver) launch(h *taskHandle, qemuPath string, bootTimeout time.Duration) (map[string]float64, error) {
	phases := map[string]float64{}
	lim, err := d.newEnforcement(h.taskConfig, h.spec.UUID, h.spec.MemoryMB)
	if err != nil {
		d.cleanup(h)
		return nil, err
	}
	h.limits = lim
	vm, err := qemu.Boot(qemuPath, d.settings().config.VhostNetBinary, &h.spec, h.runDir,
		bootTimeout, phases, lim.cgroup)
	if err != nil {
		d.cleanup(h)
		return nil, err
	}
	h.cmd, h.pid, h.ctl, h.ready = vm.Cmd, vm.Pid, vm.Ctl, vm.Ready
	if nice := d.settings().config.VcpuNice; nice != nil {
		qemu.SetVcpuNice(vm.Pid, *nice)
	}
	if err := lim.pin(vm.Pid); err != nil {
		return nil, d.abort(h, err)
	}
	if err := d.plugTaps(&h.spec, phases); err != nil {
		return nil, d.abort(h, err)
	}
	if err := h.configureNew(phases); err != nil {
		return nil, d.abort(h, err)
	}
	return phases, nil
}

// plugTaps attaches the taps of the NICs that have a bridge.
func (d *Driver) plugTaps(s *spec.VNF, phases map[string]float64) error {
	t := time.Now()
	for i, n := range s.Nics {
		if n.Bridge == nil {
			continue
		}
		if err := d.plugNIC(n.Tap, *n.Bridge); err != nil {
			return fieldErr(fmt.Sprintf("nics[%d]", i), "%v", err)
		}
	}
	phases["net"] = msSince(t)
	return nil
}

// configureNew sends the spec's click configuration to a VNF that has just booted (none: nothing).
func (h *taskHandle) configureNew(phases map[string]float64) error {
	s := &h.spec
	if s.ClickConfig == nil {
		return sendQoE(h.ctl, h.qoe)
	}
	t := time.Now()
	if _, err := h.ctl.Configure(*s.ClickConfig, s.SessionSlots, requestTimeout); err != nil {
		field := "click_config"
		if h.clickFromFile {
			field = "click_file"
		}
		h.rejected(err, h.configEcho)
		return configRejected(field, err, h.configEcho)
	}
	if err := sendQoE(h.ctl, h.qoe); err != nil {
		return err
	}
	phases["configure"] = msSince(t)
	return nil
}

// sendQoE tells a configured VNF its slots at the service's QoE (none: nothing); a refusal is
// an error naming the task config's qoe block (the launch then removes the VNF).
func sendQoE(ctl *control.Client, q TaskQoE) error {
	if !q.Set() {
		return nil
	}
	capacity, budget, ppm := q.Request()
	if _, err := ctl.QoE(capacity, budget, ppm, q.WaitPPM, requestTimeout); err != nil {
		return fieldErr("qoe", "the VNF refused its QoE (capacity %d, budget_ns %d, "+
			"quantile_ppm %d, wait_ppm %d): %v", capacity, budget, ppm, q.WaitPPM, err)
	}
	return nil
}

// abort kills a launch's QEMU, closes its control connection and removes what is left.
func (d *Driver) abort(h *taskHandle, err error) error {
	qemu.Kill(h.cmd)
	if h.ctl != nil {
		h.ctl.Close()
	}
	d.cleanup(h)
	return err
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func (d *Driver) emit(cfg *drivers.TaskConfig, msg string, ann map[string]string) {
	_ = d.eventer.EmitEvent(&drivers.TaskEvent{TaskID: cfg.ID, TaskName: cfg.Name,
		AllocID: cfg.AllocID, Timestamp: time.Now(), Message: msg, Annotations: ann})
}

// cleanup removes leftover taps (normally gone with QEMU), the run directory and the VNF's
// cgroup (resources.go).
func (d *Driver) cleanup(h *taskHandle) {
	qemu.RemoveLeftovers(&h.spec, h.runDir, func(tap string, err error) {
		h.logger.Warn("could not delete tap", "tap", tap, "error", err)
	})
	if err := qemu.CgroupFor(h.spec.UUID).Remove(); err != nil {
		h.logger.Warn("could not remove the VNF's cgroup", "error", err)
	}
	d.releasePrivate()
}

// RecoverTask re-attaches to a running QEMU by pid and control socket.
func (d *Driver) RecoverTask(handle *drivers.TaskHandle) error {
	if handle == nil {
		return errors.New("RecoverTask: nil handle")
	}
	if _, ok := d.tasks.Get(handle.Config.ID); ok {
		return nil
	}
	var st taskState
	if err := handle.GetDriverState(&st); err != nil {
		return fmt.Errorf("failed to decode task state from handle: %v", err)
	}
	if !qemu.Alive(st.Pid, st.Spec.UUID) {
		_ = qemu.CgroupFor(st.Spec.UUID).Remove() // nobody else would: Nomad starts a new task
		return fmt.Errorf("QEMU of VNF %s (pid %d) is gone", st.Spec.UUID, st.Pid)
	}
	ctl, err := control.Dial(st.Spec.ControlSocket)
	if err != nil {
		return fmt.Errorf("cannot re-attach to VNF %s control socket: %v", st.Spec.UUID, err)
	}
	if _, err := ctl.Ping(5 * time.Second); err != nil {
		ctl.Close()
		return fmt.Errorf("VNF %s does not answer ping: %v", st.Spec.UUID, err)
	}
	cfg := st.TaskConfig
	if cfg == nil {
		cfg = handle.Config
	}
	h := &taskHandle{logger: d.logger.With("task_id", cfg.ID, "vnf", st.Spec.UUID),
		taskConfig: cfg, spec: st.Spec, pid: st.Pid, runDir: filepath.Dir(st.Spec.ControlSocket),
		click: st.ClickConfig, ctl: ctl, ready: st.Ready, state: drivers.TaskStateRunning,
		startedAt: st.StartedAt, doneCh: make(chan struct{})}
	d.tasks.Set(cfg.ID, h)
	d.notePrivate(&h.spec)
	_ = os.Remove(filepath.Join(h.runDir, startingMarker)) // the client has the handle
	go h.run()
	go h.writeStatsEvery(vnfStatsEvery)
	d.startLogs(h, fileSize(st.Spec.ConsoleLog), fileSize(qemu.StderrPath(h.runDir)))
	return nil
}

func fileSize(p string) int64 {
	if st, err := os.Stat(p); err == nil {
		return st.Size()
	}
	return 0
}

func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	_ = os.Remove(filepath.Join(h.runDir, startingMarker)) // the client has the handle
	ch := make(chan *drivers.ExitResult, 1)
	go func() {
		defer close(ch)
		select {
		case <-h.doneCh:
			h.mu.Lock()
			res := h.exitResult.Copy()
			h.mu.Unlock()
			ch <- res
		case <-ctx.Done():
		case <-d.ctx.Done():
		}
	}()
	return ch, nil
}

func parseSignal(name string, def syscall.Signal) (syscall.Signal, error) {
	if name == "" {
		return def, nil
	}
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	sig := unix.SignalNum(n)
	if sig == 0 {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	return sig, nil
}

// StopTask asks QEMU to quit (SIGTERM unless told otherwise), then kills it after timeout.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	sig, err := parseSignal(signal, syscall.SIGTERM)
	if err != nil {
		return err
	}
	d.powerStopped(h)
	h.stop(sig, timeout)
	for _, n := range h.spec.Nics {
		_ = qemu.DeleteLink(n.Tap)
	}
	d.releasePrivate() // now, not at DestroyTask (the client's GC of the allocation, much later)
	return nil
}

func (d *Driver) DestroyTask(taskID string, force bool) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if h.isRunning() {
		if !force {
			return errors.New("cannot destroy running task")
		}
		h.stop(syscall.SIGKILL, 0)
	}
	d.cleanup(h)
	d.tasks.Delete(taskID)
	return nil
}

func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h.status(), nil
}

// TaskStats reports the QEMU process's CPU and memory every interval. Nomad's TaskResourceUsage
// has no room for anything else (the plugin protocol carries CPU and memory only); the VNF's
// own counters (`stats` on the control channel: per-NIC rx/tx/drops, slots, elements) are in
// <task dir>/vnf-stats.json, which the plugin rewrites itself every vnfStatsEvery
// (handle.go), readable with `nomad alloc fs <alloc> <task>/vnf-stats.json` or the
// /v1/client/fs API.
func (d *Driver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *cstructs.TaskResourceUsage, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	d.mu.RLock()
	compute := d.compute
	d.mu.RUnlock()
	ch := make(chan *cstructs.TaskResourceUsage)
	go func() {
		defer close(ch)
		tk := time.NewTimer(0)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.doneCh:
				return
			case <-tk.C:
				tk.Reset(interval)
			}
			u := h.usage(compute)
			if u == nil {
				continue
			}
			select {
			case ch <- u:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.eventer.TaskEvents(ctx)
}

// SignalTask: SIGHUP re-sends the click config (re-reading click_file); any other signal goes
// to QEMU.
func (d *Driver) SignalTask(taskID string, signal string) error {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	sig, err := parseSignal(signal, syscall.SIGTERM)
	if err != nil {
		return err
	}
	if sig == syscall.SIGHUP {
		var tc TaskConfig
		if err := h.taskConfig.DecodeDriverConfig(&tc); err != nil {
			return err
		}
		click, echo, err := taskPaths(h.taskConfig, d.settings().config).clickText(&tc)
		if err != nil {
			return err
		}
		if click == "" {
			return nil
		}
		res, err := h.configure(click, 0, nil)
		if err != nil {
			h.rejected(err, echo)
			field := "click_config"
			if tc.ClickFile != "" {
				field = "click_file"
			}
			return fmt.Errorf("reconfigure: %w", configRejected(field, err, echo))
		}
		d.emit(h.taskConfig, "VNF reconfigured", map[string]string{"elements": fmt.Sprint(res["elements"])})
		return nil
	}
	return h.signal(sig)
}

// Shutdown stops background work and kills the pooled shells (tests). Nomad kills the plugin
// process instead: its shells keep running and the next plugin process adopts them.
func (d *Driver) Shutdown() {
	d.cancel()
	d.pool.shutdown()
}

// VNFStats asks a task's VNF for its counters over the driver's control connection.
func (d *Driver) VNFStats(taskID string) (map[string]any, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h.stats(5 * time.Second)
}
