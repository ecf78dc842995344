# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/sol006: what checking descriptors against ETSI's SOL006 YANG costs.

Measures, in one process: importing the module and loading the schema (once per process), the
structure/type check of fluidvim's OSM IM samples (etc/mano), and the full SOL006 validation of
ETSI's example files (converted from XML), per file, first call and median of the next ones; then
the whole ``plan_files`` of the sample chain (YANG + fluidvim's checks + mapping).

Example::

    .venv/bin/python -m bench.sol006            # ~5 s; prints a table, writes nothing

Not a test: no thresholds.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(REPO, "etc", "mano")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=30, help="runs per measurement (default 30)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    from fluidvim.orchestrator.mano import descriptors as d, sol006
    t1 = time.perf_counter()
    sol006.data_model()
    t2 = time.perf_counter()
    print(f"SOL006 {sol006.ETSI_VERSION} with yangson: import {1000 * (t1 - t0):.0f} ms, "
          f"schema load (once per process) {1000 * (t2 - t1):.0f} ms")

    def median_ms(fn):
        ts = []
        for _ in range(args.repeat):
            a = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - a)
        return 1000 * statistics.median(ts)

    for rel, kind in (("firewall_vnf/firewall_vnfd.yaml", "vnfd"),
                      ("forwarder_vnf/forwarder_vnfd.yaml", "vnfd"),
                      ("fw_chain_ns/fw_chain_nsd.yaml", "nsd")):
        with open(os.path.join(SAMPLES, rel), encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        ms = median_ms(lambda kind=kind, doc=doc: sol006.check_document(
            kind, copy.deepcopy(doc[kind]), False, kind))
        print(f"  OSM IM {rel:<36} structure+types  {ms:7.2f} ms")

    for name in ("nfv-vnfd.xml", "complex-vnfd.xml", "nfv-nsd.xml", "nfv.xml", "nfv-pnfd.xml"):
        key, raw = sol006.xml_to_raw(os.path.join(sol006.ETSI_DIR, "example-data", name))

        def run(key=key, raw=raw, name=name):
            c = d._Checker()
            parts = d.split(d.Document(copy.deepcopy({key: raw}), name))
            for kind, x in parts:
                c.yang_check(x, kind)
            c.yang_tree(next((x for k, x in parts if k == "nsd"), None),
                        [x for k, x in parts if k == "vnfd"], [x for k, x in parts if k == "pnfd"])
            assert not c.yang, c.yang
            return len(parts)

        a = time.perf_counter()
        n = run()
        first = 1000 * (time.perf_counter() - a)
        print(f"  SOL006 {name:<17} {n} descriptor(s), full validation: first {first:6.1f} ms, "
              f"then {median_ms(run):6.1f} ms")

    kernel = os.path.join(REPO, "unikernel", "build", "fluidvim-vnf.elf")
    if os.path.exists(kernel):
        ms = median_ms(lambda: d.plan_files(os.path.join(SAMPLES, "fw_chain_ns",
                                                         "fw_chain_nsd.yaml"), [SAMPLES]))
        print(f"  plan_files(etc/mano chain): {ms:.1f} ms (load, YANG, fluidvim's checks, mapping)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
