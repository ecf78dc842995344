# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``python -m fluidvim.orchestrator.power``: which source wins here, and what it says.

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too.
"""

from __future__ import annotations

from oslo_config import cfg

from .chain import build_chain, register_opts
from .models import PowerError, library
from .sources import sample_vnf_power

EXAMPLES = """examples:
  # which power source works on this host, and why the others do not
  python -m fluidvim.orchestrator.power --config-file /etc/fluidvim/fluidvim.conf
  # a SPECpower curve by system id: watts at 0, 50 and 100 % CPU
  python -m fluidvim.orchestrator.power --system-id spec0120 --at 0 0.5 1
  # per-VNF power of two QEMU processes over 2 s (host power by the winning source)
  python -m fluidvim.orchestrator.power --system-id spec0120 --attribute 4242 4343 --interval 2
  # search the curve library
  python -m fluidvim.orchestrator.power --find 'PowerEdge R640'
  # frequency probing: the lowest scaling_max_freq of CPUs 2,3 at which VNF fw's forwarding
  # (its NICs' tx over 3 s, traffic running) stays within 2 % (a host without cpufreq says so)
  python -m fluidvim.orchestrator.power --freq-probe fw --cpus 2 3 --tolerance 0.02
"""


def main(argv=None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m fluidvim.orchestrator.power",
                                 description="Host power models of fluidvim: the [power] fallback "
                                             "chain, P(u), per-VNF attribution.",
                                 epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config-file", help="oslo.config file with a [power] section")
    ap.add_argument("--system-id", help="use this row of the curve library (overrides the config)")
    ap.add_argument("--at", type=float, nargs="+", metavar="U", help="print watts at utilisations U (0..1)")
    ap.add_argument("--attribute", type=int, nargs="+", metavar="PID",
                    help="attribute host power to these processes (QEMU VNFs) over --interval")
    ap.add_argument("--interval", type=float, default=1.0, help="attribution interval (s)")
    ap.add_argument("--find", metavar="TEXT", help="list library systems whose vendor/model/cpu contain TEXT")
    ap.add_argument("--freq-probe", metavar="VNF", help="step the CPUs' scaling_max_freq down "
                    "while this VNF's throughput holds; keep the lowest")
    ap.add_argument("--cpus", type=int, nargs="+", help="CPUs to cap (default: all)")
    ap.add_argument("--tolerance", type=float, default=0.02, help="throughput loss allowed")
    ap.add_argument("--measure-s", type=float, default=3.0, help="throughput window (s)")
    args = ap.parse_args(argv)
    if args.freq_probe:
        return _freq_probe(args)
    if args.find is not None:
        lib = library(None)
        needle = args.find.lower()
        for sid in lib.ids():
            r = lib.rows[sid]
            text = f"{r['vendor']} {r['model']} {r['cpu']}"
            if needle in text.lower():
                print(f"{sid}  {text}  threads={r['threads']}  {r['w_0']}-{r['w_100']} W")
        return 0
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf([] if not args.config_file else ["--config-file", args.config_file], project="fluidvim",
         default_config_files=[])
    try:
        res = build_chain(conf, system_id=args.system_id)
    except PowerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(res.report())
    for u in args.at or ():
        try:
            print(f"P({u:g}) = {res.model.watts(u):.1f} W")
        except PowerError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    if args.attribute:
        try:
            out = sample_vnf_power(res.model, args.attribute, args.interval, conf.power.proc_root)
        except PowerError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        for pid, v in out.items():
            print(f"pid {pid}: {v.watts:.2f} W ({100 * v.share:.1f} % of host CPU time; host "
                  f"{v.host_watts:.1f} W at u={v.host_util:.3f})")
    return 0


def _freq_probe(args) -> int:
    import json
    import sys
    import time

    from fluidvim.vnf.manager import VNFManager, make_conf

    from .freq import CpuFreq, probe

    cf = CpuFreq(cpus=args.cpus)
    why = cf.why_not()
    if why:
        print(json.dumps({"acted": False, "reason": why}))
        return 0
    mgr = VNFManager(make_conf([] if not args.config_file else ["--config-file", args.config_file]))

    def tx():
        return sum(n["tx"] for n in mgr.stats(args.freq_probe)["nics"])

    def measure():
        t0, c0 = time.monotonic(), tx()
        time.sleep(args.measure_s)
        return (tx() - c0) / (time.monotonic() - t0)

    try:
        res = probe(cf, measure, tolerance=args.tolerance)
    except PowerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        mgr.close()
    print(json.dumps(res.to_dict()))
    return 0

