# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/generator: what the traffic-generator VNF sustains here, next to the netns load generator.

Issue 23 item 2: load probes in zones where no host namespace reaches the VNF under test use a
generator VNF (the unikernel's FastUDPFlows + TimestampDiff, contract/PROTOCOL.md section 5). This
bench puts a forwarding VNF (the VNF under test, vCPU at the launchers' nice) between the two
bridges of a test network and, for each offered rate, runs one step of the generator VNF
(generator nic0 -> forwarder -> generator nic1) and, with ``--reference``, the same step of
the netns client (``fluidvim.evaluator.loadgen client`` -> forwarder -> UDP echo -> forwarder),
alternately. One JSON line per step: offered and achieved frames/s, sent, refused (generator's TX
ring full: tried again), missed (generator > 200 ms behind its schedule), received, loss,
latency quantiles (ms).

    sudo .venv/bin/python -m bench.generator --rates 1000,5000,10000,20000,40000 --reference

The generator sustains a rate while achieved >= 99 % of offered with no misses. ``--sink``: the
forwarder discards what it gets, so nothing comes back and the steps show the generator's own
sending rate (received 0).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid

from fluidvim.evaluator import loadgen
from fluidvim.vnf import testnet
from fluidvim.vnf.manager import VNFManager, make_conf

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
SINK = "FromDevice(0) -> Discard;\nFromDevice(1) -> Discard;"


def _manager(tmp: str, name: str, run_dir: str, **over) -> VNFManager:
    return VNFManager(make_conf(state_dir=f"{tmp}/{name}", run_dir=f"{run_dir}-{name}",
                                backend="qemu", **over))


def vnf_step(mgr, gen, macs, net, sessions, pps, duration) -> dict:
    """One step of the generator VNF; ``macs`` = (generator nic0, forwarder nic0)."""
    mgr.configure(gen, loadgen.generator_config(
        sessions=sessions, pps=pps, duration=duration, src_mac=macs[0], dst_mac=macs[1],
        src_ip=net.ip_a, dst_ip=net.ip_b))
    time.sleep(duration + 0.5)
    return loadgen.vnf_result(mgr.stats(gen), sessions=sessions, pps=pps, duration=duration)


def netns_step(net, sessions, pps, duration) -> dict:
    r = net.run("a", sys.executable, "-m", "fluidvim.evaluator.loadgen", "client", "--src",
                net.ip_a, "--dst", net.ip_b, "--sessions", str(sessions), "--pps", str(pps),
                "--duration", str(duration), "--proto", "udp", timeout=duration + 60)
    if r.returncode:
        raise RuntimeError(f"loadgen client failed: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _line(kind: str, r: dict) -> str:
    lat = r.get("latency_ms") or {}
    return json.dumps({
        "source": kind, "offered_pps": r["offered_pps"], "achieved_pps": round(r["achieved_pps"]),
        "sent": r["sent"], "refused": r.get("send_errors"), "missed": r.get("missed"),
        "received": r["received"], "loss": round(r["loss"], 4),
        "p50_ms": round(lat.get("0.5", float("nan")), 3), "p99_ms": round(lat.get("0.99", float("nan")), 3)})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.generator", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rates", default="1000,5000,10000,20000,40000",
                   help="offered frames/s in all, comma separated")
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--duration", type=float, default=2.0)
    p.add_argument("--gen-nice", type=int, default=0,
                   help="nice of the generator VNF's vCPU (the forwarder keeps [vnf] vcpu_nice)")
    p.add_argument("--reference", action="store_true",
                   help="also run each step with the netns client (UDP echo)")
    p.add_argument("--sink", action="store_true",
                   help="the forwarder discards what it receives: the generator's own TX rate")
    a = p.parse_args(argv)
    rates = [int(x) for x in a.rates.split(",") if x]
    tmp = tempfile.mkdtemp(prefix="fvgen-")
    run_dir = f"/run/fluidvim-bgen-{uuid.uuid4().hex[:6]}"
    fmgr = _manager(tmp, "fwd", run_dir)
    gmgr = _manager(tmp, "gen", run_dir, vcpu_nice=a.gen_nice)
    echo = None
    try:
        with testnet.TestNet("fvbg", 95) as net:
            fwd = fmgr.launch(SINK if a.sink else FORWARD, nics=net.bridges, slots=4096).vnf_id
            gen = gmgr.launch(FORWARD, nics=net.bridges, slots=4096).vnf_id
            fmacs = [n["mac"] for n in fmgr.stats(fwd)["nics"]]
            gmacs = [n["mac"] for n in gmgr.stats(gen)["nics"]]
            if a.reference:
                echo = net.start_udp_echo()
            for rate in rates:
                pps = rate / a.sessions
                r = vnf_step(gmgr, gen, (gmacs[0], fmacs[0]), net, a.sessions, pps, a.duration)
                print(_line("vnf", r), flush=True)
                if a.reference:
                    print(_line("netns", netns_step(net, a.sessions, pps, a.duration)), flush=True)
    finally:
        if echo is not None:
            testnet.stop(echo)
        for m in (gmgr, fmgr):
            m.destroy_all()
            m.stop_pool()
            m.close()
        for d in (f"{run_dir}-fwd", f"{run_dir}-gen", tmp):
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
