#!/usr/bin/env python3
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Write contract/vectors/pool.json: the warm-pool conformance vectors of contract/PROTOCOL.md §6.

Both launchers run them: the Python launch core (tests/unit/test_pool_contract.py, against
fluidvim.vnf.pool, which vnf/manager.py builds on) and the Go Nomad driver
(nomad_driver/unikernel/contract_test.go, against pool_contract.go's functions).

* ``kernel_identity``: file content (UTF-8 text) -> kernel id;
* ``pool_key``: a launch's shape -> its pool key; ``stale``: whether a ready shell's key is the
  same shape with another kernel (the shell is removed, never claimed);
* ``transitions``: every (state, event) pair that can happen and the state after it; every other
  pair is refused;
* ``claim``: a shell's NICs and a launch's requested MACs/taps -> the ``configure`` line the claim
  sends (request id 7) and the NICs the VNF then has;
* ``queuing_delay``: launch history (newest first, failed launches included) and ready shells ->
  the queuing delay in ms (null: no sample yet), its basis and sample count.

`pytest tests/unit/test_pool_contract.py` fails when this file is stale (``--check``).
"""

import json
import os
import sys

from fluidvim.common.zonetypes import NicRequest
from fluidvim.vnf import control, limits, pool, spec as specmod

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contract", "vectors", "pool.json")

FWD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
SHELL = [{"tap": "fv0123456789n0", "mac": "52:54:00:0a:0b:01"},
         {"tap": "fv0123456789n1", "mac": "52:54:00:0a:0b:02"}]


def kernel_identity():
    out = []
    for content in ("", "fluidvim", "fluidvim\n", "\x7fELF" + "x" * 5000):
        out.append({"content": content, "id": _id_of(content)})
    return out


def _id_of(content: str) -> str:
    import hashlib

    return hashlib.sha256(content.encode()).hexdigest()[:pool.KERNEL_ID_LEN]


def pool_keys():
    kid = _id_of("fluidvim")
    shapes = [("qemu", kid, 32, 1, 2, limits.FLOW_TIMEOUT_MS_DEFAULT),
              ("qemu", kid, 64, 2, 0, 5000),
              ("libvirt", kid, 32, 1, 4, limits.FLOW_TIMEOUT_MS_DEFAULT),
              ("qemu", _id_of(""), limits.MEMORY_MB_MAX, limits.VCPUS_MAX, limits.MAX_NICS,
               limits.FLOW_TIMEOUT_MS_MAX)]
    return [{"backend": b, "kernel_id": k, "memory_mb": m, "vcpus": c, "nics": n,
             "flow_timeout_ms": t, "key": pool.pool_key(b, k, m, c, n, t)}
            for b, k, m, c, n, t in shapes]


def stale():
    a = pool.pool_key("qemu", _id_of("fluidvim"), 32, 1, 2)
    cases = [(a, pool.pool_key("qemu", _id_of("other"), 32, 1, 2)),
             (a, a),
             (a, pool.pool_key("qemu", _id_of("other"), 32, 1, 3)),
             (a, pool.pool_key("libvirt", _id_of("other"), 32, 1, 2)),
             (a, pool.pool_key("qemu", _id_of("other"), 32, 1, 2, 5000))]
    return [{"key": k, "other": o, "stale": pool.same_shape_other_kernel(k, o)} for k, o in cases]


def transitions():
    states = [pool.BOOTING, pool.READY, pool.CLAIMED, pool.RUNNING, pool.REMOVED]
    out = []
    for s in states:
        for e in pool.EVENTS:
            try:
                out.append({"from": s, "event": e, "to": pool.transition(s, e)})
            except pool.TransitionError:
                out.append({"from": s, "event": e, "to": None})
    return out


def claims():
    cases = [
        ("no MACs, no taps", None, None),
        ("one MAC", ["fa:16:3e:12:34:56", None], None),
        ("both MACs", ["fa:16:3e:12:34:56", "fa:16:3e:65:43:21"], None),
        ("all None = none", [None, None], None),
        ("taps only", None, ["tapfw0001", None]),
        ("MAC and tap", [None, "fa:16:3e:00:00:02"], ["tapfw0001", "tapfw0002"]),
    ]
    out = []
    for name, macs, taps in cases:
        # the vectors keep the wire's per-field lists; the launch core takes one request a NIC
        requests = [NicRequest(mac=m, tap=t) for m, t in zip(macs or [None] * len(SHELL),
                                                             taps or [None] * len(SHELL))]
        configure_macs, nics = pool.claim_nics([specmod.NicSpec(**n) for n in SHELL], requests)
        line = control.encode_request(7, "configure", config=FWD, slots=64, macs=configure_macs)
        out.append({"name": name, "shell_nics": SHELL, "macs": macs, "taps": taps,
                    "configure_macs": configure_macs, "configure_line": line.decode(),
                    "nics": nics})
    return out


def queuing():
    def h(*items):
        return [{"kind": k, "ok": ok, "total_ms": ms} for k, ok, ms in items]

    cases = [
        ("nothing yet", 0, [], limits.LAUNCH_HISTORY_DEFAULT),
        ("cold odd", 0, h(("cold", True, 80.0), ("cold", True, 60.0), ("cold", True, 70.0)),
         limits.LAUNCH_HISTORY_DEFAULT),
        ("cold even: mean of the middle two", 0,
         h(("cold", True, 80.0), ("cold", True, 60.0), ("cold", True, 70.0), ("cold", True, 90.0)),
         limits.LAUNCH_HISTORY_DEFAULT),
        ("failed launches do not count", 0,
         h(("cold", False, 5.0), ("cold", True, 60.0), ("cold", False, 1.0)),
         limits.LAUNCH_HISTORY_DEFAULT),
        ("a ready shell: warm history", 2,
         h(("warm", True, 2.5), ("cold", True, 60.0), ("warm", True, 3.5)),
         limits.LAUNCH_HISTORY_DEFAULT),
        ("a ready shell but no warm launch yet: none", 1, h(("cold", True, 60.0)),
         limits.LAUNCH_HISTORY_DEFAULT),
        ("no shell: cold history even when warm launches are newer", 0,
         h(("warm", True, 2.0), ("warm", True, 2.0), ("cold", True, 70.0)),
         limits.LAUNCH_HISTORY_DEFAULT),
        ("only the newest window launches", 0,
         h(("cold", True, 10.0), ("cold", True, 20.0), ("cold", True, 30.0),
           ("cold", True, 1000.0), ("cold", True, 2000.0)), 3),
    ]
    out = []
    for name, shells, history, window in cases:
        by_kind = {}
        for r in history:
            if r["ok"]:
                by_kind.setdefault(r["kind"], []).append(r["total_ms"])
        qd = pool.queuing_delay(shells, by_kind, window)
        ms = None if qd["seconds"] is None else round(qd["seconds"] * 1000.0, 6)
        out.append({"name": name, "ready_shells": shells, "history": history, "window": window,
                    "ms": ms, "basis": qd["basis"], "samples": qd["samples"]})
    return out


def vectors() -> dict:
    return {"version": 1, "kernel_id_len": pool.KERNEL_ID_LEN,
            "refill_backoff_s": pool.REFILL_BACKOFF_S,
            "launch_history": limits.LAUNCH_HISTORY_DEFAULT,
            "kernel_identity": kernel_identity(), "pool_key": pool_keys(), "stale": stale(),
            "transitions": transitions(), "claim": claims(), "queuing_delay": queuing()}


def main():
    text = json.dumps(vectors(), indent=2) + "\n"
    if "--check" in sys.argv:
        try:
            with open(OUT) as f:
                sys.exit(0 if f.read() == text else 1)
        except FileNotFoundError:
            sys.exit(1)
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
