// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
)

// Per-VNF power by useful work: the arithmetic of fluidvim.orchestrator.power.attribution's
// attribute() and idle_shares(), checked against contract/vectors/attribution.json (written
// from the Python functions by tools/gen_power_vectors.py). The host's watts and idle watts come
// from the host's power chain (powermeter.go reads what `fluidvim metrics serve` computed); the
// plugin shares them among its own tasks over its own interval:
//
//   - idle watts W0 = min(idle, W); dynamic D = W - W0; one busy host CPU-second costs D / B
//     (B: the host's busy CPU-seconds of the interval, /proc/stat);
//   - a task is charged its busy and poll time (its VNF's own `stats` cpu counters; when they
//     exceed what its QEMU got, QEMU's time split in their proportion), the rest of its QEMU's
//     CPU time (qemu), its vhost backend (vhost) and the host's softirq time by its packet
//     share (softirq); should the tasks' CPU-seconds exceed B they are scaled down to B;
//   - idle power by the rule: vcpus (W0 * vcpus / max(host CPUs, the tasks' vCPUs)), equal, none;
//   - unattributed = W - the tasks' sum, so tasks + unattributed = W every interval.

// powerComponents are the parts of a task's watts (attribution.COMPONENTS).
var powerComponents = []string{"busy", "poll", "qemu", "vhost", "softirq", "idle"}

// idleRules are the [power] idle_rule values (attribution.IDLE_RULES).
var idleRules = []string{"vcpus", "equal", "none"}

// vnfDelta is one task over one interval, in CPU-seconds (attribution.VnfDelta; BusyS and PollS
// are 0 when its VNF did not answer `stats`).
type vnfDelta struct {
	Key     string  `json:"key"`
	Vcpus   int     `json:"vcpus"`
	CPUS    float64 `json:"cpu_s"`
	BusyS   float64 `json:"busy_s"`
	PollS   float64 `json:"poll_s"`
	HelperS float64 `json:"helper_s"`
	Packets int64   `json:"packets"`
}

// vnfShare is a task's watts over the interval, by component, and the CPU-seconds charged.
type vnfShare struct {
	Watts      float64            `json:"watts"`
	Components map[string]float64 `json:"components"`
	CPUS       map[string]float64 `json:"cpu_s"`
}

// powerInterval is one interval's attribution.
type powerInterval struct {
	HostWatts         float64             `json:"host_watts"`
	IdleWatts         float64             `json:"idle_watts"`
	UnattributedWatts float64             `json:"unattributed_watts"`
	VNFs              map[string]vnfShare `json:"vnfs"`
}

func checkIdleRule(rule string) error {
	for _, r := range idleRules {
		if r == rule {
			return nil
		}
	}
	return fmt.Errorf("[power] idle_rule: %q is not one of vcpus, equal, none", rule)
}

// idleShares is each task's idle watts by rule (attribution.idle_shares); their sum is at most
// idleW.
func idleShares(idleW float64, vnfs []vnfDelta, hostCPUs int, rule string) (map[string]float64, error) {
	if err := checkIdleRule(rule); err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(vnfs))
	for _, v := range vnfs {
		out[v.Key] = 0
	}
	if len(vnfs) == 0 || idleW <= 0 || rule == "none" {
		return out, nil
	}
	if rule == "equal" {
		for _, v := range vnfs {
			out[v.Key] = idleW / float64(len(vnfs))
		}
		return out, nil
	}
	sum := 0
	for _, v := range vnfs {
		if v.Vcpus < 1 {
			return nil, fmt.Errorf("VNF %s: vcpus %d < 1", v.Key, v.Vcpus)
		}
		sum += v.Vcpus
	}
	denom := math.Max(float64(hostCPUs), float64(sum))
	for _, v := range vnfs {
		out[v.Key] = idleW * float64(v.Vcpus) / denom
	}
	return out, nil
}

// attribute shares hostWatts over one interval of dt seconds among vnfs (attribution.attribute).
func attribute(hostWatts, idleWatts, dt, hostBusyS, softirqS float64, hostRxPackets int64,
	hostCPUs int, vnfs []vnfDelta, rule string) (powerInterval, error) {
	if hostWatts < 0 || idleWatts < 0 || hostBusyS < 0 || softirqS < 0 || dt <= 0 {
		return powerInterval{}, fmt.Errorf("attribution needs non-negative inputs and dt > 0, got "+
			"host_watts=%g idle_watts=%g host_busy_s=%g softirq_s=%g dt=%g",
			hostWatts, idleWatts, hostBusyS, softirqS, dt)
	}
	idleW := math.Min(idleWatts, hostWatts)
	dynW := hostWatts - idleW
	cpu, total := chargedCPU(vnfs, math.Min(softirqS, hostBusyS), hostRxPackets)
	scale := 1.0
	if total > hostBusyS && total > 0 {
		scale = hostBusyS / total
	}
	price := 0.0
	if hostBusyS > 0 {
		price = dynW / hostBusyS
	}
	idle, err := idleShares(idleW, vnfs, hostCPUs, rule)
	if err != nil {
		return powerInterval{}, err
	}
	iv := powerInterval{HostWatts: hostWatts, IdleWatts: idleW, VNFs: make(map[string]vnfShare, len(vnfs))}
	sum := 0.0
	for _, v := range vnfs {
		sh := vnfShare{Components: map[string]float64{}, CPUS: map[string]float64{}}
		for k, s := range cpu[v.Key] {
			sh.CPUS[k] = s * scale
			sh.Components[k] = price * s * scale
		}
		sh.Components["idle"] = idle[v.Key]
		for _, w := range sh.Components {
			sh.Watts += w
		}
		iv.VNFs[v.Key] = sh
		sum += sh.Watts
	}
	iv.UnattributedWatts = math.Max(0, hostWatts-sum) // float rounding only below 0
	return iv, nil
}

// chargedCPU is each task's CPU-seconds by component (busy, poll, qemu, vhost, softirq) before
// scaling, and their total.
func chargedCPU(vnfs []vnfDelta, softirqBusy float64, hostRxPackets int64) (map[string]map[string]float64, float64) {
	var allPkts int64
	for _, v := range vnfs {
		allPkts += max(0, v.Packets)
	}
	denomPkts := max(allPkts, hostRxPackets)
	cpu := make(map[string]map[string]float64, len(vnfs))
	total := 0.0
	for _, v := range vnfs {
		q := math.Max(0, v.CPUS)
		busy, poll := math.Max(0, v.BusyS), math.Max(0, v.PollS)
		if busy+poll > q {
			busy, poll = q*busy/(busy+poll), q*poll/(busy+poll)
		}
		soft := 0.0
		if denomPkts > 0 && v.Packets > 0 {
			soft = softirqBusy * float64(v.Packets) / float64(denomPkts)
		}
		c := map[string]float64{"busy": busy, "poll": poll, "qemu": math.Max(0, q-busy-poll),
			"vhost": math.Max(0, v.HelperS), "softirq": soft}
		cpu[v.Key] = c
		for _, s := range c {
			total += s
		}
	}
	return cpu, total
}

// pidsWithArg is attribution.pids_with_arg: the processes under procRoot with an argument (after
// the program's name) that ends with needle - ":<tap>" of a task's first NIC finds its
// fluidvim-vhost-net, whose arguments are "<socket fd>:<tap>" (qemu.Boot).
func pidsWithArg(procRoot, needle string) []int {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(b, []byte{0})
		for _, a := range args[min(1, len(args)):] {
			if len(a) > 0 && bytes.HasSuffix(a, []byte(needle)) {
				out = append(out, pid)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// helperCPU is the CPU-seconds (user + system, all threads) of a task's vhost backend
// processes: the task's vhost component (attribution.Attributor.vnf_counters' helper_ticks).
func helperCPU(pids []int) float64 {
	total := 0.0
	for _, p := range pids {
		if u, s, _, err := qemu.ProcStats(p); err == nil {
			total += u + s
		}
	}
	return total
}
