#!/bin/sh
# Boot the VNF on QEMU pc + qboot (legacy virtio-pci): see run.sh for the options.
MACHINE=pc exec "$(dirname "$0")/run.sh" "$@"
