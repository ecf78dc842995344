// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

type vectors struct {
	QemuBinary string `json:"qemu_binary"`
	ControlFD  int    `json:"control_fd"`
	QMPFD      int    `json:"qmp_fd"`
	Cases      []struct {
		Name     string          `json:"name"`
		Spec     json.RawMessage `json:"spec"`
		Cmdline  string          `json:"cmdline"`
		QemuArgv []string        `json:"qemu_argv"`
	} `json:"cases"`
	Invalid []struct {
		Name  string          `json:"name"`
		Spec  json.RawMessage `json:"spec"`
		Field string          `json:"field"`
	} `json:"invalid"`
	QemuBinaryRule []struct {
		Machine   string `json:"machine"`
		Accel     string `json:"accel"`
		Requested string `json:"requested"`
		Installed bool   `json:"microvm_installed"`
		Binary    string `json:"binary"`
	} `json:"qemu_binary_rule"`
	FirmwareRule []struct {
		Machine   string  `json:"machine"`
		Kernel    string  `json:"kernel"`
		Requested string  `json:"requested"`
		Present   bool    `json:"pvh_firmware_present"`
		Firmware  *string `json:"firmware"`
	} `json:"firmware_rule"`
}

func load(t *testing.T) vectors {
	data, err := os.ReadFile("../../contract/vectors/spec.json")
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQemuBinaryRule: the plugin picks the same QEMU as the Python launch core.
func TestQemuBinaryRule(t *testing.T) {
	v := load(t)
	if len(v.QemuBinaryRule) == 0 {
		t.Fatal("no qemu_binary_rule in the vectors")
	}
	for _, r := range v.QemuBinaryRule {
		s := VNF{Machine: r.Machine, Accel: r.Accel}
		got := s.QemuBinary(r.Requested, func(name string) bool {
			if name != QemuMicrovm {
				t.Errorf("asked about %q", name)
			}
			return r.Installed
		})
		if got != r.Binary {
			t.Errorf("%+v: got %q, want %q", r, got, r.Binary)
		}
	}
}

// TestFirmwareRule: the plugin boots a VNF with the same firmware as the Python launch core.
func TestFirmwareRule(t *testing.T) {
	v := load(t)
	if len(v.FirmwareRule) == 0 {
		t.Fatal("no firmware_rule in the vectors")
	}
	for _, r := range v.FirmwareRule {
		got := FirmwareFor(r.Machine, r.Kernel, r.Requested, func(p string) bool {
			if filepath.Base(p) != PVHFirmware || filepath.Dir(p) != filepath.Dir(r.Kernel) {
				t.Errorf("asked about %q", p)
			}
			return r.Present
		})
		if (got == nil) != (r.Firmware == nil) || (got != nil && *got != *r.Firmware) {
			t.Errorf("%+v: got %v, want %v", r, got, r.Firmware)
		}
	}
}

func TestArgvVectors(t *testing.T) {
	v := load(t)
	n := 0
	for _, c := range v.Cases {
		if c.QemuArgv == nil {
			continue // pc/libvirt cases belong to the Python libvirt backend
		}
		n++
		t.Run(c.Name, func(t *testing.T) {
			s, err := FromJSON(c.Spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.KernelCmdline(); got != c.Cmdline {
				t.Errorf("cmdline %q, want %q", got, c.Cmdline)
			}
			argv, err := s.QemuArgv(v.QemuBinary, v.ControlFD, v.QMPFD)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(argv, c.QemuArgv) {
				for i := range max(len(argv), len(c.QemuArgv)) {
					var a, b string
					if i < len(argv) {
						a = argv[i]
					}
					if i < len(c.QemuArgv) {
						b = c.QemuArgv[i]
					}
					if a != b {
						t.Errorf("argv[%d] = %q, want %q", i, a, b)
					}
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no microvm cases in the vectors")
	}
}

func TestPcRejectedByQemuBackend(t *testing.T) {
	for _, c := range load(t).Cases {
		if c.QemuArgv != nil {
			continue
		}
		s, err := FromJSON(c.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: valid spec rejected: %v", c.Name, err)
		}
		_, err = s.QemuArgv("qemu", 3, 4)
		var se *Error
		if !errors.As(err, &se) || se.Field != "machine" {
			t.Errorf("%s: want a machine error, got %v", c.Name, err)
		}
	}
}

func TestInvalidVectors(t *testing.T) {
	for _, c := range load(t).Invalid {
		t.Run(c.Name, func(t *testing.T) {
			s, err := FromJSON(c.Spec)
			if err == nil {
				err = s.Validate()
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("want a spec error naming %q, got %v", c.Field, err)
			}
			if se.Field != c.Field {
				t.Errorf("error names %q, want %q (%v)", se.Field, c.Field, err)
			}
		})
	}
}

func TestMacAndTapFor(t *testing.T) {
	// the vectors' NICs were made with spec.mac_for / spec.tap_for
	for _, c := range load(t).Cases {
		s, _ := FromJSON(c.Spec)
		for i, n := range s.Nics {
			if n.Bridge == nil {
				continue // hand-written NICs
			}
			if got := TapFor(s.UUID, i); got != n.Tap {
				t.Errorf("%s: TapFor(%d) = %s, want %s", c.Name, i, got, n.Tap)
			}
			if got := MACFor(s.UUID, i); got != n.MAC {
				t.Errorf("%s: MACFor(%d) = %s, want %s", c.Name, i, got, n.MAC)
			}
		}
	}
}

func TestUnknownFieldNamed(t *testing.T) {
	_, err := FromJSON([]byte(`{"uuid":"6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f","zz":1,"aa":2}`))
	var se *Error
	if !errors.As(err, &se) || se.Field != "aa" {
		t.Fatalf("want error naming aa, got %v", err)
	}
}

func TestNameWithTrailingNewlineRejected(t *testing.T) {
	s := New()
	s.UUID, s.Name = "6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f", "fw1\n"
	s.Kernel, s.ControlSocket, s.ConsoleLog = "/k", "/c", "/l"
	var se *Error
	if err := s.Validate(); !errors.As(err, &se) || se.Field != "name" {
		t.Fatalf("want name error, got %v", err)
	}
}

// TestLimitsVectors: every limit of vnf/limits.py (contract/vectors/limits.json) has its Go constant
// with the same value, and no Go constant is left without a Python definition.
func TestLimitsVectors(t *testing.T) {
	data, err := os.ReadFile("../../contract/vectors/limits.json")
	if err != nil {
		t.Fatalf("read limits: %v", err)
	}
	var doc struct {
		Limits map[string]int `json:"limits"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Limits) == 0 {
		t.Fatal("no limits in contract/vectors/limits.json")
	}
	for name, want := range doc.Limits {
		got, ok := Limits[name]
		if !ok {
			t.Errorf("%s = %d in vnf/limits.py has no Go constant (add it to spec.Limits)", name, want)
		} else if got != want {
			t.Errorf("%s: Go has %d, vnf/limits.py %d", name, got, want)
		}
	}
	for name := range Limits {
		if _, ok := doc.Limits[name]; !ok {
			t.Errorf("spec.Limits[%q] is not in vnf/limits.py", name)
		}
	}
	d := New()
	if d.MemoryMB != Limits["MEMORY_MB_DEFAULT"] || d.Vcpus != Limits["VCPUS_DEFAULT"] ||
		d.SessionSlots != Limits["SLOTS_DEFAULT"] || d.FlowTimeoutMS != Limits["FLOW_TIMEOUT_MS_DEFAULT"] {
		t.Errorf("New() defaults %+v differ from the limits", d)
	}
}
