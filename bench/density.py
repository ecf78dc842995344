# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/density: how many idle VNFs this host keeps, and what each one costs.

For each N in --counts: launch N cold VNFs (1 NIC, ``FromDevice(0) -> Discard;``) through
``VNFManager.launch`` from --concurrency threads (the cold launch rate), let them idle, then measure
per VNF: CPU (all QEMU threads, over --idle-s seconds, from /proc), PSS and RSS (smaps_rollup),
and that a sample of them still answers ``stats``. One forwarding VNF between two namespaces idles
with them: the first ping after the idle period is the time to the first forwarded packet (the VNF
wakes from ``hlt`` on the packet), against a ping right after it.

In the same run, the same N=--compare VNFs are measured with ``[vnf] share_memory = False`` (QEMU
as it comes: transparent huge pages, no KSM) — the ratio is what the memory tuning buys.

ksmd's own CPU over the idle window is reported separately (it is the host's price for sharing;
it scans at a fixed rate whatever N is). During the settle time the bench raises KSM's scan rate
so the merge converges before measuring, and puts it back afterwards.

    sudo .venv/bin/python -m bench.density --counts 10,100,1000
    sudo .venv/bin/python -m bench.density --counts 50 --idle-s 10 --compare 20   # quick

Writes bench/results/density.json (keys idle_vnfs, idle_cpu_pct_per_vnf, pss_mib_per_vnf,
cold_launches_per_s, ...) and density.png. Not a test: no thresholds.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import random
import resource
import shutil
import subprocess
import tempfile
import time

from tqdm import tqdm

from bench.launch import pct
from fluidvim.orchestrator.power.models import PowerError
from fluidvim.orchestrator.power.sources import ProcReader
from fluidvim.vnf import testnet
from fluidvim.vnf.manager import VNFManager, make_conf

IDLE = "FromDevice(0) -> Discard;"
FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
KSM = "/sys/kernel/mm/ksm"
HZ = os.sysconf("SC_CLK_TCK")


_PROC = ProcReader()


def cpu_ticks(pid: int) -> int:
    """utime + stime of every thread of a process (clock ticks); 0 once it is gone."""
    try:
        return _PROC.process_ticks(pid)
    except PowerError:
        return 0


def mem_kib(pid: int) -> tuple[int, int]:
    """(PSS, RSS) in KiB."""
    pss = rss = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
            elif line.startswith("Rss:"):
                rss = int(line.split()[1])
    return pss, rss


def ksm_get(name: str) -> str | None:
    try:
        with open(os.path.join(KSM, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def ksm_set(name: str, value) -> None:
    try:
        with open(os.path.join(KSM, name), "w") as f:
            f.write(str(value))
    except OSError:
        pass


def ksmd_pid() -> int | None:
    out = subprocess.run(["pgrep", "-x", "ksmd"], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def ping_ms(net: testnet.TestNet) -> float | None:
    r = net.run("a", "ping", "-c", "1", "-W", "2", net.ip_b, check=False)
    for tok in r.stdout.split():
        if tok.startswith("time="):
            return float(tok[5:])
    return None


def run_one(n: int, args, share: bool, fwd_net, binary: str = "auto",
            net_backend: str = "tap") -> dict:
    tag = os.urandom(3).hex()
    state = tempfile.mkdtemp(prefix="fluidvim-density-")
    mgr = VNFManager(make_conf(state_dir=state, run_dir=f"/run/fluidvim-density-{tag}",
                               backend="qemu", share_memory=share, memory_mb=args.memory_mb,
                               qemu_binary=binary, boot_log=args.boot_log,
                               net_backend=net_backend))
    ids: list[str] = []
    try:
        fwd = mgr.launch(FORWARD, name=f"fwd-{tag}", nics=fwd_net.bridges, warm=False)
        ids.append(fwd.vnf_id)
        assert ping_ms(fwd_net) is not None, "the forwarding VNF does not forward"

        def one(i):
            return mgr.launch(IDLE, name=f"idle{i}-{tag}", nics=[None], warm=False).vnf_id

        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(args.concurrency) as ex:
            for vid in tqdm(ex.map(one, range(n)), total=n,
                            desc=f"launch {n} (share={share}, qemu={binary})",
                            leave=False):
                ids.append(vid)
        launch_s = time.monotonic() - t0
        be = mgr.backend()
        # every process of a VNF: QEMU, and its fluidvim-vhost-net with net_backend vhost-user
        groups = [[mgr.get(v).pid] + be.helper_pids(v) for v in ids]
        pids = [g[0] for g in groups]

        scan = ksm_get("pages_to_scan")
        if share and scan is not None:
            ksm_set("pages_to_scan", args.ksm_settle_scan)
        time.sleep(args.settle_s)
        if scan is not None:
            ksm_set("pages_to_scan", scan)

        kpid = ksmd_pid()
        k0 = cpu_ticks(kpid) if kpid else 0
        c0 = [sum(cpu_ticks(p) for p in g) for g in groups]
        w0 = time.monotonic()
        time.sleep(args.idle_s)
        window = time.monotonic() - w0
        c1 = [sum(cpu_ticks(p) for p in g) for g in groups]
        k1 = cpu_ticks(kpid) if kpid else 0
        first_ms = ping_ms(fwd_net)          # first packet after the idle window
        next_ms = ping_ms(fwd_net)

        per_cpu = [(b - a) / HZ / window * 100 for a, b in zip(c0, c1)]
        mems = [tuple(map(sum, zip(*(mem_kib(p) for p in g)))) for g in groups]
        sample = random.sample(ids, min(20, len(ids)))
        answered = sum(1 for v in sample if mgr.stats(v).get("uptime_us", 0) > 0)
        return {
            "n": n, "share_memory": share, "qemu_binary": binary, "net_backend": net_backend,
            "qemu_binary_used": os.path.basename(os.readlink(f"/proc/{pids[-1]}/exe")),
            "cold_launches_per_s": round(n / launch_s, 1),
            "idle_cpu_pct_per_vnf": round(sum(per_cpu) / len(per_cpu), 4),
            "idle_cpu_pct_per_vnf_p99": round(pct(per_cpu, 99), 3),
            "idle_cpu_pct_all_vnfs": round(sum(per_cpu), 2),
            "ksmd_cpu_pct": round((k1 - k0) / HZ / window * 100, 2) if kpid else None,
            "pss_mib_per_vnf": round(sum(m[0] for m in mems) / len(mems) / 1024, 2),
            "rss_mib_per_vnf": round(sum(m[1] for m in mems) / len(mems) / 1024, 2),
            "stats_answered": f"{answered}/{len(sample)}",
            "first_packet_after_idle_ms": first_ms, "next_packet_ms": next_ms,
            "idle_window_s": round(window, 1),
            "ksm_pages_sharing": int(ksm_get("pages_sharing") or 0),
        }
    finally:
        for v in tqdm(ids, desc="destroy", leave=False):
            try:
                mgr.destroy(v)
            except Exception as e:  # noqa: BLE001 - report, keep cleaning
                print(f"destroy {v}: {e}")
        mgr.close()
        shutil.rmtree(state, ignore_errors=True)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tap = [r for r in rows if r.get("net_backend", "tap") == "tap"]
    on = [r for r in tap if r["share_memory"] and r["qemu_binary"] == "auto"]
    off = [r for r in tap if not r["share_memory"]]
    full = [r for r in tap if r["qemu_binary"] != "auto"]
    vu = [r for r in rows if r.get("net_backend") == "vhost-user"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for data, label in ((on, "share_memory on"), (off, "off (THP, no KSM)"),
                        (full, "full qemu-system-x86_64"),
                        (vu, "net_backend vhost-user")):
        if data:
            a1.plot([r["n"] for r in data], [r["pss_mib_per_vnf"] for r in data], "o-", label=label)
            a2.plot([r["n"] for r in data], [r["idle_cpu_pct_per_vnf"] for r in data], "o-",
                    label=label)
    a1.set(xscale="log", xlabel="idle VNFs", ylabel="PSS per VNF (MiB)", title="memory")
    a2.set(xscale="log", xlabel="idle VNFs", ylabel="% of a core per VNF", title="idle CPU")
    a1.axhline(8, ls=":", c="grey")
    a2.axhline(0.1, ls=":", c="grey")
    a1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default="10,100,1000", help="idle VNF counts (default %(default)s)")
    ap.add_argument("--compare", type=int, default=50,
                    help="N measured again with share_memory off (0: skip; default %(default)s)")
    ap.add_argument("--compare-binary", type=int, default=100,
                    help="N measured again with the full qemu-system-x86_64 instead of [vnf] "
                         "qemu_binary=auto (the microvm build); 0: skip (default %(default)s)")
    ap.add_argument("--compare-vhost-user", type=int, default=50,
                    help="N measured again with [vnf] net_backend = vhost-user (QEMU plus its "
                         "fluidvim-vhost-net per VNF; guest RAM a shared memfd); 0: skip "
                         "(default %(default)s)")
    ap.add_argument("--boot-log", choices=("brief", "full"), default="brief",
                    help="[vnf] boot_log of every VNF (default %(default)s; full = the whole boot "
                         "summary on COM1, a VM exit per byte)")
    ap.add_argument("--concurrency", type=int, default=4, help="launching threads (default 4)")
    ap.add_argument("--idle-s", type=float, default=30.0, help="CPU measuring window (default 30)")
    ap.add_argument("--settle-s", type=float, default=20.0,
                    help="wait after the launches before measuring (default 20)")
    ap.add_argument("--ksm-settle-scan", type=int, default=20000,
                    help="KSM pages_to_scan during the settle time (default 20000)")
    ap.add_argument("--memory-mb", type=int, default=32, help="guest RAM per VNF (default 32)")
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args(argv)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # a control socket per VNF
    counts = [int(c) for c in args.counts.split(",") if c]
    rows = []
    with testnet.TestNet("fdn", 89) as net:
        for n in counts:
            rows.append(run_one(n, args, True, net))
            print(json.dumps(rows[-1]))
        if args.compare:
            rows.append(run_one(args.compare, args, False, net))
            print(json.dumps(rows[-1]))
        if args.compare_binary:
            rows.append(run_one(args.compare_binary, args, True, net, binary="qemu-system-x86_64"))
            print(json.dumps(rows[-1]))
        if args.compare_vhost_user:
            rows.append(run_one(args.compare_vhost_user, args, True, net, net_backend="vhost-user"))
            print(json.dumps(rows[-1]))
    vu = next((r for r in rows if r["net_backend"] == "vhost-user"), None)
    rows_tap = [r for r in rows if r["net_backend"] == "tap"]
    mine = [r for r in rows_tap if r["qemu_binary"] == "auto"]
    best = max((r for r in mine if r["share_memory"]), key=lambda r: r["n"])
    same = next((r for r in mine if r["share_memory"] and r["n"] == args.compare), None)
    off = next((r for r in rows_tap if not r["share_memory"]), None)
    full = next((r for r in rows_tap if r["qemu_binary"] != "auto"), None)
    auto_n = next((r for r in mine if r["share_memory"] and full and r["n"] == full["n"]), None)
    summary = {k: best[k] for k in ("idle_cpu_pct_per_vnf", "pss_mib_per_vnf", "rss_mib_per_vnf",
                                    "cold_launches_per_s", "ksmd_cpu_pct",
                                    "first_packet_after_idle_ms")}
    summary["idle_vnfs"] = best["n"]
    if same and off:
        summary["pss_ratio_share_off_vs_on"] = round(off["pss_mib_per_vnf"] / same["pss_mib_per_vnf"], 2)
    if full and auto_n:
        summary["full_qemu_vs_auto"] = {
            "n": full["n"], "qemu_binary_used": auto_n["qemu_binary_used"],
            "pss_ratio": round(full["pss_mib_per_vnf"] / auto_n["pss_mib_per_vnf"], 2),
            "launch_rate_ratio": round(auto_n["cold_launches_per_s"] /
                                       full["cold_launches_per_s"], 2)}
    tap_n = next((r for r in mine if r["share_memory"] and vu and r["n"] == vu["n"]), None)
    if vu and tap_n:
        summary["vhost_user_vs_tap"] = {
            "n": vu["n"], "pss_ratio": round(vu["pss_mib_per_vnf"] / tap_n["pss_mib_per_vnf"], 2),
            "idle_cpu_pct_per_vnf": vu["idle_cpu_pct_per_vnf"],
            "launch_rate_ratio": round(vu["cold_launches_per_s"] / tap_n["cold_launches_per_s"], 2)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "density.json"), "w") as f:
        json.dump({**summary, "runs": rows, "host_cpus": os.cpu_count(),
                   "boot_log": args.boot_log}, f, indent=2)
    plot(rows, os.path.join(args.out, "density.png"))
    print("\nsummary:", json.dumps(summary, indent=2))
    for r in rows:
        print(f"  N={r['n']:5d} {r['qemu_binary_used']:27s} {r['net_backend']:10s} "
              f"share={str(r['share_memory']):5s} "
              f"cpu/VNF {r['idle_cpu_pct_per_vnf']:.4f} % "
              f"PSS {r['pss_mib_per_vnf']:.1f} MiB RSS {r['rss_mib_per_vnf']:.1f} MiB "
              f"launch {r['cold_launches_per_s']}/s first pkt {r['first_packet_after_idle_ms']} ms")
    if same and off:
        print(f"  PSS share_memory off/on at N={args.compare}: {summary['pss_ratio_share_off_vs_on']}x")
    if "full_qemu_vs_auto" in summary:
        c = summary["full_qemu_vs_auto"]
        print(f"  N={c['n']}: full qemu-system-x86_64 PSS {c['pss_ratio']}x the {c['qemu_binary_used']}'s; "
              f"{c['qemu_binary_used']} launches {c['launch_rate_ratio']}x as fast")


    if "vhost_user_vs_tap" in summary:
        c = summary["vhost_user_vs_tap"]
        print(f"  N={c['n']}: net_backend vhost-user PSS {c['pss_ratio']}x tap's (QEMU + its "
              f"fluidvim-vhost-net), launches {c['launch_rate_ratio']}x as fast, idle CPU "
              f"{c['idle_cpu_pct_per_vnf']} % per VNF")


if __name__ == "__main__":
    main()
