# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/launchcpu: what one cold launch costs the host, and how many per second it sustains.

N cold launches (QEMU direct backend, 1 unplugged NIC, ``FromDevice(0) -> Discard;``) from C
threads through ``VNFManager.launch``, for each variant, interleaved over R rounds in one run:

  defaults     [vnf] qemu_binary = auto (the microvm build), firmware = auto (fluidvim-pvh.bin),
               boot_log = brief
  qboot        the same with QEMU's default firmware, qboot (firmware = qemu: before fluidvim-pvh)
  log-full     the defaults plus the whole boot summary on COM1 (boot_log = full: an exit per byte)
  full+full    the full qemu-system-x86_64, qboot and the full boot log (the path of 2026-11-24)

The run directories (sockets, console logs, spec.json: six inodes per VNF) go under --run-root
(default /run). On a real host /run is a tmpfs; in a container or sandbox it may be a disk file
system, and ext4 without a journal makes each new inode scan past recently deleted ones: ~8 ms
more host CPU per launch in this sandbox. The file system type is printed and recorded.

Host CPU per launch comes from /proc/stat (user, system) over the burst, so it includes QEMU,
the guest's exits, the launcher and the kernel's work for them. Not a test: no thresholds.

    sudo .venv/bin/python -m bench.launchcpu                       # 100 launches x 4 variants x 2 rounds
    sudo .venv/bin/python -m bench.launchcpu --launches 200 --concurrency 8 --rounds 3
    sudo mount -t tmpfs tmpfs /mnt/rt && sudo .venv/bin/python -m bench.launchcpu --run-root /mnt/rt
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import statistics
import tempfile
import time

from tqdm import tqdm

from fluidvim.orchestrator.power.sources import ProcReader
from fluidvim.vnf.manager import VNFManager, make_conf

IDLE = "FromDevice(0) -> Discard;"
# name: ([vnf] qemu_binary, boot_log, firmware)
VARIANTS = {"defaults": ("auto", "brief", "auto"), "qboot": ("auto", "brief", "qemu"),
            "log-full": ("auto", "full", "auto"), "full+full": ("qemu-system-x86_64", "full", "qemu")}
TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def fs_type(path: str) -> str:
    """The file system type of the mount holding path (from /proc/self/mounts)."""
    path, best = os.path.realpath(path), ("", "?")
    with open("/proc/self/mounts") as f:
        for line in f:
            _dev, mnt, typ = line.split()[:3]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[0]):
                best = (mnt, typ)
    return best[1]


def burst(variant: str, n: int, concurrency: int, run_root: str = "/run") -> dict:
    binary, boot_log, firmware = VARIANTS[variant]
    state = tempfile.mkdtemp(prefix="fluidvim-launchcpu-")
    tag = os.urandom(3).hex()
    mgr = VNFManager(make_conf(state_dir=state, run_dir=os.path.join(run_root, f"fluidvim-launchcpu-{tag}"),
                               backend="qemu", qemu_binary=binary, boot_log=boot_log,
                               firmware=firmware))
    ids = []
    try:
        c0, t0 = ProcReader().host_fields(), time.monotonic()
        with cf.ThreadPoolExecutor(concurrency) as ex:
            for r in ex.map(lambda i: mgr.launch(IDLE, name=f"lc{i}-{tag}", nics=[None],
                                                 warm=False), range(n)):
                ids.append(r.vnf_id)
        wall = time.monotonic() - t0
        c1 = ProcReader().host_fields()
    finally:
        for v in ids:
            mgr.destroy(v)
        mgr.close()
        shutil.rmtree(state, ignore_errors=True)
    d = {k: (c1[k] - c0[k]) * TICK_MS / n for k in c0}
    return {"variant": variant, "launches_per_s": round(n / wall, 1),
            "cpu_ms_per_launch": round(d["user"] + d["system"] + d["softirq"] + d["irq"], 1),
            "user_ms": round(d["user"], 1), "system_ms": round(d["system"], 1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launches", type=int, default=100, help="per burst (default %(default)s)")
    ap.add_argument("--concurrency", type=int, default=4, help="threads (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default %(default)s)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated (default: {','.join(VARIANTS)})")
    ap.add_argument("--run-root", default="/run",
                    help="where the VNFs' run directories go (default %(default)s; see above)")
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    runs = []
    for _ in tqdm(range(args.rounds), desc="rounds"):
        for v in variants:
            runs.append(burst(v, args.launches, args.concurrency, args.run_root))
            print(json.dumps(runs[-1]))
    summary = {}
    for v in variants:
        mine = [r for r in runs if r["variant"] == v]
        summary[v] = {k: statistics.median(r[k] for r in mine)
                      for k in ("launches_per_s", "cpu_ms_per_launch", "user_ms", "system_ms")}
    base = summary.get("qboot")
    run_fs = fs_type(args.run_root)
    print(f"\n{args.launches} cold launches per burst, {args.concurrency} threads, "
          f"{args.rounds} interleaved rounds, run directories on {args.run_root} ({run_fs}); "
          "medians:")
    for v, s in summary.items():
        ratio = (f"  {s['launches_per_s'] / base['launches_per_s']:.2f}x, CPU "
                 f"{s['cpu_ms_per_launch'] / base['cpu_ms_per_launch']:.2f}x qboot") if base else ""
        print(f"  {v:11s} {s['launches_per_s']:6.1f}/s  host CPU {s['cpu_ms_per_launch']:5.1f} ms "
              f"per launch (user {s['user_ms']:.1f}, system {s['system_ms']:.1f}){ratio}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "launchcpu.json"), "w") as f:
        json.dump({"launches": args.launches, "concurrency": args.concurrency,
                   "rounds": args.rounds, "run_root": args.run_root, "run_root_fs": run_fs,
                   "summary": summary, "runs": runs,
                   "host_cpus": os.cpu_count()}, f, indent=2)


if __name__ == "__main__":
    main()
