#!/usr/bin/env python3
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Regenerate contract/vectors/spec.json and limits.json (review the diff before committing!).

spec.json pins the spec -> QEMU argv / libvirt XML mapping for every implementation (Python, Go);
`pytest tests/unit/test_spec.py` fails when the mapping and the vectors disagree.

limits.json is fluidvim.vnf.limits (every VNF limit and default, defined once) and the release
version (fluidvim/__init__.py): the Go driver's tests load it and fail when one of its own
constants differs; `pytest tests/unit/test_limits.py` fails when the file is stale.
"""

import json
import os
import sys

import fluidvim
from fluidvim.vnf import limits, spec as S

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "contract", "vectors", "spec.json")
LIMITS_OUT = os.path.join(HERE, "..", "contract", "vectors", "limits.json")

U1 = "6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f"
U2 = "0b7e6c1a-2f3d-4e5a-8b9c-d0e1f2a3b4c5"


def base(u, machine, accel="kvm", nics=2, **kw):
    d = f"/run/fluidvim/{u}"
    return S.VNFSpec(
        uuid=u, name=kw.pop("name", "fw1"), kernel="/usr/share/fluidvim/fluidvim-vnf.elf",
        control_socket=f"{d}/ctl.sock", console_log=f"{d}/console.log",
        qmp_socket=f"{d}/qmp.sock" if machine == "microvm" else None,
        nics=tuple(S.NicSpec(tap=S.tap_for(u, i), mac=S.mac_for(u, i),
                             bridge=(f"br{i}" if i < 2 else None)) for i in range(nics)),
        machine=machine, accel=accel, **kw)


CASES = [
    ("microvm-kvm-2nics", base(U1, "microvm")),
    ("microvm-tcg-0nics", base(U2, "microvm", accel="tcg", nics=0, name="probe",
                               session_slots=16, memory_mb=16)),
    ("microvm-kvm-4nics-extra", base(U1, "microvm", nics=4, vcpus=2, memory_mb=64,
                                     flow_timeout_ms=5000, cmdline_extra="tsc_khz=2400000")),
    ("pc-kvm-2nics", base(U1, "pc")),
    ("pc-tcg-1nic", base(U2, "pc", accel="tcg", nics=1, name="mirror", session_slots=65536,
                         tsc_khz=2599998)),
    ("microvm-tcg-tsc", base(U2, "microvm", accel="tcg", nics=1, tsc_khz=2599998)),
    ("microvm-kvm-pvh-firmware", base(U1, "microvm", nics=1,
                                      firmware="/usr/share/fluidvim/fluidvim-pvh.bin")),
    ("microvm-kvm-vhost-user", base(U2, "microvm", nics=2, memory_mb=48,
                                    net_backend=S.NET_VHOST_USER)),
]

BAD = [
    ("bad-name", {"name": "-x"}, "name"),
    ("bad-name-newline", {"name": "fw1\n"}, "name"),
    ("bad-memory", {"memory_mb": 4}, "memory_mb"),
    ("bad-slots", {"session_slots": 0}, "session_slots"),
    ("bad-machine", {"machine": "q35"}, "machine"),
    ("bad-accel", {"accel": "hvf"}, "accel"),
    ("bad-kernel", {"kernel": "vnf.elf"}, "kernel"),
    ("bad-tsc", {"tsc_khz": 5}, "tsc_khz"),
    ("bad-firmware", {"firmware": "pvh.bin"}, "firmware"),
    ("pc-firmware", {"machine": "pc", "qmp_socket": None, "firmware": "/x/pvh.bin"}, "firmware"),
    ("bad-net-backend", {"net_backend": "vhost-net"}, "net_backend"),
    ("pc-vhost-user", {"machine": "pc", "qmp_socket": None, "net_backend": "vhost-user"},
     "net_backend"),
    ("bad-mac", {"nics": [{"tap": "fvx0", "mac": "01:00:5e:00:00:01", "bridge": None}]},
     "nics[0].mac"),
    ("zero-mac", {"nics": [{"tap": "fvx0", "mac": "00:00:00:00:00:00", "bridge": None}]},
     "nics[0].mac"),
    ("bad-tap", {"nics": [{"tap": "a-very-long-tap-name", "mac": "52:54:00:00:00:01",
                           "bridge": None}]}, "nics[0].tap"),
    ("too-many-nics", {"nics": [{"tap": f"fvx{i}", "mac": f"52:54:00:00:00:0{i + 1}",
                                 "bridge": None} for i in range(5)]}, "nics"),
]


def main():
    vectors = {"version": 1, "qemu_binary": "qemu-system-x86_64",
               "emulator": "/usr/bin/qemu-system-x86_64", "control_fd": 3, "qmp_fd": 4,
               "cases": [], "invalid": [], "qemu_binary_rule": qemu_binary_rule(),
               "firmware_rule": firmware_rule()}
    for name, sp in CASES:
        case = {"name": name, "spec": sp.to_dict(), "cmdline": S.kernel_cmdline(sp)}
        if sp.machine == "microvm":
            case["qemu_argv"] = S.qemu_argv(sp, control_fd=3, qmp_fd=4)
        else:
            case["libvirt_xml"] = S.libvirt_xml(sp)
        vectors["cases"].append(case)
    good = base(U1, "microvm").to_dict()
    for name, change, field in BAD:
        d = dict(good)
        d.update(change)
        vectors["invalid"].append({"name": name, "spec": d, "field": field})
    outputs = {OUT: vectors, LIMITS_OUT: limits_vectors()}
    texts = {path: json.dumps(doc, indent=2) + "\n" for path, doc in outputs.items()}
    if "--check" in sys.argv:
        stale = []
        for path, text in texts.items():
            try:
                with open(path) as f:
                    current = f.read() == text
            except FileNotFoundError:
                current = False
            if not current:
                stale.append(os.path.basename(path))
        if stale:
            print("stale: " + ", ".join(stale), file=sys.stderr)
        sys.exit(1 if stale else 0)
    for path, text in texts.items():
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path}")


def qemu_binary_rule() -> list[dict]:
    """Which QEMU runs a spec ([vnf] qemu_binary / the plugin's qemu_binary), for every input."""
    out = []
    for machine in S.MACHINES:
        for accel in S.ACCELS:
            for requested in (S.QEMU_AUTO, "/opt/qemu/bin/qemu-system-x86_64"):
                for installed in (True, False):
                    sp = base(U1, machine, accel=accel)
                    out.append({"machine": machine, "accel": accel, "requested": requested,
                                "microvm_installed": installed,
                                "binary": S.qemu_binary(sp, requested,
                                                        available=lambda _n, i=installed: i)})
    return out


def firmware_rule() -> list[dict]:
    """Which firmware boots a spec ([vnf] firmware / the plugin's firmware), for every input."""
    out = []
    kernel = "/usr/share/fluidvim/fluidvim-vnf.elf"
    for machine in S.MACHINES:
        for requested in (S.FIRMWARE_AUTO, S.FIRMWARE_QEMU, "/opt/fw/custom.bin"):
            for present in (True, False):
                fw = S.firmware_for(machine, kernel, requested, exists=lambda _p, i=present: i)
                out.append({"machine": machine, "kernel": kernel, "requested": requested,
                            "pvh_firmware_present": present, "firmware": fw})
    return out


def limits_vectors() -> dict:
    return {"version": fluidvim.__version__, "limits": limits.as_dict()}


if __name__ == "__main__":
    main()
