// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package qemu

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ShareVNFMemory makes the QEMUs this plugin starts from now on cheap to keep idle, exactly as
// the Python launch core does (vnf/backends.py share_vnf_memory): no transparent huge pages (one
// guest write would pin 2 MiB of host memory) and all their anonymous memory KSM-mergeable.
// Both are prctl flags of this process that QEMU inherits across fork and exec (the merge flag
// needs Linux >= 6.4 and CAP_SYS_RESOURCE). enable=false clears them.
func ShareVNFMemory(enable bool) error {
	var v uintptr
	if enable {
		v = 1
	}
	var errs []error
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, v, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("PR_SET_THP_DISABLE: %w", err))
	}
	if err := unix.Prctl(prSetMemoryMerge, v, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("PR_SET_MEMORY_MERGE: %w", err))
	}
	return errors.Join(errs...)
}

// PR_SET_MEMORY_MERGE (linux/prctl.h, Linux 6.4)
const prSetMemoryMerge = 67
