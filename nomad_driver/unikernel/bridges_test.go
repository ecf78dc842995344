// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// TestFingerprintBridges: a bridge created on the host appears as
// driver.unikernel.bridge.<name> = true at the next fingerprint, and once deleted it is
// reported as "" (what makes the Nomad client delete the node attribute).
func TestFingerprintBridges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (bridges)")
	}
	if _, err := exec.LookPath(spec.QemuFull); err != nil {
		t.Skip("qemu-system-x86_64 not installed (the fingerprint is undetected without it)")
	}
	_, d, _ := newHarness(t)
	name := fmt.Sprintf("fvfp%d", os.Getpid()%100000)
	key := "driver.unikernel.bridge." + name
	if _, ok := d.buildFingerprint().Attributes[key]; ok {
		t.Fatalf("%s reported before the bridge exists", key)
	}
	bridge(t, name)
	fp := d.buildFingerprint()
	if v, ok := fp.Attributes[key].GetBool(); !ok || !v {
		t.Fatalf("%s = %v after creating the bridge, want true", key, fp.Attributes[key])
	}
	if got := fp.Attributes[key].GoString(); got != "true" {
		t.Errorf("%s renders as %q in the node attributes, want \"true\" (the constraint value)", key, got)
	}
	// a plain link is not a bridge: a tap cannot be attached to it
	dummy := name + "v"
	if out, err := exec.Command("ip", "link", "add", dummy, "type", "veth", "peer", "name",
		name+"p").CombinedOutput(); err == nil {
		t.Cleanup(func() { exec.Command("ip", "link", "del", dummy).Run() })
		if _, ok := d.buildFingerprint().Attributes["driver.unikernel.bridge."+dummy]; ok {
			t.Errorf("veth %s fingerprinted as a bridge", dummy)
		}
	} else {
		t.Logf("no veth (%v %s): skipping the non-bridge check", err, out)
	}
	if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip link del %s: %v %s", name, err, out)
	}
	fp = d.buildFingerprint()
	a, ok := fp.Attributes[key]
	if !ok {
		t.Fatalf("%s not reported after the bridge went: the Nomad client would keep the stale value", key)
	}
	if got := a.GoString(); got != "" {
		t.Errorf("%s = %q after deleting the bridge, want \"\" (dropped)", key, got)
	}
}
