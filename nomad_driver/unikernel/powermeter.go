// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The plugin's power meter: every interval it reads the host's power figure, the host's CPU
// and packet counters and every task's, shares the host's watts among its tasks (power.go) and
// keeps each task's joules. Where the figures go:
//
//   - the node: driver.unikernel.host_watts (W), host_watts.source (which source of the host's
//     power chain measured or modelled it: rapl, redfish, specpower, linear), host_watts.age_s;
//     host_watts.error says why there is none;
//   - the task: "power" in its vnf-stats.json (watts, joules, components, source, interval);
//   - the task's events: one when its power is first attributed, one with its total when it
//     stops.
//
// The host's watts are the Python power chain's (fluidvim.orchestrator.power): the last
// interval `fluidvim metrics serve` wrote to its state file (power_state, default
// /run/fluidvim/power.json), so there is one definition of the host's power per host; the
// plugin attributes it over its own interval (the host's watts held at that figure).

const (
	// hostPowerMaxAge: an older state file is not used (VNFManager.power_state's default).
	hostPowerMaxAge = 300 * time.Second
	// userHZ: clock ticks per second of /proc/stat (USER_HZ, as qemu.ProcStats)
	userHZ = 100.0
)

// hostPower is the host's power from the state file of `fluidvim metrics serve`.
type hostPower struct {
	Source    string  `json:"source"`
	HostWatts float64 `json:"host_watts"`
	IdleWatts float64 `json:"idle_watts"`
	IdleRule  string  `json:"idle_rule"`
	At        float64 `json:"at"` // seconds since the epoch
}

func readHostPower(path string, now time.Time) (*hostPower, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("no host power: %v (run `fluidvim metrics serve` on this host, "+
			"or set the plugin's power_state to where it writes)", err)
	}
	var hp hostPower
	if err := json.Unmarshal(b, &hp); err != nil || hp.Source == "" || hp.At <= 0 {
		return nil, fmt.Errorf("no host power: %s is not a power state file (%v)", path, err)
	}
	if age := now.Sub(time.Unix(0, int64(hp.At*1e9))); age > hostPowerMaxAge {
		return nil, fmt.Errorf("no host power: %s is %s old (is `fluidvim metrics serve` running?)",
			path, age.Round(time.Second))
	}
	if hp.IdleRule == "" {
		hp.IdleRule = "vcpus"
	}
	return &hp, nil
}

// hostCounters are the host's /proc counters at one instant (attribution.HostCounters).
type hostCounters struct {
	t          time.Time
	busyS      float64 // all CPU time but idle and iowait
	softirqS   float64
	rxPackets  int64 // received by the host's interfaces, lo excluded
	cpus       int
	readFailed error
}

func readHostCounters() hostCounters {
	h := hostCounters{t: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		h.readFailed = err
		return h
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			h.cpus++ // every CPU of the host (os.cpu_count), not the plugin's affinity
			continue
		}
		if !strings.HasPrefix(line, "cpu ") {
			continue
		}
		var total, idle, iowait, softirq float64
		for i, f := range strings.Fields(line)[1:] {
			if i >= 8 { // user nice system idle iowait irq softirq steal (guest is in user)
				break
			}
			v, _ := strconv.ParseFloat(f, 64)
			v /= userHZ
			total += v
			switch i {
			case 3:
				idle = v
			case 4:
				iowait = v
			case 6:
				softirq = v
			}
		}
		h.busyS, h.softirqS = total-idle-iowait, softirq
	}
	h.rxPackets, h.readFailed = netRxPackets()
	return h
}

func netRxPackets() (int64, error) {
	f, err := os.Open("/proc/net/dev")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan(); n++ {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if n < 2 || !ok || strings.TrimSpace(name) == "lo" {
			continue
		}
		if fs := strings.Fields(rest); len(fs) > 1 {
			v, _ := strconv.ParseInt(fs[1], 10, 64)
			total += v
		}
	}
	return total, sc.Err()
}

// taskCounters are one task's counters at one instant (attribution.VnfCounters).
type taskCounters struct {
	pid        int
	cpuS       float64 // its QEMU's user + system time
	answered   bool    // its VNF answered `stats`
	uptimeUS   int64
	busyUS     int64
	pollUS     int64
	packets    int64
	vcpus      int
	helperS    float64 // its vhost backend's user + system time (net_backend vhost-user)
	helperPids []int
	taskConfig *drivers.TaskConfig
}

func (h *taskHandle) counters() (taskCounters, bool) {
	user, sys, _, err := qemu.ProcStats(h.pid)
	if err != nil {
		return taskCounters{}, false
	}
	c := taskCounters{pid: h.pid, cpuS: user + sys, vcpus: max(1, h.spec.Vcpus), taskConfig: h.taskConfig}
	if h.spec.NetBackend == spec.NetVhostUser && len(h.spec.Nics) > 0 {
		c.helperPids = pidsWithArg("/proc", ":"+h.spec.Nics[0].Tap)
		c.helperS = helperCPU(c.helperPids)
	}
	if st, err := h.stats(2 * time.Second); err == nil {
		cpu, _ := st["cpu"].(map[string]any)
		c.answered = cpu != nil
		c.uptimeUS, c.busyUS, c.pollUS = toInt(st["uptime_us"]), toInt(cpu["busy_us"]), toInt(cpu["poll_us"])
		nics, _ := st["nics"].([]any)
		for _, n := range nics {
			if m, ok := n.(map[string]any); ok {
				c.packets += toInt(m["rx"]) + toInt(m["tx"])
			}
		}
	}
	return c, true
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case json.Number:
		n, _ := x.Int64()
		return n
	case float64:
		return int64(x)
	}
	return 0
}

// since is a counter's increase (attribution.counter_delta without a modulus): a counter that
// went down restarted, and counts from 0.
func since(prev, cur int64) int64 {
	if cur >= prev {
		return cur - prev
	}
	return cur
}

// delta is a task's interval (attribution.Attributor._delta): a new QEMU counts all its time,
// a restarted VNF (uptime went down) its counters since.
func delta(key string, prev *taskCounters, cur taskCounters) vnfDelta {
	d := vnfDelta{Key: key, Vcpus: cur.vcpus}
	if prev == nil {
		return d
	}
	reset := prev.pid != cur.pid
	if reset {
		d.CPUS = cur.cpuS
	} else if cur.cpuS >= prev.cpuS {
		d.CPUS = cur.cpuS - prev.cpuS
	} else {
		d.CPUS, reset = cur.cpuS, true
	}
	if slices.Equal(prev.helperPids, cur.helperPids) {
		d.HelperS = since64(prev.helperS, cur.helperS)
	} else {
		d.HelperS = cur.helperS // a new backend: all its time is new
	}
	if cur.answered && prev.answered {
		if cur.uptimeUS < prev.uptimeUS || reset {
			d.BusyS, d.PollS, d.Packets = float64(cur.busyUS)/1e6, float64(cur.pollUS)/1e6, cur.packets
		} else {
			d.BusyS = float64(since(prev.busyUS, cur.busyUS)) / 1e6
			d.PollS = float64(since(prev.pollUS, cur.pollUS)) / 1e6
			d.Packets = since(prev.packets, cur.packets)
		}
	}
	return d
}

// taskPower is what a task's vnf-stats.json says of its power.
type taskPower struct {
	Watts      float64            `json:"watts"`
	Joules     float64            `json:"joules"`
	Components map[string]float64 `json:"components"`
	Source     string             `json:"source"`
	HostWatts  float64            `json:"host_watts"`
	IdleRule   string             `json:"idle_rule"`
	IntervalS  float64            `json:"interval_s"`
	At         time.Time          `json:"at"`
}

// powerMeter keeps the previous counters and the joules between intervals.
type powerMeter struct {
	mu     sync.Mutex
	host   *hostCounters
	tasks  map[string]taskCounters
	joules map[string]float64
	hostW  *hostPower
	err    string // why there is no host power
}

func newPowerMeter() *powerMeter {
	return &powerMeter{tasks: map[string]taskCounters{}, joules: map[string]float64{}}
}

// step is one interval over the running tasks: attribute, add the joules, hand each task its
// figures (the first time with an event).
func (d *Driver) powerStep() {
	d.mu.RLock()
	path := d.config.PowerState
	d.mu.RUnlock()
	m := d.power
	host := readHostCounters()
	cur, handles := d.readTasks()
	hp, err := readHostPower(path, time.Now())
	m.mu.Lock()
	defer m.mu.Unlock()
	prevHost, prevTasks := m.host, m.tasks
	m.host, m.tasks, m.hostW, m.err = &host, cur, hp, ""
	if err != nil {
		m.err = err.Error()
		return
	}
	if prevHost == nil || host.readFailed != nil || prevHost.readFailed != nil {
		return
	}
	dt := host.t.Sub(prevHost.t).Seconds()
	var deltas []vnfDelta
	for id, c := range cur {
		var p *taskCounters
		if pc, ok := prevTasks[id]; ok {
			p = &pc
		}
		deltas = append(deltas, delta(id, p, c))
	}
	iv, err := attribute(hp.HostWatts, hp.IdleWatts, dt, since64(prevHost.busyS, host.busyS),
		since64(prevHost.softirqS, host.softirqS), since(prevHost.rxPackets, host.rxPackets),
		host.cpus, deltas, hp.IdleRule)
	if err != nil {
		m.err = err.Error()
		return
	}
	for id, sh := range iv.VNFs {
		_, seen := m.joules[id]
		m.joules[id] += sh.Watts * dt
		p := taskPower{Watts: sh.Watts, Joules: m.joules[id], Components: sh.Components,
			Source: hp.Source, HostWatts: hp.HostWatts, IdleRule: hp.IdleRule, IntervalS: dt,
			At: host.t.UTC()}
		h := handles[id]
		h.mu.Lock()
		h.power = &p
		h.mu.Unlock()
		if !seen {
			d.emit(h.taskConfig, fmt.Sprintf("power attributed: %.2f W (host %.1f W, source %s)",
				p.Watts, p.HostWatts, p.Source), powerAnnotations(p))
		}
	}
	for id := range m.joules {
		if _, ok := cur[id]; !ok {
			delete(m.joules, id) // stopped: its total went out with its stop event
		}
	}
}

// readTasks reads the counters of every running task (by task ID).
func (d *Driver) readTasks() (map[string]taskCounters, map[string]*taskHandle) {
	cur := map[string]taskCounters{}
	handles := map[string]*taskHandle{}
	for _, h := range d.tasks.All() {
		if !h.isRunning() {
			continue
		}
		if c, ok := h.counters(); ok {
			cur[h.taskConfig.ID], handles[h.taskConfig.ID] = c, h
		}
	}
	return cur, handles
}

func since64(prev, cur float64) float64 {
	if cur >= prev {
		return cur - prev
	}
	return cur
}

func powerAnnotations(p taskPower) map[string]string {
	return map[string]string{"joules": fmt.Sprintf("%.3f", p.Joules),
		"watts": fmt.Sprintf("%.3f", p.Watts), "power_source": p.Source,
		"host_watts": fmt.Sprintf("%.3f", p.HostWatts)}
}

// powerStopped emits a stopping task's total joules.
func (d *Driver) powerStopped(h *taskHandle) {
	h.mu.Lock()
	p := h.power
	h.mu.Unlock()
	if p == nil {
		return
	}
	d.emit(h.taskConfig, fmt.Sprintf("VNF used %.1f J (last %.2f W, source %s)", p.Joules,
		p.Watts, p.Source), powerAnnotations(*p))
}

// powerAttributes sets the host's power attributes (an empty value deletes a stale one).
func (d *Driver) powerAttributes(a map[string]*pstructs.Attribute, pre string) {
	set := func(key string, v any) {
		switch x := v.(type) {
		case float64:
			unit := map[string]string{"host_watts": "W", "host_watts.age_s": "s"}[key]
			a[pre+key] = pstructs.NewFloatAttribute(x, unit)
		case string:
			a[pre+key] = pstructs.NewStringAttribute(x)
		}
	}
	m := d.power
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hostW == nil {
		set("host_watts", "")
		set("host_watts.source", "")
		set("host_watts.age_s", "")
		if m.err != "" {
			set("host_watts.error", m.err)
		}
		return
	}
	set("host_watts.error", "")
	set("host_watts", m.hostW.HostWatts)
	set("host_watts.source", m.hostW.Source)
	set("host_watts.age_s", time.Since(time.Unix(0, int64(m.hostW.At*1e9))).Seconds())
}

// runPowerMeter steps the meter every fingerprint period (at most 5 s) until the driver stops.
func (d *Driver) runPowerMeter() {
	for {
		d.mu.RLock()
		period := min(d.fpPeriod, 5*time.Second)
		d.mu.RUnlock()
		d.powerStep()
		select {
		case <-d.ctx.Done():
			return
		case <-time.After(period):
		}
	}
}
