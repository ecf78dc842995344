// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// contract/vectors/attribution.json: the Python attribute() (fluidvim.orchestrator.power.
// attribution, written by tools/gen_power_vectors.py) and this port give the same watts.
func TestAttributionVectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "contract", "vectors", "attribution.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Name string `json:"name"`
			In   struct {
				HostWatts     float64    `json:"host_watts"`
				IdleWatts     float64    `json:"idle_watts"`
				Dt            float64    `json:"dt"`
				HostBusyS     float64    `json:"host_busy_s"`
				SoftirqS      float64    `json:"softirq_s"`
				HostRxPackets int64      `json:"host_rx_packets"`
				HostCPUs      int        `json:"host_cpus"`
				IdleRule      string     `json:"idle_rule"`
				VNFs          []vnfDelta `json:"vnfs"`
			} `json:"in"`
			Out powerInterval `json:"out"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Cases) == 0 {
		t.Fatalf("attribution vectors: %v (%d cases)", err, len(doc.Cases))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	for _, c := range doc.Cases {
		in := c.In
		got, err := attribute(in.HostWatts, in.IdleWatts, in.Dt, in.HostBusyS, in.SoftirqS,
			in.HostRxPackets, in.HostCPUs, in.VNFs, in.IdleRule)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		want := c.Out
		if !near(got.HostWatts, want.HostWatts) || !near(got.IdleWatts, want.IdleWatts) ||
			!near(got.UnattributedWatts, want.UnattributedWatts) || len(got.VNFs) != len(want.VNFs) {
			t.Errorf("%s: host %+v, want %+v", c.Name, got, want)
			continue
		}
		sum := got.UnattributedWatts
		for k, w := range want.VNFs {
			g := got.VNFs[k]
			sum += g.Watts
			if !near(g.Watts, w.Watts) {
				t.Errorf("%s: %s watts %g, want %g", c.Name, k, g.Watts, w.Watts)
			}
			for _, comp := range powerComponents {
				if !near(g.Components[comp], w.Components[comp]) {
					t.Errorf("%s: %s %s %g W, want %g", c.Name, k, comp, g.Components[comp], w.Components[comp])
				}
			}
			for comp, s := range w.CPUS {
				if !near(g.CPUS[comp], s) {
					t.Errorf("%s: %s %s %g CPU-s, want %g", c.Name, k, comp, g.CPUS[comp], s)
				}
			}
		}
		if !near(sum, in.HostWatts) { // conservation: tasks + unattributed = host
			t.Errorf("%s: tasks + unattributed = %g W, host %g W", c.Name, sum, in.HostWatts)
		}
	}
	if _, err := attribute(100, 50, 1, 1, 0, 0, 2, nil, "fair"); err == nil ||
		!strings.Contains(err.Error(), "idle_rule") {
		t.Errorf("a bad idle rule: %v", err)
	}
}

// A task's interval from two readings: deltas, a new QEMU (all its time), a restarted VNF
// (its counters since), a VNF that did not answer (no busy/poll).
func TestTaskDelta(t *testing.T) {
	prev := taskCounters{pid: 10, cpuS: 5, answered: true, uptimeUS: 1e6, busyUS: 2e5, pollUS: 3e5, packets: 100, vcpus: 1}
	cur := prev
	cur.cpuS, cur.uptimeUS, cur.busyUS, cur.pollUS, cur.packets = 5.5, 2e6, 4e5, 6e5, 160
	d := delta("t", &prev, cur)
	if d.CPUS != 0.5 || math.Abs(d.BusyS-0.2) > 1e-12 || math.Abs(d.PollS-0.3) > 1e-12 || d.Packets != 60 {
		t.Errorf("delta %+v", d)
	}
	if d := delta("t", nil, cur); d.CPUS != 0 || d.BusyS != 0 || d.Vcpus != 1 {
		t.Errorf("first reading counts nothing: %+v", d)
	}
	newQemu := cur
	newQemu.pid, newQemu.cpuS, newQemu.uptimeUS, newQemu.busyUS = 11, 0.3, 1e5, 5e4
	if d := delta("t", &prev, newQemu); d.CPUS != 0.3 || d.BusyS != 0.05 {
		t.Errorf("a new QEMU: %+v", d)
	}
	silent := cur
	silent.answered = false
	if d := delta("t", &prev, silent); d.BusyS != 0 || d.PollS != 0 || d.CPUS != 0.5 {
		t.Errorf("no stats answer: %+v", d)
	}
}

// The host's power comes from the state file of `fluidvim metrics serve`; a missing, foreign
// or stale one is an error that says what to do.
func TestReadHostPower(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "power.json")
	now := time.Now()
	if _, err := readHostPower(p, now); err == nil || !strings.Contains(err.Error(), "fluidvim metrics serve") {
		t.Errorf("missing file: %v", err)
	}
	write := func(doc map[string]any) {
		b, _ := json.Marshal(doc)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"hello": 1})
	if _, err := readHostPower(p, now); err == nil || !strings.Contains(err.Error(), "not a power state file") {
		t.Errorf("foreign file: %v", err)
	}
	at := float64(now.Add(-10*time.Second).UnixNano()) / 1e9
	write(map[string]any{"source": "specpower", "host_watts": 151.5, "idle_watts": 90.0, "at": at})
	hp, err := readHostPower(p, now)
	if err != nil || hp.HostWatts != 151.5 || hp.Source != "specpower" || hp.IdleRule != "vcpus" {
		t.Errorf("state file: %+v %v", hp, err)
	}
	if _, err := readHostPower(p, now.Add(hostPowerMaxAge)); err == nil || !strings.Contains(err.Error(), "old") {
		t.Errorf("stale file: %v", err)
	}
}

// The power meter over a running task: the host's power from a state file as `fluidvim metrics
// serve` writes it, the node's attributes name its source, the task's vnf-stats.json carries its
// watts (components adding up) and its joules grow; without the file, the attribute says why.
func TestPowerMeterChargesARunningTask(t *testing.T) {
	k := requireVNF(t)
	state := filepath.Join(t.TempDir(), "power.json")
	h, d := newHarnessWith(t, t.TempDir(), nil, func(c *Config) { c.PowerState = state })
	d.powerStep()
	fp := d.buildFingerprint()
	if v, _ := fp.Attributes["driver.unikernel.host_watts.error"].GetString(); !strings.Contains(v, "fluidvim metrics serve") {
		t.Errorf("no state file: host_watts.error %q", v)
	}
	b, _ := json.Marshal(map[string]any{"source": "linear", "host_watts": 120.0, "idle_watts": 40.0,
		"idle_rule": "vcpus", "at": float64(time.Now().UnixNano()) / 1e9})
	if err := os.WriteFile(state, b, 0o644); err != nil {
		t.Fatal(err)
	}
	task := newTask(t, h, "pw", &TaskConfig{Kernel: k, NICs: []string{""}, ClickConfig: "FromDevice(0) -> Discard;"})
	startTask(t, h, task)
	th, _ := d.tasks.Get(task.ID)
	d.powerStep() // the first reading of the host and the task: nothing to attribute yet
	time.Sleep(300 * time.Millisecond)
	d.powerStep()
	time.Sleep(300 * time.Millisecond)
	d.powerStep()
	th.writeVNFStats()
	var doc struct {
		Power *taskPower `json:"power"`
	}
	raw, err := os.ReadFile(filepath.Join(task.TaskDir().Dir, vnfStatsFile))
	if err != nil || json.Unmarshal(raw, &doc) != nil || doc.Power == nil {
		t.Fatalf("no power in vnf-stats.json: %v %s", err, raw)
	}
	p := doc.Power
	sum := 0.0
	for _, c := range powerComponents {
		sum += p.Components[c]
	}
	// idle share by vcpus: 40 W * 1 vCPU / max(host CPUs, 1)
	if p.Source != "linear" || p.HostWatts != 120 || p.Joules <= 0 || math.Abs(sum-p.Watts) > 1e-9 ||
		p.Watts > 120 || p.Components["idle"] <= 0 {
		t.Errorf("task power %+v", p)
	}
	fp = d.buildFingerprint()
	if v, _ := fp.Attributes["driver.unikernel.host_watts.source"].GetString(); v != "linear" {
		t.Errorf("host_watts.source %q", v)
	}
	if v, ok := fp.Attributes["driver.unikernel.host_watts"].GetFloat(); !ok || v != 120 {
		t.Errorf("host_watts %v", fp.Attributes["driver.unikernel.host_watts"])
	}
	if err := h.DestroyTask(task.ID, true); err != nil {
		t.Fatal(err)
	}
}

// A task's vhost backend: found by its first NIC's tap argument ("<fd>:<tap>", the whole
// argument's end, never the program's name), its CPU time charged as the task's vhost
// component: the increase while it is the same process, all of it for a new one.
func TestVhostHelperIsFoundAndCharged(t *testing.T) {
	root := t.TempDir()
	for pid, args := range map[string][]string{
		"11":   {"fluidvim-vhost-net", "5:fvabcdef0123n0", "6:fvabcdef0123n1"},
		"12":   {"fluidvim-vhost-net", "5:fvabcdef0123n00"},
		"13":   {"x:fvabcdef0123n0"},
		"self": {"fluidvim-vhost-net", "5:fvabcdef0123n0"},
	} {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(args, "\x00")+"\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := pidsWithArg(root, ":fvabcdef0123n0"); len(got) != 1 || got[0] != 11 {
		t.Errorf("pidsWithArg = %v, want [11]", got)
	}
	self := helperCPU([]int{os.Getpid()})
	for self == 0 { // until this process has a clock tick of CPU time
		self = helperCPU([]int{os.Getpid()})
	}
	if got := helperCPU([]int{os.Getpid(), -1}); got < self {
		t.Errorf("helperCPU: %v after %v (a missing process adds nothing)", got, self)
	}
	prev := taskCounters{pid: 10, cpuS: 5, vcpus: 1, helperS: 1.5, helperPids: []int{11}}
	cur := prev
	cur.cpuS, cur.helperS = 5.5, 1.75
	if d := delta("t", &prev, cur); d.HelperS != 0.25 {
		t.Errorf("same backend: HelperS %v, want 0.25", d.HelperS)
	}
	cur.helperPids, cur.helperS = []int{12}, 0.1
	if d := delta("t", &prev, cur); d.HelperS != 0.1 {
		t.Errorf("a new backend: HelperS %v, want 0.1", d.HelperS)
	}
	if d := delta("t", nil, cur); d.HelperS != 0 {
		t.Errorf("first reading counts nothing: %+v", d)
	}
}
