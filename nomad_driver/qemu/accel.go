// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package qemu

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// DetectAccel is backends.detect_accel: KVM when /dev/kvm opens and answers, else TCG. It
// returns the accelerator and why it was chosen; requested "kvm" without a working /dev/kvm is
// an error.
func DetectAccel(requested string) (string, string, error) {
	if requested == "tcg" {
		return "tcg", "requested", nil
	}
	var why string
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == nil {
		api, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), 0xAE00, 0) // KVM_GET_API_VERSION
		unix.Close(fd)
		if errno == 0 && api == 12 {
			return "kvm", "/dev/kvm works", nil
		}
		why = fmt.Sprintf("/dev/kvm API version %d (need 12)", api)
	} else {
		why = "/dev/kvm unusable: " + err.Error()
	}
	if requested == "kvm" {
		return "", "", fmt.Errorf("accel=kvm requested but %s; use auto or tcg", why)
	}
	return "tcg", why, nil
}

// HostTSCkHz is backends.host_tsc_khz: the host TSC rate for TCG guests (constant TSC only;
// nil otherwise).
func HostTSCkHz() *int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	first := strings.SplitN(string(b), "\n\n", 2)[0]
	fields := map[string]string{}
	for _, l := range strings.Split(first, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	hasConst := false
	for _, f := range strings.Fields(fields["flags"]) {
		hasConst = hasConst || f == "constant_tsc"
	}
	var mhz float64
	if _, err := fmt.Sscanf(fields["cpu MHz"], "%g", &mhz); err != nil || !hasConst {
		return nil
	}
	v := int(mhz * 1000)
	return &v
}
