// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The task's `resources {}` (what Nomad reserved on the client) bound the VNF: the guest
// memory and vCPUs are taken from it or checked against it (fromReservation), QEMU runs in a
// cgroup with memory.max = guest memory + spec.QemuOverheadMB, a CPU weight from the reserved
// MHz and a hard cpu.max only for reserved `cores`, which also pin the vCPU threads. Nomad's drivers.TaskConfig (1.11) names
// no task cgroup for a third-party driver (only LinuxResources.CpusetCgroupPath, the cpuset
// partition), so the group is fluidvim's own: fluidvim.slice/<vnf uuid> (qemu/cgroup.go).

// fromReservation fills memory_mb and vcpus from the task's reservation when unset, and refuses
// a guest larger than the reservation. A task config without resources (made in Go, tests)
// keeps the defaults.
func (tc *TaskConfig) fromReservation(res *drivers.Resources) error {
	if res == nil || res.NomadResources == nil {
		return nil
	}
	reservedMB := int(res.NomadResources.Memory.MemoryMB)
	cores := len(reservedCores(res))
	if reservedMB > 0 {
		switch {
		case tc.MemoryMB == 0:
			tc.MemoryMB = min(reservedMB, spec.MaxMemoryMB)
		case tc.MemoryMB > reservedMB:
			return fieldErr("memory_mb", "%d MiB is more than the task reserves (resources { memory = %d }): "+
				"raise resources.memory to at least %d, or lower memory_mb (unset = the reservation)",
				tc.MemoryMB, reservedMB, tc.MemoryMB)
		}
	}
	if cores > 0 {
		switch {
		case tc.Vcpus == 0:
			tc.Vcpus = min(cores, spec.MaxVcpus)
		case tc.Vcpus > cores:
			return fieldErr("vcpus", "%d vCPUs on %d reserved cores (resources { cores = %d }): raise "+
				"resources.cores to at least %d, or lower vcpus (unset = the reserved cores)",
				tc.Vcpus, cores, cores, tc.Vcpus)
		}
	}
	return nil
}

// reservedCores is the task's `resources { cores }`: NomadResources.Cpu.ReservedCores in the
// client, which the plugin protocol does not carry; over it, LinuxResources.CpusetCpus (the
// client joins the reserved cores with commas; ranges "a-b" are read too).
func reservedCores(res *drivers.Resources) []int {
	var cores []int
	if res == nil {
		return nil
	}
	if res.NomadResources != nil {
		for _, c := range res.NomadResources.Cpu.ReservedCores {
			cores = append(cores, int(c))
		}
	}
	if len(cores) > 0 || res.LinuxResources == nil {
		return cores
	}
	for _, part := range strings.Split(res.LinuxResources.CpusetCpus, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b; c++ {
			cores = append(cores, c)
		}
	}
	return cores
}

// limitsFor is the cgroup limits of a task's VNF of memoryMB guest memory: memory plus the QEMU
// allowance. CPU as Nomad's own drivers treat it: reserved `cores` are a hard limit (one period
// of quota per core, and the vCPU threads pinned to them); `cpu` in MHz is a relative weight
// (cpu.shares = MHz, cpu.weight on v2), not a cap, so an idle neighbour's time is usable and a
// VNF is only held to its share when the client is busy. ok false: the task reserves nothing
// to enforce.
func limitsFor(res *drivers.Resources, memoryMB int) (qemu.Limits, bool) {
	lim := qemu.Limits{CPUPeriodUs: spec.CPUPeriodUs,
		MemoryBytes: int64(memoryMB+spec.QemuOverheadMB) << 20}
	if res == nil || res.NomadResources == nil {
		return lim, false
	}
	if cores := reservedCores(res); len(cores) > 0 {
		lim.CPUQuotaUs = int64(len(cores))*spec.CPUPeriodUs + spec.QemuOverheadCPUUs
	}
	lim.CPUShares = res.NomadResources.Cpu.CpuShares
	return lim, true
}

// enforcement is what enforce did, for the task's event and log.
type enforcement struct {
	cgroup   *qemu.Cgroup
	limits   qemu.Limits
	cores    []int
	enforced bool
	why      string // not enforced: why
}

func (e enforcement) annotations() map[string]string {
	if !e.enforced {
		return map[string]string{"limits_enforced": "false", "limits_reason": e.why}
	}
	a := map[string]string{"limits_enforced": "true",
		"memory_max_bytes": fmt.Sprint(e.limits.MemoryBytes),
		"cpu_max":          fmt.Sprintf("%d %d", e.limits.CPUQuotaUs, e.limits.CPUPeriodUs),
		"cpu_shares":       fmt.Sprint(e.limits.CPUShares),
		"cgroup":           fmt.Sprint(e.cgroup.Dirs)}
	if e.limits.CPUQuotaUs == 0 {
		a["cpu_max"] = fmt.Sprintf("max %d", e.limits.CPUPeriodUs)
	}
	if len(e.cores) > 0 {
		a["vcpu_cores"] = fmt.Sprint(e.cores)
	}
	return a
}

// newEnforcement creates the cgroup of VNF vid for task cfg (before QEMU starts, or at a warm
// claim). A host without usable memory/cpu controllers is not an error: the result says the
// limits are not enforced and why (logged as a warning, shown in the task's event); any
// other failure to set the limits up is.
func (d *Driver) newEnforcement(cfg *drivers.TaskConfig, vid string, memoryMB int) (enforcement, error) {
	if cfg == nil { // a warm-pool shell: it gets its task's limits when claimed
		return enforcement{why: "a warm-pool shell (limited when claimed)"}, nil
	}
	lim, ok := limitsFor(cfg.Resources, memoryMB)
	e := enforcement{limits: lim}
	if !ok {
		e.why = "the task has no resources to enforce"
		return e, nil
	}
	e.cores = reservedCores(cfg.Resources)
	cg, err := qemu.NewCgroup(vid, lim)
	if errors.Is(err, qemu.ErrNoCgroup) {
		e.why = err.Error()
		d.logger.Warn("VNF resource limits NOT enforced", "task_id", cfg.ID, "vnf", vid, "reason", e.why)
		return e, nil
	}
	if err != nil {
		return e, fmt.Errorf("cannot set up the VNF's resource limits: %w", err)
	}
	e.cgroup, e.enforced = cg, true
	return e, nil
}

// pin binds the VNF's vCPU threads to the reserved cores (none reserved: nothing).
func (e enforcement) pin(pid int) error {
	return qemu.PinVcpus(pid, e.cores)
}
