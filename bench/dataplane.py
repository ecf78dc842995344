# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/dataplane: a plain Linux bridge vs the VNF as a bump in the wire, in one run.

    ns a (10.x.0.1) -- veth -- bridge -- veth -- ns b (10.x.0.2)                      (bridge)
    ns a -- veth -- bridge -- tap -- [VNF nic0  nic1] -- tap -- bridge -- veth -- ns b    (vnf)
    ns a -- veth -- bridge -- tap -- [QEMU hub, no guest] -- tap -- bridge -- veth -- ns b (hub)

For the bridge and for the VNF running each element chain users build (forward, Counter,
IPFilter, Classifier, Queue, and all of them with the flow table in one firewall; every ToDevice
also does the flow table's session accounting) it measures:

- TCP: one iperf3 stream a -> b, ``--tcp-seconds`` long (Mb/s received);
- 64-byte UDP frames and IMIX (7:4:1 of 64/594/1518 bytes) from ``bench/pktgen.c`` (a PACKET_MMAP
  TX-ring generator, built here with gcc) in ns a, counted as they arrive at ns b's veth. First a
  blast (as fast as the generator goes) gives the path's ceiling; then lower offered rates until
  the loss is < 0.1 % (or higher ones while it stays so), then two bisection steps between the
  best passing rate and the first failing one: that rate is the path's ``pps_64`` / ``pps_imix``;
- one-way latency (p50/p99, kernel receive timestamp minus the sender's timestamp; one clock) of
  64-byte frames at 50 % of the forwarding VNF's no-loss rate, through the bridge, the VNF and the
  hub: VNF minus bridge is what the VNF adds, the hub what any tap path adds;
- the VNF's busy share (``vnf_busy_tcp``, ``vnf_busy_64``: of its main loop, from its `stats`
  "cpu", PROTOCOL.md) during the TCP run and at the 64-byte no-loss rate. Its vCPU thread shows
  ~100 % on the host whenever frames flow (it busy-polls); well below 100 % here means the host's
  side (taps, QEMU or the backend, the two trips through the host's stack) set the limit;
- the hub ceiling: two taps joined by a QEMU hub (``-netdev hubport``, no guest): what a
  tap-based path without vhost-net can do on this host at best (no offloads through a hub);
- the same for ``--vhost-chains`` with ``[vnf] net_backend = vhost-user`` (fluidvim-vhost-net,
  ``vhost``: one thread per NIC instead of QEMU's main thread), named ``<chain>/vhost-user``,
  and its latency at the same offered rate.

Prints a table with ratios against the bridge, writes ``dataplane.json`` (top-level ``bridge`` and
``vnf`` = the forwarding chain on QEMU's taps, each with ``tcp_mbps``, ``pps_64``, ``loss_64``;
``vnf_vhost_user`` the same on fluidvim-vhost-net; then ``hub``, ``chains``, ``latency``,
``ratios``) and ``dataplane.png``. Not a test: no thresholds. Needs root,
iperf3 (``apt-get install -y iperf3``), gcc, and the kernel (``make -C unikernel``).

    sudo .venv/bin/python -m bench.dataplane                       # ~6 min
    sudo .venv/bin/python -m bench.dataplane --chains forward --kernel /tmp/old.elf --out /tmp/before

A change of the VNF is better judged with ``--ab OLD.elf``: the forwarding VNF with the built kernel
(or ``--kernel``) and with OLD.elf, alternated for ``--ab-rounds`` rounds (TCP, a 64-byte blast and
the latency at ``--ab-pps`` per trial), medians and new/old ratios, ``ab.json``; no bridge. The
bridge's own TCP figure moves by ±30 % between runs on a shared 2-core host, so a ratio against it
from one run says less than the VNF's own numbers taken in the same minutes.

    sudo .venv/bin/python -m bench.dataplane --ab /tmp/old.elf --ab-rounds 4   # ~4 min
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from fluidvim.vnf import netdev
from fluidvim.vnf.manager import VNFManager, make_conf
from fluidvim.vnf.testnet import TestNet

HERE = os.path.dirname(os.path.abspath(__file__))

CHAINS = {
    "forward": "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);",
    "counter": "FromDevice(0) -> c0 :: Counter -> ToDevice(1);\n"
               "FromDevice(1) -> c1 :: Counter -> ToDevice(0);",
    "ipfilter": "fw :: IPFilter(allow arp, allow icmp, allow tcp dst port 5201, allow udp dst port 9, "
                "deny all);\nFromDevice(0) -> fw -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);",
    "classifier": "c :: Classifier(ip proto tcp, ip proto udp, arp, -);\nout :: ToDevice(1);\n"
                  "FromDevice(0) -> c;\nc[0] -> out; c[1] -> out; c[2] -> out; c[3] -> Discard;\n"
                  "FromDevice(1) -> ToDevice(0);",
    "queue": "FromDevice(0) -> Queue(1000) -> ToDevice(1);\nFromDevice(1) -> Queue(1000) -> ToDevice(0);",
    "firewall": "c :: Classifier(ip, arp, -);\n"
                "fw :: IPFilter(allow icmp, allow tcp dst port 5201, allow udp dst port 9, deny all);\n"
                "out :: Queue(1000) -> ToDevice(1);\n"
                "FromDevice(0) -> c;\nc[0] -> fw -> passed :: Counter -> out;\nc[1] -> out;\n"
                "c[2] -> Discard;\nfw[1] -> blocked :: Counter -> Discard;\n"
                "FromDevice(1) -> back :: Counter -> ToDevice(0);",
}

LOSS_OK = 0.001                     # < 0.1 %
TRIAL_S = 2.0
BISECT = 2                          # trials between the best pass and the first loss above it


def build_pktgen(out_dir: str) -> str:
    exe = os.path.join(out_dir, "pktgen")
    src = os.path.join(HERE, "pktgen.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["gcc", "-O2", "-Wall", "-o", exe, src], check=True)
    return exe


def busy_share(c0: dict | None, c1: dict | None) -> float | None:
    """The share of its main loop a VNF spent busy between two `stats` "cpu" (PROTOCOL.md): its
    vCPU thread shows ~100 % on the host while it polls, this is what its processing used."""
    if not c0 or not c1:
        return None
    loop = sum(c1[k] - c0[k] for k in ("busy_us", "poll_us", "halt_us"))
    return round((c1["busy_us"] - c0["busy_us"]) / loop, 3) if loop > 0 else None


class Path:
    """A TestNet (ns a, ns b) with something between them; measures through it. ``vnf_stats``:
    the VNF's `stats` (a callable), for its busy share during each measurement."""

    verbose = False

    def __init__(self, name: str, net: TestNet, pktgen: str, vnf_stats=None):
        self.name, self.net, self.pktgen, self.vnf_stats = name, net, pktgen, vnf_stats
        self.mac_b = json.loads(net.run("b", "ip", "-j", "link", "show", f"{net.prefix}bp",
                                        check=True).stdout)[0]["address"]

    def rx_packets(self) -> int:
        r = self.net.run("b", "cat", f"/sys/class/net/{self.net.prefix}bp/statistics/rx_packets")
        return int(r.stdout)

    def cpu(self) -> dict | None:
        return self.vnf_stats().get("cpu") if self.vnf_stats else None   # older kernels: none

    def send(self, pps: float, size: str = "60", secs: float = TRIAL_S) -> dict:
        """Offer `pps` (0 = blast) frames of `size` for `secs`; what arrived at ns b's veth."""
        n = self.net
        cpu0 = self.cpu()
        c0 = self.rx_packets()
        r = n.run("a", self.pktgen, "send", f"{n.prefix}ap", self.mac_b, n.ip_a, n.ip_b, "9", size,
                  str(int(pps)), str(secs), timeout=secs + 30)
        time.sleep(0.3)                 # frames still in flight
        got = self.rx_packets() - c0
        j = json.loads(r.stdout)
        sent = max(1, j["sent"])
        out = {"offered_pps": round(j["pps"]), "sent": j["sent"], "delivered": got,
               "delivered_pps": round(got / j["seconds"]), "loss": max(0.0, 1 - got / sent),
               "vnf_busy": busy_share(cpu0, self.cpu())}
        if self.verbose:
            busy = f", VNF busy {100 * out['vnf_busy']:.0f} %" if out["vnf_busy"] is not None else ""
            print(f"  {self.name} {size}: offered {out['offered_pps']} pps, delivered "
                  f"{out['delivered_pps']} pps, loss {100 * out['loss']:.3f} %{busy}", flush=True)
        return out

    def rate_search(self, size: str) -> dict:
        """Blast, then lower (or higher) rates until loss < 0.1 %, then bisect towards the first
        loss: the highest rate delivered with < 0.1 % loss is the answer."""
        blast = self.send(0, size)
        ceiling = max(1000, blast["delivered_pps"])
        trials = []
        best = None
        for f in (1.0, 0.85, 0.7, 0.55, 0.4, 0.25, 0.1):
            t = self.send(ceiling * f, size)
            trials.append(t)
            if t["loss"] < LOSS_OK:
                best = t
                break
        failed = trials[-2]["offered_pps"] if best is not None and len(trials) > 1 else None
        if best is not None and len(trials) == 1:
            # the blast's own CPU use can starve the path: try higher rates while loss stays low
            # (the generator may not reach them: keep the passing trial that delivered most)
            for f in (1.2, 1.4, 1.6):
                t = self.send(ceiling * f, size)
                trials.append(t)
                if t["loss"] >= LOSS_OK:
                    failed = t["offered_pps"]
                    break
                if t["delivered_pps"] > best["delivered_pps"]:
                    best = t
        # the steps above are 15-20 % apart: halve the gap between the best pass and the first
        # failure above it BISECT times
        lo = best["offered_pps"] if best is not None else None
        for _ in range(BISECT if lo is not None and failed else 0):
            if failed - lo < 0.02 * failed:
                break
            t = self.send((lo + failed) / 2, size)
            trials.append(t)
            if t["loss"] < LOSS_OK:
                lo = t["offered_pps"]
                if t["delivered_pps"] > best["delivered_pps"]:
                    best = t
            else:
                failed = t["offered_pps"]
        return {"blast": blast, "trials": trials,
                "pps": best["delivered_pps"] if best else 0,
                "loss": best["loss"] if best else trials[-1]["loss"],
                "vnf_busy": best["vnf_busy"] if best else None}

    def tcp(self, secs: float) -> float:
        n = self.net
        srv = n.popen("b", "iperf3", "-s", "-1", "-B", n.ip_b, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            r = n.run("a", "iperf3", "-c", n.ip_b, "-t", str(secs), "-J", timeout=secs + 30)
            srv.wait(10)
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
        end = json.loads(r.stdout).get("end", {})
        mbps = round(end.get("sum_received", {}).get("bits_per_second", 0) / 1e6, 1)
        if self.verbose:
            print(f"  {self.name} TCP: {mbps} Mb/s", flush=True)
        return mbps

    def latency(self, pps: float, secs: float = 3.0) -> dict:
        n = self.net
        rx = n.popen("b", self.pktgen, "recv", n.ip_b, "9", str(secs + 1.5), stdout=subprocess.PIPE,
                     text=True)
        rx.stdout.readline()            # "ready"
        tx = self.send(pps, "60", secs)
        out = json.loads(rx.stdout.readline() or "{}")
        rx.wait(10)
        out.update(offered_pps=tx["offered_pps"], loss=tx["loss"])
        return out

    def measure(self, tcp_s: float, imix: bool = True) -> dict:
        cpu0 = self.cpu()
        res = {"tcp_mbps": self.tcp(tcp_s)}
        busy_tcp = busy_share(cpu0, self.cpu())
        s64 = self.rate_search("60")
        res.update(pps_64=s64["pps"], loss_64=round(s64["loss"], 5),
                   blast_64=s64["blast"], trials_64=s64["trials"])
        if self.vnf_stats:
            # how much of its own loop the VNF needed at those rates: well below 1 means the
            # limit was on the host's side (taps, QEMU, the stack), not in the VNF's processing
            res.update(vnf_busy_tcp=busy_tcp, vnf_busy_64=s64["vnf_busy"])
        if imix:
            si = self.rate_search("imix")
            res.update(pps_imix=si["pps"], loss_imix=round(si["loss"], 5), blast_imix=si["blast"])
        return res


def bridge_net(prefix: str, subnet: int) -> tuple[TestNet, str]:
    br = f"{prefix}br"
    netdev.ensure_bridge(br)
    subprocess.run(["ip", "link", "set", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"],
                   check=True)
    subprocess.run(["ip", "link", "set", br, "up"], check=True)
    return TestNet(prefix, subnet, bridges=(br, br)), br


def run_bridge(args, pktgen) -> tuple[dict, dict]:
    net, br = bridge_net("dpx", 97)
    try:
        net.up()
        net.ping(1)
        p = Path("bridge", net, pktgen)
        print("bridge ...", flush=True)
        res = p.measure(args.tcp_seconds)
        return res, {"path": p}
    finally:
        net.down()
        netdev.delete_link(br)


@contextlib.contextmanager
def hub_path(pktgen):
    """ns a and ns b joined by a guest-less QEMU hub between two taps."""
    with TestNet("dph", 95) as net:
        taps = ("dphq0", "dphq1")
        q = subprocess.Popen(["qemu-system-x86_64", "-M", "none", "-nodefaults", "-display", "none",
                              "-netdev", f"tap,id=t0,ifname={taps[0]},script=no,downscript=no",
                              "-netdev", f"tap,id=t1,ifname={taps[1]},script=no,downscript=no",
                              "-netdev", "hubport,id=p0,hubid=0,netdev=t0",
                              "-netdev", "hubport,id=p1,hubid=0,netdev=t1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):
                if all(netdev.exists(t) for t in taps):
                    break
                time.sleep(0.1)
            netdev.plug(taps[0], net.br0)
            netdev.plug(taps[1], net.br1)
            net.ping(1)
            yield Path("hub", net, pktgen)
        finally:
            q.terminate()
            q.wait()


def run_hub(args, pktgen) -> dict:
    with hub_path(pktgen) as p:
        print("hub ...", flush=True)
        return p.measure(args.tcp_seconds, imix=False)


@contextlib.contextmanager
def vnf_path(mgr, chain: str, kernel, label: str, pktgen: str):
    """ns a and ns b with a VNF running `chain` (on `kernel`) between them; destroyed after."""
    with TestNet("dpv", 96) as net:
        res = mgr.launch(CHAINS[chain], nics=net.bridges, kernel=kernel, warm=False)
        try:
            net.ping(1)
            yield Path(label, net, pktgen, lambda: mgr.stats(res.vnf_id)), res.vnf_id
        finally:
            mgr.destroy(res.vnf_id)


def run_vnf(mgr, chain: str, args, pktgen, label: str | None = None) -> dict:
    with vnf_path(mgr, chain, args.kernel, label or chain, pktgen) as (p, vnf_id):
        print(f"vnf {label or chain} ...", flush=True)
        out = p.measure(args.tcp_seconds, imix=chain in ("forward", "firewall"))
        st = mgr.stats(vnf_id)
        out["stats"] = {"nics": st["nics"], "elements": st["elements"], "slots": st["slots"]}
        return out


def forward_latency(mgr, args, pktgen, pps: float) -> dict:
    with vnf_path(mgr, "forward", args.kernel, "forward", pktgen) as (p, _):
        return p.latency(pps)


def bridge_latency(pktgen, pps: float) -> dict:
    net, br = bridge_net("dpx", 97)
    try:
        net.up()
        net.ping(1)
        return Path("bridge", net, pktgen).latency(pps)
    finally:
        net.down()
        netdev.delete_link(br)


def run_ab(args, pktgen) -> int:
    """The forwarding VNF with args.kernel ("new") and args.ab ("old"), alternated per round."""
    kernels = {"new": args.kernel, "old": args.ab}
    trials = {k: [] for k in kernels}
    mgr = VNFManager(make_conf(state_dir=args.state_dir, run_dir=args.run_dir))
    try:
        for rnd in range(args.ab_rounds):
            for name, kernel in kernels.items():
                with vnf_path(mgr, "forward", kernel, f"{name} {rnd + 1}", pktgen) as (p, _):
                    lat = p.latency(args.ab_pps)
                    blast = p.send(0)
                    t = {"tcp_mbps": p.tcp(args.tcp_seconds),
                         "blast_64_pps": blast["delivered_pps"], "busy_blast": blast["vnf_busy"],
                         "lat_p50_us": lat["lat_p50_us"], "lat_p99_us": lat["lat_p99_us"]}
                trials[name].append(t)
                print(f"round {rnd + 1} {name}: " + ", ".join(f"{k} {v}" for k, v in t.items()),
                      flush=True)
    finally:
        mgr.close()
    keys = list(trials["new"][0])
    def median(vals):
        vals = [v for v in vals if v is not None]
        return round(statistics.median(vals), 3) if vals else None
    med = {n: {k: median(t[k] for t in trials[n]) for k in keys} for n in trials}
    data = {"kernels": {n: k or "default" for n, k in kernels.items()}, "rounds": args.ab_rounds,
            "lat_offered_pps": args.ab_pps, "trials": trials, "median": med,
            "new_over_old": {k: ratio(med["new"][k], med["old"][k])
                             if None not in (med["new"][k], med["old"][k]) else None for k in keys}}
    print(f"\n{'median of ' + str(args.ab_rounds):<16}" + "".join(f"{k:>14}" for k in keys))
    def cell(v, fmt):
        return f"{'-':>14}" if v is None else f"{v:>14{fmt}}"
    for n in ("old", "new"):
        print(f"{n:<16}" + "".join(cell(med[n][k], ".1f") for k in keys))
    print(f"{'new / old':<16}" + "".join(cell(data['new_over_old'][k], ".3f") for k in keys))
    with open(os.path.join(args.out, "ab.json"), "w") as f:
        json.dump(data, f, indent=2)
    print(f"wrote {args.out}/ab.json")
    return 0


def busy_cols(r: dict) -> str:
    if r.get("vnf_busy_tcp") is None and r.get("vnf_busy_64") is None:
        return "-"
    return "/".join("-" if r.get(k) is None else f"{100 * r[k]:.0f} %" for k in ("vnf_busy_tcp",
                                                                                  "vnf_busy_64"))


def ratio(a, b):
    return round(a / b, 3) if b else None


def plot(path: str, data: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["bridge"] + (["hub"] if data["hub"] else []) + [f"vnf {c}" for c in data["chains"]]
    rows = [data["bridge"]] + ([data["hub"]] if data["hub"] else []) + list(data["chains"].values())
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, key, label, scale in ((axes[0], "tcp_mbps", "TCP, Gb/s", 1e-3),
                                  (axes[1], "pps_64", "64 B, kpps at < 0.1 % loss", 1e-3),
                                  (axes[2], "blast_64", "64 B blast, delivered kpps", 1e-3)):
        vals = [(r[key]["delivered_pps"] if key == "blast_64" else r[key]) * scale for r in rows]
        n_ref = 2 if data["hub"] else 1
        colors = ["#888888", "#bbbbbb"][:n_ref] + [
            "#2ca02c" if c.endswith("/vhost-user") else "#3b7dd8" for c in data["chains"]]
        ax.barh(names, vals, color=colors)
        ax.invert_yaxis()
        ax.set_title(label)
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:.2f}" if scale == 1e-3 and key == "tcp_mbps" else f" {v:.0f}",
                    va="center", fontsize=8)
    fig.suptitle("bench/dataplane: bridge vs QEMU hub vs VNF on QEMU taps (blue) and on "
                 "fluidvim-vhost-net (green); no vhost-net, KVM via kvm_pvm, 2 shared cores")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chains", default=",".join(CHAINS), help="comma-separated subset of "
                    + ",".join(CHAINS))
    ap.add_argument("--tcp-seconds", type=float, default=5.0)
    ap.add_argument("--kernel", default=None, help="VNF kernel image (default: the built one)")
    ap.add_argument("--no-hub", action="store_true", help="skip the QEMU hub ceiling")
    ap.add_argument("--vhost-chains", default="forward,firewall",
                    help="chains also measured with net_backend vhost-user ('' = none)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("-v", "--verbose", action="store_true", help="print every trial")
    ap.add_argument("--ab", metavar="OLD_KERNEL", help="only an interleaved A/B of the forwarding "
                    "VNF: the kernel under test against OLD_KERNEL (see above)")
    ap.add_argument("--ab-rounds", type=int, default=4)
    ap.add_argument("--ab-pps", type=float, default=30000, help="offered rate of the A/B's latency "
                    "trials (64 B)")
    ap.add_argument("--state-dir", default="/var/lib/fluidvim-bench-dataplane")
    ap.add_argument("--run-dir", default="/run/fluidvim-bench-dataplane")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (namespaces, bridges, taps)", file=sys.stderr)
        return 2
    missing = [t for t in ("iperf3", "gcc") if not shutil.which(t)]
    if missing:
        print(f"missing {', '.join(missing)}: apt-get install -y {' '.join(missing)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    Path.verbose = args.verbose
    pktgen = build_pktgen(args.out if args.out.startswith("/tmp") else "/tmp")
    if args.ab:
        return run_ab(args, pktgen)
    chains = [c for c in args.chains.split(",") if c]
    t0 = time.time()
    with open("/proc/loadavg") as f:
        load0 = f.read().split()[:3]

    bridge, _ = run_bridge(args, pktgen)
    hub = {} if args.no_hub else run_hub(args, pktgen)
    mgr = VNFManager(make_conf(state_dir=args.state_dir, run_dir=args.run_dir))
    vhost_chains = [c for c in args.vhost_chains.split(",") if c]
    mgr_vu = (VNFManager(make_conf(state_dir=args.state_dir, run_dir=args.run_dir + "-vu",
                                   net_backend="vhost-user")) if vhost_chains else None)
    results = {}
    try:
        for c in chains:
            results[c] = run_vnf(mgr, c, args, pktgen)
        for c in vhost_chains:
            results[f"{c}/vhost-user"] = run_vnf(mgr_vu, c, args, pktgen, f"{c}/vhost-user")
        # latency at 50 % of the forwarding VNF's no-loss 64-byte rate, VNF and bridge
        fwd = results.get("forward") or next(iter(results.values()))
        lat_pps = max(1000, fwd["pps_64"] // 2)
        lat_vnf = forward_latency(mgr, args, pktgen, lat_pps)
        lat_vu = forward_latency(mgr_vu, args, pktgen, lat_pps) if mgr_vu else None
    finally:
        mgr.close()
        if mgr_vu:
            mgr_vu.close()
    lat_br = bridge_latency(pktgen, lat_pps)
    lat_hub = None
    if not args.no_hub:
        with hub_path(pktgen) as p:
            lat_hub = p.latency(lat_pps)
    latency = {"offered_pps": lat_pps, "bridge": lat_br, "vnf": lat_vnf, "hub": lat_hub,
               "added_p50_us": round(lat_vnf["lat_p50_us"] - lat_br["lat_p50_us"], 1),
               "added_p99_us": round(lat_vnf["lat_p99_us"] - lat_br["lat_p99_us"], 1)}
    if lat_vu:
        latency.update(vnf_vhost_user=lat_vu,
                       added_p50_us_vhost_user=round(lat_vu["lat_p50_us"] - lat_br["lat_p50_us"], 1),
                       added_p99_us_vhost_user=round(lat_vu["lat_p99_us"] - lat_br["lat_p99_us"], 1))
    vnf = results.get("forward") or next(iter(results.values()))
    vnf_vu = results.get("forward/vhost-user")
    ratios = {c: {"tcp": ratio(r["tcp_mbps"], bridge["tcp_mbps"]),
                  "pps_64": ratio(r["pps_64"], bridge["pps_64"]),
                  "pps_64_vs_hub": ratio(r["pps_64"], hub.get("pps_64", 0)),
                  "blast_64_vs_hub": ratio(r["blast_64"]["delivered_pps"],
                                           hub.get("blast_64", {}).get("delivered_pps", 0)),
                  "pps_imix": ratio(r.get("pps_imix", 0), bridge.get("pps_imix", 0))
                  if "pps_imix" in r else None}
              for c, r in results.items()}
    with open("/proc/loadavg") as f:
        load1 = f.read().split()[:3]
    data = {"bridge": bridge, "vnf": vnf, "vnf_vhost_user": vnf_vu, "hub": hub, "chains": results,
            "latency": latency,
            "ratios": ratios, "kernel": args.kernel or "default",
            "machine": {"cpus": os.cpu_count(), "loadavg_start": load0, "loadavg_end": load1,
                        "note": "shared 2-core machine; no vhost-net; KVM via kvm_pvm (PVM)"},
            "took_s": round(time.time() - t0, 1)}

    print(f"\n{'path':<24}{'TCP Mb/s':>10}{'x br':>7}{'64B pps':>10}{'x br':>7}{'loss %':>8}"
          f"{'64B blast':>11}{'IMIX pps':>10}{'VNF busy TCP/64B':>18}")
    rows = [("bridge", bridge)] + ([("hub", hub)] if hub else []) + [(f"vnf {c}", r)
                                                                    for c, r in results.items()]
    for name, r in rows:
        print(f"{name:<24}{r['tcp_mbps']:>10.0f}{ratio(r['tcp_mbps'], bridge['tcp_mbps']):>7.2f}"
              f"{r['pps_64']:>10}{ratio(r['pps_64'], bridge['pps_64']):>7.2f}"
              f"{100 * r['loss_64']:>8.3f}{r['blast_64']['delivered_pps']:>11}"
              f"{r.get('pps_imix', '-'):>10}{busy_cols(r):>18}")
    print(f"latency at {lat_pps} pps (64 B): bridge p50/p99 {lat_br['lat_p50_us']}/"
          f"{lat_br['lat_p99_us']} us, "
          f"VNF {lat_vnf['lat_p50_us']}/{lat_vnf['lat_p99_us']} us -> added "
          f"{latency['added_p50_us']}/{latency['added_p99_us']} us"
          + (f"; hub (no guest) {lat_hub['lat_p50_us']}/{lat_hub['lat_p99_us']} us" if lat_hub else "")
          + (f"; VNF on vhost-user {lat_vu['lat_p50_us']}/{lat_vu['lat_p99_us']} us" if lat_vu else ""))
    with open(os.path.join(args.out, "dataplane.json"), "w") as f:
        json.dump(data, f, indent=2)
    try:
        plot(os.path.join(args.out, "dataplane.png"), data)
    except ImportError:
        print("matplotlib missing: no PNG", file=sys.stderr)
    print(f"wrote {args.out}/dataplane.json and .png ({data['took_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
