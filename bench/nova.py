# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/nova: the Superfluidity breakdown of a Nova boot — where does API POST → ACTIVE go?

Runs Nova in-process with its own functional fixtures (API over WSGI, conductor, scheduler,
Placement, one nova-compute with ``fluidvim.UnikernelDriver`` booting real VNFs under QEMU;
Glance/Neutron are Nova's fixtures; ``--nic none``). Each boot is timed end to end and split by
timers wrapped around Nova's own methods:

* ``api``              POST /servers until the 202 (``client.post_server``)
* ``api→conductor``    202 … ``SchedulerManager.select_destinations`` starts (RPC cast + conductor)
* ``scheduling``       ``select_destinations`` (Placement GET a_c + filters/weighers + claim)
* ``conductor→compute`` its end … ``ComputeManager._do_build_and_run_instance`` starts
* ``compute pre-spawn`` … ``driver.spawn`` starts (claim, network, block devices, hooks)
* ``spawn``            the driver's spawn (its phases image/spec/stale/launch_*/total in
                       system_metadata)
* ``compute post-spawn`` spawn returns … the instance is saved ACTIVE

(the sum is POST → ACTIVE as nova-compute records it; ``active_polled`` adds the client's GET
/servers/{id} that then sees ACTIVE — the bench does not poll the API while a boot runs, since in
one process that would steal the CPU from the boot.) Two series on the same compute: ``cold``
(flavor extra spec ``fluidvim:warm=false``) and ``warm`` (a pool of 1 shell, refilled between
boots). The reference is the stock define-and-start libvirt path a Nova libvirt driver takes for
the same kernel (``bench.launch.StockLibvirt``: qcow2 overlay, SeaBIOS, the usual devices; Nova's
libvirt driver itself cannot run here), measured in the same run; the "stock Nova" POST → ACTIVE
row is an *estimate* = our Nova overhead (POST → ACTIVE minus spawn) + the stock spawn. The
launch core alone (``VNFManager.launch`` cold and warm, as in ``bench/launch``) runs in the same
process after the Nova series: the floor under the driver's spawn.

    sudo .venv/bin/python -m bench.nova --boots 30      # writes bench/results/nova.{json,png}

``--services`` runs the same boots against real services instead, each its own process
(Keystone, Placement, Glance, nova-api, -conductor, -scheduler, -compute: the cloud of
``tools/nova-e2e.sh``), through the REST API with a keystoneauth session: POST /servers, GET every
20 ms until ACTIVE, DELETE and wait for 404 between boots. Segments come from nova-compute's log
(``Took … to spawn``/``to build``) and the driver's phases; printed next to the in-process numbers
of ``bench/results/nova.json`` when it exists (a different run)::

    sudo .venv/bin/python -m bench.nova --services --boots 20   # writes nova-services.json
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import unittest
import uuid as uuidlib
import warnings

from bench.launch import pct

SEGMENTS = ("api", "api→conductor", "scheduling", "conductor→compute", "compute pre-spawn",
            "spawn", "compute post-spawn")
IMAGE_ID = "5b0f8a61-0e43-4c6e-8f3f-7d1e2c3b4a51"
CONFIG = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"
RESULTS: dict = {}


class _Timers:
    """perf_counter stamps per instance uuid, taken by wrappers around Nova's methods."""

    def __init__(self):
        self.stamps: dict[str, dict[str, float]] = {}

    def mark(self, uuid, key):
        self.stamps.setdefault(uuid, {})[key] = time.perf_counter()

    def wrap(self, owner, name, start_key, end_key, uuid_of):
        orig = getattr(owner, name)

        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            u = uuid_of(args, kwargs)
            if u:
                self.mark(u, start_key)
            try:
                return orig(*args, **kwargs)
            finally:
                if u:
                    self.mark(u, end_key)
        return orig, wrapper


def _instance_uuid(args, kwargs, pos):
    inst = kwargs.get("instance") or (args[pos] if len(args) > pos else None)
    return getattr(inst, "uuid", None)


def _sched_uuid(args, kwargs):
    uuids = kwargs.get("instance_uuids") or (args[5] if len(args) > 5 else None)
    return uuids[0] if uuids else None


def make_case(boots: int):
    from nova.compute import manager as compute_manager
    from nova.scheduler import manager as sched_manager
    from nova.tests.functional import integrated_helpers
    from sqlalchemy import exc as sqla_exc

    from fluidvim.nova_driver import driver as fdriver
    from fluidvim.vnf import conf as vnfconf

    class NovaBench(integrated_helpers.ProviderUsageBaseTestCase):
        compute_driver = "fluidvim.UnikernelDriver"

        def setUp(self):
            super().setUp()
            warnings.filterwarnings("ignore", message=r"The noload\(\) option is deprecated",
                                    category=sqla_exc.SADeprecationWarning)
            tmp = tempfile.mkdtemp(prefix="fluidvim-bench-nova-")
            self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
            run_dir = f"/run/fluidvim-bench-nova-{uuidlib.uuid4().hex[:8]}"
            self.addCleanup(shutil.rmtree, run_dir, ignore_errors=True)
            self.flags(state_dir=os.path.join(tmp, "state"), run_dir=run_dir, pool_size=0,
                       group="vnf")
            self.flags(image_cache_dir=os.path.join(tmp, "images"), group="fluidvim")
            with open(vnfconf.default_kernel(), "rb") as f:
                kernel = f.read()
            # as Glance shows an uploaded image: with its md5 checksum and os_hash
            self.glance.create(None, {
                "id": IMAGE_ID, "name": "fluidvim-vnf", "disk_format": "aki",
                "container_format": "aki", "size": len(kernel), "min_ram": 0, "min_disk": 0,
                "checksum": hashlib.md5(kernel).hexdigest(), "os_hash_algo": "sha512",
                "os_hash_value": hashlib.sha512(kernel).hexdigest(),
                "properties": {"fluidvim_click_config": CONFIG}})
            self.glance._imagedata[IMAGE_ID] = kernel
            self.timers = _Timers()
            for owner, name, s, e, f in (
                    (sched_manager.SchedulerManager, "select_destinations", "sched_start",
                     "sched_end", _sched_uuid),
                    (compute_manager.ComputeManager, "_do_build_and_run_instance",
                     "build_start", "build_end", lambda a, k: _instance_uuid(a, k, 2)),
                    (fdriver.UnikernelDriver, "spawn", "spawn_start", "spawn_end",
                     lambda a, k: _instance_uuid(a, k, 2))):
                orig, wrapper = self.timers.wrap(owner, name, s, e, f)
                setattr(owner, name, wrapper)
                self.addCleanup(setattr, owner, name, orig)
            self.compute = self._start_compute("host1")
            self.addCleanup(lambda: self.compute.manager.driver.manager.destroy_all())


        def _boot(self, flavor_id):
            from nova import context as nova_context
            from nova.db.main import api as db

            body = self._build_server(image_uuid=IMAGE_ID, flavor_id=flavor_id,
                                      networks="none")
            t0 = time.perf_counter()
            server = self.api.post_server({"server": body})
            t1 = time.perf_counter()
            # wait for nova-compute's own end stamp without polling the API: in this one
            # process a GET every few ms would steal the CPU from the boot being measured
            while "build_end" not in self.timers.stamps.get(server["id"], {}):
                if time.perf_counter() - t0 > 120:
                    raise RuntimeError("boot did not finish in 120 s")
                time.sleep(0.002)
            s = self._wait_for_state_change(server, "ACTIVE")
            t_poll = time.perf_counter()
            st = self.timers.stamps.pop(server["id"])
            sysmeta = db.instance_system_metadata_get(nova_context.get_admin_context(),
                                                      server["id"])
            seg = {
                "api": t1 - t0,
                "api→conductor": st["sched_start"] - t1,
                "scheduling": st["sched_end"] - st["sched_start"],
                "conductor→compute": st["build_start"] - st["sched_end"],
                "compute pre-spawn": st["spawn_start"] - st["build_start"],
                "spawn": st["spawn_end"] - st["spawn_start"],
                "compute post-spawn": st["build_end"] - st["spawn_end"],
            }
            run = {"segments_ms": {k: round(v * 1000.0, 3) for k, v in seg.items()},
                   "active_ms": round((st["build_end"] - t0) * 1000.0, 3),
                   "active_polled_ms": round((t_poll - t0) * 1000.0, 3),
                   "kind": sysmeta.get("fluidvim_launch_kind"),
                   "spawn_phases_ms": json.loads(sysmeta.get("fluidvim_phases_ms", "{}"))}
            self._delete_server(s)
            return run

        def test_bench(self):
            manager = self.compute.manager.driver.manager
            cold_flavor = self._create_flavor(memory_mb=32, vcpu=1, disk=1, extra_spec={
                "fluidvim:warm": "false"})
            warm_flavor = self._create_flavor(memory_mb=32, vcpu=1, disk=1)
            self._boot(cold_flavor)                                  # warm-up, not counted
            RESULTS["accel"] = manager.accel
            RESULTS["cold"] = [self._boot(cold_flavor) for _ in _progress(boots, "nova cold")]
            key = manager.start_pool(1, nics=2, memory_mb=32, vcpus=1)
            warm = []
            for _ in _progress(boots, "nova warm"):
                # measure the warm path itself, not the refill racing it on 2 cores
                assert manager.wait_pool(key, 1, timeout=60), "the pool did not refill"
                warm.append(self._boot(warm_flavor))
            RESULTS["warm"] = warm
            manager.stop_pool()
            for kind, runs in (("cold", RESULTS["cold"]), ("warm", warm)):
                bad = [r["kind"] for r in runs if r["kind"] != kind]
                assert not bad, f"{kind} series had launches of kind {bad}"

    return NovaBench("test_bench")


def _progress(n, desc):
    try:
        from tqdm import tqdm
        return tqdm(range(n), desc=desc, unit="boot", file=sys.stderr)
    except ImportError:
        return range(n)


def run_stock(n):
    from bench.launch import StockLibvirt
    from fluidvim.vnf import backends, conf as vnfconf

    accel, _ = backends.detect_accel("auto")
    stock = StockLibvirt(vnfconf.default_kernel(), "/var/lib/fluidvim-bench/stock", accel)
    runs = []
    for _ in _progress(n, "stock libvirt"):
        r = stock.launch()
        stock.destroy(r.pop("_cleanup"))
        runs.append(r)
    return runs


def run_core(n):
    """The launch core alone (``VNFManager.launch``, as ``bench/launch`` (c)/(d) call it), in
    this process after the Nova run: the floor under the driver's spawn, same machine state."""
    from bench.launch import run_ours
    from fluidvim.vnf.manager import VNFManager, make_conf

    tmp = tempfile.mkdtemp(prefix="fluidvim-bench-core-")
    run_dir = f"/run/fluidvim-bench-core-{uuidlib.uuid4().hex[:8]}"
    mgr = VNFManager(make_conf(state_dir=tmp, run_dir=run_dir))
    try:
        cold = run_ours(mgr, "qemu", n, False, "launch core cold")
        key = mgr.start_pool(2, nics=2, backend="qemu")
        warm = run_ours(mgr, "qemu", n, True, "launch core warm", key)
    finally:
        mgr.stop_pool()
        mgr.drain_pool()
        mgr.close()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"cold": cold, "warm": warm}


def summarize(results):
    def stats(vals):
        return {"p50": statistics.median(vals), "p90": pct(vals, 90), "min": min(vals)}

    out = {}
    for kind in ("cold", "warm"):
        runs = results[kind]
        out[kind] = {
            "n": len(runs),
            "active": stats([r["active_ms"] for r in runs]),
            "active_polled": stats([r["active_polled_ms"] for r in runs]),
            "spawn": stats([r["segments_ms"]["spawn"] for r in runs]),
            "overhead": stats([r["active_ms"] - r["segments_ms"]["spawn"] for r in runs]),
            "segments_p50": {s: statistics.median(r["segments_ms"][s] for r in runs)
                             for s in SEGMENTS},
            "spawn_phases_p50": {p: statistics.median(r["spawn_phases_ms"].get(p, 0)
                                                      for r in runs)
                                 for p in runs[0]["spawn_phases_ms"]},
        }
    if "core" in results:
        out["core"] = {kind: {"n": len(runs), "launch": stats([r["total_ms"] for r in runs]),
                              "phases_p50": {p: statistics.median(r["phases_ms"][p] for r in runs)
                                             for p in runs[0]["phases_ms"]}}
                       for kind, runs in results["core"].items()}
    stock = results["stock"]
    out["stock"] = {"n": len(stock), "spawn": stats([r["total_ms"] for r in stock]),
                    "phases_p50": {p: statistics.median(r["phases_ms"][p] for r in stock)
                                   for p in stock[0]["phases_ms"]}}
    return out


def print_table(s, n):
    st = s["stock"]["spawn"]
    print(f"\nbench/nova: {n} boots per series, accel {RESULTS['accel']}, Nova in-process "
          "(functional fixtures), --nic none, 32 MiB / 1 vCPU / 2 NICs")
    print("| what | p50 ms | p90 ms | min ms | × vs stock spawn (p50) |")
    print("|---|---:|---:|---:|---:|")
    rows = [("stock libvirt define+start spawn (reference)", st),
            ("fluidvim driver spawn, cold", s["cold"]["spawn"]),
            ("fluidvim driver spawn, warm", s["warm"]["spawn"])]
    if "core" in s:
        rows += [("launch core alone (VNFManager.launch), cold", s["core"]["cold"]["launch"]),
                 ("launch core alone (VNFManager.launch), warm", s["core"]["warm"]["launch"])]
    for name, v in rows:
        print(f"| {name} | {v['p50']:.2f} | {v['p90']:.2f} | {v['min']:.2f} | "
              f"{st['p50'] / v['p50']:.1f} |")
    est = s["cold"]["overhead"]["p50"] + st["p50"]
    print("| what | p50 ms | p90 ms | min ms | × vs stock Nova estimate (p50) |")
    print("|---|---:|---:|---:|---:|")
    print(f"| stock Nova POST → ACTIVE, estimate (Nova overhead + stock spawn) | {est:.2f} | "
          "– | – | 1.0 |")
    for kind in ("cold", "warm"):
        for key, label in (("active", "POST → ACTIVE (compute saves ACTIVE)"),
                           ("active_polled", "POST → ACTIVE seen by a client GET"),
                           ("overhead", "Nova overhead (POST → ACTIVE − spawn)")):
            v = s[kind][key]
            print(f"| {kind}: {label} | {v['p50']:.2f} | {v['p90']:.2f} | {v['min']:.2f} | "
                  f"{est / v['p50']:.1f} |")
    print("\nsegments of POST → ACTIVE (p50 ms):")
    print("| segment | cold | warm |")
    print("|---|---:|---:|")
    for seg in SEGMENTS:
        print(f"| {seg} | {s['cold']['segments_p50'][seg]:.2f} | "
              f"{s['warm']['segments_p50'][seg]:.2f} |")
    for kind in ("cold", "warm"):
        print(f"spawn phases, {kind} (p50 ms): " + ", ".join(
            f"{k} {v:.2f}" for k, v in s[kind]["spawn_phases_p50"].items()))
    for kind in s.get("core", {}):
        print(f"launch core alone, {kind} (p50 ms): " + ", ".join(
            f"{k} {v:.2f}" for k, v in s["core"][kind]["phases_p50"].items()))
    print("stock spawn phases (p50 ms): " + ", ".join(
        f"{k} {v:.2f}" for k, v in s["stock"]["phases_p50"].items()))


def plot(s, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stock_nova = dict(s["cold"]["segments_p50"], spawn=s["stock"]["spawn"]["p50"])
    bars = [("stock Nova\n(estimate)", stock_nova), ("fluidvim\ncold", s["cold"]["segments_p50"]),
            ("fluidvim\nwarm", s["warm"]["segments_p50"])]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
    colors = plt.cm.tab10.colors
    # left: all three; right: zoom on fluidvim (stacked bars on a log axis would lie)
    for ax, shown in zip(axes, (bars, bars[1:])):
        for i, (_name, segs) in enumerate(shown):
            bottom = 0.0
            for j, seg in enumerate(SEGMENTS):
                v = max(segs[seg], 0.0)
                ax.bar(i, v, bottom=bottom, color=colors[j % 10],
                       label=seg if i == 0 else None, width=0.6)
                bottom += v
            ax.text(i, bottom, f"{bottom:.0f} ms", ha="center", va="bottom", fontsize=9)
        ax.set_xticks(range(len(shown)), [b[0] for b in shown])
        ax.set_ylabel("ms, API POST → ACTIVE (p50 per segment)")
    axes[0].legend(fontsize=8, loc="upper right")
    axes[1].set_title("fluidvim only (zoom)", fontsize=10)
    fig.suptitle("bench/nova: where a Nova boot's time goes (same kernel, same run)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _compute_log_times(log_path, uuid):
    """nova-compute's and the driver's own numbers for one instance, from its log."""
    import ast
    import re

    out = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            if uuid not in line:
                continue
            m = re.search(r"Took ([0-9.]+) seconds to (spawn|build)", line)
            if m:
                out[f"compute_{m.group(2)}_ms"] = float(m.group(1)) * 1000.0
            m = re.search(r"fluidvim: spawned .* as (\w+) VNF .* in ([0-9.]+) ms .*?: (\{.*\})",
                          line)
            if m:
                out["kind"] = m.group(1)
                out["driver_spawn_ms"] = float(m.group(2))
                out["driver_phases_ms"] = ast.literal_eval(m.group(3))
    return out


def run_services(boots: int, out_dir: str) -> int:
    """The boots of this bench against real services in their own processes."""
    from fluidvim.vnf import conf as vnfconf
    from tests.e2e import nova_services as ns

    kernel = vnfconf.default_kernel()
    stack = ns.Stack(f"{ns.DEFAULT_WORKDIR}-bench", kernel=kernel, slot_capacity=4096,
                     pool_size=1)
    results = {"cold": [], "warm": []}
    try:
        stack.start()
        s = stack.session()
        compute = {"service_type": "compute"}
        image = {"service_type": "image"}
        img = s.post("/v2/images", json={"name": "vnf-bench", "disk_format": "aki",
                                         "container_format": "aki",
                                         "fluidvim_click_config": CONFIG},
                     endpoint_filter=image).json()
        with open(kernel, "rb") as f:
            s.put(f"/v2/images/{img['id']}/file", data=f.read(), endpoint_filter=image,
                  headers={"Content-Type": "application/octet-stream"})
        flavors = {}
        for kind, specs in (("cold", {"fluidvim:warm": "false"}), ("warm", {})):
            fl = s.post("/flavors", json={"flavor": {"name": f"vnf.bench.{kind}", "ram": 32,
                                                     "vcpus": 1, "disk": 0}},
                        endpoint_filter=compute).json()["flavor"]
            specs = dict(specs, **{"resources:CUSTOM_VNF_SESSION_SLOT": "1"})
            s.post(f"/flavors/{fl['id']}/os-extra_specs", json={"extra_specs": specs},
                   endpoint_filter=compute)
            flavors[kind] = fl["id"]
        headers = {"OpenStack-API-Version": "compute 2.37"}
        for i in _progress(2 * boots + 2, "nova services (cold/warm alternating)"):
            kind = ("cold", "warm")[i % 2]
            if kind == "warm":
                time.sleep(0.5)            # let the pool refill its shell (booted in ~60 ms)
            t0 = time.perf_counter()
            srv = s.post("/servers", json={"server": {
                "name": f"bench-{i}", "imageRef": img["id"], "flavorRef": flavors[kind],
                "networks": "none"}}, endpoint_filter=compute, headers=headers).json()["server"]
            t_api = time.perf_counter()
            deadline = time.monotonic() + 120
            while True:
                st = s.get(f"/servers/{srv['id']}", endpoint_filter=compute,
                           headers=headers).json()["server"]
                if st["status"] in ("ACTIVE", "ERROR"):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server {srv['id']} not ACTIVE within 120 s: {st}")
                time.sleep(0.02)
            t_active = time.perf_counter()
            if st["status"] != "ACTIVE":
                raise RuntimeError(f"server {srv['id']} went to ERROR: {st.get('fault')}")
            s.delete(f"/servers/{srv['id']}", endpoint_filter=compute)
            deadline = time.monotonic() + 60
            while s.get(f"/servers/{srv['id']}", endpoint_filter=compute,
                        raise_exc=False).status_code != 404:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server {srv['id']} was not deleted within 60 s")
                time.sleep(0.05)
            if i < 2:
                continue                   # one warm-up boot per series (image download, pool)
            r = {"api_ms": (t_api - t0) * 1000.0, "active_polled_ms": (t_active - t0) * 1000.0}
            r.update(_compute_log_times(stack.log("nova-compute"), srv["id"]))
            results[kind].append(r)
    finally:
        stack.stop()

    def p50(vals):
        return statistics.median(vals) if vals else float("nan")

    summary = {}
    for kind, runs in results.items():
        summary[kind] = {
            "n": len(runs),
            "launch_kinds": sorted({r.get("kind", "?") for r in runs}),
            "api_p50": p50([r["api_ms"] for r in runs]),
            "active_polled_p50": p50([r["active_polled_ms"] for r in runs]),
            "active_polled_p90": pct([r["active_polled_ms"] for r in runs], 90),
            "compute_build_p50": p50([r["compute_build_ms"] for r in runs]),
            "compute_spawn_p50": p50([r["compute_spawn_ms"] for r in runs]),
            "driver_spawn_p50": p50([r["driver_spawn_ms"] for r in runs]),
            "driver_spawn_p90": pct([r["driver_spawn_ms"] for r in runs], 90),
        }
    inproc = None
    path = os.path.join(out_dir, "nova.json")
    if os.path.exists(path):
        with open(path) as f:
            inproc = json.load(f)["summary"]
    print(f"\nbench/nova --services: {boots} boots per series, real services (one process each), "
          "--nic none, 32 MiB / 1 vCPU / 2 NICs")
    print("| what (p50 ms) | services cold | services warm | in-process cold | in-process warm |")
    print("|---|---:|---:|---:|---:|")
    rows = [("POST → ACTIVE seen by a client GET", "active_polled_p50", "active_polled"),
            ("POST → 202 (api)", "api_p50", None),
            ("compute: build (claim → ACTIVE saved)", "compute_build_p50", None),
            ("compute: spawn (as nova-compute logs it)", "compute_spawn_p50", None),
            ("driver spawn", "driver_spawn_p50", "spawn")]
    for label, key, ikey in rows:
        ip = ["–", "–"]
        if inproc and ikey:
            ip = [f"{inproc[k][ikey]['p50']:.1f}" for k in ("cold", "warm")]
        print(f"| {label} | {summary['cold'][key]:.1f} | {summary['warm'][key]:.1f} | "
              f"{ip[0]} | {ip[1]} |")
    print("launch kinds seen: cold series " + ",".join(summary["cold"]["launch_kinds"]) +
          "; warm series " + ",".join(summary["warm"]["launch_kinds"]))
    with open(os.path.join(out_dir, "nova-services.json"), "w") as f:
        json.dump({"summary": summary, "runs": results}, f, indent=2)
    print(f"wrote {out_dir}/nova-services.json")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--boots", type=int, default=30, help="boots per series (default 30)")
    ap.add_argument("--out", default="bench/results", help="directory for nova.json/.png")
    ap.add_argument("--services", action="store_true",
                    help="real services in their own processes (see tests/e2e/nova_services.py)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        ap.error("needs root (QEMU with taps, libvirt qemu:///system)")
    os.makedirs(args.out, exist_ok=True)
    if args.services:
        return run_services(args.boots, args.out)
    case = make_case(args.boots)
    result = unittest.TestResult()
    case.run(result)
    # Nova's logging fixture leaves its handler behind: keep the rest of the output readable
    logging.getLogger().setLevel(logging.WARNING)
    for _, tb in result.errors + result.failures:
        print(tb, file=sys.stderr)
    if not result.wasSuccessful() or "warm" not in RESULTS:
        print("bench/nova: the Nova run failed", file=sys.stderr)
        return 1
    RESULTS["core"] = run_core(args.boots)
    RESULTS["stock"] = run_stock(args.boots)
    s = summarize(RESULTS)
    print_table(s, args.boots)
    with open(os.path.join(args.out, "nova.json"), "w") as f:
        json.dump({"summary": s, "runs": RESULTS}, f, indent=2)
    plot(s, os.path.join(args.out, "nova.png"))
    print(f"wrote {args.out}/nova.json and nova.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
