# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/launch: request -> "VNF forwarding", in one run, for four paths on the same kernel:

(a) stock libvirt path: a domain defined the way a stock Nova libvirt driver defines one (qcow2
    overlay disk created and resized per instance, SeaBIOS, USB tablet, VNC + video, virtio balloon
    and RNG, pty console), defineXML + create, then wait for the VNF and configure it;
(b) fluidvim libvirt backend, cold (pc + qboot, no disk, transient domain, created paused);
(c) fluidvim QEMU direct backend, cold (microvm, no firmware);
(d) fluidvim warm pool (QEMU direct shells, refilled in the background between launches);
(e) the same warm pool for Neutron-style ports: each NIC with a given MAC and tap name (the
    shell's taps are renamed at claim, the VNF is told its MACs in ``configure``).

"Forwarding" = the VNF's own reply to `configure`. Prints p50/p90 per path and the ratios against
(a), QEMU memory per VNF, and writes a PNG and JSON. Not a test: no thresholds.

    sudo .venv/bin/python -m bench.launch --launches 30
    sudo .venv/bin/python -m bench.launch --paths warm,warm-ports --launches 200  # (d) vs (e)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid as uuidlib
from xml.sax.saxutils import escape, quoteattr

from tqdm import tqdm

from fluidvim.common.measure import quantile
from fluidvim.common.zonetypes import NicRequest
from fluidvim.vnf import netdev, spec as specmod
from fluidvim.vnf.control import ControlChannel
from fluidvim.vnf.manager import VNFManager, make_conf

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
PATHS = ("stock", "libvirt", "qemu", "warm", "warm-ports")


def pct(values, q):
    """The ``q``-th percentile (0-100) of ``values``: nearest rank, always one of the samples."""
    return quantile(values, q / 100.0, method="nearest")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class StockLibvirt:
    """The stock define-and-start path a Nova libvirt driver takes for a kernel-boot image."""

    def __init__(self, kernel: str, workdir: str, accel: str):
        import libvirt

        self.libvirt = libvirt
        self.conn = libvirt.open("qemu:///system")
        self.kernel = kernel
        self.workdir = workdir
        self.accel = accel
        os.makedirs(workdir, exist_ok=True)
        self.base = os.path.join(workdir, "base.qcow2")     # Nova's image cache entry
        if not os.path.exists(self.base):
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", self.base, "64M"],
                           check=True)

    def xml(self, u: str, disk: str, ctl: str, taps) -> str:
        cpu = ("<cpu mode='host-passthrough' check='none'>"
               "<feature policy='disable' name='arch-capabilities'/></cpu>"
               if self.accel == "kvm" else "")
        nics = "".join(
            f"<interface type='ethernet'><mac address={quoteattr(specmod.mac_for(u, i))}/>"
            f"<target dev={quoteattr(t)}/><model type='virtio'/>"
            "<mtu size='1500'/></interface>"
            for i, t in enumerate(taps))
        return (
            f"<domain type='{'kvm' if self.accel == 'kvm' else 'qemu'}'>"
            f"<name>stock-{u}</name><uuid>{u}</uuid>"
            "<memory unit='MiB'>32</memory><vcpu>1</vcpu>"
            "<sysinfo type='smbios'><system><entry name='manufacturer'>OpenStack Foundation"
            "</entry><entry name='product'>OpenStack Nova</entry></system></sysinfo>"
            "<os><type arch='x86_64' machine='pc'>hvm</type>"
            f"<kernel>{escape(self.kernel)}</kernel><cmdline>slots=1024 name=stock</cmdline>"
            "<smbios mode='sysinfo'/></os>"
            "<features><acpi/><apic/></features>"
            f"{cpu}"
            "<clock offset='utc'><timer name='pit' tickpolicy='delay'/>"
            "<timer name='rtc' tickpolicy='catchup'/><timer name='hpet' present='no'/></clock>"
            "<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot>"
            "<on_crash>destroy</on_crash>"
            "<devices>"
            f"<disk type='file' device='disk'><driver name='qemu' type='qcow2' cache='none'/>"
            f"<source file={quoteattr(disk)}/><target dev='vda' bus='virtio'/></disk>"
            f"{nics}"
            "<serial type='pty'><target port='0'/></serial>"
            "<console type='pty'><target type='serial' port='0'/></console>"
            # the VNF's control channel, as in our domains (a virtio console)
            f"<console type='unix'><source mode='bind' path={quoteattr(ctl)}/>"
            "<target type='virtio' port='0'/></console>"
            "<input type='tablet' bus='usb'/>"
            "<graphics type='vnc' autoport='yes' listen='127.0.0.1'/>"
            "<video><model type='virtio'/></video>"
            "<memballoon model='virtio'><stats period='10'/></memballoon>"
            "<rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>"
            "</devices>"
            "<seclabel type='static' model='dac' relabel='no'><label>+0:+0</label></seclabel>"
            "</domain>")

    def launch(self):
        u = str(uuidlib.uuid4())
        d = os.path.join(self.workdir, u)
        os.makedirs(d)
        taps = [specmod.tap_for(u, i) for i in range(2)]
        phases = {}
        t0 = t = time.perf_counter()
        disk = os.path.join(d, "disk")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", self.base,
                        disk], check=True)
        subprocess.run(["qemu-img", "resize", "-q", disk, "1G"], check=True)
        phases["image"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        ctl = os.path.join(d, "ctl.sock")
        dom = self.conn.defineXML(self.xml(u, disk, ctl, taps))
        try:
            dom.create()
            phases["define+start"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            with ControlChannel(ctl).connect() as ch:
                ch.wait_ready(60)
                phases["boot"] = (time.perf_counter() - t) * 1000
                t = time.perf_counter()
                ch.configure(FORWARD)
                phases["configure"] = (time.perf_counter() - t) * 1000
        except BaseException:
            self.destroy((dom, taps, d))
            raise
        total = (time.perf_counter() - t0) * 1000
        pid = int(open(f"/run/libvirt/qemu/stock-{u}.pid").read())
        return {"total_ms": total, "phases_ms": phases, "rss_kib": rss_kib(pid),
                "_cleanup": (dom, taps, d)}

    def destroy(self, handle):
        dom, taps, d = handle
        if dom.isActive():
            dom.destroy()
        dom.undefine()
        for tap in taps:
            netdev.delete_link(tap)
        subprocess.run(["rm", "-rf", d], check=True)


def port_nics(tap_prefix: str, nics: int = 2):
    """MACs and tap names as Neutron gives them: fa:16:3e:..., ``tap`` + 11 characters of the port
    id (here ``tap_prefix`` + random hex, 14 characters)."""
    ports = [uuidlib.uuid4().hex for _ in range(nics)]
    return ([f"fa:16:3e:{p[0:2]}:{p[2:4]}:{p[4:6]}" for p in ports],
            [(tap_prefix + p)[:14] for p in ports])


def launch_once(mgr, backend, warm, key=None, tap_prefix=None):
    if warm:
        mgr.wait_pool(key, 2, timeout=60)   # refill done: measure the warm path itself
    macs, taps = port_nics(tap_prefix) if tap_prefix else (None, None)
    t = time.perf_counter()
    nics = ([NicRequest(mac=m, tap=t) for m, t in zip(macs, taps)] if tap_prefix
            else [None, None])
    res = mgr.launch(FORWARD, nics=nics, backend=backend, warm=warm)
    wall = (time.perf_counter() - t) * 1000      # the caller's view: every commit included
    assert res.kind == ("warm" if warm else "cold"), res.kind
    rec = mgr.get(res.vnf_id)
    pid = rec.pid or int(open(f"/run/libvirt/qemu/fluidvim-{res.vnf_id}.pid").read())
    out = {"total_ms": wall, "phases_ms": res.phases_ms, "rss_kib": rss_kib(pid),
           "boot_us": res.boot_us}
    mgr.destroy(res.vnf_id)
    return out


def run_ours(mgr, backend, n, warm, desc, key=None, tap_prefix=None):
    return [launch_once(mgr, backend, warm, key, tap_prefix)
            for _ in tqdm(range(n), desc=desc, unit="vnf")]


def run_warm_pair(mgr, n, key, tap_prefix):
    """(d) and (e) alternately, so that load from elsewhere on the host hits both alike."""
    plain, ports = [], []
    for _ in tqdm(range(n), desc="(d)+(e) warm, alternating", unit="pair"):
        plain.append(launch_once(mgr, "qemu", True, key))
        ports.append(launch_once(mgr, "qemu", True, key, tap_prefix))
    return plain, ports


def summarize(name, runs):
    tot = [r["total_ms"] for r in runs]
    return {"path": name, "n": len(runs), "p50_ms": statistics.median(tot),
            "p90_ms": pct(tot, 90), "min_ms": min(tot),
            "rss_mib_p50": statistics.median(r["rss_kib"] for r in runs) / 1024.0,
            "phases_p50_ms": {ph: statistics.median(r["phases_ms"].get(ph, 0) for r in runs)
                              for ph in runs[0]["phases_ms"]}}


def plot(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    names = [s["path"] for s in summary]
    p50 = [s["p50_ms"] for s in summary]
    p90 = [s["p90_ms"] for s in summary]
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
    ax.bar([i + 0.2 for i in x], p90, width=0.4, label="p90")
    for i, v in enumerate(p50):
        ax.text(i - 0.2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(list(x), names, rotation=10)
    ax.set_ylabel("ms, request → VNF forwarding (log)")
    ax.set_title("bench/launch: same kernel, same run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launches", type=int, default=30, help="launches per path (default 30)")
    ap.add_argument("--out", default="bench/results", help="directory for launch.json/.png")
    ap.add_argument("--skip-stock", action="store_true", help="skip (a), the slow stock path")
    ap.add_argument("--paths", default=",".join(PATHS),
                    help=f"comma-separated paths to run (default: all of {','.join(PATHS)})")
    ap.add_argument("--tap-prefix", default="tap",
                    help="tap name prefix of (e)'s ports (default tap, as Neutron's devnames)")
    ap.add_argument("--state-dir", default="/var/lib/fluidvim-bench")
    ap.add_argument("--run-dir", default="/run/fluidvim-bench")
    args = ap.parse_args(argv)
    paths = [p for p in args.paths.split(",") if p]
    unknown = sorted(set(paths) - set(PATHS))
    if unknown:
        ap.error(f"--paths: unknown {', '.join(unknown)} (known: {', '.join(PATHS)})")
    if args.skip_stock and "stock" in paths:
        paths.remove("stock")
    os.makedirs(args.out, exist_ok=True)
    conf = make_conf(state_dir=args.state_dir, run_dir=args.run_dir)
    mgr = VNFManager(conf)
    mgr.recover()
    for rec in mgr.list(include_pool=True):
        mgr.destroy(rec.id)
    n = args.launches
    results = {}
    try:
        if "stock" in paths:
            stock = StockLibvirt(mgr.kernel, os.path.join(args.state_dir, "stock"), mgr.accel)
            runs = []
            for _ in tqdm(range(n), desc="(a) stock libvirt", unit="vnf"):
                r = stock.launch()
                stock.destroy(r.pop("_cleanup"))
                runs.append(r)
            results["(a) stock libvirt"] = runs
        if "libvirt" in paths:
            results["(b) libvirt cold"] = run_ours(mgr, "libvirt", n, False, "(b) libvirt cold")
        if "qemu" in paths:
            results["(c) qemu direct cold"] = run_ours(mgr, "qemu", n, False, "(c) qemu cold")
        if "warm" in paths or "warm-ports" in paths:
            key = mgr.start_pool(2, nics=2, backend="qemu")
        e_name = "(e) warm pool, ports (MACs + tap names)"
        if "warm" in paths and "warm-ports" in paths:
            results["(d) warm pool"], results[e_name] = run_warm_pair(mgr, n, key,
                                                                      args.tap_prefix)
        elif "warm" in paths:
            results["(d) warm pool"] = run_ours(mgr, "qemu", n, True, "(d) warm pool", key)
        elif "warm-ports" in paths:
            results[e_name] = run_ours(mgr, "qemu", n, True, "(e) warm ports", key,
                                       tap_prefix=args.tap_prefix)
    finally:
        mgr.stop_pool()
        mgr.drain_pool()
        mgr.close()
    summary = [summarize(k, v) for k, v in results.items()]
    ref = summary[0]["p50_ms"]
    print(f"\nbench/launch: {n} launches per path, accel {mgr.accel}, "
          f"image {os.path.getsize(mgr.kernel)} bytes")
    print(f"| path | p50 ms | p90 ms | min ms | x faster than {summary[0]['path']} (p50) | "
          "QEMU RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in summary:
        print(f"| {s['path']} | {s['p50_ms']:.2f} | {s['p90_ms']:.2f} | {s['min_ms']:.2f} | "
              f"{ref / s['p50_ms']:.1f} | {s['rss_mib_p50']:.1f} |")
    print("\nphases (p50 ms):")
    for s in summary:
        print(f"  {s['path']}: " + ", ".join(f"{k} {v:.2f}" for k, v in
                                               s["phases_p50_ms"].items()))
    with open(os.path.join(args.out, "launch.json"), "w") as f:
        json.dump({"accel": mgr.accel, "summary": summary, "runs": results}, f, indent=2)
    plot(summary, os.path.join(args.out, "launch.png"))
    print(f"wrote {args.out}/launch.json and launch.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
