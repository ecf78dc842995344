// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

// Package spec is the Go twin of vnf/spec.py: the VNF launch spec, its validation and its
// mapping to a QEMU argv (microvm, direct backend). Both are pinned by contract/vectors/spec.json.
package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The VNF limits and defaults. Their one definition is vnf/limits.py (with the reasons for each
// value); a Go module cannot import it, so these are copies that TestLimitsVectors checks
// against contract/vectors/limits.json (written from vnf/limits.py by tools/gen_vectors.py).
const (
	MinMemoryMB          = 8
	DefaultMemoryMB      = 32
	MaxMemoryMB          = 4096
	MinVcpus             = 1
	DefaultVcpus         = 1
	MaxVcpus             = 8 // the guest runs on the boot vCPU only; more cost a QEMU thread each
	MaxNics              = 4
	MinSlots             = 1
	DefaultSlots         = 1024
	MaxSlots             = 65536
	MinFlowTimeoutMS     = 1
	DefaultFlowTimeoutMS = 30000
	MaxFlowTimeoutMS     = 86_400_000
	// MaxClickConfig is the largest click config in bytes (a control line is at most
	// MaxControlLine bytes).
	MaxClickConfig = 7000
	MaxControlLine = 8192
	MaxName        = 63
	MinTSCkHz      = 1000
	MaxTSCkHz      = 100_000_000
	// MaxPoolSize is the most shells one warm_pool block keeps; LaunchHistory the number of
	// launches of one kind the queuing delay is the median of (contract/PROTOCOL.md §6).
	MaxPoolSize   = 64
	LaunchHistory = 64
	// TapTxQueueLen is the frames a VNF's tap holds for QEMU (vnf/limits.py TAP_TXQUEUELEN).
	TapTxQueueLen = 4096
	// VcpuNiceDefault is the nice value of a VNF's vCPU threads (vnf/limits.py VCPU_NICE_DEFAULT:
	// the busy-polling guest yields to the threads that move its frames); VcpuNiceMax its bound.
	VcpuNiceDefault = 10
	VcpuNiceMax     = 19
	// QemuOverheadMB is what a VNF's cgroup memory limit allows QEMU beyond the guest memory
	// (vnf/limits.py QEMU_OVERHEAD_MB); CPUPeriodUs the cgroup CPU bandwidth period;
	// QemuOverheadCPUUs what a hard CPU quota allows QEMU's own threads beyond its vCPUs per
	// period (QEMU_OVERHEAD_CPU_US: its main loop moves frames on another core meanwhile).
	QemuOverheadMB    = 64
	CPUPeriodUs       = 100_000
	QemuOverheadCPUUs = 50_000
)

// Limits are the constants above by their vnf/limits.py names (for the vectors test).
var Limits = map[string]int{
	"MEMORY_MB_MIN": MinMemoryMB, "MEMORY_MB_DEFAULT": DefaultMemoryMB, "MEMORY_MB_MAX": MaxMemoryMB,
	"VCPUS_MIN": MinVcpus, "VCPUS_DEFAULT": DefaultVcpus, "VCPUS_MAX": MaxVcpus,
	"MAX_NICS": MaxNics, "SLOTS_MIN": MinSlots, "SLOTS_DEFAULT": DefaultSlots, "SLOTS_MAX": MaxSlots,
	"FLOW_TIMEOUT_MS_MIN": MinFlowTimeoutMS, "FLOW_TIMEOUT_MS_DEFAULT": DefaultFlowTimeoutMS,
	"FLOW_TIMEOUT_MS_MAX": MaxFlowTimeoutMS, "MAX_CONTROL_LINE": MaxControlLine,
	"MAX_CLICK_CONFIG_BYTES": MaxClickConfig, "MAX_NAME": MaxName, "TSC_KHZ_MIN": MinTSCkHz,
	"TSC_KHZ_MAX": MaxTSCkHz, "POOL_SIZE_MAX": MaxPoolSize, "LAUNCH_HISTORY_DEFAULT": LaunchHistory,
	"TAP_TXQUEUELEN": TapTxQueueLen, "VCPU_NICE_DEFAULT": VcpuNiceDefault, "VCPU_NICE_MAX": VcpuNiceMax,
	"QEMU_OVERHEAD_MB": QemuOverheadMB, "CPU_PERIOD_US": CPUPeriodUs,
	"QEMU_OVERHEAD_CPU_US": QemuOverheadCPUUs,
}

var (
	Machines = []string{"microvm", "pc"}
	Accels   = []string{"kvm", "tcg"}
	// NetBackends: how a microvm VNF's NICs reach their taps (vnf/spec.py NET_*): QEMU's tap
	// netdev, or fluidvim-vhost-net listening on VhostSocket.
	NetBackends = []string{NetTap, NetVhostUser}

	// Go's `$` (no multiline flag) matches only at the end of the text; Python's re `$` also
	// matches before a final "\n". We deliberately do not copy that quirk (see README).
	nameRE   = regexp.MustCompile(fmt.Sprintf(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,%d}$`, MaxName-1))
	macRE    = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)
	ifnameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)
)

// Error is an invalid spec; Field names the offending field (as in spec.py's SpecError).
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

func errf(field, format string, a ...any) error {
	return &Error{Field: field, Message: fmt.Sprintf(format, a...)}
}

// NIC is one virtio-net NIC: a tap device (created by QEMU), optionally plugged into a bridge.
type NIC struct {
	Tap    string  `json:"tap"`
	MAC    string  `json:"mac"`
	Bridge *string `json:"bridge"`
}

// VNF is everything needed to start one VNF. Paths are absolute on the host.
type VNF struct {
	UUID          string  `json:"uuid"`
	Name          string  `json:"name"`
	Kernel        string  `json:"kernel"`
	ControlSocket string  `json:"control_socket"`
	ConsoleLog    string  `json:"console_log"`
	MemoryMB      int     `json:"memory_mb"`
	Vcpus         int     `json:"vcpus"`
	Nics          []NIC   `json:"nics"`
	SessionSlots  int     `json:"session_slots"`
	FlowTimeoutMS int     `json:"flow_timeout_ms"`
	ClickConfig   *string `json:"click_config"`
	Machine       string  `json:"machine"`
	Accel         string  `json:"accel"`
	QMPSocket     *string `json:"qmp_socket"`
	CmdlineExtra  string  `json:"cmdline_extra"`
	TSCkHz        *int    `json:"tsc_khz"`
	Firmware      *string `json:"firmware"`    // microvm: the -bios image (nil: QEMU's default, qboot)
	NetBackend    string  `json:"net_backend"` // NetTap (left out of specs) or NetVhostUser
}

// Network backends of a microvm VNF's NICs.
const (
	NetTap       = "tap"
	NetVhostUser = "vhost-user"
)

// New returns a spec with spec.py's defaults.
func New() VNF {
	return VNF{MemoryMB: DefaultMemoryMB, Vcpus: DefaultVcpus, Nics: []NIC{}, SessionSlots: DefaultSlots,
		FlowTimeoutMS: DefaultFlowTimeoutMS, Machine: "microvm", Accel: "kvm", NetBackend: NetTap}
}

// FromJSON decodes a spec like VNFSpec.from_dict: missing fields take defaults, an unknown
// field is an error naming it.
func FromJSON(data []byte) (VNF, error) {
	v := New()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return v, errf("spec", "not a JSON object: %v", err)
	}
	known := jsonFields()
	var unknown []string
	for k := range raw {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, 0, len(known))
		for k := range known {
			names = append(names, k)
		}
		sort.Strings(names)
		return v, errf(unknown[0], "unknown field (known: %s)", strings.Join(names, ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			return v, errf(te.Field, "wrong type: %v", err)
		}
		return v, errf("spec", "%v", err)
	}
	if v.Nics == nil {
		v.Nics = []NIC{}
	}
	return v, nil
}

func jsonFields() map[string]bool {
	return map[string]bool{"uuid": true, "name": true, "kernel": true, "control_socket": true,
		"console_log": true, "memory_mb": true, "vcpus": true, "nics": true,
		"session_slots": true, "flow_timeout_ms": true, "click_config": true, "machine": true,
		"accel": true, "qmp_socket": true, "cmdline_extra": true, "tsc_khz": true,
		"firmware": true, "net_backend": true}
}

// pyRepr quotes a string roughly like Python's repr() (messages only; fields are what matter).
func pyRepr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return strconv.Quote(s)
	}
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
	return "'" + q + "'"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ValidUUID accepts what Python's uuid.UUID(str) accepts: 32 hex digits, optionally with
// hyphens, braces and a urn:uuid: prefix.
func ValidUUID(s string) bool {
	h := strings.ReplaceAll(strings.ReplaceAll(s, "urn:", ""), "uuid:", "")
	h = strings.ReplaceAll(strings.Trim(h, "{}"), "-", "")
	if len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func uuidHex(s string) string {
	h := strings.ReplaceAll(strings.ReplaceAll(s, "urn:", ""), "uuid:", "")
	return strings.ToLower(strings.ReplaceAll(strings.Trim(h, "{}"), "-", ""))
}

// MACProblem is spec.mac_problem: why mac cannot be a NIC's address, or "" (one rule for specs
// and task configs).
func MACProblem(mac string) string {
	if !macRE.MatchString(mac) {
		return pyRepr(mac) + " is not a MAC address like 52:54:00:12:34:56 (lower-case hex)"
	}
	if b, _ := strconv.ParseUint(mac[:2], 16, 8); b&1 == 1 {
		return mac + " is a multicast address; use a unicast one (even first octet)"
	}
	if mac == "00:00:00:00:00:00" {
		return mac + " is the all-zero address; use a unicast one"
	}
	return ""
}

func (n NIC) validate(i int) error {
	if !ifnameRE.MatchString(n.Tap) {
		return errf(fmt.Sprintf("nics[%d].tap", i), "%s is not a valid interface name "+
			"(1-15 characters of A-Z a-z 0-9 _ . -)", pyRepr(n.Tap))
	}
	if why := MACProblem(n.MAC); why != "" {
		return errf(fmt.Sprintf("nics[%d].mac", i), "%s", why)
	}
	if n.Bridge != nil && !ifnameRE.MatchString(*n.Bridge) {
		return errf(fmt.Sprintf("nics[%d].bridge", i), "%s is not a valid bridge name",
			pyRepr(*n.Bridge))
	}
	return nil
}

// Validate checks the spec exactly in spec.py's order, so the first bad field is the same one.
func (v *VNF) Validate() error {
	if !ValidUUID(v.UUID) {
		return errf("uuid", "%s is not a UUID", pyRepr(v.UUID))
	}
	if !nameRE.MatchString(v.Name) {
		return errf("name", "%s: use 1-%d characters of A-Z a-z 0-9 _ . - starting with a "+
			"letter or digit", pyRepr(v.Name), MaxName)
	}
	for _, f := range []struct{ name, value string }{{"kernel", v.Kernel},
		{"control_socket", v.ControlSocket}, {"console_log", v.ConsoleLog}} {
		if !strings.HasPrefix(f.value, "/") {
			return errf(f.name, "%s must be an absolute path", pyRepr(f.value))
		}
	}
	if v.MemoryMB < MinMemoryMB || v.MemoryMB > MaxMemoryMB {
		return errf("memory_mb", "%d is out of range %d..%d (the VNF needs about %d MiB; %d is "+
			"the default)", v.MemoryMB, MinMemoryMB, MaxMemoryMB, MinMemoryMB, DefaultMemoryMB)
	}
	if v.Vcpus < MinVcpus || v.Vcpus > MaxVcpus {
		return errf("vcpus", "%d is out of range %d..%d", v.Vcpus, MinVcpus, MaxVcpus)
	}
	if len(v.Nics) > MaxNics {
		return errf("nics", "%d NICs requested; a VNF has at most %d", len(v.Nics), MaxNics)
	}
	for i, n := range v.Nics {
		if err := n.validate(i); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, n := range v.Nics {
		if seen[n.Tap] {
			return errf("nics", "two NICs use the same tap device")
		}
		seen[n.Tap] = true
	}
	if v.SessionSlots < MinSlots || v.SessionSlots > MaxSlots {
		return errf("session_slots", "%d is out of range %d..%d", v.SessionSlots, MinSlots, MaxSlots)
	}
	if v.FlowTimeoutMS < MinFlowTimeoutMS || v.FlowTimeoutMS > MaxFlowTimeoutMS {
		return errf("flow_timeout_ms", "%d is out of range %d..%d", v.FlowTimeoutMS, MinFlowTimeoutMS,
			MaxFlowTimeoutMS)
	}
	if !contains(Machines, v.Machine) {
		return errf("machine", "%s is not one of %s", pyRepr(v.Machine), strings.Join(Machines, ", "))
	}
	if !contains(Accels, v.Accel) {
		return errf("accel", "%s is not one of %s", pyRepr(v.Accel), strings.Join(Accels, ", "))
	}
	if v.Firmware != nil {
		if !strings.HasPrefix(*v.Firmware, "/") {
			return errf("firmware", "%s must be an absolute path", pyRepr(*v.Firmware))
		}
		if v.Machine != "microvm" {
			return errf("firmware", "only microvm takes a firmware image; pc boots through qboot "+
				"(the libvirt backend's loader)")
		}
	}
	if !contains(NetBackends, v.NetBackend) {
		return errf("net_backend", "%s is not one of %s", pyRepr(v.NetBackend),
			strings.Join(NetBackends, ", "))
	}
	if v.NetBackend != NetTap && v.Machine != "microvm" {
		return errf("net_backend", "%s NICs run on the qemu backend (microvm) only; the "+
			"libvirt backend (pc) uses tap", v.NetBackend)
	}
	if v.TSCkHz != nil && (*v.TSCkHz < MinTSCkHz || *v.TSCkHz > MaxTSCkHz) {
		return errf("tsc_khz", "%d is out of range %d..%d", *v.TSCkHz, MinTSCkHz, MaxTSCkHz)
	}
	if strings.ContainsAny(v.CmdlineExtra, "\n\r\x00") {
		return errf("cmdline_extra", "must be a single line")
	}
	if v.ClickConfig != nil && len(*v.ClickConfig) > MaxClickConfig {
		return errf("click_config", "longer than %d bytes (the control channel carries at "+
			"most %d bytes per message)", MaxClickConfig, MaxControlLine)
	}
	return nil
}

// MACFor is spec.mac_for: a stable unicast MAC in 52:54:00 for NIC index of a VNF.
func MACFor(vnfUUID string, index int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", vnfUUID, index)))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// TapFor is spec.tap_for: the tap name of NIC index (13 characters, within IFNAMSIZ).
func TapFor(vnfUUID string, index int) string {
	return fmt.Sprintf("fv%sn%d", uuidHex(vnfUUID)[:10], index)
}

// KernelCmdline is spec.kernel_cmdline (contract/PROTOCOL.md §1). The config is sent later.
func (v *VNF) KernelCmdline() string {
	parts := []string{fmt.Sprintf("slots=%d", v.SessionSlots),
		fmt.Sprintf("flow_timeout_ms=%d", v.FlowTimeoutMS), "name=" + v.Name}
	if v.TSCkHz != nil && *v.TSCkHz != 0 {
		parts = append(parts, fmt.Sprintf("tsc_khz=%d", *v.TSCkHz))
	}
	if v.CmdlineExtra != "" {
		parts = append(parts, v.CmdlineExtra)
	}
	return strings.Join(parts, " ")
}

func cpuArgs(accel string) []string {
	// `-cpu host` aborts QEMU on this PVM host (kvm_pvm; MSR 0x10a): max minus arch-capabilities works.
	if accel == "kvm" {
		return []string{"-accel", "kvm", "-cpu", "max,-arch-capabilities"}
	}
	return []string{"-accel", "tcg", "-cpu", "max"}
}

// QEMU binaries of the direct path. QemuAuto picks Debian's minimal microvm build
// (machine microvm, KVM only; 10 shared libraries instead of 51: less CPU per cold launch,
// about half the RSS per VM) when it can run the VNF and is installed, else the full build.
const (
	QemuAuto    = "auto"
	QemuFull    = "qemu-system-x86_64"
	QemuMicrovm = "qemu-system-x86_64-microvm"
)

// QemuBinary is the binary (name or path) that runs v for the configured qemu_binary
// (requested): a name or path is used as given; "auto" is QemuMicrovm when v is a microvm on
// KVM and installed(QemuMicrovm), else QemuFull. The Python launch core applies the same rule
// (vnf/spec.py qemu_binary); both are pinned by contract/vectors/spec.json "qemu_binary_rule".
func (v *VNF) QemuBinary(requested string, installed func(string) bool) string {
	if requested != QemuAuto {
		return requested
	}
	if v.Machine == "microvm" && v.Accel == "kvm" && installed(QemuMicrovm) {
		return QemuMicrovm
	}
	return QemuFull
}

// Firmware of the direct path (vnf/spec.py FIRMWARE_*): FirmwareAuto takes PVHFirmware from the
// kernel image's directory (unikernel/firmware/pvh.S: four fw_cfg DMA reads and a jump, where
// qboot runs ~6 ms of ring-0 code that KVM-PVM emulates) when the VNF is a microvm and the file is
// there; FirmwareQemu keeps QEMU's default (qboot); anything else is a path.
const (
	FirmwareAuto = "auto"
	FirmwareQemu = "qemu"
	PVHFirmware  = "fluidvim-pvh.bin"
)

// FirmwareFor is spec.firmware_for: the Firmware of a VNF of machine booting kernel, for the
// configured firmware (requested); nil = QEMU's default. Pinned by contract/vectors/spec.json
// "firmware_rule".
func FirmwareFor(machine, kernel, requested string, exists func(string) bool) *string {
	switch {
	case requested == FirmwareQemu:
		return nil
	case requested != FirmwareAuto:
		return &requested
	case machine != "microvm":
		return nil
	}
	p := filepath.Join(filepath.Dir(kernel), PVHFirmware)
	if !exists(p) {
		return nil
	}
	return &p
}

// QemuArgv is spec.qemu_argv: the QEMU argv for the direct backend (microvm, virtio-mmio).
// The control channel and QMP monitor are listening sockets inherited as controlFD and qmpFD
// (qmpFD < 0: no QMP monitor).
func (v *VNF) QemuArgv(qemu string, controlFD, qmpFD int) ([]string, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if v.Machine != "microvm" {
		return nil, errf("machine", "the QEMU direct backend runs microvm; use the libvirt "+
			"backend for pc")
	}
	vhost := v.NetBackend == NetVhostUser
	machine := "microvm,x-option-roms=off,pit=off,pic=off,rtc=off,isa-serial=on,acpi=off"
	if vhost {
		machine += ",memory-backend=mem"
	}
	argv := []string{qemu, "-name", "guest=" + v.Name + ",debug-threads=off", "-uuid", v.UUID,
		"-M", machine}
	if v.Firmware != nil {
		argv = append(argv, "-bios", *v.Firmware)
	}
	argv = append(argv, cpuArgs(v.Accel)...)
	argv = append(argv, "-m", strconv.Itoa(v.MemoryMB), "-smp", strconv.Itoa(v.Vcpus))
	if vhost {
		argv = append(argv, "-object",
			fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", v.MemoryMB))
	}
	argv = append(argv,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", v.Kernel, "-append", v.KernelCmdline(),
		"-chardev", "file,id=con,path="+v.ConsoleLog, "-serial", "chardev:con",
		// control channel: virtio-console port 0 (a UART costs a VM exit per byte)
		"-device", "virtio-serial-device,max_ports=1",
		"-chardev", fmt.Sprintf("socket,id=ctl,fd=%d,server=on,wait=on", controlFD),
		"-device", "virtconsole,chardev=ctl,nr=0")
	if qmpFD >= 0 {
		argv = append(argv, "-chardev", fmt.Sprintf("socket,id=qmp,fd=%d,server=on,wait=off", qmpFD),
			"-mon", "chardev=qmp,mode=control")
	}
	for i, n := range v.Nics {
		if vhost {
			argv = append(argv, "-chardev", fmt.Sprintf("socket,id=vu%d,path=%s", i, v.VhostSocket(i)),
				"-netdev", fmt.Sprintf("vhost-user,id=net%d,chardev=vu%d", i, i))
		} else {
			argv = append(argv,
				"-netdev", fmt.Sprintf("tap,id=net%d,ifname=%s,script=no,downscript=no", i, n.Tap))
		}
		argv = append(argv, "-device", fmt.Sprintf("virtio-net-device,netdev=net%d,mac=%s", i, n.MAC))
	}
	return argv, nil
}

// VhostSocket is spec.vhost_socket: NIC index's vhost-user socket, beside the control socket.
func (v *VNF) VhostSocket(index int) string {
	return filepath.Join(filepath.Dir(v.ControlSocket), fmt.Sprintf("vhost%d.sock", index))
}
