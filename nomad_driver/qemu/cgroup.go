// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package qemu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupRoot is where the cgroup hierarchies are mounted; CgroupSlice the fluidvim-owned
// group every VNF's QEMU gets a child of (fluidvim.slice/<vnf uuid>).
var (
	CgroupRoot  = "/sys/fs/cgroup"
	CgroupSlice = "fluidvim.slice"
)

// Limits are what a VNF's QEMU may use: MemoryBytes (memory.max), CPUQuotaUs per
// CPUPeriodUs (cpu.max; quota 0 = no hard CPU limit) and CPUShares, the relative CPU weight
// under contention (v1 cpu.shares; v2 cpu.weight, converted as runc and systemd do; 0 = the
// kernel's default).
type Limits struct {
	MemoryBytes int64
	CPUQuotaUs  int64
	CPUPeriodUs int64
	CPUShares   int64
}

// cpuWeight is cgroup v1 cpu.shares [2, 262144] as a v2 cpu.weight [1, 10000] (the conversion
// runc and systemd use).
func cpuWeight(shares int64) int64 {
	shares = max(2, min(shares, 262144))
	return 1 + ((shares-2)*9999)/262142
}

// Cgroup is one VNF's group: on cgroup v2 one directory, on v1 one per controller (memory, cpu).
type Cgroup struct {
	Version int      // 2 or 1
	Dirs    []string // the group's directories (v2: one)
}

// ErrNoCgroup: this host cannot enforce the limits (no memory/cpu controller the plugin can use).
var ErrNoCgroup = errors.New("no usable cgroup memory and cpu controllers")

func writeFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return denied(fmt.Errorf("cgroup: write %q to %s: %w", value, path, err))
	}
	return nil
}

// denied marks err as ErrNoCgroup when the hierarchy may not be changed by this process
// (not root, or mounted read-only as in many containers): the limits cannot be enforced here.
func denied(err error) error {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
		return fmt.Errorf("%w: %v", ErrNoCgroup, err)
	}
	return err
}

// enableV2 turns the memory and cpu controllers on for the children of dir (subtree_control).
func enableV2(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return denied(fmt.Errorf("cgroup: %w", err))
	}
	on := strings.Fields(string(b))
	for _, c := range []string{"memory", "cpu"} {
		if !contains(on, c) {
			if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c); err != nil {
				return err
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CgroupMode says which cgroup version this host offers the memory and cpu controllers on
// (2: unified at CgroupRoot, 1: legacy hierarchies CgroupRoot/memory and CgroupRoot/cpu), or
// 0 and why not.
func CgroupMode() (int, string) {
	if b, err := os.ReadFile(filepath.Join(CgroupRoot, "cgroup.controllers")); err == nil {
		have := strings.Fields(string(b))
		if contains(have, "memory") && contains(have, "cpu") {
			return 2, ""
		}
		return 0, fmt.Sprintf("cgroup v2 at %s offers controllers %v, not memory and cpu", CgroupRoot, have)
	}
	_, merr := os.Stat(filepath.Join(CgroupRoot, "memory", "memory.limit_in_bytes"))
	_, cerr := os.Stat(filepath.Join(CgroupRoot, "cpu", "cpu.cfs_quota_us"))
	if merr == nil && cerr == nil {
		return 1, ""
	}
	return 0, fmt.Sprintf("neither cgroup v2 (%s/cgroup.controllers) nor v1 memory and cpu "+
		"hierarchies (%s/memory, %s/cpu) are mounted", CgroupRoot, CgroupRoot, CgroupRoot)
}

// NewCgroup creates the group CgroupSlice/name with lim; on cgroup v2 it first enables the
// memory and cpu controllers for the slice. An error wrapping ErrNoCgroup says the host cannot
// enforce limits at all; any other error is a failure to set them up.
func NewCgroup(name string, lim Limits) (*Cgroup, error) {
	mode, why := CgroupMode()
	cg := &Cgroup{Version: mode}
	switch mode {
	case 2:
		slice := filepath.Join(CgroupRoot, CgroupSlice)
		if err := enableV2(CgroupRoot); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(slice, 0o755); err != nil {
			return nil, denied(fmt.Errorf("cgroup: %w", err))
		}
		if err := enableV2(slice); err != nil {
			return nil, err
		}
		dir := filepath.Join(slice, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return nil, denied(fmt.Errorf("cgroup: %w", err))
		}
		cg.Dirs = []string{dir}
		cpu := "max"
		if lim.CPUQuotaUs > 0 {
			cpu = strconv.FormatInt(lim.CPUQuotaUs, 10)
		}
		err := writeFile(filepath.Join(dir, "memory.max"), strconv.FormatInt(lim.MemoryBytes, 10))
		if err == nil {
			err = writeFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%s %d", cpu, lim.CPUPeriodUs))
		}
		if err == nil && lim.CPUShares > 0 {
			err = writeFile(filepath.Join(dir, "cpu.weight"), strconv.FormatInt(cpuWeight(lim.CPUShares), 10))
		}
		if err == nil {
			if _, serr := os.Stat(filepath.Join(dir, "memory.swap.max")); serr == nil {
				err = writeFile(filepath.Join(dir, "memory.swap.max"), "0") // no way around memory.max
			}
		}
		if err != nil {
			cg.Remove()
			return nil, err
		}
	case 1:
		mem := filepath.Join(CgroupRoot, "memory", CgroupSlice, name)
		cpu := filepath.Join(CgroupRoot, "cpu", CgroupSlice, name)
		for _, d := range []string{mem, cpu} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				cg.Remove()
				return nil, denied(fmt.Errorf("cgroup: %w", err))
			}
			cg.Dirs = append(cg.Dirs, d)
		}
		quota := int64(-1)
		if lim.CPUQuotaUs > 0 {
			quota = lim.CPUQuotaUs
		}
		err := writeFile(filepath.Join(mem, "memory.limit_in_bytes"), strconv.FormatInt(lim.MemoryBytes, 10))
		if err == nil {
			// a warm shell's pages would come with it; recent kernels refuse (EINVAL; v2 has no
			// such move), and then only what it touches from now on is charged
			_ = writeFile(filepath.Join(mem, "memory.move_charge_at_immigrate"), "3")
		}
		if err == nil {
			err = writeFile(filepath.Join(cpu, "cpu.cfs_period_us"), strconv.FormatInt(lim.CPUPeriodUs, 10))
		}
		if err == nil {
			err = writeFile(filepath.Join(cpu, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10))
		}
		if err == nil && lim.CPUShares > 0 {
			err = writeFile(filepath.Join(cpu, "cpu.shares"), strconv.FormatInt(max(2, lim.CPUShares), 10))
		}
		if err != nil {
			cg.Remove()
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %s", ErrNoCgroup, why)
	}
	return cg, nil
}

// Add moves pid (all its threads) into the group.
func (c *Cgroup) Add(pid int) error {
	for _, d := range c.Dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// VcpuGroup is the sub-group the latency controller (Python, vnf/cgroups.py set_vcpu_quota)
// makes for a capped VNF's vCPU threads; it goes before its group.
const VcpuGroup = "vcpus"

// Remove deletes the group's directories; its processes must have exited (a QEMU just killed
// may take a moment to leave, so an EBUSY is retried for up to a second).
func (c *Cgroup) Remove() error {
	if c == nil {
		return nil
	}
	var last error
	for _, d := range c.Dirs {
		_ = os.Remove(filepath.Join(d, VcpuGroup)) // the latency controller's vCPU sub-group
		for i := 0; ; i++ {
			err := os.Remove(d)
			if err == nil || os.IsNotExist(err) {
				break
			}
			if i >= 50 {
				last = fmt.Errorf("cgroup: cannot remove %s: %w", d, err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return last
}

// CgroupFor returns the group of a VNF (name: its uuid) if it exists, for a recovered task.
func CgroupFor(name string) *Cgroup {
	mode, _ := CgroupMode()
	var dirs []string
	switch mode {
	case 2:
		dirs = []string{filepath.Join(CgroupRoot, CgroupSlice, name)}
	case 1:
		dirs = []string{filepath.Join(CgroupRoot, "memory", CgroupSlice, name),
			filepath.Join(CgroupRoot, "cpu", CgroupSlice, name)}
	}
	cg := &Cgroup{Version: mode}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			cg.Dirs = append(cg.Dirs, d)
		}
	}
	if len(cg.Dirs) == 0 {
		return nil
	}
	return cg
}

// SweepMinAge: an empty group younger than this may be a launch (of this or another plugin or
// launch core on the host) between its mkdir and the move of its QEMU into it.
const SweepMinAge = time.Minute

// SweepCgroups removes the empty CgroupSlice/<uuid> groups left by VNFs nobody cleaned up (a
// plugin or launch core killed with -9 whose QEMUs died later; a task whose QEMU was gone when
// it was recovered) and returns the directories removed. Never removed: a group with a process
// in it (checked, and the kernel refuses with EBUSY: the VNFs of other plugins and launch cores
// on this host), one keep names, or one younger than minAge (a leaf group's mtime is its mkdir).
func SweepCgroups(keep func(name string) bool, minAge time.Duration) []string {
	mode, _ := CgroupMode()
	var slices []string
	switch mode {
	case 2:
		slices = []string{filepath.Join(CgroupRoot, CgroupSlice)}
	case 1:
		slices = []string{filepath.Join(CgroupRoot, "memory", CgroupSlice),
			filepath.Join(CgroupRoot, "cpu", CgroupSlice)}
	}
	var gone []string
	for _, sl := range slices {
		entries, err := os.ReadDir(sl)
		if err != nil {
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(sl, e.Name())
			if !e.IsDir() || (keep != nil && keep(e.Name())) {
				continue
			}
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < minAge {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err != nil || len(strings.Fields(string(b))) > 0 {
				continue
			}
			_ = os.Remove(filepath.Join(dir, VcpuGroup))
			if os.Remove(dir) == nil { // EBUSY: a process moved in meanwhile
				gone = append(gone, dir)
			}
		}
	}
	return gone
}

// PinVcpus binds every thread of QEMU pid but its main thread (the vCPUs, as SetVcpuNice
// finds them) to cpus.
func PinVcpus(pid int, cpus []int) error {
	if pid <= 0 || len(cpus) == 0 {
		return nil
	}
	var set unix.CPUSet
	set.Zero()
	for _, c := range cpus {
		set.Set(c)
	}
	for _, tid := range vcpuThreads(pid) {
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("cannot pin thread %d of QEMU %d to CPUs %v: %w", tid, pid, cpus, err)
		}
	}
	return nil
}
