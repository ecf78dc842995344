#!/usr/bin/env python3
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Regenerate contract/vectors/attribution.json: per-VNF power by useful work
(fluidvim.orchestrator.power.attribution.attribute), inputs and the watts they give, so the Go
Nomad plugin's port (nomad_driver/unikernel/power.go) is checked against the one definition.

    tools/gen_power_vectors.py            # write it (review the diff before committing)
    tools/gen_power_vectors.py --check    # exit 1 when the file is stale
"""

import json
import os
import sys

from fluidvim.orchestrator.power.attribution import VnfDelta, attribute

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "contract", "vectors", "attribution.json")


def vnf(key, vcpus=1, cpu_s=0.0, busy_s=None, poll_s=None, helper_s=0.0, packets=0):
    return VnfDelta(key=key, name=key, vcpus=vcpus, cpu_s=cpu_s, busy_s=busy_s, poll_s=poll_s,
                    helper_s=helper_s, packets=packets)


# (name, host_watts, idle_watts, dt, host_busy_s, softirq_s, host_rx_packets, host_cpus, rule, vnfs)
CASES = [
    ("three-vnfs-vcpus", 180.0, 100.0, 5.0, 4.0, 0.2, 10000, 2, "vcpus",
     [vnf("near-capacity", cpu_s=2.5, busy_s=2.0, poll_s=0.3, packets=8000),
      vnf("polling", cpu_s=1.0, busy_s=0.05, poll_s=0.9, packets=200),
      vnf("idle", cpu_s=0.01, busy_s=0.0, poll_s=0.0)]),
    ("guest-clock-exceeds-qemu", 150.0, 90.0, 1.0, 1.5, 0.0, 0, 4, "vcpus",
     [vnf("a", cpu_s=0.5, busy_s=0.4, poll_s=0.4)]),
    ("no-stats-answer", 120.0, 80.0, 2.0, 1.0, 0.1, 500, 2, "equal",
     [vnf("a", cpu_s=0.6), vnf("b", vcpus=2, cpu_s=0.2, busy_s=0.1, poll_s=0.05, packets=100)]),
    ("overcommitted-vcpus", 200.0, 100.0, 1.0, 1.0, 0.05, 0, 2, "vcpus",
     [vnf("a", vcpus=2, cpu_s=0.8, busy_s=0.5, poll_s=0.1, packets=50),
      vnf("b", vcpus=2, cpu_s=0.7, busy_s=0.2, poll_s=0.4, helper_s=0.1, packets=150)]),
    # a vhost-user VNF beside a tap one: its backend's CPU (helper_s) is its vhost component and
    # takes part in the scale-down when the VNFs' CPU-seconds exceed the host's busy time
    ("vhost-backend-scaled", 140.0, 60.0, 1.0, 1.0, 0.1, 1500, 2, "vcpus",
     [vnf("vhost-user", cpu_s=0.5, busy_s=0.3, poll_s=0.1, helper_s=0.45, packets=1000),
      vnf("tap", cpu_s=0.3, busy_s=0.1, poll_s=0.15, packets=500)]),
    ("idle-rule-none", 100.0, 60.0, 1.0, 0.5, 0.0, 0, 8, "none",
     [vnf("a", cpu_s=0.2, busy_s=0.1, poll_s=0.05)]),
    ("idle-above-measured", 50.0, 70.0, 1.0, 0.2, 0.0, 0, 2, "vcpus",
     [vnf("a", cpu_s=0.1, busy_s=0.05, poll_s=0.01)]),
    ("idle-host", 90.0, 90.0, 3.0, 0.0, 0.0, 0, 2, "vcpus", [vnf("a")]),
    ("no-vnfs", 110.0, 80.0, 1.0, 0.4, 0.0, 0, 2, "vcpus", []),
]


def vectors() -> dict:
    cases = []
    for name, hw, iw, dt, busy, soft, rx, cpus, rule, vnfs in CASES:
        iv = attribute(hw, iw, "linear", dt, busy, soft, rx, cpus, vnfs, rule)
        cases.append({
            "name": name,
            "in": {"host_watts": hw, "idle_watts": iw, "dt": dt, "host_busy_s": busy,
                   "softirq_s": soft, "host_rx_packets": rx, "host_cpus": cpus, "idle_rule": rule,
                   "vnfs": [{"key": v.key, "vcpus": v.vcpus, "cpu_s": v.cpu_s,
                             "busy_s": v.busy_s or 0.0, "poll_s": v.poll_s or 0.0,
                             "helper_s": v.helper_s, "packets": v.packets} for v in vnfs]},
            "out": {"host_watts": iv.host_watts, "idle_watts": iv.idle_watts,
                    "unattributed_watts": iv.unattributed_watts,
                    "vnfs": {k: {"watts": s.watts, "components": s.components, "cpu_s": s.cpu_s}
                             for k, s in iv.vnfs.items()}}})
    return {"about": "fluidvim.orchestrator.power.attribution.attribute: inputs -> watts "
                     "(tools/gen_power_vectors.py); nomad_driver/unikernel/power.go is checked "
                     "against it", "cases": cases}


def main() -> int:
    text = json.dumps(vectors(), indent=1, sort_keys=True) + "\n"
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            if f.read() != text:
                print(f"{OUT} is stale: run tools/gen_power_vectors.py", file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", os.path.normpath(OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
