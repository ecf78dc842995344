// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
)

// sweepGroup makes CgroupSlice/<new uuid>, aged two hours when aged, with a sleeping process in
// it when busy; removed (and the process killed) when the test ends.
func sweepGroup(t *testing.T, aged, busy bool) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/uuid")
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimSpace(string(b))
	cg, err := qemu.NewCgroup(name, qemu.Limits{MemoryBytes: 96 << 20, CPUPeriodUs: 100000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cg.Remove() })
	if busy {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if err := cg.Add(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if aged { // a leaf group's mtime is its mkdir
		old := time.Now().Add(-2 * time.Hour)
		for _, d := range cg.Dirs {
			if err := os.Chtimes(d, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	return name
}

// TestStartSweepsOrphanedCgroups: a plugin that starts (its first Fingerprint) removes the empty
// groups of VNFs nobody runs any more (a plugin killed -9, its QEMUs killed later), and only
// those: not a group with a process in it (another plugin's or launch core's VNF) nor a young
// one (a launch before its QEMU moved in).
func TestStartSweepsOrphanedCgroups(t *testing.T) {
	if mode, why := qemu.CgroupMode(); mode == 0 || os.Geteuid() != 0 {
		t.Skipf("cannot manage cgroups here: %s (euid %d)", why, os.Geteuid())
	}
	orphan := sweepGroup(t, true, false)
	young := sweepGroup(t, false, false)
	busy := sweepGroup(t, true, true)
	d := NewPlugin(hclog.NewNullLogger()).(*Driver)
	t.Cleanup(d.Shutdown)
	if _, err := d.Fingerprint(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cg := qemu.CgroupFor(orphan); cg != nil {
		t.Errorf("orphaned empty group left: %v", cg.Dirs)
	}
	if qemu.CgroupFor(young) == nil {
		t.Error("a group younger than SweepMinAge was removed")
	}
	if qemu.CgroupFor(busy) == nil {
		t.Error("a group with a process in it was removed")
	}
}
