// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The plugin config's defaults, one constant each. They apply in one place, the hclspec below
// (Nomad decodes the plugin block with it); a Config made in Go (tests, the driver before
// SetConfig) gets the same values from defaultConfig / fillDefaults, which read these constants.
const (
	defaultQemu              = spec.QemuAuto // the microvm build on KVM when installed (spec.QemuBinary)
	defaultAccel             = "auto"
	defaultFirmware          = spec.FirmwareAuto // fluidvim-pvh.bin beside the kernel (spec.FirmwareFor)
	defaultKernel            = "/usr/share/fluidvim/fluidvim-vnf.elf"
	defaultRunDir            = "/run/fluidvim-nomad"
	defaultBootTimeout       = "30s"
	defaultShareMemory       = true
	defaultFingerprintPeriod = "30s" // how often attributes are re-reported
	defaultPoolSize          = 1     // shells per warm_pool block
	defaultNetBackend        = spec.NetTap
	defaultVhostNet          = "/usr/libexec/fluidvim/fluidvim-vhost-net" // vnf/conf.py INSTALLED_VHOST_NET
	defaultPowerState        = "/run/fluidvim/power.json"                 // [vnf] run_dir + manager.POWER_STATE
)

// attr is an optional attribute; withDefault gives it a default (a Go value, written as an HCL
// literal here so that the hclspec and Go read the same constant).
func attr(name, typ string) *hclspec.Spec { return hclspec.NewAttr(name, typ, false) }

func withDefault(name, typ string, v any) *hclspec.Spec {
	var lit string
	switch x := v.(type) {
	case string:
		lit = strconv.Quote(x)
	case int:
		lit = strconv.Itoa(x)
	case bool:
		lit = strconv.FormatBool(x)
	default:
		panic(fmt.Sprintf("hclspec default of %s: unsupported type %T", name, v))
	}
	return hclspec.NewDefault(attr(name, typ), hclspec.NewLiteral(lit))
}

// configSpec is the plugin block of the Nomad client config:
//
//	plugin "fluidvim-unikernel" { config { qemu = "..." accel = "auto" kernel = "..." run_dir = "..." } }
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"qemu":  withDefault("qemu", "string", defaultQemu),
	"accel": withDefault("accel", "string", defaultAccel),
	// firmware = "auto" | "qemu" | "/path/fw.bin": the microvm's -bios (vnf/spec.py firmware_for)
	"firmware": withDefault("firmware", "string", defaultFirmware),
	"kernel":   withDefault("kernel", "string", defaultKernel),
	// image_paths: directories whose files jobs may name as kernel or click_file besides their
	// own task directory (as Nomad's qemu driver); empty by default (paths.go)
	"image_paths": hclspec.NewAttr("image_paths", "list(string)", false),
	"run_dir":     withDefault("run_dir", "string", defaultRunDir),
	// private_bridges = "fvp": nic bridges with this prefix are made on demand and deleted when
	// their last VNF is gone (privnet.go: the load probe's networks); "" (default) = off
	"private_bridges": withDefault("private_bridges", "string", ""),
	// net_backend = "tap" | "vhost-user": VNF NICs on QEMU's taps, or on fluidvim-vhost-net
	// (vhost/: a backend process per VNF, one thread per NIC; as [vnf] net_backend)
	"net_backend":      withDefault("net_backend", "string", defaultNetBackend),
	"vhost_net_binary": withDefault("vhost_net_binary", "string", defaultVhostNet),
	// vcpu_nice: nice value of each VNF's vCPU threads once it is ready (as [vnf] vcpu_nice)
	"vcpu_nice": withDefault("vcpu_nice", "number", spec.VcpuNiceDefault),
	// warm_pool { kernel = "/path/vnf.elf" size = 2 nics = 2 }: shells booted ahead, per shape
	"warm_pool": hclspec.NewBlockList("warm_pool", hclspec.NewObject(map[string]*hclspec.Spec{
		"kernel": hclspec.NewAttr("kernel", "string", true),
		"size":   withDefault("size", "number", defaultPoolSize),
		// the shape: as a task's (0 or unset = spec's default, see checkShape)
		"memory_mb":       withDefault("memory_mb", "number", spec.DefaultMemoryMB),
		"vcpus":           withDefault("vcpus", "number", spec.DefaultVcpus),
		"nics":            attr("nics", "number"),
		"session_slots":   withDefault("session_slots", "number", spec.DefaultSlots),
		"flow_timeout_ms": withDefault("flow_timeout_ms", "number", spec.DefaultFlowTimeoutMS),
	})),
	"boot_timeout": withDefault("boot_timeout", "string", defaultBootTimeout),
	// share_memory: QEMUs started KSM-mergeable and without transparent huge pages (as the
	// Python launch core's [vnf] share_memory; see memory.go)
	"share_memory": withDefault("share_memory", "bool", defaultShareMemory),
	// how often attributes (vnfs, session_slots.*, queuing_delay_ms) are re-reported
	"fingerprint_period": withDefault("fingerprint_period", "string", defaultFingerprintPeriod),
	// power_state: the host's power as `fluidvim metrics serve` writes it (powermeter.go)
	"power_state": withDefault("power_state", "string", defaultPowerState),
})

// taskConfigSpec is the task's `config` block (job file). The shape's defaults are spec's (the
// shared limits, vnf/limits.py); a TaskConfig made in Go with zeros gets the same (checkShape).
var taskConfigSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"kernel": attr("kernel", "string"),
	// memory_mb, vcpus: unset = from the task's resources (memory, cores), else spec's
	// defaults; more than the reservation is refused (resources.go)
	"memory_mb":       attr("memory_mb", "number"),
	"vcpus":           attr("vcpus", "number"),
	"click_config":    attr("click_config", "string"),
	"click_file":      attr("click_file", "string"),
	"session_slots":   withDefault("session_slots", "number", spec.DefaultSlots),
	"flow_timeout_ms": withDefault("flow_timeout_ms", "number", spec.DefaultFlowTimeoutMS),
	// nic { bridge = "br0" mac = "fa:16:3e:00:00:01" }: one block per NIC, in order; bridge
	// "" or unset = unplugged, mac "" or unset = generated (spec.MACFor); a warm shell is told
	// its MACs in `configure` (contract/PROTOCOL.md §6.4). A new per-NIC field goes in TaskNIC
	// (and its validate) and in the launch (driver.go buildSpec, pool.go), which read tc.NIC.
	"nic": hclspec.NewBlockList("nic", hclspec.NewObject(map[string]*hclspec.Spec{
		"bridge": attr("bridge", "string"),
		"mac":    attr("mac", "string"),
	})),
	// the older form, still accepted (not together with nic blocks): nics = bridge names, one
	// NIC each; macs = none, or one per NIC ("" = generated)
	"nics": hclspec.NewAttr("nics", "list(string)", false),
	"macs": hclspec.NewAttr("macs", "list(string)", false),
	"warm": hclspec.NewAttr("warm", "bool", false),
	"name": hclspec.NewAttr("name", "string", false),
	// qoe: the VNF's session slots at the service's QoE (issue 23), sent as its `qoe` op
	// right after `configure` (contract/PROTOCOL.md §4). deadline_ms and quantile are numbers
	// (quantile = 0.99) decoded as text: cty's msgpack sends a number that is not exactly a
	// float64 (0.99) as a string, which no float field takes
	"qoe": hclspec.NewBlock("qoe", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"capacity":    attr("capacity", "number"),
		"deadline_ms": attr("deadline_ms", "string"),
		"quantile":    attr("quantile", "string"),
		"budget_ns":   attr("budget_ns", "number"),
		"wait_ppm":    attr("wait_ppm", "number"),
	})),
})

// TaskQoE is a task's `qoe` block: the sessions the VNF serves within DeadlineMS at Quantile
// (the stage-1 load probe's capacity); BudgetNS = the VNF's own latency budget at that
// quantile (the probe's; 0 = the whole deadline); WaitPPM = the VNF's host-wait budget, the
// share of a correction window its vCPU may wait for a CPU (ppm, from the probe's steal shares;
// 0 = no such rule). All zero = no block: the flow table's slots.
type TaskQoE struct {
	Capacity   int    `codec:"capacity"`
	DeadlineMS string `codec:"deadline_ms"` // a number of milliseconds, e.g. 5 or 0.5
	Quantile   string `codec:"quantile"`    // a number in (0, 1), e.g. 0.99
	BudgetNS   int64  `codec:"budget_ns"`
	WaitPPM    int64  `codec:"wait_ppm"`
}

// Set reports whether the task has a qoe block.
func (q TaskQoE) Set() bool { return q != TaskQoE{} }

func (q TaskQoE) numbers() (deadlineMS, quantile float64) {
	deadlineMS, _ = strconv.ParseFloat(strings.TrimSpace(q.DeadlineMS), 64)
	quantile, _ = strconv.ParseFloat(strings.TrimSpace(q.Quantile), 64)
	return deadlineMS, quantile
}

// Request is the `qoe` op's fields: capacity, budget_ns, quantile_ppm (of a validated block);
// the optional wait_ppm is WaitPPM.
func (q TaskQoE) Request() (int, int64, int) {
	deadlineMS, quantile := q.numbers()
	budget := q.BudgetNS
	if budget == 0 {
		budget = int64(deadlineMS * 1e6)
	}
	ppm := int(math.RoundToEven(quantile * 1e6)) // as Python's round (contract/vectors/qoe.json)
	return q.Capacity, budget, min(max(ppm, 1), 999999)
}

func (q TaskQoE) validate() error {
	if !q.Set() {
		return nil
	}
	if q.Capacity < 1 || q.Capacity > spec.MaxSlots {
		return fieldErr("qoe.capacity", "%d is out of range 1..%d (sessions at the deadline)",
			q.Capacity, spec.MaxSlots)
	}
	deadlineMS, quantile := q.numbers()
	if !(deadlineMS > 0) || math.IsInf(deadlineMS, 0) {
		return fieldErr("qoe.deadline_ms", "%q is not a positive number of milliseconds, e.g. 5",
			q.DeadlineMS)
	}
	if !(quantile > 0 && quantile < 1) {
		return fieldErr("qoe.quantile", "%q is not a number in (0, 1), e.g. 0.99", q.Quantile)
	}
	if q.BudgetNS < 0 || q.BudgetNS > 60_000_000_000 {
		return fieldErr("qoe.budget_ns", "%d is out of range 1..60000000000 (0 or unset = the "+
			"deadline)", q.BudgetNS)
	}
	if q.WaitPPM < 0 || q.WaitPPM > 1_000_000 {
		return fieldErr("qoe.wait_ppm", "%d is out of range 0..1000000 (ppm of a window the "+
			"vCPU may wait for a CPU; 0 or unset = no host-wait rule)", q.WaitPPM)
	}
	if _, b, _ := q.Request(); b < 1 || b > 60_000_000_000 {
		return fieldErr("qoe.deadline_ms", "%v ms is out of range for the VNF's budget "+
			"(1 ns..60 s): set qoe.budget_ns", q.DeadlineMS)
	}
	return nil
}

// Config is the plugin configuration.
type Config struct {
	Qemu  string `codec:"qemu"`
	Accel string `codec:"accel"`
	// Firmware: "auto" (fluidvim-pvh.bin beside the kernel, if there), "qemu" (qboot) or a path
	Firmware string `codec:"firmware"`
	Kernel   string `codec:"kernel"`
	// ImagePaths: directories (absolute) whose files a task may name besides its own directory
	ImagePaths []string `codec:"image_paths"`
	RunDir     string   `codec:"run_dir"`
	// PrivateBridges: the prefix of bridges made on demand (privnet.go); "" = none
	PrivateBridges string `codec:"private_bridges"`
	// NetBackend: spec.NetTap or spec.NetVhostUser; VhostNetBinary: fluidvim-vhost-net's path
	NetBackend     string `codec:"net_backend"`
	VhostNetBinary string `codec:"vhost_net_binary"`
	// VcpuNice: nil (not decoded from HCL, e.g. in tests) means the hclspec default
	VcpuNice *int `codec:"vcpu_nice"`
	// WarmPool lists the shapes to keep shells of (manager.start_pool per block)
	WarmPool    []PoolConfig `codec:"warm_pool"`
	BootTimeout string       `codec:"boot_timeout"`
	// ShareMemory: nil (not decoded from HCL, e.g. in tests) means the hclspec default
	ShareMemory *bool `codec:"share_memory"`
	// FingerprintPeriod is how often the fingerprint is re-sent ("30s"; at least 1s)
	FingerprintPeriod string `codec:"fingerprint_period"`
	// PowerState: the state file of `fluidvim metrics serve` with the host's power
	PowerState string `codec:"power_state"`
}

// defaultConfig is the plugin config of an empty plugin block: the hclspec's defaults.
func defaultConfig() *Config {
	c := &Config{}
	c.fillDefaults()
	c.Kernel = defaultKernel
	return c
}

// fillDefaults gives the fields a Config made in Go left unset the hclspec's defaults (a
// decoded config has them already). Kernel stays as it is: "" means no plugin-wide kernel
// (each task names its own).
func (c *Config) fillDefaults() {
	for _, f := range []struct {
		v   *string
		def string
	}{
		{&c.Qemu, defaultQemu}, {&c.Accel, defaultAccel}, {&c.Firmware, defaultFirmware}, {&c.RunDir, defaultRunDir},
		{&c.BootTimeout, defaultBootTimeout}, {&c.FingerprintPeriod, defaultFingerprintPeriod},
		{&c.NetBackend, defaultNetBackend}, {&c.VhostNetBinary, defaultVhostNet}, {&c.PowerState, defaultPowerState},
	} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	if c.ShareMemory == nil {
		share := defaultShareMemory
		c.ShareMemory = &share
	}
	if c.VcpuNice == nil {
		nice := spec.VcpuNiceDefault
		c.VcpuNice = &nice
	}
}

// TaskConfig is a task's driver configuration.
type TaskConfig struct {
	Kernel        string `codec:"kernel"`
	MemoryMB      int    `codec:"memory_mb"`
	Vcpus         int    `codec:"vcpus"`
	ClickConfig   string `codec:"click_config"`
	ClickFile     string `codec:"click_file"`
	SessionSlots  int    `codec:"session_slots"`
	FlowTimeoutMS int    `codec:"flow_timeout_ms"`
	// NIC: the nic blocks; validate() also turns the older NICs/MACs lists into them, and the
	// launch reads only NIC
	NIC []TaskNIC `codec:"nic"`
	// NICs: bridge names, one NIC each ("" = an unplugged NIC); MACs: none, or one per NIC
	// ("" = generated, spec.MACFor): the older form, still accepted
	NICs []string `codec:"nics"`
	MACs []string `codec:"macs"`
	// Warm: unset or true = claim a ready shell of the same shape if there is one (else cold);
	// false = always cold
	Warm *bool  `codec:"warm"`
	Name string `codec:"name"`
	// QoE: the VNF's slots at the service's QoE (a `qoe { … }` block; zero = none)
	QoE TaskQoE `codec:"qoe"`

	// set by validation: the kernel file (confined, paths.go); configEcho: the VNF's messages
	// about the click configuration may be shown (it is the job's own: paths.go)
	kernelFile confined
	configEcho bool
	oldNICs    bool // the NICs came as the nics/macs lists (errors name those keys)
}

// TaskNIC is one `nic { bridge = … mac = … }` block: what the task fixes of one NIC.
type TaskNIC struct {
	Bridge string `codec:"bridge"` // a Linux bridge on the node; "" = unplugged
	MAC    string `codec:"mac"`    // "" = generated (spec.MACFor)
}

// validate checks one NIC; field(name) is the config key to report (nic[1].mac, macs[1]).
func (n TaskNIC) validate(field func(string) string) error {
	if n.Bridge != "" && !bridgeRE.MatchString(n.Bridge) {
		return fieldErr(field("bridge"), "%q is not a valid bridge name", n.Bridge)
	}
	if n.MAC != "" {
		if why := spec.MACProblem(n.MAC); why != "" {
			return fieldErr(field("mac"), "%s", why)
		}
	}
	return nil
}

// checkNICs validates the task's NICs, given as nic blocks or as the older nics/macs lists
// (not both), and leaves them in NIC, one TaskNIC per NIC, which is what the launch reads: a
// new per-NIC field goes in TaskNIC, its validate and the launch, nowhere else.
func (tc *TaskConfig) checkNICs() error {
	if len(tc.NIC) > 0 && (len(tc.NICs) > 0 || len(tc.MACs) > 0) {
		return fieldErr("nic", "nic blocks and the older nics/macs lists both given: describe "+
			"each NIC in one nic { bridge = \"…\" mac = \"…\" } block and drop nics and macs")
	}
	if len(tc.NIC) == 0 && len(tc.MACs) != 0 && len(tc.MACs) != len(tc.NICs) {
		return fieldErr("macs", "%d entries for %d NICs: give one (or \"\") per NIC, or use "+
			"one nic { bridge = … mac = … } block per NIC", len(tc.MACs), len(tc.NICs))
	}
	if len(tc.NIC) == 0 && len(tc.NICs) > 0 {
		tc.oldNICs = true // errors name the keys the job used
		for i, b := range tc.NICs {
			nic := TaskNIC{Bridge: b}
			if i < len(tc.MACs) {
				nic.MAC = tc.MACs[i]
			}
			tc.NIC = append(tc.NIC, nic)
		}
		tc.NICs, tc.MACs = nil, nil
	}
	if n := len(tc.NIC); n > spec.MaxNics {
		return fieldErr(map[bool]string{true: "nics", false: "nic"}[tc.oldNICs],
			"%d NICs requested; a VNF has at most %d", n, spec.MaxNics)
	}
	for i, nic := range tc.NIC {
		if err := nic.validate(func(f string) string { return tc.nicKey(i, f) }); err != nil {
			return err
		}
	}
	return nil
}

// nicKey is the config key of NIC i's field f as the job wrote it: nic[i].bridge in a nic
// block, nics[i] / macs[i] in the older lists.
func (tc *TaskConfig) nicKey(i int, f string) string {
	if tc.oldNICs {
		return map[string]string{"bridge": "nics", "mac": "macs"}[f] + fmt.Sprintf("[%d]", i)
	}
	return fmt.Sprintf("nic[%d].%s", i, f)
}

// fixedMACs is the MAC each NIC asks for ("" = generated), or nil when none asks for one.
func (tc *TaskConfig) fixedMACs() []string {
	macs := make([]string, len(tc.NIC))
	anyMAC := false
	for i, nic := range tc.NIC {
		macs[i], anyMAC = nic.MAC, anyMAC || nic.MAC != ""
	}
	if !anyMAC {
		return nil
	}
	return macs
}

// FieldError is an invalid task or plugin config; Field names the config key.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("invalid config: %s: %s", e.Field, e.Message)
}

func fieldErr(field, format string, a ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, a...)}
}

var bridgeRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

func (c *Config) validate() error {
	switch c.Accel {
	case "auto", "kvm", "tcg":
	default:
		return fieldErr("accel", "%q is not one of auto, kvm, tcg", c.Accel)
	}
	if !filepath.IsAbs(c.RunDir) {
		return fieldErr("run_dir", "%q must be an absolute path", c.RunDir)
	}
	if c.VcpuNice != nil && (*c.VcpuNice < 0 || *c.VcpuNice > spec.VcpuNiceMax) {
		return fieldErr("vcpu_nice", "%d is out of range 0..%d", *c.VcpuNice, spec.VcpuNiceMax)
	}
	switch c.NetBackend {
	case spec.NetTap:
	case spec.NetVhostUser:
		if fi, err := os.Stat(c.VhostNetBinary); err != nil || fi.Mode()&0o111 == 0 {
			return fieldErr("vhost_net_binary", "%q is not an executable: build it with `make -C "+
				"vhost` and install it there, or set net_backend = %q", c.VhostNetBinary, spec.NetTap)
		}
	default:
		return fieldErr("net_backend", "%q is not one of %s", c.NetBackend,
			strings.Join(spec.NetBackends, ", "))
	}
	// control sockets live at <run_dir>/<uuid>/ctl.sock: sun_path holds 107 bytes
	if len(c.RunDir)+1+36+len("/ctl.sock") > 107 {
		return fieldErr("run_dir", "%q is too long for unix socket paths (max %d characters)",
			c.RunDir, 107-46)
	}
	if c.Kernel != "" && !filepath.IsAbs(c.Kernel) {
		return fieldErr("kernel", "%q must be an absolute path", c.Kernel)
	}
	if err := checkImagePaths(c.ImagePaths); err != nil {
		return err
	}
	if c.PrivateBridges != "" && !privateRE.MatchString(c.PrivateBridges) {
		return fieldErr("private_bridges", "%q is not a bridge-name prefix: use 2-5 lowercase "+
			"letters or digits starting with a letter, that no bridge of the host starts with "+
			"(e.g. \"fvp\"), or \"\" to turn private bridges off", c.PrivateBridges)
	}
	seen := map[poolShape]int{}
	for i := range c.WarmPool {
		if err := c.WarmPool[i].validate(i); err != nil {
			return err
		}
		sh := c.WarmPool[i].shape()
		if j, dup := seen[sh]; dup {
			return fieldErr(fmt.Sprintf("warm_pool[%d]", i), "same kernel, memory_mb, vcpus, nics and "+
				"flow_timeout_ms as warm_pool[%d]: merge the two blocks (add their sizes)", j)
		}
		seen[sh] = i
	}
	return nil
}

// validate checks a task config and fills defaults; errors name the task config key. The
// kernel must be a file paths allows (unset: the plugin's); tc.Kernel becomes that file.
func (tc *TaskConfig) validate(paths *pathPolicy) error {
	k, err := paths.kernel(tc.Kernel)
	if err != nil {
		return err
	}
	tc.Kernel, tc.kernelFile = k.Path, k
	if err := checkShape(func(name string) string { return name }, &tc.MemoryMB, &tc.Vcpus,
		&tc.SessionSlots, &tc.FlowTimeoutMS); err != nil {
		return err
	}
	if err := tc.checkNICs(); err != nil {
		return err
	}
	if tc.ClickConfig != "" && tc.ClickFile != "" {
		return fieldErr("click_file", "set click_config or click_file, not both")
	}
	if len(tc.ClickConfig) > spec.MaxClickConfig {
		return fieldErr("click_config", "longer than %d bytes", spec.MaxClickConfig)
	}
	if err := tc.QoE.validate(); err != nil {
		return err
	}
	if tc.Name != "" && !nameRE.MatchString(tc.Name) {
		return fieldErr("name", "%q: use 1-63 characters of A-Z a-z 0-9 _ . - starting with a "+
			"letter or digit", tc.Name)
	}
	return nil
}

var nameRE = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,%d}$`, spec.MaxName-1))

// checkShape fills the defaults of, and checks, the fields a task and a warm_pool block share
// (limits: spec's constants, i.e. vnf/limits.py); field(name) is the config key to report.
func checkShape(field func(string) string, memoryMB, vcpus, slots, flowTimeoutMS *int) error {
	for _, f := range []struct {
		name        string
		v           *int
		def, lo, hi int
	}{
		{"memory_mb", memoryMB, spec.DefaultMemoryMB, spec.MinMemoryMB, spec.MaxMemoryMB},
		{"vcpus", vcpus, spec.DefaultVcpus, spec.MinVcpus, spec.MaxVcpus},
		{"session_slots", slots, spec.DefaultSlots, spec.MinSlots, spec.MaxSlots},
		{"flow_timeout_ms", flowTimeoutMS, spec.DefaultFlowTimeoutMS, spec.MinFlowTimeoutMS,
			spec.MaxFlowTimeoutMS},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < f.lo || *f.v > f.hi {
			return fieldErr(field(f.name), "%d is out of range %d..%d", *f.v, f.lo, f.hi)
		}
	}
	return nil
}
