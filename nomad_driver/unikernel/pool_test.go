// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins/base"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
)

func poolRunDir(t *testing.T) string {
	t.Helper()
	runDir, err := os.MkdirTemp("/tmp", "fvmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// a failed test must not leave QEMU behind: kill what still runs under runDir
		out, _ := exec.Command("pgrep", "-f", runDir).Output()
		for _, f := range strings.Fields(string(out)) {
			exec.Command("kill", "-9", f).Run()
		}
		os.RemoveAll(runDir)
	})
	return runDir
}

// qemuUnder lists the pids of QEMU processes whose command line names runDir.
func qemuUnder(runDir string) []string {
	out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+runDir).Output()
	return strings.Fields(string(out))
}

// readyShells is the pool's ready list for sh (uuids, in order).
func readyShells(d *Driver, sh poolShape) []*shell {
	d.pool.mu.Lock()
	defer d.pool.mu.Unlock()
	return append([]*shell(nil), d.pool.ready[sh]...)
}

func waitShell(t *testing.T, d *Driver, sh poolShape, notUUID string) *shell {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range readyShells(d, sh) {
			if s.h.spec.UUID != notUUID {
				return s
			}
		}
		d.pool.waitReady(sh, 1, 200*time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no shell of %s became ready (last error %q)", sh, d.pool.lastErr[sh])
	return nil
}

func stopDestroy(t *testing.T, h *dtestutil.DriverHarness, id string) {
	t.Helper()
	if err := h.StopTask(id, 5*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	waitExit(t, h, id, 10*time.Second)
	if err := h.DestroyTask(id, false); err != nil {
		t.Fatal(err)
	}
}

func TestWarmPoolClaimAndRefill(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 2}
	h, d := newHarnessIn(t, runDir, []PoolConfig{pc})
	if err := pc.validate(0); err != nil {
		t.Fatal(err)
	}
	sh := pc.shape()
	bridge(t, "fvmbr0")
	bridge(t, "fvmbr1")
	first := waitShell(t, d, sh, "")
	shellTaps := []string{first.h.spec.Nics[0].Tap, first.h.spec.Nics[1].Tap}
	for _, tap := range shellTaps {
		if !qemu.LinkExists(tap) || master(tap) != "" {
			t.Fatalf("a pooled shell's tap %s should exist and be unattached (master %q)", tap, master(tap))
		}
	}

	task := newTask(t, h, "fw", &TaskConfig{Kernel: k, NICs: []string{"fvmbr0", "fvmbr1"},
		ClickConfig: forward2, SessionSlots: 64})
	t0 := time.Now()
	handle, _, err := h.StartTask(task)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StartTask (warm: claim, attach 2 taps, configure) took %s", time.Since(t0))
	var state taskState
	if err := handle.GetDriverState(&state); err != nil {
		t.Fatal(err)
	}
	if state.Spec.UUID != first.h.spec.UUID {
		t.Fatalf("task runs VNF %s, not the pooled shell %s", state.Spec.UUID, first.h.spec.UUID)
	}
	// the ready signal says the claim was warm (what the Nomad zone records as the launch kind)
	var ready struct {
		VNF    string `json:"vnf_uuid"`
		Launch string `json:"launch"`
	}
	if b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, vnfStatsFile)); err != nil ||
		json.Unmarshal(b, &ready) != nil || ready.VNF != state.Spec.UUID || ready.Launch != "warm" {
		t.Errorf("ready file after a warm claim: %+v %v", ready, err)
	}
	for i, tap := range shellTaps {
		if m := master(tap); m != []string{"fvmbr0", "fvmbr1"}[i] {
			t.Errorf("tap %s master %q after the claim", tap, m)
		}
	}
	if state.Spec.Nics[0].Bridge == nil || *state.Spec.Nics[0].Bridge != "fvmbr0" || state.Spec.SessionSlots != 64 {
		t.Errorf("recorded spec not updated: %+v", state.Spec)
	}
	for _, m := range []string{poolMarker, claimingMarker, bootingMarker} {
		if fileExists(filepath.Join(runDir, state.Spec.UUID, m)) {
			t.Errorf("a claimed shell still has %s", m)
		}
	}
	stats, err := d.VNFStats(task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stats["configured"] != true || num(stats["slots"].(map[string]any)["total"]) != 64 {
		t.Errorf("stats after a warm launch: %v", stats)
	}

	// refill: a new shell boots in the background
	second := waitShell(t, d, sh, first.h.spec.UUID)
	fp := d.buildFingerprint()
	for _, a := range []string{"warm_pool.ready", "warm_pool.size"} {
		if v, _ := fp.Attributes["driver.unikernel."+a].GetInt(); v != 1 {
			t.Errorf("fingerprint %s = %v, want 1", a, v)
		}
	}
	warmMS, ok := fp.Attributes["driver.unikernel.queuing_delay_warm_ms"].GetFloat()
	if !ok {
		t.Fatal("no queuing_delay_warm_ms attribute after a warm launch")
	}
	if q, _ := fp.Attributes["driver.unikernel.queuing_delay_ms"].GetFloat(); q != warmMS {
		t.Errorf("queuing_delay_ms %v should be the warm launch time %v while a shell is ready", q, warmMS)
	}
	if b, _ := fp.Attributes["driver.unikernel.queuing_delay_basis"].GetString(); b != "warm" {
		t.Errorf("queuing_delay_basis %q", b)
	}

	// TaskStats also writes the VNF's own counters into the task directory
	sch, err := h.TaskStats(t.Context(), task.ID, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-sch
	<-sch
	b, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, vnfStatsFile))
	if err != nil {
		t.Fatal(err)
	}
	var vs struct {
		UUID  string         `json:"vnf_uuid"`
		Stats map[string]any `json:"stats"`
	}
	if err := json.Unmarshal(b, &vs); err != nil || vs.UUID != state.Spec.UUID || vs.Stats["configured"] != true ||
		len(vs.Stats["nics"].([]any)) != 2 {
		t.Errorf("%s: %s (%v)", vnfStatsFile, b, err)
	}

	// warm = false skips the pool
	no := false
	cold := newTask(t, h, "cold", &TaskConfig{Kernel: k, NICs: []string{"", ""}, ClickConfig: forward2, Warm: &no})
	ch, _, err := h.StartTask(cold)
	if err != nil {
		t.Fatal(err)
	}
	var cst taskState
	_ = ch.GetDriverState(&cst)
	if cst.Spec.UUID == second.h.spec.UUID || len(readyShells(d, sh)) != 1 {
		t.Errorf("warm=false took the pooled shell")
	}
	stopDestroy(t, h, cold.ID)
	stopDestroy(t, h, task.ID)
	for _, tap := range shellTaps {
		if qemu.LinkExists(tap) {
			t.Errorf("tap %s left after the warm task was destroyed", tap)
		}
	}
	d.Shutdown()
	if left := qemuUnder(runDir); len(left) != 0 {
		t.Errorf("QEMU left after Shutdown: %v", left)
	}
	if qemu.LinkExists(second.h.spec.Nics[0].Tap) {
		t.Errorf("the pooled shell's tap is left after Shutdown")
	}
}

func TestWarmPoolRejectedConfigKeepsShell(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 1}
	h, d := newHarnessIn(t, runDir, []PoolConfig{pc})
	_ = pc.validate(0)
	sh := pc.shape()
	bridge(t, "fvmbr2")
	s := waitShell(t, d, sh, "")
	tap := s.h.spec.Nics[0].Tap

	task := newTask(t, h, "bad", &TaskConfig{Kernel: k, NICs: []string{"fvmbr2"},
		ClickConfig: "FromDevice(0) -> Countr -> Discard;"})
	_, _, err := h.StartTask(task)
	if err == nil || !strings.Contains(err.Error(), "click_config") || !strings.Contains(err.Error(), "Countr") {
		t.Fatalf("want a click_config error naming Countr, got %v", err)
	}
	// the shell is back in the pool, unconfigured, its tap detached; nothing else runs
	back := readyShells(d, sh)
	if len(back) != 1 || back[0].h.spec.UUID != s.h.spec.UUID {
		t.Fatalf("shell not returned to the pool: %v", back)
	}
	if m := master(tap); m != "" {
		t.Errorf("returned shell's tap still attached to %q", m)
	}
	if res, err := back[0].h.ctl.Ping(5 * time.Second); err != nil || res["configured"] != false {
		t.Errorf("returned shell: ping %v %v", res, err)
	}
	if n := len(qemuUnder(runDir)); n != 1 {
		t.Errorf("%d QEMU processes, want the one shell", n)
	}
	if _, err := os.Stat(filepath.Join(runDir, s.h.spec.UUID, poolMarker)); err != nil {
		t.Errorf("returned shell lost its pool marker: %v", err)
	}
	if fileExists(filepath.Join(runDir, s.h.spec.UUID, claimingMarker)) {
		t.Errorf("returned shell still marked as being claimed")
	}

	// a bridge that does not exist is refused before any shell is claimed
	task2 := newTask(t, h, "nobr", &TaskConfig{Kernel: k, NICs: []string{"fvmnobr"}, ClickConfig: "FromDevice(0) -> Discard;"})
	if _, _, err := h.StartTask(task2); err == nil || !strings.Contains(err.Error(), "nics[0]") {
		t.Errorf("want a nics[0] error, got %v", err)
	}
	if len(readyShells(d, sh)) != 1 {
		t.Error("a refused task consumed the shell")
	}

	// the same shell then serves a good configuration
	task3 := newTask(t, h, "good", &TaskConfig{Kernel: k, NICs: []string{"fvmbr2"}, ClickConfig: "FromDevice(0) -> Discard;"})
	handle, _, err := h.StartTask(task3)
	if err != nil {
		t.Fatal(err)
	}
	var st taskState
	_ = handle.GetDriverState(&st)
	if st.Spec.UUID != s.h.spec.UUID || master(tap) != "fvmbr2" {
		t.Errorf("good config did not use the returned shell (%s, master %q)", st.Spec.UUID, master(tap))
	}
	stopDestroy(t, h, task3.ID)
}

// abandon simulates the plugin process dying: the refill stops, the shells are forgotten
// (not killed) and their control connections close.
func abandon(d *Driver) {
	p := d.pool
	close(p.stop)
	<-p.done
	p.mu.Lock()
	for k, list := range p.ready {
		for _, s := range list {
			s.h.ctl.Close()
		}
		delete(p.ready, k)
	}
	p.mu.Unlock()
}

func TestWarmPoolDeathAdoptionNoLeak(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 1}
	_, d := newHarnessIn(t, runDir, []PoolConfig{pc})
	_ = pc.validate(0)
	sh := pc.shape()
	s := waitShell(t, d, sh, "")

	// a shell that dies in the pool is cleaned up and replaced
	if err := syscall.Kill(s.h.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s2 := waitShell(t, d, sh, s.h.spec.UUID)
	deadline := time.Now().Add(5 * time.Second)
	for (qemu.LinkExists(s.h.spec.Nics[0].Tap) || fileExists(s.h.runDir)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if qemu.LinkExists(s.h.spec.Nics[0].Tap) || fileExists(s.h.runDir) {
		t.Errorf("dead shell %s left its tap or run dir", s.h.spec.UUID)
	}

	// plugin restart with the same pool: the new plugin adopts the shell
	abandon(d)
	_, d2 := newHarnessIn(t, runDir, []PoolConfig{pc})
	got := readyShells(d2, sh)
	if len(got) != 1 || got[0].h.spec.UUID != s2.h.spec.UUID {
		t.Fatalf("restarted plugin did not adopt shell %s: %v", s2.h.spec.UUID, got)
	}
	if n := len(qemuUnder(runDir)); n != 1 {
		t.Errorf("%d QEMU after adoption, want 1", n)
	}

	// the plugin dies in the middle of a claim: the next process kills that shell and boots a
	// fresh one
	if err := os.Rename(filepath.Join(s2.h.runDir, poolMarker), filepath.Join(s2.h.runDir, claimingMarker)); err != nil {
		t.Fatal(err)
	}
	abandon(d2)
	_, d3 := newHarnessIn(t, runDir, []PoolConfig{pc})
	s3 := waitShell(t, d3, sh, s2.h.spec.UUID)
	if qemu.LinkExists(s2.h.spec.Nics[0].Tap) || fileExists(s2.h.runDir) || qemu.Alive(s2.h.pid, s2.h.spec.UUID) {
		t.Errorf("half-claimed shell %s not removed", s2.h.spec.UUID)
	}

	// plugin restart without a warm_pool block: the orphan shell is killed, nothing is left
	abandon(d3)
	newHarnessIn(t, runDir, []PoolConfig{})
	if left := qemuUnder(runDir); len(left) != 0 {
		t.Errorf("QEMU left after a restart without warm_pool: %v", left)
	}
	if qemu.LinkExists(s3.h.spec.Nics[0].Tap) || fileExists(s3.h.runDir) {
		t.Errorf("orphan shell's tap or run dir left")
	}
}

// Nomad's plugin loader runs throw-away plugin processes that only get SetConfig: they must
// not boot shells (they are killed ~30 ms later, which would orphan them).
func TestWarmPoolNotStartedBySetConfigAlone(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	d := NewPlugin(hclog.NewNullLogger()).(*Driver)
	t.Cleanup(d.Shutdown)
	var data []byte
	cfg := &Config{Qemu: defaultQemu, Accel: "auto", Kernel: k, RunDir: runDir, BootTimeout: "30s",
		WarmPool: []PoolConfig{{Kernel: k, Size: 2, Nics: 1}}}
	if err := base.MsgPackEncode(&data, cfg); err != nil {
		t.Fatal(err)
	}
	if err := d.SetConfig(&base.Config{PluginConfig: data}); err != nil {
		t.Fatal(err)
	}
	if d.pool.started || len(qemuUnder(runDir)) != 0 {
		t.Fatal("SetConfig alone started the warm pool")
	}
	ch, err := d.Fingerprint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	pc := cfg.WarmPool[0]
	_ = pc.validate(0)
	if !d.pool.waitReady(pc.shape(), 2, 60*time.Second) {
		t.Fatal("the pool did not fill after Fingerprint")
	}
}

// A pool whose kernel is missing does not fail the plugin: the refill backs off and the error is
// a fingerprint attribute naming the file.
func TestWarmPoolMissingKernelReported(t *testing.T) {
	requireVNF(t)
	runDir := poolRunDir(t)
	_, d := newHarnessIn(t, runDir, []PoolConfig{{Kernel: "/nonexistent/fvm-vnf.elf", Size: 1}})
	deadline := time.Now().Add(30 * time.Second)
	for d.pool.lastError() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	fp := d.buildFingerprint()
	e, ok := fp.Attributes["driver.unikernel.warm_pool.error"].GetString()
	if !ok || !strings.Contains(e, "/nonexistent/fvm-vnf.elf") || !strings.Contains(e, "does not exist") {
		t.Errorf("warm_pool.error = %q", e)
	}
	if fp.Health != "healthy" {
		t.Errorf("driver health %s", fp.Health)
	}
	if n := len(qemuUnder(runDir)); n != 0 {
		t.Errorf("%d QEMU started", n)
	}
	entries, _ := os.ReadDir(runDir)
	if len(entries) != 0 {
		t.Errorf("run dir not empty: %v", entries)
	}
}

// A claim that fails for another reason than a rejected config (here: the control channel is
// broken) destroys the shell: QEMU killed, taps and run dir removed, the pool refills.
func TestWarmPoolBrokenClaimDestroysShell(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 1}
	h, d := newHarnessIn(t, runDir, []PoolConfig{pc})
	_ = pc.validate(0)
	sh := pc.shape()
	bridge(t, "fvmbr3")
	s := waitShell(t, d, sh, "")
	s.h.ctl.Close()
	task := newTask(t, h, "broken", &TaskConfig{Kernel: k, NICs: []string{"fvmbr3"}, ClickConfig: "FromDevice(0) -> Discard;"})
	_, _, err := h.StartTask(task)
	if err == nil || !strings.Contains(err.Error(), "warm shell") {
		t.Fatalf("want a warm-claim error, got %v", err)
	}
	if qemu.Alive(s.h.pid, s.h.spec.UUID) || qemu.LinkExists(s.h.spec.Nics[0].Tap) || fileExists(s.h.runDir) {
		t.Errorf("broken shell %s not destroyed (QEMU, tap or run dir left)", s.h.spec.UUID)
	}
	s2 := waitShell(t, d, sh, s.h.spec.UUID)
	if n := len(qemuUnder(runDir)); n != 1 {
		t.Errorf("%d QEMU after the refill, want 1 (%s)", n, s2.h.spec.UUID)
	}
}

// TestWarmPoolClaimSendsMACs: a task's macs reach a claimed shell in `configure` (contract/PROTOCOL.md
// §6.4), as the Python launch core sends a Neutron port's; a rejected configure changes none,
// and a task with nothing to configure cannot take a shell it would have to give MACs.
func TestWarmPoolClaimSendsMACs(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 2}
	h, d := newHarnessIn(t, runDir, []PoolConfig{pc})
	_ = pc.validate(0)
	sh := pc.shape()
	s := waitShell(t, d, sh, "")
	shellMACs := []string{s.h.spec.Nics[0].MAC, s.h.spec.Nics[1].MAC}
	const mac = "fa:16:3e:12:34:56"

	bad := newTask(t, h, "bad", &TaskConfig{Kernel: k, NICs: []string{"", ""}, MACs: []string{mac, ""},
		ClickConfig: "FromDevice(0) -> Countr -> Discard;"})
	if _, _, err := h.StartTask(bad); err == nil || !strings.Contains(err.Error(), "Countr") {
		t.Fatalf("want a config error, got %v", err)
	}
	back := readyShells(d, sh)
	if len(back) != 1 || back[0] != s || s.state != stReady {
		t.Fatalf("the shell was not given back: %v (state %s)", back, s.state)
	}
	st, err := s.h.stats(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range st["nics"].([]any) {
		if got := n.(map[string]any)["mac"]; got != shellMACs[i] {
			t.Errorf("after a rejected configure NIC %d has MAC %v, want the shell's %s", i, got, shellMACs[i])
		}
	}

	// no click config: the shell cannot be told a MAC, so the task boots cold
	noclick := newTask(t, h, "noclick", &TaskConfig{Kernel: k, NICs: []string{"", ""}, MACs: []string{mac, ""}})
	nh, _, err := h.StartTask(noclick)
	if err != nil {
		t.Fatal(err)
	}
	var nst taskState
	_ = nh.GetDriverState(&nst)
	if nst.Spec.UUID == s.h.spec.UUID || nst.Spec.Nics[0].MAC != mac || len(readyShells(d, sh)) != 1 {
		t.Errorf("a task without click config took the shell or lost its MAC: %+v", nst.Spec.Nics)
	}
	stopDestroy(t, h, noclick.ID)

	good := newTask(t, h, "good", &TaskConfig{Kernel: k, NICs: []string{"", ""}, MACs: []string{mac, ""},
		ClickConfig: forward2})
	handle, _, err := h.StartTask(good)
	if err != nil {
		t.Fatal(err)
	}
	var gst taskState
	_ = handle.GetDriverState(&gst)
	if gst.Spec.UUID != s.h.spec.UUID || s.state != stRunning {
		t.Fatalf("the task did not claim the shell (%s, state %s)", gst.Spec.UUID, s.state)
	}
	if gst.Spec.Nics[0].MAC != mac || gst.Spec.Nics[1].MAC != shellMACs[1] {
		t.Errorf("recorded NICs %+v, want MACs %s, %s", gst.Spec.Nics, mac, shellMACs[1])
	}
	stats, err := d.VNFStats(good.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{mac, shellMACs[1]}
	for i, n := range stats["nics"].([]any) {
		if got := n.(map[string]any)["mac"]; got != want[i] {
			t.Errorf("NIC %d reports MAC %v, want %s", i, got, want[i])
		}
	}
	stopDestroy(t, h, good.ID)
}

// TestWarmPoolReplacedKernelRetiresShells: a shell whose kernel file was rebuilt since it booted
// is never claimed and is removed (contract/PROTOCOL.md §6.1, event kernel_changed); the refill boots
// one of the new kernel.
func TestWarmPoolReplacedKernelRetiresShells(t *testing.T) {
	src := requireVNF(t)
	runDir := poolRunDir(t)
	k := filepath.Join(t.TempDir(), "vnf.elf")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, b, 0o644); err != nil {
		t.Fatal(err)
	}
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 1}
	h, d := newHarnessIn(t, runDir, []PoolConfig{pc})
	_ = pc.validate(0)
	sh := pc.shape()
	old := waitShell(t, d, sh, "")
	// rebuilt: other content (trailing bytes the ELF loader ignores), so another identity
	if err := os.WriteFile(k, append(b, []byte("\x00rebuilt")...), 0o644); err != nil {
		t.Fatal(err)
	}
	task := newTask(t, h, "fw", &TaskConfig{Kernel: k, NICs: []string{""}, ClickConfig: "FromDevice(0) -> Discard;"})
	handle, _, err := h.StartTask(task)
	if err != nil {
		t.Fatal(err)
	}
	var st taskState
	_ = handle.GetDriverState(&st)
	if st.Spec.UUID == old.h.spec.UUID {
		t.Fatal("a shell of the replaced kernel was claimed")
	}
	fresh := waitShell(t, d, sh, old.h.spec.UUID)
	if fresh.kernelID != kernelID(k) || fresh.kernelID == old.kernelID {
		t.Errorf("the refilled shell has kernel id %s (file %s, old %s)", fresh.kernelID, kernelID(k), old.kernelID)
	}
	deadline := time.Now().Add(10 * time.Second)
	for qemu.Alive(old.h.pid, old.h.spec.UUID) || fileExists(old.h.runDir) {
		if time.Now().After(deadline) {
			t.Fatal("the old shell's QEMU or run dir is still there")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopDestroy(t, h, task.ID)
}
