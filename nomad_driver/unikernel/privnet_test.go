// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
)

// TestPrivateBridgesMadeAndGone: with private_bridges set, two VNFs naming the same missing
// bridge with that prefix share one bridge the plugin made; it stays while either VNF is there
// and goes with the last one. Without the prefix the same job is refused naming the field.
func TestPrivateBridgesMadeAndGone(t *testing.T) {
	k := requireVNF(t)
	prefix := "fvq"
	br := fmt.Sprintf("%s%d", prefix, os.Getpid()%1000000)
	t.Cleanup(func() { _ = qemu.DeleteLink(br) })
	runDir, err := os.MkdirTemp("/tmp", "fvnd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })

	off, _ := newHarnessIn(t, runDir, nil)
	task := newTask(t, off, "p0", &TaskConfig{Kernel: k, NIC: []TaskNIC{{Bridge: br}}, ClickConfig: "FromDevice(0) -> Discard;"})
	if _, _, err := off.StartTask(task); err == nil || !strings.Contains(err.Error(), "nic[0].bridge") ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("private bridges off: StartTask error %v, want nic[0].bridge does not exist", err)
	}

	h, d := newHarnessWith(t, runDir, nil, func(c *Config) { c.PrivateBridges = prefix })
	if got := d.buildFingerprint().Attributes["driver.unikernel.private_bridges"]; got == nil || got.GoString() != prefix {
		t.Errorf("fingerprint private_bridges = %v, want %q", got, prefix)
	}
	var ids []string
	for i := 0; i < 2; i++ {
		task := newTask(t, h, fmt.Sprintf("p%d", i), &TaskConfig{Kernel: k, NIC: []TaskNIC{{Bridge: br}},
			ClickConfig: "FromDevice(0) -> Discard;"})
		_, st := startTask(t, h, task)
		if m := master(st.Spec.Nics[0].Tap); m != br {
			t.Fatalf("VNF %d: tap %s on %q, want the private bridge %s", i, st.Spec.Nics[0].Tap, m, br)
		}
		ids = append(ids, task.ID)
	}
	if n := qemu.BridgePorts(br); n != 2 {
		t.Fatalf("%s has %d ports, want the two VNFs' taps", br, n)
	}
	for i, id := range ids {
		if err := h.DestroyTask(id, true); err != nil {
			t.Fatal(err)
		}
		if exists, want := qemu.LinkExists(br), i == 0; exists != want {
			t.Fatalf("after destroying VNF %d of 2: bridge %s exists = %v, want %v", i, br, exists, want)
		}
	}
}

func TestPrivateBridgesPrefixChecked(t *testing.T) {
	for _, p := range []string{"x", "Fvp", "fv-p", "fvprob", "1fv"} {
		c := Config{Qemu: defaultQemu, Accel: "auto", RunDir: "/tmp/fv", NetBackend: defaultNetBackend, PrivateBridges: p}
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), "private_bridges") {
			t.Errorf("private_bridges = %q: error %v, want one naming private_bridges", p, err)
		}
	}
}
