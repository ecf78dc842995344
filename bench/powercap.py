# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/powercap: the latency controller on vs the defaults, on one real VNF, in one run.

One forwarding VNF between two network namespaces; 64-byte frames from ``bench/pktgen.c`` at 10,
50 and 90 % of its capacity (the highest rate it forwards with < 0.1 % loss, found as
``bench/dataplane`` does). For each load, trials alternate
``default`` (the flavor's CPU quota, no controller) and ``controller``
(:class:`~fluidvim.orchestrator.power.controller.LatencyController` on the VNF's real cgroup and
its busy-poll window, stepping every ``--step`` s with the p99 target ``--target-us``),
``--rounds`` times each, order swapped every round. A trial: ``--warmup`` s of traffic (the
controller settles), then ``--measure`` s measured:

* host CPU-seconds of the VNF's QEMU process (``/proc``), per million packets delivered, and the
  watts that is on the linear model (``(max - idle) / CPUs`` per busy CPU);
* one-way latency p50 / p99 at ns b's socket (``pktgen recv``: kernel timestamp minus the
  sender's), loss;
* the VNF's own p99 per step interval (its ``latency_ns`` histogram): intervals over target.

Writes ``bench/results/powercap.json``: ``loads`` keyed ``10``, ``50``, ``90`` with
``cpu_saved_pct`` (controller vs default, host CPU-seconds per Mpkt) and
``intervals_within_target_pct`` (controller trials), each mode's medians, every trial; and
``attribution_error_pct`` (the worst VNF of ``bench/results/attribution.json``). Not a test: no
thresholds. Needs root, gcc, the kernel, and CPU quotas (cgroup v1 or v2)::

    sudo .venv/bin/python -m bench.powercap                 # ~4 min
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench.dataplane import CHAINS, Path, build_pktgen
from fluidvim.orchestrator.power import ProcReader
from fluidvim.orchestrator.power.attribution import CLK_TCK
from fluidvim.orchestrator.power.controller import (
    POLL_DEFAULT_US,
    LatencyController,
    interval_p99,
)
from fluidvim.vnf import cgroups, limits
from fluidvim.vnf.manager import VNFManager, make_conf
from fluidvim.vnf.testnet import TestNet

HERE = os.path.dirname(os.path.abspath(__file__))
LOADS = (10, 50, 90)


def trial(mgr, vnf_id, uid, path: Path, pps: float, mode: str, args, ctl) -> dict:
    n = path.net
    proc = ProcReader()
    pid = mgr.get(vnf_id).pid
    if mode == "default":                           # the flavor's quota, the 1 ms poll window
        cgroups.set_cpu_quota(uid, limits.CPU_PERIOD_US)
        set_window(mgr, vnf_id, POLL_DEFAULT_US)
    elif uid in ctl.state:                          # the controller's own, as it left them
        cgroups.set_cpu_quota(uid, ctl.state[uid].quota_us)
        ctl.state[uid].poll_applied = set_window(mgr, vnf_id, ctl.state[uid].poll_us)
    secs = args.warmup + args.measure
    tx = n.popen("a", path.pktgen, "send", f"{n.prefix}ap", path.mac_b, n.ip_a, n.ip_b, "9",
                 "60", str(int(pps)), str(secs), stdout=subprocess.PIPE,
                 stderr=subprocess.DEVNULL, text=True)
    t_end = time.monotonic() + args.warmup

    def stats():
        try:
            return mgr.stats(vnf_id)
        except Exception:          # noqa: BLE001 - a VNF that does not answer: the controller
            return None            # releases; the bench records it

    while time.monotonic() < t_end:                 # warm-up: the controller settles
        if ctl is not None:
            ctl.step(uid, "vnf", args.target_us, 1, stats())
        time.sleep(args.step)
    rx = n.popen("b", path.pktgen, "recv", n.ip_b, "9", str(args.measure), stdout=subprocess.PIPE,
                 text=True)
    rx.stdout.readline()                            # "ready"
    c0, r0, t0 = proc.process_ticks(pid), path.rx_packets(), time.monotonic()
    st = stats()
    b_prev = (st or {}).get("latency_ns", {}).get("buckets_log2")
    p99s, quotas = [], []
    while time.monotonic() - t0 < args.measure - args.step / 2:
        time.sleep(args.step)
        st = stats()
        if ctl is not None:
            quotas.append(ctl.step(uid, "vnf", args.target_us, 1, st)["quota_us"])
        b = (st or {}).get("latency_ns", {}).get("buckets_log2")
        if b is not None and b_prev is not None:
            p, cnt = interval_p99(b_prev, b)
            if cnt:
                p99s.append(p)
        b_prev = b
    c1, r1, t1 = proc.process_ticks(pid), path.rx_packets(), time.monotonic()
    lat = json.loads(rx.stdout.readline() or "{}")
    rx.wait(30)
    sent = json.loads(tx.communicate(timeout=60)[0] or "{}")
    cpu_s = (c1 - c0) / CLK_TCK
    pkts = r1 - r0
    target_ns = args.target_us * 1000
    return {"mode": mode, "offered_pps": round(pps), "delivered_pps": round(pkts / (t1 - t0)),
            "sent_pps": round(sent.get("pps", 0)),
            "loss": round(max(0.0, 1 - pkts / (t1 - t0) / sent["pps"]), 5) if sent.get("pps")
            else None,
            "cpu_s": round(cpu_s, 3), "cpu_s_per_mpkt": round(cpu_s / max(1, pkts) * 1e6, 3),
            "lat_p50_us": lat.get("lat_p50_us"), "lat_p99_us": lat.get("lat_p99_us"),
            "vnf_p99_ns": p99s, "intervals": len(p99s),
            "intervals_within_target": sum(1 for p in p99s if p <= target_ns),
            "quota_us": quotas,
            "poll_window_us": ctl.state[uid].poll_us if ctl is not None and uid in ctl.state
            else POLL_DEFAULT_US}


def set_window(mgr, vnf_id, us: int) -> int:
    with mgr.channel(vnf_id) as ch:
        return ch.poll(us)["window_us"]


def median(trials, key):
    vals = [t[key] for t in trials if t.get(key) is not None]
    return round(statistics.median(vals), 3) if vals else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target-us", type=float, default=100.0,
                    help="p99 target of the VNF's own latency (us)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--measure", type=float, default=6.0)
    ap.add_argument("--step", type=float, default=0.5, help="controller interval (s)")
    ap.add_argument("--idle-watts", type=float, default=40.0)
    ap.add_argument("--max-watts", type=float, default=140.0)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "powercap.json"))
    ap.add_argument("--state-dir", default="/var/lib/fluidvim-bench-powercap")
    ap.add_argument("--run-dir", default="/run/fluidvim-bench-powercap")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (namespaces, bridges, taps, cgroups)", file=sys.stderr)
        return 2
    version, why = cgroups.mode()
    if not version:
        print(f"no CPU quota to control here: {why}", file=sys.stderr)
        return 2
    pktgen = build_pktgen("/tmp")
    t_start = time.time()
    with open("/proc/loadavg") as f:
        load0 = f.read().split()[:3]
    mgr = VNFManager(make_conf(state_dir=args.state_dir, run_dir=args.run_dir))
    results = {}
    with TestNet("pcp", 90) as net:
        res = mgr.launch(CHAINS["forward"], name="powercap", nics=net.bridges, warm=False)
        try:
            net.ping(1)
            uid = mgr.get(res.vnf_id).spec.uuid
            path = Path("vnf", net, pktgen, lambda: mgr.stats(res.vnf_id))
            # capacity = the highest 64-byte rate delivered with < 0.1 % loss (bench/dataplane's
            # search: a blast, lower rates, two bisection steps)
            cap = max(1000, path.rate_search("60")["pps"])
            print(f"capacity (no-loss 64 B rate): {cap} pps; p99 target {args.target_us:g} us",
                  flush=True)
            for load in LOADS:
                pps = cap * load / 100
                ctl = LatencyController(
                    cgroups.set_cpu_quota, hold_intervals=2, min_packets=20,
                    poller=lambda k, us: set_window(mgr, res.vnf_id, us))
                trials = []
                for r in range(args.rounds):
                    for mode in (("default", "controller") if r % 2 == 0 else
                                 ("controller", "default")):
                        t = trial(mgr, res.vnf_id, uid, path, pps, mode, args,
                                  ctl if mode == "controller" else None)
                        trials.append(t)
                        print(f"  {load} %: {mode:<10} {t['delivered_pps']} pps, "
                              f"{t['cpu_s_per_mpkt']} CPU-s/Mpkt, p50/p99 "
                              f"{t['lat_p50_us']}/{t['lat_p99_us']} us, loss "
                              f"{100 * t['loss']:.2f} %, within target "
                              f"{t['intervals_within_target']}/{t['intervals']}"
                              + (f", quota {t['quota_us'][-1]}, poll window "
                                 f"{t['poll_window_us']} us" if t["quota_us"] else ""),
                              flush=True)
                cgroups.set_cpu_quota(uid, limits.CPU_PERIOD_US)
                modes = {}
                for mode in ("default", "controller"):
                    ts = [t for t in trials if t["mode"] == mode]
                    n_iv = sum(t["intervals"] for t in ts)
                    modes[mode] = {
                        "cpu_s_per_mpkt": median(ts, "cpu_s_per_mpkt"),
                        "lat_p50_us": median(ts, "lat_p50_us"),
                        "lat_p99_us": median(ts, "lat_p99_us"),
                        "loss": median(ts, "loss"), "delivered_pps": median(ts, "delivered_pps"),
                        "intervals_within_target_pct": round(
                            100 * sum(t["intervals_within_target"] for t in ts) / n_iv, 1)
                        if n_iv else None}
                    per_cpu_w = (args.max_watts - args.idle_watts) / (os.cpu_count() or 1)
                    if modes[mode]["cpu_s_per_mpkt"] is not None:
                        # joules per Mpkt = CPU-s per Mpkt x W per busy CPU
                        modes[mode]["joules_per_mpkt"] = round(
                            modes[mode]["cpu_s_per_mpkt"] * per_cpu_w, 2)
                d, c = modes["default"]["cpu_s_per_mpkt"], modes["controller"]["cpu_s_per_mpkt"]
                results[str(load)] = {
                    "offered_pps": round(pps),
                    "cpu_saved_pct": round(100 * (1 - c / d), 1) if d and c is not None else None,
                    "intervals_within_target_pct":
                        modes["controller"]["intervals_within_target_pct"],
                    "default": modes["default"], "controller": modes["controller"],
                    "trials": trials}
        finally:
            mgr.destroy(res.vnf_id)
            mgr.close()
    try:
        with open(os.path.join(HERE, "results", "attribution.json")) as f:
            attribution_err = json.load(f).get("fluidvim_worst_abs_err_pct")
    except (OSError, ValueError):
        attribution_err = None
    with open("/proc/loadavg") as f:
        load1 = f.read().split()[:3]
    doc = {"bench": "powercap", "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t_start)),
           "capacity_pps": cap, "target_us": args.target_us, "args": vars(args),
           "host": {"cpus": os.cpu_count(), "cgroup": version, "loadavg_before": load0,
                    "loadavg_after": load1},
           "loads": results, "attribution_error_pct": attribution_err,
           "seconds": round(time.time() - t_start, 1)}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\n{'load':>4} {'CPU-s/Mpkt def':>14} {'ctl':>7} {'saved':>7} {'p99 us def':>10} "
          f"{'ctl':>7} {'within target':>13} {'loss def':>8} {'ctl':>6}")
    for load in LOADS:
        r = results[str(load)]
        dm, cm = r["default"], r["controller"]
        print(f"{load:>3}% {dm['cpu_s_per_mpkt']:>14} {cm['cpu_s_per_mpkt']:>7} "
              f"{r['cpu_saved_pct']:>6}% {dm['lat_p99_us']:>10} {cm['lat_p99_us']:>7} "
              f"{r['intervals_within_target_pct']:>12}% {dm['loss']:>8} {cm['loss']:>6}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
