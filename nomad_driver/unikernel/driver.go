// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

// Package unikernel is the Nomad task driver for fluidvim VNFs: each task is one unikernel in
// a QEMU microvm, launched like the Python core (vnf/backends.py QemuBackend, vnf/manager.py):
// spec → argv → QEMU with the control and QMP sockets as inherited fds → connect → the VNF's
// own `ready` → plug taps into bridges → `configure`.
package unikernel

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"
	"golang.org/x/sys/unix"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

const (
	// PluginName is the driver name used in job files (`driver = "unikernel"`); the client's
	// plugin block is named after the binary instead: `plugin "fluidvim-unikernel"`.
	PluginName    = "unikernel"
	PluginVersion = "0.1.0"

	requestTimeout = 10 * time.Second
)

var pluginInfo = &base.PluginInfoResponse{
	Type:              base.PluginTypeDriver,
	PluginApiVersions: []string{drivers.ApiVersion010},
	PluginVersion:     PluginVersion,
	Name:              PluginName,
}

var capabilities = &drivers.Capabilities{
	SendSignals:       true,
	Exec:              false,
	FSIsolation:       drivers.FSIsolationNone,
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

	pool *warmPool

	launchMu    sync.Mutex
	launchTimes map[string][]float64 // recent launch durations (ms) by kind: StartTask → configured
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
	qemuPath, _ := exec.LookPath(cfg.Qemu)
	accel, why, err := detectAccel(cfg.Accel)
	if err != nil {
		return fieldErr("accel", "%v", err)
	}
	var tsc *int
	if accel == "tcg" {
		tsc = hostTSCkHz()
	}
	if err := shareVNFMemory(*cfg.ShareMemory); err != nil {
		d.logger.Warn("VNF memory sharing", "error", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.config, d.qemuPath, d.accel, d.accelWhy, d.tscKHz, d.bootTimeout = cfg, qemuPath, accel, why, tsc, bt
	d.fpPeriod = fpp
	return nil
}

// detectAccel is backends.detect_accel: KVM when /dev/kvm opens and answers, else TCG.
func detectAccel(requested string) (string, string, error) {
	if requested == "tcg" {
		return "tcg", "requested", nil
	}
	var why string
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == nil {
		api, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), 0xAE00, 0) // KVM_GET_API_VERSION
		unix.Close(fd)
		if errno == 0 && api == 12 {
			return "kvm", "/dev/kvm works", nil
		}
		why = fmt.Sprintf("/dev/kvm API version %d (need 12)", api)
	} else {
		why = "/dev/kvm unusable: " + err.Error()
	}
	if requested == "kvm" {
		return "", "", fmt.Errorf("accel=kvm requested but %s; use auto or tcg", why)
	}
	return "tcg", why, nil
}

// hostTSCkHz is backends.host_tsc_khz: the host TSC rate for TCG guests (constant TSC only).
func hostTSCkHz() *int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	first := strings.SplitN(string(b), "\n\n", 2)[0]
	fields := map[string]string{}
	for _, l := range strings.Split(first, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	hasConst := false
	for _, f := range strings.Fields(fields["flags"]) {
		hasConst = hasConst || f == "constant_tsc"
	}
	var mhz float64
	if _, err := fmt.Sscanf(fields["cpu MHz"], "%g", &mhz); err != nil || !hasConst {
		return nil
	}
	v := int(mhz * 1000)
	return &v
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
		f := h.spec.SessionSlots
		if st, err := h.stats(2 * time.Second); err == nil {
			if s, ok := st["slots"].(map[string]any); ok {
				if n, ok := s["free"].(json.Number); ok {
					if v, err := n.Int64(); err == nil {
						f = int(v)
					}
				}
			}
		}
		free += f
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
	// what the next launch costs: a warm claim while a shell is ready (§6.5)
	if ms, basis, ok := d.queuingDelay(); ok {
		a[pre+"queuing_delay_ms"] = pstructs.NewFloatAttribute(ms, "ms")
		a[pre+"queuing_delay_basis"] = pstructs.NewStringAttribute(basis)
	}
	return fp
}

// launchHistoryFile keeps the recent successful launch times in the run directory, so the
// queuing delay survives a plugin restart as the Python core's launches table does (§6.5).
const launchHistoryFile = "launches.json"

// history returns the launch times by kind, newest first, loading them from the run directory
// the first time (d.launchMu held).
func (d *Driver) history() map[string][]float64 {
	if d.launchTimes == nil {
		d.launchTimes = map[string][]float64{}
		d.mu.RLock()
		runDir := d.config.RunDir
		d.mu.RUnlock()
		if b, err := os.ReadFile(filepath.Join(runDir, launchHistoryFile)); err == nil {
			_ = json.Unmarshal(b, &d.launchTimes)
		}
	}
	return d.launchTimes
}

// recordLaunch adds a successful launch's total time (ms; StartTask to configured).
func (d *Driver) recordLaunch(kind string, ms float64) {
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	h := d.history()
	l := append([]float64{ms}, h[kind]...)
	if len(l) > spec.LaunchHistory {
		l = l[:spec.LaunchHistory]
	}
	h[kind] = l
	d.mu.RLock()
	runDir := d.config.RunDir
	d.mu.RUnlock()
	if b, err := json.Marshal(h); err == nil {
		tmp := filepath.Join(runDir, "."+launchHistoryFile+".tmp")
		if os.WriteFile(tmp, b, 0o640) == nil {
			_ = os.Rename(tmp, filepath.Join(runDir, launchHistoryFile))
		}
	}
}

// medianLaunch is the median of the recent launches of one kind.
func (d *Driver) medianLaunch(kind string) (float64, bool) {
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	return median(d.history()[kind])
}

// queuingDelay is what the next launch costs (vnf/PROTOCOL.md §6.5, manager.queuing_delay):
// the median recent warm launch while any shell is ready, else the median cold one; none (ok
// false) while there is no launch of that kind yet.
func (d *Driver) queuingDelay() (float64, string, bool) {
	ready, _, _ := d.pool.counts()
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	ms, basis, _, ok := queuingDelay(ready, d.history(), spec.LaunchHistory)
	return ms, basis, ok
}

// newSpec is the part of a VNF spec shared by cold launches and pool shells.
func newSpec(vid, name, runRoot, accel string, tsc *int) spec.VNF {
	runDir := filepath.Join(runRoot, vid)
	qmp := filepath.Join(runDir, "qmp.sock")
	s := spec.New()
	s.UUID, s.Name = vid, name
	s.ControlSocket, s.ConsoleLog, s.QMPSocket = filepath.Join(runDir, "ctl.sock"), filepath.Join(runDir, "console.log"), &qmp
	s.Accel, s.TSCkHz = accel, tsc
	return s
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
func (d *Driver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	handle, logsOpen, err := d.startTask(cfg)
	if err != nil && !logsOpen {
		reportToFIFOs(cfg, "fluidvim unikernel driver: "+err.Error())
	}
	return handle, nil, err
}

// reportToFIFOs opens both log FIFOs (if their reader is there), writes msg to stderr and
// closes them, so Nomad's log collector is not left waiting for a writer.
func reportToFIFOs(cfg *drivers.TaskConfig, msg string) {
	for _, p := range []string{cfg.StdoutPath, cfg.StderrPath} {
		if p == "" {
			continue
		}
		f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if p == cfg.StderrPath {
			_, _ = f.WriteString(msg + "\n")
		}
		f.Close()
	}
}

func (d *Driver) startTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, bool, error) {
	t0 := time.Now()
	if _, ok := d.tasks.Get(cfg.ID); ok {
		return nil, false, fmt.Errorf("task with ID %q already started", cfg.ID)
	}
	var tc TaskConfig
	if err := cfg.DecodeDriverConfig(&tc); err != nil {
		return nil, false, fmt.Errorf("failed to decode driver config: %v", err)
	}
	d.mu.RLock()
	pcfg, qemuPath, accel, tsc, bootTimeout := d.config, d.qemuPath, d.accel, d.tscKHz, d.bootTimeout
	d.mu.RUnlock()
	if err := tc.validate(pcfg.Kernel); err != nil {
		return nil, false, err
	}
	click, err := tc.clickText(filepath.Join(cfg.AllocDir, cfg.Name))
	if err != nil {
		return nil, false, err
	}
	if qemuPath == "" {
		return nil, false, fmt.Errorf("QEMU binary %q not found", pcfg.Qemu)
	}
	for i, br := range tc.NICs {
		if br != "" && !linkExists(br) {
			return nil, false, fieldErr(fmt.Sprintf("nics[%d]", i), "bridge %q does not exist: create "+
				"it first (ip link add %s type bridge) or pick an existing one", br, br)
		}
	}
	if tc.Warm == nil || *tc.Warm {
		handle, claimed, err := d.startWarm(cfg, &tc, click, t0)
		if claimed {
			return handle, false, err
		}
		if tc.Warm != nil {
			d.emit(cfg, "warm launch requested but no shell of this shape is ready: cold launch", nil)
		}
	}

	vid := newUUID()
	runDir := filepath.Join(pcfg.RunDir, vid)
	s := newSpec(vid, vnfName(&tc, cfg, vid), pcfg.RunDir, accel, tsc)
	s.Kernel = tc.Kernel
	s.MemoryMB, s.Vcpus, s.SessionSlots, s.FlowTimeoutMS = tc.MemoryMB, tc.Vcpus, tc.SessionSlots, tc.FlowTimeoutMS
	for i, br := range tc.NICs {
		n := spec.NIC{Tap: spec.TapFor(vid, i), MAC: spec.MACFor(vid, i)}
		if len(tc.MACs) > i && tc.MACs[i] != "" {
			n.MAC = tc.MACs[i] // a cold launch boots with the asked-for MACs (§6.4)
		}
		if br != "" {
			b := br
			n.Bridge = &b
		}
		s.Nics = append(s.Nics, n)
	}
	if click != "" {
		s.ClickConfig = &click
	}
	if err := s.Validate(); err != nil {
		return nil, false, fmt.Errorf("invalid config: %w", err)
	}

	h := &taskHandle{logger: d.logger.With("task_id", cfg.ID, "vnf", vid), taskConfig: cfg,
		spec: s, runDir: runDir, click: click, clickFromFile: tc.ClickFile != "", state: drivers.TaskStateUnknown,
		doneCh: make(chan struct{})}
	d.startLogs(h, 0, 0) // open both FIFOs now: a failed start reports on stderr
	phases, err := d.launch(h, qemuPath, bootTimeout)
	if err != nil {
		h.mu.Lock()
		h.failMsg = "fluidvim unikernel driver: " + err.Error()
		h.mu.Unlock()
		close(h.doneCh)
		return nil, true, err
	}
	total := float64(time.Since(t0).Microseconds()) / 1000
	d.recordLaunch("cold", total)

	h.state = drivers.TaskStateRunning
	h.startedAt = time.Now().Round(time.Millisecond)
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(&taskState{TaskConfig: cfg, Spec: s, Pid: h.pid,
		StartedAt: h.startedAt, ClickConfig: click, Ready: h.ready}); err != nil {
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
		d.cleanup(h)
		close(h.doneCh)
		return nil, true, fmt.Errorf("failed to set driver state: %v", err)
	}
	d.tasks.Set(cfg.ID, h)
	go h.run()
	ann := map[string]string{"launch": "cold", "launch_ms": fmt.Sprintf("%.1f", total), "vnf_uuid": vid}
	for k, v := range phases {
		ann[k+"_ms"] = fmt.Sprintf("%.1f", v)
	}
	if v, ok := h.ready["boot_us"]; ok {
		ann["boot_us"] = fmt.Sprint(v)
	}
	d.emit(cfg, fmt.Sprintf("VNF %s ready and configured (cold launch %.1f ms)", s.Name, total), ann)
	return handle, true, nil
}

// launch starts QEMU and brings the VNF to forwarding; on failure it removes everything.
func (d *Driver) launch(h *taskHandle, qemuPath string, bootTimeout time.Duration) (map[string]float64, error) {
	s := &h.spec
	phases := map[string]float64{}
	ms := func(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
	t := time.Now()
	if err := os.MkdirAll(h.runDir, 0o750); err != nil {
		return nil, err
	}
	if b, err := json.Marshal(s); err == nil {
		_ = os.WriteFile(filepath.Join(h.runDir, "spec.json"), b, 0o640)
	}
	fail := func(err error) (map[string]float64, error) {
		if h.cmd != nil && h.cmd.Process != nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
		if h.ctl != nil {
			h.ctl.Close()
		}
		d.cleanup(h)
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
	errF, err := os.Create(filepath.Join(h.runDir, "qemu.stderr"))
	if err != nil {
		return fail(err)
	}
	defer errF.Close()
	// ExtraFiles[i] becomes fd 3+i in QEMU: control = 3, QMP = 4 (as in vnf/vectors/spec.json)
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
	h.cmd, h.pid = cmd, cmd.Process.Pid
	ctlF.Close()
	qmpF.Close()
	ctl, err := control.Dial(s.ControlSocket)
	if err != nil {
		return fail(fmt.Errorf("cannot connect to the control socket: %w", err))
	}
	h.ctl = ctl
	phases["spawn"] = ms(t)
	t = time.Now()
	ready, err := ctl.WaitReady(bootTimeout)
	if err != nil {
		if h.cmd.Process != nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
		return fail(fmt.Errorf("VNF %s did not become ready: %v; QEMU: %s; console: %s",
			s.Name, err, h.stderrTail(), tail(s.ConsoleLog, 500)))
	}
	h.ready = ready
	phases["boot"] = ms(t)
	t = time.Now()
	for i, n := range s.Nics {
		if n.Bridge == nil {
			continue
		}
		if err := plugTap(n.Tap, *n.Bridge); err != nil {
			return fail(fieldErr(fmt.Sprintf("nics[%d]", i), "%v", err))
		}
	}
	phases["net"] = ms(t)
	if s.ClickConfig != nil {
		t = time.Now()
		if _, err := ctl.Configure(*s.ClickConfig, s.SessionSlots, requestTimeout); err != nil {
			field := "click_config"
			if h.clickFromFile {
				field = "click_file"
			}
			return fail(fieldErr(field, "the VNF rejected the configuration: %v", err))
		}
		phases["configure"] = ms(t)
	}
	return phases, nil
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

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// startLogs follows the console log into the task's stdout FIFO and QEMU's stderr into its
// stderr FIFO (both FIFOs must be opened, or Nomad waits for them at task exit).
func (d *Driver) startLogs(h *taskHandle, conOff, errOff int64) {
	cfg := h.taskConfig
	for _, p := range []struct {
		fifo, file string
		off        int64
	}{{cfg.StdoutPath, h.spec.ConsoleLog, conOff}, {cfg.StderrPath, filepath.Join(h.runDir, "qemu.stderr"), errOff}} {
		if p.fifo == "" {
			continue
		}
		go func(fifoPath, file string, off int64) {
			var w *os.File
			for w == nil {
				f, err := os.OpenFile(fifoPath, os.O_WRONLY|syscall.O_NONBLOCK, 0)
				if err == nil {
					w = f
					break
				}
				if !errors.Is(err, syscall.ENXIO) { // ENXIO: no reader yet
					h.logger.Warn("cannot open log FIFO", "path", fifoPath, "error", err)
					return
				}
				select {
				case <-h.doneCh:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			defer w.Close()
			var final func() string
			if fifoPath == cfg.StderrPath {
				final = func() string { h.mu.Lock(); defer h.mu.Unlock(); return h.failMsg }
			}
			follow(file, off, w, h.doneCh, final)
		}(p.fifo, p.file, p.off)
	}
}

func (d *Driver) emit(cfg *drivers.TaskConfig, msg string, ann map[string]string) {
	_ = d.eventer.EmitEvent(&drivers.TaskEvent{TaskID: cfg.ID, TaskName: cfg.Name,
		AllocID: cfg.AllocID, Timestamp: time.Now(), Message: msg, Annotations: ann})
}

// cleanup removes leftover taps (normally gone with QEMU) and the run directory.
func (d *Driver) cleanup(h *taskHandle) {
	for _, n := range h.spec.Nics {
		if err := deleteLink(n.Tap); err != nil {
			h.logger.Warn("could not delete tap", "tap", n.Tap, "error", err)
		}
	}
	_ = os.RemoveAll(h.runDir)
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
	if !alive(st.Pid, st.Spec.UUID) {
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
	go h.run()
	d.startLogs(h, fileSize(st.Spec.ConsoleLog), fileSize(filepath.Join(h.runDir, "qemu.stderr")))
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
	h.stop(sig, timeout)
	for _, n := range h.spec.Nics {
		_ = deleteLink(n.Tap)
	}
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
// has no room for anything else (the plugin protocol carries CPU and memory only), so the VNF's
// own counters (`stats` on the control channel: per-NIC rx/tx/drops, slots, elements) are
// written at the same interval to <task dir>/vnf-stats.json, readable with
// `nomad alloc fs <alloc> <task>/vnf-stats.json` or the /v1/client/fs API.
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
			h.writeVNFStats()
			select {
			case ch <- u:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (h *taskHandle) usage(compute cpustats.Compute) *cstructs.TaskResourceUsage {
	user, sys, rss, err := procStats(h.pid)
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
		click, err := tc.clickText(filepath.Join(h.taskConfig.AllocDir, h.taskConfig.Name))
		if err != nil {
			return err
		}
		if click == "" {
			return nil
		}
		res, err := h.configure(click, 0, nil)
		if err != nil {
			return fmt.Errorf("reconfigure: %w", err)
		}
		d.emit(h.taskConfig, "VNF reconfigured", map[string]string{"elements": fmt.Sprint(res["elements"])})
		return nil
	}
	return h.signal(sig)
}

func (d *Driver) ExecTask(taskID string, cmd []string, timeout time.Duration) (*drivers.ExecTaskResult, error) {
	return nil, errors.New("ExecTask is not supported by the unikernel driver: a VNF has no " +
		"shell or processes; use its control channel (stats, configure)")
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

// vnfStatsFile is where TaskStats writes the VNF's counters, in the task directory.
const vnfStatsFile = "vnf-stats.json"

// writeVNFStats replaces <task dir>/vnf-stats.json with the VNF's current counters.
func (h *taskHandle) writeVNFStats() {
	cfg := h.taskConfig
	if cfg == nil || cfg.AllocDir == "" {
		return
	}
	st, err := h.stats(2 * time.Second)
	if err != nil {
		return
	}
	b, err := json.Marshal(map[string]any{"vnf_uuid": h.spec.UUID, "time": time.Now().UTC(), "stats": st})
	if err != nil {
		return
	}
	dir := cfg.TaskDir().Dir
	tmp := filepath.Join(dir, "."+vnfStatsFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return
	}
	_ = os.Rename(tmp, filepath.Join(dir, vnfStatsFile))
}

func (h *taskHandle) stats(timeout time.Duration) (map[string]any, error) {
	h.mu.Lock()
	ctl := h.ctl
	h.mu.Unlock()
	if ctl == nil {
		return nil, errors.New("no control channel")
	}
	return ctl.Stats(timeout)
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
