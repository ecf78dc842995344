// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

const forward2 = "FromDevice(0) -> Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"

func kernelPath(t *testing.T) string {
	p, err := filepath.Abs("../../unikernel/build/fluidvim-vnf.elf")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// requireVNF skips unless the test can boot a real VNF.
func requireVNF(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (taps, bridges)")
	}
	k := kernelPath(t)
	if _, err := os.Stat(k); err != nil {
		t.Skipf("VNF kernel not built (%s): run make -C unikernel", k)
	}
	if _, err := exec.LookPath(spec.QemuFull); err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	return k
}

func newHarness(t *testing.T) (*dtestutil.DriverHarness, *Driver, string) {
	t.Helper()
	runDir, err := os.MkdirTemp("/tmp", "fvnd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	h, d := newHarnessIn(t, runDir, nil)
	return h, d, runDir
}

// newHarnessIn starts a plugin on runDir with pools as its warm_pool blocks.
func newHarnessIn(t *testing.T, runDir string, pools []PoolConfig) (*dtestutil.DriverHarness, *Driver) {
	return newHarnessWith(t, runDir, pools, nil)
}

// newHarnessWith is newHarnessIn with the plugin config changed by mod first.
func newHarnessWith(t *testing.T, runDir string, pools []PoolConfig, mod func(*Config)) (*dtestutil.DriverHarness, *Driver) {
	t.Helper()
	d := NewPlugin(hclog.NewNullLogger()).(*Driver)
	t.Cleanup(d.Shutdown)
	h := dtestutil.NewDriverHarness(t, d)
	var data []byte
	cfg := &Config{Qemu: defaultQemu, Accel: "auto", Kernel: kernelPath(t), RunDir: runDir, BootTimeout: "30s",
		WarmPool: pools}
	if mod != nil {
		mod(cfg)
	}
	if err := base.MsgPackEncode(&data, cfg); err != nil {
		t.Fatal(err)
	}
	if err := h.SetConfig(&base.Config{PluginConfig: data}); err != nil {
		t.Fatal(err)
	}
	if pools != nil {
		d.startPool() // what the client's first Fingerprint call does
	}
	return h, d
}

func newTask(t *testing.T, h *dtestutil.DriverHarness, name string, tc *TaskConfig) *drivers.TaskConfig {
	t.Helper()
	task := &drivers.TaskConfig{ID: newUUID(), AllocID: newUUID(), Name: name}
	if err := task.EncodeConcreteDriverConfig(tc); err != nil {
		t.Fatal(err)
	}
	cleanup := h.MkAllocDir(task, true)
	t.Cleanup(cleanup)
	return task
}

// startTask starts task and returns its handle and driver state (pid, spec).
func startTask(t *testing.T, h *dtestutil.DriverHarness, task *drivers.TaskConfig) (*drivers.TaskHandle, taskState) {
	t.Helper()
	handle, _, err := h.StartTask(task)
	if err != nil {
		t.Fatal(err)
	}
	var state taskState
	if err := handle.GetDriverState(&state); err != nil {
		t.Fatal(err)
	}
	return handle, state
}

func bridge(t *testing.T, name string) {
	t.Helper()
	exec.Command("ip", "link", "del", name).Run()
	if out, err := exec.Command("ip", "link", "add", name, "type", "bridge").CombinedOutput(); err != nil {
		t.Skipf("cannot create bridge %s: %v %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
}

func master(iface string) string {
	l, err := os.Readlink("/sys/class/net/" + iface + "/master")
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

func num(v any) int64 {
	n, _ := v.(json.Number).Int64()
	return n
}

func waitExit(t *testing.T, h *dtestutil.DriverHarness, id string, within time.Duration) *drivers.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ch, err := h.WaitTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r == nil {
			t.Fatal("WaitTask channel closed without a result")
		}
		return r
	case <-ctx.Done():
		t.Fatalf("task %s did not exit within %s", id, within)
	}
	return nil
}

func TestPluginBasics(t *testing.T) {
	d := NewPlugin(hclog.NewNullLogger()).(*Driver)
	defer d.Shutdown()
	info, _ := d.PluginInfo()
	if info.Name != PluginName || info.Type != base.PluginTypeDriver {
		t.Errorf("plugin info %+v", info)
	}
	if _, err := d.ExecTask("x", []string{"ping"}, time.Second); err != drivers.ErrTaskNotFound {
		t.Errorf("ExecTask of an unknown task: %v", err)
	}
	for field, c := range map[string]*Config{
		"accel":               {Accel: "hvf", RunDir: "/run/x"},
		"run_dir":             {Accel: "auto", RunDir: "relative"},
		"kernel":              {Accel: "auto", RunDir: "/run/x", Kernel: "k.elf"},
		"fingerprint_period":  {Accel: "auto", RunDir: "/run/x", FingerprintPeriod: "10ms"},
		"warm_pool[0].kernel": {Accel: "auto", RunDir: "/run/x", WarmPool: []PoolConfig{{Kernel: "k.elf"}}},
		"warm_pool[0].size":   {Accel: "auto", RunDir: "/run/x", WarmPool: []PoolConfig{{Kernel: "/k", Size: -1}}},
		"warm_pool[1].nics": {Accel: "auto", RunDir: "/run/x",
			WarmPool: []PoolConfig{{Kernel: "/k", Size: 1}, {Kernel: "/k", Size: 1, Nics: 9}}},
		"warm_pool[1]": {Accel: "auto", RunDir: "/run/x",
			WarmPool: []PoolConfig{{Kernel: "/k", Size: 1, Nics: 1}, {Kernel: "/k", Size: 2, Nics: 1}}},
	} {
		err := d.applyConfig(c)
		if fe, ok := err.(*FieldError); !ok || fe.Field != field {
			t.Errorf("config %+v: want an error naming %s, got %v", c, field, err)
		}
	}
}

func TestTaskConfigValidation(t *testing.T) {
	k := kernelPath(t)
	if _, err := os.Stat(k); err != nil {
		t.Skip("VNF kernel not built")
	}
	cases := map[string]TaskConfig{
		"kernel":          {Kernel: "vnf.elf"},
		"memory_mb":       {MemoryMB: 4},
		"vcpus":           {Vcpus: 9},
		"session_slots":   {SessionSlots: 70000},
		"flow_timeout_ms": {FlowTimeoutMS: -1},
		"nics":            {NICs: []string{"a", "b", "c", "d", "e"}},
		"nics[1]":         {NICs: []string{"br0", "bad bridge name!"}},
		"click_file":      {ClickConfig: "x", ClickFile: "y"},
		"click_config":    {ClickConfig: strings.Repeat("x", 7001)},
		"name":            {Name: "-x"},
		"macs":            {NICs: []string{"", ""}, MACs: []string{"fa:16:3e:00:00:01"}},
		"macs[1]":         {NICs: []string{"", ""}, MACs: []string{"", "01:00:5e:00:00:01"}},
		"qoe.capacity":    {QoE: TaskQoE{Capacity: 70000, DeadlineMS: "5", Quantile: "0.99"}},
		"qoe.deadline_ms": {QoE: TaskQoE{Capacity: 8, DeadlineMS: "soon", Quantile: "0.99"}},
		"qoe.quantile":    {QoE: TaskQoE{Capacity: 8, DeadlineMS: "5", Quantile: "1"}},
		"qoe.budget_ns":   {QoE: TaskQoE{Capacity: 8, DeadlineMS: "5", Quantile: "0.9", BudgetNS: -1}},
		"qoe.wait_ppm":    {QoE: TaskQoE{Capacity: 8, DeadlineMS: "5", Quantile: "0.9", WaitPPM: 1_000_001}},
	}
	paths := taskPaths(&drivers.TaskConfig{AllocDir: t.TempDir(), Name: "t"}, &Config{Kernel: k})
	for field, tc := range cases {
		err := tc.validate(paths)
		if err == nil {
			t.Errorf("%s: accepted", field)
			continue
		}
		if fe, ok := err.(*FieldError); !ok || fe.Field != field {
			t.Errorf("%s: error %v does not name the field", field, err)
		}
	}
}

func TestStartStatsStopDestroy(t *testing.T) {
	k := requireVNF(t)
	h, d, _ := newHarness(t)
	bridge(t, "fvtbr0")
	bridge(t, "fvtbr1")
	task := newTask(t, h, "fw", &TaskConfig{Kernel: k, NICs: []string{"fvtbr0", "fvtbr1"},
		ClickConfig: forward2, SessionSlots: 64})
	t0 := time.Now()
	handle, _, err := h.StartTask(task)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StartTask (cold: spawn, ready, plug 2 taps, configure) took %s", time.Since(t0))
	if err := h.WaitUntilStarted(task.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	st, err := h.InspectTask(task.ID)
	if err != nil || st.State != drivers.TaskStateRunning {
		t.Fatalf("inspect: %+v %v", st, err)
	}
	t.Logf("guest boot_us=%s", st.DriverAttributes["boot_us"])
	var state taskState
	if err := handle.GetDriverState(&state); err != nil || state.Pid == 0 {
		t.Fatalf("driver state %+v %v", state, err)
	}
	// the ready signal: vnf-stats.json is in the task dir when StartTask returns, before any
	// TaskStats tick, with the time the VNF was handed over configured
	var ready struct {
		VNF     string         `json:"vnf_uuid"`
		ReadyAt time.Time      `json:"ready_at"`
		Launch  string         `json:"launch"`
		Stats   map[string]any `json:"stats"`
	}
	b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, vnfStatsFile))
	if err != nil || json.Unmarshal(b, &ready) != nil {
		t.Fatalf("no ready vnf-stats.json after StartTask: %v %s", err, b)
	}
	if ready.VNF != state.Spec.UUID || !ready.ReadyAt.Equal(state.StartedAt) ||
		ready.Stats["configured"] != true || ready.Launch != "cold" {
		t.Errorf("ready file %s, want vnf %s ready_at %s configured, cold", b, state.Spec.UUID, state.StartedAt)
	}
	// and rewritten by the plugin itself, with no TaskStats call (Nomad's client makes none
	// unless it publishes allocation metrics)
	var first, later struct {
		Time time.Time `json:"time"`
	}
	_ = json.Unmarshal(b, &first)
	deadline := time.Now().Add(10 * vnfStatsEvery)
	for !later.Time.After(first.Time) {
		if time.Now().After(deadline) {
			t.Fatalf("vnf-stats.json not rewritten within %s without TaskStats (time %s)", 10*vnfStatsEvery, first.Time)
		}
		time.Sleep(vnfStatsEvery / 4)
		if b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, vnfStatsFile)); err == nil {
			_ = json.Unmarshal(b, &later)
		}
	}
	// the vCPU threads (every thread but QEMU's main one) run at vcpu_nice
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", state.Pid))
	for _, e := range ents {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", state.Pid, e.Name()))
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		want := fmt.Sprint(spec.VcpuNiceDefault)
		if e.Name() == fmt.Sprint(state.Pid) {
			want = "0"
		}
		if len(f) < 17 || f[16] != want {
			t.Errorf("thread %s of QEMU %d: nice %v, want %s", e.Name(), state.Pid, f[16:17], want)
		}
	}
	taps := []string{state.Spec.Nics[0].Tap, state.Spec.Nics[1].Tap}
	for i, tap := range taps {
		if m := master(tap); m != fmt.Sprintf("fvtbr%d", i) {
			t.Errorf("tap %s master %q", tap, m)
		}
	}
	stats, err := d.VNFStats(task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stats["configured"] != true || num(stats["slots"].(map[string]any)["total"]) != 64 ||
		len(stats["nics"].([]any)) != 2 {
		t.Errorf("stats %v", stats)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sch, err := h.TaskStats(ctx, task.ID, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	u := <-sch
	cancel()
	if u == nil || u.ResourceUsage.MemoryStats.RSS == 0 {
		t.Errorf("task stats %+v", u)
	}
	fp := d.buildFingerprint()
	if v, _ := fp.Attributes["driver.unikernel.session_slots.total"].GetInt(); v != 64 {
		t.Errorf("fingerprint slots total %v", v)
	}
	if _, ok := fp.Attributes["driver.unikernel.queuing_delay_ms"]; !ok {
		t.Error("no queuing_delay_ms attribute")
	}

	if err := h.StopTask(task.ID, 5*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	res := waitExit(t, h, task.ID, 10*time.Second)
	t.Logf("exit after StopTask: %+v", res)
	if err := h.DestroyTask(task.ID, false); err != nil {
		t.Fatal(err)
	}
	if qemu.Alive(state.Pid, state.Spec.UUID) {
		t.Errorf("QEMU pid %d still running after DestroyTask", state.Pid)
	}
	for _, tap := range taps {
		if qemu.LinkExists(tap) {
			t.Errorf("tap %s left behind", tap)
		}
	}
	if _, err := os.Stat(filepath.Dir(state.Spec.ControlSocket)); !os.IsNotExist(err) {
		t.Errorf("run dir left behind: %v", err)
	}
}

// A task's qoe block reaches the VNF with its launch: its slots reply (what the fingerprint's
// session_slots.free sums) follows the capacity, not the 64-entry flow table.
func TestQoEBlockSetsTheVNFsSlots(t *testing.T) {
	k := requireVNF(t)
	h, d, _ := newHarness(t)
	var tc TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, `config {
  session_slots = 64
  qoe {
    capacity    = 10
    deadline_ms = 5
    quantile    = 0.99
    wait_ppm    = 1000000
  }
}`, &tc)
	want := TaskQoE{Capacity: 10, DeadlineMS: "5", Quantile: "0.99", WaitPPM: 1_000_000}
	if tc.QoE != want {
		t.Fatalf("qoe block decodes to %+v, want %+v", tc.QoE, want)
	}
	// the JSON job the orchestrator's Nomad zone sends (orchestrator/zones/nomad.py job_spec)
	var fromJSON TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseJson(t, `{"Config": {"qoe": [{"capacity": 10, `+
		`"deadline_ms": "5.0", "quantile": "0.99", "budget_ns": 4096, "wait_ppm": 250000}]}}`, &fromJSON)
	if c, b, p := fromJSON.QoE.Request(); fromJSON.QoE.validate() != nil || c != 10 || b != 4096 ||
		p != 990000 || fromJSON.QoE.WaitPPM != 250_000 {
		t.Fatalf("JSON qoe block decodes to %+v: request %d %d %d", fromJSON.QoE, c, b, p)
	}
	tc.Kernel, tc.NICs, tc.ClickConfig = k, []string{""}, "FromDevice(0) -> Discard;"
	task := newTask(t, h, "qoe", &tc)
	startTask(t, h, task)
	stats, err := d.VNFStats(task.ID)
	if err != nil {
		t.Fatal(err)
	}
	sl := stats["slots"].(map[string]any)
	q, _ := sl["qoe"].(map[string]any)
	// wait_budget_ppm: the block's wait_ppm reached the VNF (a whole window: never over)
	if num(sl["total"]) != 64 || num(sl["free"]) != 10 || q == nil || num(q["capacity"]) != 10 ||
		num(q["budget_ns"]) != 5_000_000 || num(q["quantile_ppm"]) != 990000 ||
		num(q["wait_budget_ppm"]) != 1_000_000 {
		t.Errorf("slots %v", sl)
	}
	fp := d.buildFingerprint()
	if v, _ := fp.Attributes["driver.unikernel.session_slots.free"].GetInt(); v != 10 {
		t.Errorf("fingerprint free slots %v, want 10", v)
	}
	if err := h.DestroyTask(task.ID, true); err != nil {
		t.Fatal(err)
	}
}

func TestKill9IsReportedAsExit(t *testing.T) {
	k := requireVNF(t)
	h, _, _ := newHarness(t)
	task := newTask(t, h, "victim", &TaskConfig{Kernel: k})
	_, state := startTask(t, h, task)
	if err := syscall.Kill(state.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := waitExit(t, h, task.ID, 10*time.Second)
	if res.Signal != int(syscall.SIGKILL) || res.Successful() {
		t.Errorf("exit result %+v, want signal 9", res)
	}
	st, _ := h.InspectTask(task.ID)
	if st.State != drivers.TaskStateExited {
		t.Errorf("state %s", st.State)
	}
	if err := h.DestroyTask(task.ID, true); err != nil {
		t.Fatal(err)
	}
}

func TestBadClickConfigFailsCleanly(t *testing.T) {
	k := requireVNF(t)
	h, _, runDir := newHarness(t)
	task := newTask(t, h, "bad", &TaskConfig{Kernel: k, NICs: []string{""}, ClickConfig: "FromDevice(0) -> Countr -> Discard;"})
	_, _, err := h.StartTask(task)
	if err == nil || !strings.Contains(err.Error(), "click_config") || !strings.Contains(err.Error(), "Countr") {
		t.Fatalf("want a click_config error, got %v", err)
	}
	entries, _ := os.ReadDir(runDir)
	if len(entries) != 0 {
		t.Errorf("run dir not cleaned: %v", entries)
	}
	out, _ := exec.Command("pgrep", "-f", runDir).Output()
	if len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("QEMU left running: %s", out)
	}
	// the field is named through the plugin's gRPC boundary too
	task2 := newTask(t, h, "bad2", &TaskConfig{Kernel: k, MemoryMB: 4})
	if _, _, err := h.StartTask(task2); err == nil || !strings.Contains(err.Error(), "memory_mb") {
		t.Errorf("want a memory_mb error, got %v", err)
	}
}

func TestRecoverTask(t *testing.T) {
	k := requireVNF(t)
	h, d, _ := newHarness(t)
	task := newTask(t, h, "survivor", &TaskConfig{Kernel: k, NICs: []string{""}, ClickConfig: "FromDevice(0) -> Discard;"})
	handle, state := startTask(t, h, task)
	// simulate a plugin restart: the old plugin's control connection goes away
	old, _ := d.tasks.Get(task.ID)
	old.ctl.Close()

	h2, d2, _ := newHarness(t)
	if err := h2.RecoverTask(handle); err != nil {
		t.Fatal(err)
	}
	st, err := d2.VNFStats(task.ID)
	if err != nil || st["configured"] != true {
		t.Fatalf("stats after recover: %v %v", st, err)
	}
	syscall.Kill(state.Pid, syscall.SIGKILL)
	res := waitExit(t, h2, task.ID, 10*time.Second)
	if res.Successful() {
		t.Errorf("exit after kill -9 reported as success: %+v", res)
	}
	h2.DestroyTask(task.ID, true)
	h.DestroyTask(task.ID, true)
}

// TestStartedForADeadClientIsReaped: a VNF whose handle the client never got (it died during
// StartTask, and will start the task again) is marked until WaitTask; the next plugin process
// kills a marked one and keeps one the client waits on (it recovers that one).
func TestStartedForADeadClientIsReaped(t *testing.T) {
	k := requireVNF(t)
	h, d, runDir := newHarness(t)
	cfg := &TaskConfig{Kernel: k, NICs: []string{""}, ClickConfig: "FromDevice(0) -> Discard;"}
	lost := newTask(t, h, "lost", cfg)
	_, lostState := startTask(t, h, lost)
	kept := newTask(t, h, "kept", cfg)
	_, keptState := startTask(t, h, kept)
	if _, err := h.WaitTask(context.Background(), kept.ID); err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(runDir, lostState.Spec.UUID, startingMarker)) {
		t.Fatalf("no %s before WaitTask (%s)", startingMarker, runDir)
	}
	marker := filepath.Join(runDir, keptState.Spec.UUID, startingMarker)
	for deadline := time.Now().Add(10 * time.Second); fileExists(marker); { // WaitTask's stream
		if time.Now().After(deadline) {
			t.Fatalf("%s left after WaitTask", startingMarker)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, id := range []string{lost.ID, kept.ID} { // the plugin process goes away
		old, _ := d.tasks.Get(id)
		old.ctl.Close()
	}

	_, d2 := newHarnessIn(t, runDir, nil)
	d2.startPool() // what the client's first Fingerprint call does
	if qemu.Alive(lostState.Pid, lostState.Spec.UUID) {
		t.Errorf("the QEMU of a task the client never got (pid %d) still runs", lostState.Pid)
	}
	if fileExists(filepath.Join(runDir, lostState.Spec.UUID)) {
		t.Errorf("its run dir is left")
	}
	if !qemu.Alive(keptState.Pid, keptState.Spec.UUID) {
		t.Errorf("the QEMU of a task the client has (pid %d) was killed", keptState.Pid)
	}
	h.DestroyTask(kept.ID, true)
}

// TestVhostUserNICs: with net_backend = "vhost-user" the plugin starts fluidvim-vhost-net before
// QEMU (argv from the shared vectors), the taps it creates are plugged, and a destroy leaves
// neither the backend nor a tap.
func TestVhostUserNICs(t *testing.T) {
	k := requireVNF(t)
	bin, _ := filepath.Abs("../../vhost/build/fluidvim-vhost-net")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("fluidvim-vhost-net not built (%s): run make -C vhost", bin)
	}
	runDir := t.TempDir()
	h, d := newHarnessWith(t, runDir, nil, func(c *Config) {
		c.NetBackend, c.VhostNetBinary = spec.NetVhostUser, bin
	})
	bridge(t, "fvtvb0")
	bridge(t, "fvtvb1")
	task := newTask(t, h, "vu", &TaskConfig{Kernel: k, NICs: []string{"fvtvb0", "fvtvb1"},
		ClickConfig: forward2})
	_, state := startTask(t, h, task)
	t.Cleanup(func() { _ = h.DestroyTask(task.ID, true) }) // also when the test fails midway
	if state.Spec.NetBackend != spec.NetVhostUser {
		t.Fatalf("spec net_backend %q", state.Spec.NetBackend)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", state.Pid))
	if !strings.Contains(string(cmdline), "vhost-user,id=net0,chardev=vu0") {
		t.Errorf("QEMU argv without vhost-user: %q", cmdline)
	}
	// the backend's argv is FD:TAP per NIC
	out, _ := exec.Command("pgrep", "-f", "fluidvim-vhost-net .*:"+state.Spec.Nics[0].Tap).Output()
	backend := strings.TrimSpace(string(out))
	if backend == "" || strings.Contains(backend, "\n") {
		t.Fatal("no fluidvim-vhost-net process for the VNF")
	}
	// the power meter charges that backend's CPU time to the task (its vhost component)
	th, _ := d.tasks.Get(task.ID)
	if c, ok := th.counters(); !ok || len(c.helperPids) != 1 || strconv.Itoa(c.helperPids[0]) != backend {
		t.Errorf("power meter: backend pids %v, want [%s]", c.helperPids, backend)
	}
	taps := []string{state.Spec.Nics[0].Tap, state.Spec.Nics[1].Tap}
	for i, tap := range taps {
		if m := master(tap); m != fmt.Sprintf("fvtvb%d", i) {
			t.Errorf("tap %s master %q", tap, m)
		}
	}
	if err := h.StopTask(task.ID, 5*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	waitExit(t, h, task.ID, 10*time.Second)
	if err := h.DestroyTask(task.ID, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, err := os.Stat("/proc/" + backend); err == nil && time.Now().Before(deadline); _, err = os.Stat("/proc/" + backend) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat("/proc/" + backend); err == nil {
		t.Errorf("fluidvim-vhost-net %s still running after DestroyTask", backend)
	}
	for _, tap := range taps {
		if qemu.LinkExists(tap) {
			t.Errorf("tap %s left behind", tap)
		}
	}
}

// `nomad alloc exec` into a running VNF: commands are control-channel requests.
func TestExecCommandsAndConsole(t *testing.T) {
	k := requireVNF(t)
	h, d, _ := newHarness(t)
	task := newTask(t, h, "execfw", &TaskConfig{Kernel: k, NICs: []string{""},
		ClickConfig: "FromDevice(0) -> Counter -> Discard;", SessionSlots: 32})
	startTask(t, h, task)
	defer h.DestroyTask(task.ID, true)
	run := func(tty bool, stdin string, cmd ...string) (int, string, string) {
		var out, errOut strings.Builder
		r, err := d.ExecTaskStreaming(context.Background(), task.ID, &drivers.ExecOptions{
			Command: cmd, Tty: tty, Stdin: io.NopCloser(strings.NewReader(stdin)),
			Stdout: nopCloser{&out}, Stderr: nopCloser{&errOut}, ResizeCh: make(chan drivers.TerminalSize)})
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		return r.ExitCode, out.String(), errOut.String()
	}

	code, out, stderr := run(false, "", "ping")
	if code != 0 || !strings.HasPrefix(out, "pong from execfw") || !strings.Contains(out, "configured true") {
		t.Errorf("ping: %d %q %q", code, out, stderr)
	}
	code, out, _ = run(false, "", "slots")
	if code != 0 || !strings.HasPrefix(out, "32 free of 32 session slots") {
		t.Errorf("slots: %d %q", code, out)
	}
	code, out, _ = run(false, "", "/bin/sh", "-c", "stats elements") // how tools wrap commands
	var elems []map[string]any
	if err := json.Unmarshal([]byte(out), &elems); code != 0 || err != nil || len(elems) != 2 ||
		elems[0]["class"] != "Counter" {
		t.Errorf("stats elements: %d %q %v", code, out, err)
	}
	code, _, stderr = run(false, "", "stats", "nosuchkey")
	if code != execFailed || !strings.Contains(stderr, `no key "nosuchkey"`) || !strings.Contains(stderr, "slots") {
		t.Errorf("stats nosuchkey: %d %q", code, stderr)
	}
	code, _, stderr = run(false, "", "ls", "-l")
	if code != execUnknown || !strings.Contains(stderr, "ls: unknown command") {
		t.Errorf("ls: %d %q", code, stderr)
	}

	// the console on a terminal: prompt, echo, backspace, an arrow key ignored, CR LF, exit
	code, out, _ = run(true, "pii\x7fng\r\x1b[Aslots\rexit\r", "console")
	for _, want := range []string{"execfw> pii\b \bng\r\n", "pong from execfw", "32 free of 32",
		"execfw> exit\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("console output lacks %q: %q", want, out)
		}
	}
	if code != 0 || strings.Contains(strings.ReplaceAll(out, "\r\n", ""), "\n") {
		t.Errorf("console: exit %d, or a bare LF on a raw terminal: %q", code, out)
	}
	// without a terminal: lines from stdin, no prompt, the last command's exit code
	code, out, _ = run(false, "help\nbogus\n", "sh")
	if code != execUnknown || !strings.Contains(out, "session slots: free") || strings.Contains(out, "> ") {
		t.Errorf("console without a tty: %d %q", code, out)
	}

	// the one-shot RPC through the plugin's gRPC boundary (Nomad script checks use it)
	res, err := h.ExecTask(task.ID, []string{"slots"}, 5*time.Second)
	if err != nil || res.ExitResult.ExitCode != 0 || !strings.Contains(string(res.Stdout), "free of 32") {
		t.Errorf("ExecTask slots: %+v %v", res, err)
	}
	if _, err := h.ExecTask(task.ID, []string{"console"}, 5*time.Second); err == nil ||
		!strings.Contains(err.Error(), "needs a terminal") {
		t.Errorf("ExecTask console: %v", err)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
