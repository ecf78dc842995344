// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package qemu

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// PlugTap attaches a tap (created by QEMU from -netdev tap,ifname=) to an existing bridge and
// brings it up, with the bridge ioctls (as vnf/netdev.py's plug).
func PlugTap(tap, bridge string) error {
	ti, err := net.InterfaceByName(tap)
	if err != nil {
		return fmt.Errorf("tap %s does not exist: %w", tap, err)
	}
	if _, err := net.InterfaceByName(bridge); err != nil {
		return fmt.Errorf("bridge %q does not exist: create it first (ip link add %s type "+
			"bridge) or pick an existing one", bridge, bridge)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(bridge)
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(ti.Index))
	if err := unix.IoctlIfreq(fd, unix.SIOCBRADDIF, ifr); err != nil {
		return fmt.Errorf("cannot add %s to bridge %s: %w", tap, bridge, err)
	}
	tr, err := unix.NewIfreq(tap)
	if err != nil {
		return err
	}
	// as many queued frames as vnf/netdev.py set_txqueuelen: fewer drops while QEMU waits for a CPU
	tr.SetUint32(spec.TapTxQueueLen)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFTXQLEN, tr); err != nil {
		return fmt.Errorf("cannot set txqueuelen of %s: %w", tap, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, tr); err != nil {
		return err
	}
	if flags := tr.Uint16(); flags&unix.IFF_UP == 0 {
		tr.SetUint16(flags | unix.IFF_UP)
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, tr); err != nil {
			return fmt.Errorf("cannot bring %s up: %w", tap, err)
		}
	}
	return nil
}

// UnplugTap detaches a tap from its bridge, if it has one (vnf/netdev.py plug(tap, None)).
func UnplugTap(tap string) error {
	ti, err := net.InterfaceByName(tap)
	if err != nil {
		return fmt.Errorf("tap %s does not exist: %w", tap, err)
	}
	l, err := os.Readlink("/sys/class/net/" + tap + "/master")
	if err != nil {
		return nil // not attached
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(filepath.Base(l))
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(ti.Index))
	if err := unix.IoctlIfreq(fd, unix.SIOCBRDELIF, ifr); err != nil {
		return fmt.Errorf("cannot remove %s from bridge %s: %w", tap, filepath.Base(l), err)
	}
	return nil
}

// LinkExists reports whether a network interface of this name exists.
func LinkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// Bridges lists the host's Linux bridges (the links with a /sys/class/net/<name>/bridge
// directory), the only kind PlugTap can attach a tap to.
func Bridges() ([]string, error) {
	dirs, err := filepath.Glob("/sys/class/net/*/bridge")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(dirs))
	for _, d := range dirs {
		names = append(names, filepath.Base(filepath.Dir(d)))
	}
	return names, nil
}

// DeleteLink removes a leftover link (taps normally vanish with their QEMU).
func DeleteLink(name string) error {
	if !LinkExists(name) {
		return nil
	}
	out, err := exec.Command("ip", "link", "delete", name).CombinedOutput()
	if err != nil && LinkExists(name) {
		return fmt.Errorf("ip link delete %s: %v: %s", name, err, out)
	}
	return nil
}

// EnsureBridge creates Linux bridge name if it is missing and brings it up (as vnf/netdev.py
// ensure_bridge; one created meanwhile by someone else is fine).
func EnsureBridge(name string) error {
	if !LinkExists(name) {
		out, err := exec.Command("ip", "link", "add", name, "type", "bridge").CombinedOutput()
		if err != nil && !LinkExists(name) {
			return fmt.Errorf("ip link add %s type bridge: %v: %s", name, err, out)
		}
	}
	if out, err := exec.Command("ip", "link", "set", name, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set %s up: %v: %s", name, err, out)
	}
	return nil
}

// BridgePorts is the number of links attached to bridge name (-1: it is not a bridge, or gone).
func BridgePorts(name string) int {
	ports, err := os.ReadDir("/sys/class/net/" + name + "/brif")
	if err != nil {
		return -1
	}
	return len(ports)
}
