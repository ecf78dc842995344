// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/plugins/drivers"
	"golang.org/x/sys/unix"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// reservation is what the Nomad client sends for `resources { memory = memMB  cores = N }`:
// the cores reach a driver only as LinuxResources.CpusetCpus (the plugin protocol drops
// ReservedCores).
func reservation(memMB int64, cpuMHz int64, cpuset string) *drivers.Resources {
	return &drivers.Resources{
		NomadResources: &structs.AllocatedTaskResources{
			Memory: structs.AllocatedMemoryResources{MemoryMB: memMB},
			Cpu:    structs.AllocatedCpuResources{CpuShares: cpuMHz}},
		LinuxResources: &drivers.LinuxResources{CpusetCpus: cpuset, CPUShares: cpuMHz,
			MemoryLimitBytes: memMB << 20},
	}
}

// TestResourcesFromReservation: unset memory_mb/vcpus come from the reservation; a larger guest
// is refused naming both fields and the fix.
func TestResourcesFromReservation(t *testing.T) {
	tc := TaskConfig{}
	if err := tc.fromReservation(reservation(48, 500, "0,1")); err != nil {
		t.Fatal(err)
	}
	if tc.MemoryMB != 48 || tc.Vcpus != 2 {
		t.Errorf("unset shape from a 48 MiB, 2-core reservation: memory_mb %d vcpus %d", tc.MemoryMB, tc.Vcpus)
	}
	tc = TaskConfig{MemoryMB: 128}
	err := tc.fromReservation(reservation(64, 500, ""))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "memory_mb" || !strings.Contains(err.Error(), "resources.memory") ||
		!strings.Contains(err.Error(), "128") || !strings.Contains(err.Error(), "64") {
		t.Errorf("memory_mb 128 on a 64 MiB reservation: %v", err)
	}
	tc = TaskConfig{Vcpus: 3}
	if err := tc.fromReservation(reservation(64, 500, "2-3")); err == nil ||
		!strings.Contains(err.Error(), "vcpus") || !strings.Contains(err.Error(), "resources.cores") {
		t.Errorf("3 vCPUs on cores 2-3: %v", err)
	}
	if got := reservedCores(reservation(64, 500, "1,3-4")); len(got) != 3 || got[0] != 1 || got[2] != 4 {
		t.Errorf("cpuset 1,3-4 read as %v", got)
	}
	// CPU from MHz: a weight (cpu.shares = MHz), no hard quota, as Nomad's own drivers; reserved
	// cores: one period of quota per core
	lim, ok := limitsFor(reservation(64, 500, ""), 32)
	if !ok || lim.CPUQuotaUs != 0 || lim.CPUShares != 500 || lim.MemoryBytes != int64(32+spec.QemuOverheadMB)<<20 {
		t.Errorf("limits of 500 MHz / 32 MiB guest: %+v ok=%v, want shares 500 and no quota", lim, ok)
	}
	if lim, _ := limitsFor(reservation(64, 500, "2-3"), 32); lim.CPUQuotaUs != 2*spec.CPUPeriodUs+spec.QemuOverheadCPUUs {
		t.Errorf("limits of cores 2-3: %+v, want two periods of quota and QEMU's allowance", lim)
	}
}

// TestResourcesEnforced launches a real VNF with a reservation (64 MiB, core 0): the guest has
// the reserved memory, QEMU is in a cgroup whose memory and CPU limits are the reservation's
// (memory + the QEMU allowance, one core's quota), its vCPU threads run on core 0 only, and the
// group is gone after the task is destroyed. A config asking for more memory is refused.
func TestResourcesEnforced(t *testing.T) {
	k := requireVNF(t)
	if mode, why := qemu.CgroupMode(); mode == 0 {
		t.Skipf("limits cannot be enforced here: %s", why)
	}
	h, _, _ := newHarness(t)

	big := newTask(t, h, "big", &TaskConfig{Kernel: k, MemoryMB: 128, NICs: []string{""}})
	big.Resources = reservation(64, 500, "0")
	if _, _, err := h.StartTask(big); err == nil || !strings.Contains(err.Error(), "memory_mb") ||
		!strings.Contains(err.Error(), "resources.memory") {
		t.Fatalf("memory_mb 128 on a 64 MiB reservation started: %v", err)
	}

	task := newTask(t, h, "sized", &TaskConfig{Kernel: k, NICs: []string{""}})
	task.Resources = reservation(64, 500, "0")
	_, state := startTask(t, h, task)
	if state.Spec.MemoryMB != 64 {
		t.Errorf("guest memory %d MiB, want the reservation's 64", state.Spec.MemoryMB)
	}
	// the guest may have finished booting before QEMU joined its group and then sleep: ask the
	// VNF for its stats (TaskStats does, each interval) so QEMU runs inside the group before
	// the CPU accounting is read
	sch, err := h.TaskStats(t.Context(), task.ID, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-sch
	<-sch
	cg := checkLimits(t, state.Pid, state.Spec.UUID, 64, 0, true)

	if err := h.StopTask(task.ID, 5*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	waitExit(t, h, task.ID, 10*time.Second)
	if err := h.DestroyTask(task.ID, false); err != nil {
		t.Fatal(err)
	}
	for _, d := range cg.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left after DestroyTask (%v)", d, err)
		}
	}
}

// checkLimits checks the cgroup of VNF vid: memory limit memMB + the QEMU allowance, one
// core's CPU quota, QEMU (pid) in it and charged within the limit, its vCPU threads on core
// only. It returns the group.
func checkLimits(t *testing.T, pid int, vid string, memMB int64, core int, cold bool) *qemu.Cgroup {
	t.Helper()
	cg := qemu.CgroupFor(vid)
	if cg == nil {
		t.Fatalf("no cgroup for VNF %s", vid)
	}
	read := func(dir, f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	wantMem := (memMB + spec.QemuOverheadMB) << 20
	var memDir string
	switch cg.Version {
	case 2:
		memDir = cg.Dirs[0]
		if got := read(memDir, "memory.max"); got != strconv.FormatInt(wantMem, 10) {
			t.Errorf("memory.max %s, want %d", got, wantMem)
		}
		if got := read(memDir, "cpu.max"); got != strconv.Itoa(spec.CPUPeriodUs+spec.QemuOverheadCPUUs)+" "+strconv.Itoa(spec.CPUPeriodUs) {
			t.Errorf("cpu.max %q, want one core's quota", got)
		}
		if got := read(memDir, "cpu.weight"); got == "100" { // the kernel's default: no weight set
			t.Errorf("cpu.weight %s: the reservation's MHz set no weight", got)
		}
	case 1:
		memDir = cg.Dirs[0]
		if got := read(memDir, "memory.limit_in_bytes"); got != strconv.FormatInt(wantMem, 10) {
			t.Errorf("memory.limit_in_bytes %s, want %d", got, wantMem)
		}
		if got := read(cg.Dirs[1], "cpu.cfs_quota_us"); got != strconv.Itoa(spec.CPUPeriodUs+spec.QemuOverheadCPUUs) {
			t.Errorf("cpu.cfs_quota_us %s, want one core's quota and QEMU's allowance %d", got, spec.CPUPeriodUs+spec.QemuOverheadCPUUs)
		}
		if got := read(cg.Dirs[1], "cpu.shares"); got != "500" {
			t.Errorf("cpu.shares %s, want the reserved 500 MHz", got)
		}
		if got := read(cg.Dirs[1], "cpu.cfs_period_us"); got != strconv.Itoa(spec.CPUPeriodUs) {
			t.Errorf("cpu.cfs_period_us %s", got)
		}
	}
	for _, d := range cg.Dirs {
		if !strings.Contains("\n"+read(d, "cgroup.procs")+"\n", "\n"+strconv.Itoa(pid)+"\n") {
			t.Errorf("QEMU pid %d not in %s/cgroup.procs", pid, d)
		}
	}
	// the guest's memory is charged to the group, within the limit
	usageFile := map[int]string{2: "memory.current", 1: "memory.usage_in_bytes"}[cg.Version]
	usage, _ := strconv.ParseInt(read(memDir, usageFile), 10, 64)
	// a warm shell's pages stay charged where they were touched (no charge moves): only a cold
	// launch's QEMU must show its guest's memory in the group
	if usage > wantMem || (usage <= 0 && cold) {
		t.Errorf("%s = %d, want within (0, %d]", usageFile, usage, wantMem)
	}
	t.Logf("QEMU of a %d MiB guest: %s = %d MiB of %d MiB allowed", memMB, usageFile, usage>>20, wantMem>>20)
	// the CPU quota is live: the kernel's bandwidth control counts the periods QEMU ran in
	cpuDir := cg.Dirs[len(cg.Dirs)-1]
	periods := -1
	for _, line := range strings.Split(read(cpuDir, "cpu.stat"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nr_periods" {
			periods, _ = strconv.Atoi(f[1])
		}
	}
	if periods <= 0 && cold {
		t.Errorf("cpu.stat nr_periods %d in %s: no CPU bandwidth accounted to QEMU's group", periods, cpuDir)
	}
	// vCPU threads pinned to the reserved core
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	pinned := 0
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if tid == pid {
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // the thread ended
		}
		if set.Count() != 1 || !set.IsSet(core) {
			t.Errorf("thread %d of QEMU may run on %d CPUs, want core %d only", tid, set.Count(), core)
		}
		pinned++
	}
	if pinned == 0 {
		t.Error("no vCPU thread found to check")
	}

	return cg
}

// TestResourcesWarmClaim: a warm shell claimed by a task with a reservation moves into the
// task's cgroup with the task's limits and onto its reserved core; the group goes with the task
// and the refilled shell is in none.
func TestResourcesWarmClaim(t *testing.T) {
	k := requireVNF(t)
	if mode, why := qemu.CgroupMode(); mode == 0 {
		t.Skipf("limits cannot be enforced here: %s", why)
	}
	runDir := poolRunDir(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 1}
	h, d := newHarnessIn(t, runDir, []PoolConfig{pc})
	if err := pc.validate(0); err != nil {
		t.Fatal(err)
	}
	first := waitShell(t, d, pc.shape(), "")
	if qemu.CgroupFor(first.h.spec.UUID) != nil {
		t.Fatalf("an unclaimed shell has a cgroup")
	}
	core := runtime.NumCPU() - 1 // the last core: not the one the test itself started on, often
	task := newTask(t, h, "warm-sized", &TaskConfig{Kernel: k, NICs: []string{""},
		ClickConfig: "FromDevice(0) -> Discard;", SessionSlots: 64})
	task.Resources = reservation(int64(spec.DefaultMemoryMB), 500, strconv.Itoa(core))
	_, state := startTask(t, h, task)
	if state.Spec.UUID != first.h.spec.UUID {
		t.Fatalf("cold launch (%s), not the warm shell %s", state.Spec.UUID, first.h.spec.UUID)
	}
	cg := checkLimits(t, state.Pid, state.Spec.UUID, int64(spec.DefaultMemoryMB), core, false)
	second := waitShell(t, d, pc.shape(), first.h.spec.UUID)
	if qemu.CgroupFor(second.h.spec.UUID) != nil {
		t.Errorf("the refilled shell %s has a cgroup", second.h.spec.UUID)
	}
	stopDestroy(t, h, task.ID)
	for _, dir := range cg.Dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left after DestroyTask (%v)", dir, err)
		}
	}
}
