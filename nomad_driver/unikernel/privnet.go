// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

// Private bridges: host-local L2 segments between VNFs on one client, made on demand.
//
// A stage-1 load probe in a Nomad zone (evaluator/genprobe.py) wires a probe VNF to a traffic
// generator VNF through two networks of their own. Nomad has no network API for that, so the
// operator may let the plugin make them: with `private_bridges = "fvp"` in the plugin config, a
// task's `nic { bridge = "fvp…" }` naming a bridge that does not exist yet gets one (a plain
// Linux bridge with no address and no uplink, so only the VNFs plugged into it share it), and
// the bridge is deleted once the last VNF plugged into it by this plugin is gone. Every other
// bridge must exist (driver.go validateTask), as before. Off by default: a job cannot make a
// host link unless the operator chose a prefix no real bridge uses. The prefix is fingerprinted
// (driver.unikernel.private_bridges), which is how orchestrator/zones/nomad.py learns it.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// privateRE: what private_bridges may be; short, so a 10-character network hash still fits in
// Linux's 15-character interface names.
var privateRE = regexp.MustCompile(`^[a-z][a-z0-9]{1,4}$`)

// privateBridge reports whether the configuration lets bridge be made on demand.
func (c *Config) privateBridge(bridge string) bool {
	return c.PrivateBridges != "" && strings.HasPrefix(bridge, c.PrivateBridges)
}

// plugNIC attaches a VNF's tap to bridge, making the bridge first when it is a private one.
// privMu makes "make, plug" and "unplugged and empty, delete" (releasePrivate) exclusive.
func (d *Driver) plugNIC(tap, bridge string) error {
	if !d.settings().config.privateBridge(bridge) {
		return qemu.PlugTap(tap, bridge)
	}
	d.privMu.Lock()
	defer d.privMu.Unlock()
	if err := qemu.EnsureBridge(bridge); err != nil {
		return err
	}
	if d.privUsed == nil {
		d.privUsed = map[string]bool{}
	}
	d.privUsed[bridge] = true
	return qemu.PlugTap(tap, bridge)
}

// notePrivate remembers the private bridges a recovered task's taps are plugged into (made by
// this plugin before a restart), so they go with their last VNF as the others do.
func (d *Driver) notePrivate(s *spec.VNF) {
	c := d.settings().config
	d.privMu.Lock()
	defer d.privMu.Unlock()
	for _, n := range s.Nics {
		master, err := os.Readlink("/sys/class/net/" + n.Tap + "/master")
		if b := filepath.Base(master); err == nil && c.privateBridge(b) {
			if d.privUsed == nil {
				d.privUsed = map[string]bool{}
			}
			d.privUsed[b] = true
		}
	}
}

// releasePrivate deletes the private bridges this plugin made that no VNF is plugged into any
// more (after a task's taps are gone).
func (d *Driver) releasePrivate() {
	d.privMu.Lock()
	defer d.privMu.Unlock()
	for b := range d.privUsed {
		switch qemu.BridgePorts(b) {
		case 0:
			if err := qemu.DeleteLink(b); err != nil {
				d.logger.Warn("could not delete a private bridge", "bridge", b, "error", err)
				continue
			}
			delete(d.privUsed, b)
		case -1:
			delete(d.privUsed, b) // gone already
		}
	}
}
