# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/attribution: per-VNF power, the CPU-time-ratio method (Kepler's) against fluidvim's
attribution by useful work, side by side in one run on three real VNFs.

    loaded   forwards 64-byte frames from bench/pktgen.c at ~90 % of what a blast gets through
    polling  forwards a few hundred frames/s: busy a few %, polling after every frame
    idle     no traffic (it only answers `stats`)

Each VNF runs the forwarding chain between two network namespaces (vnf/testnet.py); the host's
power comes from the [power] chain (here: no RAPL, no BMC, so the linear model of ``--idle-watts``
/ ``--max-watts``, whose name every figure carries).

**Ground truth** per VNF and interval, from the host's and the VNFs' own accounting:
``c * (its QEMU process's CPU-seconds + its vhost backend's + the softirq seconds its traffic
caused) + its idle share``, with ``c = (W - W_idle) / host busy CPU-seconds`` and the idle share
by the documented rule (``[power] idle_rule``, vcpus). The softirq its traffic caused is measured,
not assumed: before the comparison, each loaded VNF's traffic runs alone, and the host's softirq
time above the no-traffic baseline divided by the VNF's packets is that path's softirq cost per
packet; in the comparison a VNF's softirq is its packets times its own cost.

**fluidvim** is :class:`~fluidvim.orchestrator.power.Attributor`, the exporter's arithmetic, as it
runs in production: softirq shared by packet share (no solo runs), busy / poll / QEMU from the
VNF's `stats` and /proc. **ratio** is ``W * QEMU CPU / host busy`` (the whole host's watts by CPU
time, :func:`~fluidvim.orchestrator.power.attribute_watts`); **ratio_dyn** the same of the dynamic
watts only (``attribute_watts(idle_w=...)``: idle power charged to nobody). Error = (method -
truth) / truth, per interval; the JSON keeps every interval, the table the mean and the worst.

Writes ``bench/results/attribution.json``. Not a test: no thresholds. Needs root, gcc and the
kernel (``make -C unikernel``)::

    sudo .venv/bin/python -m bench.attribution                  # ~2.5 min
    sudo .venv/bin/python -m bench.attribution --interval 2 --intervals 10 --poll-pps 300
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
from fluidvim.orchestrator import power
from fluidvim.orchestrator.power import attribution as att
from fluidvim.vnf.manager import VNFManager, make_conf
from fluidvim.vnf.testnet import TestNet

HERE = os.path.dirname(os.path.abspath(__file__))
ROLES = ("loaded", "polling", "idle")


class Traffic:
    """pktgen sending 64-byte frames a -> b through one VNF, in the background."""

    def __init__(self, path: Path, pps: float, secs: float):
        n = path.net
        self.proc = n.popen("a", path.pktgen, "send", f"{n.prefix}ap", path.mac_b, n.ip_a, n.ip_b,
                            "9", "60", str(int(pps)), str(secs), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)

    def wait(self) -> dict:
        out, _ = self.proc.communicate(timeout=120)
        try:
            return json.loads(out)
        except ValueError:
            return {}


class Bench:
    def __init__(self, args, mgr, vnfs: dict, paths: dict, pktgen: str):
        self.args, self.mgr, self.vnfs, self.paths, self.pktgen = args, mgr, vnfs, paths, pktgen
        conf = mgr.conf
        power.register_opts(conf)
        conf.set_override("sources", ["linear"], group="power")
        conf.set_override("idle_watts", args.idle_watts, group="power")
        conf.set_override("max_watts", args.max_watts, group="power")
        self.chain = power.build_chain(conf)
        self.att = att.Attributor(self.chain.model, self.chain.source,
                                  idle_rule=args.idle_rule)

    def read(self):
        host = self.att.read_host()
        out = []
        for role, res in self.vnfs.items():
            rec = self.mgr.get(res.vnf_id)
            try:
                st = self.mgr.stats(res.vnf_id)
            except Exception:     # noqa: BLE001 - a VNF that does not answer is still read
                st = None
            out.append(self.att.vnf_counters(role, role, rec.pid, st, vcpus=rec.spec.vcpus))
        return host, out

    def window(self, secs: float, interval: float, traffic: dict) -> list:
        """Run ``traffic`` (role -> pps) for ``secs`` and read every ``interval`` s: a list of
        (host0, vnfs0, host1, vnfs1, fluidvim Interval) per interval."""
        gens = [Traffic(self.paths[r], pps, secs + 1.0) for r, pps in traffic.items()]
        time.sleep(0.5)                             # generators up
        prev = self.read()
        self.att.sample(*prev)                      # the attributor's baseline
        rows = []
        t_end = time.monotonic() + secs - 0.5
        while time.monotonic() + interval <= t_end + 1e-6:
            time.sleep(interval)
            cur = self.read()
            iv = self.att.sample(*cur)
            rows.append((prev, cur, iv))
            prev = cur
        for g in gens:
            g.wait()
        return rows


def deltas(a: att.Attributor, prev, cur) -> dict:
    """Per role: the VnfDelta between two reads (restart handling as in production)."""
    (_, v0), (_, v1) = prev, cur
    p = {v.key: v for v in v0}
    return {v.key: a._delta(p.get(v.key), v) for v in v1}


def host_delta(prev, cur) -> tuple[float, float, float]:
    (h0, _), (h1, _) = prev, cur
    tck = att.CLK_TCK
    return (h1.t - h0.t, (h1.busy_ticks - h0.busy_ticks) / tck,
            (h1.softirq_ticks - h0.softirq_ticks) / tck)


def softirq_costs(bench: Bench, args) -> dict:
    """Softirq seconds per packet of each loaded path: its traffic alone, minus the host's
    softirq rate without traffic measured just before and after (other work on the host moves
    it), ``--calib-rounds`` times alternated; the median of the rounds."""
    def rate(traffic):
        rows = bench.window(args.solo_s, args.solo_s - 1.0, traffic)
        dt, _, soft = host_delta(rows[0][0], rows[-1][1])
        return dt, soft, deltas(bench.att, rows[0][0], rows[-1][1])

    per = {"loaded": [], "polling": []}
    pps = {"loaded": [], "polling": []}
    base = []
    dt, soft, _ = rate({})
    before = soft / dt
    for _ in range(args.calib_rounds):
        for role, offered in (("loaded", bench.load_pps), ("polling", args.poll_pps)):
            dt, soft, d = rate({role: offered})
            dtb, softb, _ = rate({})
            after = softb / dtb
            base.append(after)
            pkts = d[role].packets
            per[role].append(max(0.0, soft - dt * (before + after) / 2) / pkts if pkts else 0.0)
            pps[role].append(pkts / dt)
            before = after
    out = {role: statistics.median(v) for role, v in per.items()}
    out.update({f"{role}_rounds": [round(x, 9) for x in v] for role, v in per.items()})
    out.update({f"{role}_packets_per_s": round(statistics.fmean(v)) for role, v in pps.items()})
    out["baseline_softirq_s_per_s"] = [round(x, 5) for x in base]
    return out


def truth_and_ratio(bench: Bench, prev, cur, iv, costs: dict) -> dict:
    dt, busy_s, soft_s = host_delta(prev, cur)
    d = deltas(bench.att, prev, cur)
    w, w0 = iv.host_watts, iv.idle_watts
    price = (w - w0) / busy_s if busy_s > 0 else 0.0
    idle = att.idle_shares(w0, d.values(), bench.att.host_cpus, bench.args.idle_rule)
    out = {}
    ratio = att.ratio_watts(w, busy_s, {k: v.cpu_s for k, v in d.items()})
    # the ratio with idle power held back (attribute_watts' idle_w): dynamic watts by CPU time
    ratio_dyn = att.ratio_watts(w - w0, busy_s, {k: v.cpu_s for k, v in d.items()})
    for role, v in d.items():
        soft = costs.get(role, 0.0) * v.packets if role in ("loaded", "polling") else 0.0
        truth = price * (v.cpu_s + v.helper_s + soft) + idle[role]
        fv = iv.vnfs[role]
        out[role] = {"truth_w": truth, "fluidvim_w": fv.watts, "ratio_w": ratio[role],
                     "fluidvim_err": (fv.watts - truth) / truth if truth > 0 else None,
                     "ratio_err": (ratio[role] - truth) / truth if truth > 0 else None,
                     "ratio_dyn_w": ratio_dyn[role],
                     "ratio_dyn_err": (ratio_dyn[role] - truth) / truth if truth > 0 else None,
                     "busy_w": fv.components["busy"], "poll_w": fv.components["poll"],
                     "host_side_w": fv.host_side_watts, "idle_w": fv.components["idle"],
                     "softirq_truth_s": soft, "softirq_fluidvim_s": fv.cpu_s["softirq"],
                     "qemu_cpu_s": v.cpu_s, "busy_s": v.busy_s, "poll_s": v.poll_s,
                     "packets": v.packets, "source": fv.source}
    return {"dt_s": dt, "host_watts": w, "idle_watts": w0, "host_busy_s": busy_s,
            "softirq_s": soft_s, "unattributed_w": iv.unattributed_watts,
            "conservation_gap": iv.check(0.01), "vnfs": out}


def summarise(intervals: list) -> dict:
    out = {}
    for role in ROLES:
        rows = [iv["vnfs"][role] for iv in intervals]

        def mean(k, rows=rows):
            vals = [r[k] for r in rows if r[k] is not None]
            return statistics.fmean(vals) if vals else None

        fe = [abs(r["fluidvim_err"]) for r in rows if r["fluidvim_err"] is not None]
        re_ = [r["ratio_err"] for r in rows if r["ratio_err"] is not None]
        out[role] = {k: (round(mean(k), 4) if mean(k) is not None else None)
                     for k in ("truth_w", "fluidvim_w", "ratio_w", "ratio_dyn_w", "busy_w", "poll_w",
                               "host_side_w", "idle_w", "qemu_cpu_s", "busy_s", "poll_s")}
        loop = [(r["busy_s"], r["poll_s"]) for r in rows if r["busy_s"] is not None]
        out[role]["busy_share_of_qemu_cpu"] = round(
            sum(b for b, _ in loop) / max(1e-9, sum(r["qemu_cpu_s"] for r in rows)), 4)
        out[role]["packets_per_s"] = round(sum(r["packets"] for r in rows) /
                                           sum(iv["dt_s"] for iv in intervals))
        out[role]["fluidvim_err_pct"] = round(100 * statistics.fmean(
            [r["fluidvim_err"] for r in rows if r["fluidvim_err"] is not None]), 2)
        out[role]["fluidvim_abs_err_pct_worst"] = round(100 * max(fe), 2) if fe else None
        out[role]["ratio_err_pct"] = round(100 * statistics.fmean(re_), 2) if re_ else None
        rd = [r["ratio_dyn_err"] for r in rows if r["ratio_dyn_err"] is not None]
        out[role]["ratio_dyn_err_pct"] = round(100 * statistics.fmean(rd), 2) if rd else None
        out[role]["ratio_abs_err_pct_worst"] = (round(100 * max(abs(x) for x in re_), 2)
                                                if re_ else None)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval", type=float, default=2.0, help="attribution interval (s)")
    ap.add_argument("--intervals", type=int, default=8, help="intervals compared")
    ap.add_argument("--load-frac", type=float, default=0.9,
                    help="loaded VNF's offered rate, a fraction of what a blast gets through")
    ap.add_argument("--poll-pps", type=float, default=400, help="polling VNF's offered rate")
    ap.add_argument("--solo-s", type=float, default=5.0, help="each softirq calibration run (s)")
    ap.add_argument("--calib-rounds", type=int, default=3, help="softirq calibration rounds")
    ap.add_argument("--idle-watts", type=float, default=40.0, help="linear model: W at idle")
    ap.add_argument("--max-watts", type=float, default=140.0, help="linear model: W at 100 %%")
    ap.add_argument("--idle-rule", default="vcpus", choices=att.IDLE_RULES)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "attribution.json"))
    ap.add_argument("--state-dir", default="/var/lib/fluidvim-bench-attribution")
    ap.add_argument("--run-dir", default="/run/fluidvim-bench-attribution")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (namespaces, bridges, taps)", file=sys.stderr)
        return 2
    pktgen = build_pktgen("/tmp")
    t0 = time.time()
    with open("/proc/loadavg") as f:
        load0 = f.read().split()[:3]
    mgr = VNFManager(make_conf(state_dir=args.state_dir, run_dir=args.run_dir))
    nets = {"loaded": TestNet("atl", 91), "polling": TestNet("atp", 92)}
    vnfs, paths = {}, {}
    try:
        for role, net in nets.items():
            net.up()
            vnfs[role] = mgr.launch(CHAINS["forward"], name=f"attr-{role}", nics=net.bridges,
                                    warm=False)
            net.ping(1)
            paths[role] = Path(role, net, pktgen, lambda v=vnfs[role]: mgr.stats(v.vnf_id))
        vnfs["idle"] = mgr.launch(CHAINS["forward"], name="attr-idle", nics=[None, None],
                                  warm=False)
        bench = Bench(args, mgr, vnfs, paths, pktgen)
        blast = paths["loaded"].send(0, "60", 2.0)
        bench.load_pps = max(1000, args.load_frac * blast["delivered_pps"])
        print(f"loaded VNF: blast delivered {blast['delivered_pps']} pps; offering "
              f"{bench.load_pps:.0f} pps; polling VNF {args.poll_pps:.0f} pps", flush=True)
        costs = softirq_costs(bench, args)
        print(f"softirq per packet: loaded {1e6 * costs['loaded']:.2f} us, polling "
              f"{1e6 * costs['polling']:.2f} us (rounds {costs['loaded_rounds']}, "
              f"{costs['polling_rounds']}; host softirq without traffic "
              f"{costs['baseline_softirq_s_per_s']} s/s)", flush=True)
        secs = args.intervals * args.interval + 1.0
        rows = bench.window(secs, args.interval, {"loaded": bench.load_pps,
                                                  "polling": args.poll_pps})
        intervals = [truth_and_ratio(bench, p, c, iv, costs) for p, c, iv in rows]
    finally:
        for res in vnfs.values():
            try:
                mgr.destroy(res.vnf_id)
            except Exception:     # noqa: BLE001 - best effort
                pass
        mgr.close()
        for net in nets.values():
            net.down()
    with open("/proc/loadavg") as f:
        load1 = f.read().split()[:3]
    summary = summarise(intervals)
    worst_gap = max(iv["conservation_gap"] for iv in intervals)
    doc = {"bench": "attribution", "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)),
           "host": {"cpus": os.cpu_count(), "power_source": bench.chain.source,
                    "loadavg_before": load0, "loadavg_after": load1,
                    "model": bench.chain.model.describe()},
           "args": vars(args), "blast_pps": blast["delivered_pps"],
           "offered_pps": {"loaded": round(bench.load_pps), "polling": args.poll_pps, "idle": 0},
           "softirq_cost_s_per_packet": costs, "summary": summary,
           "worst_conservation_gap": worst_gap,
           "fluidvim_worst_abs_err_pct": max(s["fluidvim_abs_err_pct_worst"] for s in
                                             summary.values()),
           "intervals": intervals, "seconds": round(time.time() - t0, 1)}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"\n{'VNF':<8} {'truth W':>8} {'fluidvim':>9} {'err %':>7} {'worst':>6} {'ratio W':>8} "
          f"{'err %':>7} {'dyn err %':>9}  busy W  poll W  host-side W  idle W  busy/QEMU CPU")
    for role in ROLES:
        s = summary[role]
        print(f"{role:<8} {s['truth_w']:8.2f} {s['fluidvim_w']:9.2f} {s['fluidvim_err_pct']:7.2f} "
              f"{s['fluidvim_abs_err_pct_worst']:6.2f} {s['ratio_w']:8.2f} "
              f"{s['ratio_err_pct']:7.1f} {s['ratio_dyn_err_pct']:9.1f}  {s['busy_w']:6.2f}  "
              f"{s['poll_w']:6.2f}  "
              f"{s['host_side_w']:11.2f}  {s['idle_w']:6.2f}  {s['busy_share_of_qemu_cpu']:.3f}")
    print(f"power source {bench.chain.source}; worst conservation gap {100 * worst_gap:.4f} %; "
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
