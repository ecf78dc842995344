#!/bin/sh
# Boot the VNF on QEMU microvm (virtio-mmio): see run.sh for the options.
MACHINE=microvm exec "$(dirname "$0")/run.sh" "$@"
