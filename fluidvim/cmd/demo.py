# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim demo``: launch VNFs cold and warm through the embedded local zone, send real traffic
through a firewall VNF between two network namespaces, and show phases, session slots, queuing delay
and a plot."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid

from tqdm import tqdm

from fluidvim.common.clicommon import setup_logging
from fluidvim.common.measure import median, quantile
from fluidvim.vnf import states as vstates, testnet
from fluidvim.vnf.manager import VNFManager, make_conf

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"
FIREWALL = """// web, ARP and ping from a to b pass; everything else from a is dropped and counted
fw :: IPFilter(allow arp, allow icmp, allow tcp dst port 80, deny all);
FromDevice(0) -> fw -> passed :: Counter -> ToDevice(1);
fw[1] -> blocked :: Counter -> Discard;
FromDevice(1) -> back :: Counter -> ToDevice(0);
"""


def _phase_table(results, phases):
    rows = []
    for ph in phases:
        vals = [r.phases_ms.get(ph, 0.0) for r in results]
        rows.append((ph, median(vals), quantile(vals, 0.9, method="nearest")))
    tot = [r.total_ms for r in results]
    rows.append(("TOTAL", median(tot), quantile(tot, 0.9, method="nearest")))
    return rows


def _print_table(title, rows):
    print(f"\n{title}")
    print(f"  {'phase':<12}{'p50 ms':>10}{'p90 ms':>10}")
    for name, p50, p90 in rows:
        print(f"  {name:<12}{p50:>10.2f}{p90:>10.2f}")


def run(args) -> int:
    from fluidvim.vnf.manager import COLD_PHASES, WARM_PHASES

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    # a run dir of its own: another demo's VNFs (another --out) are not this one's orphans
    run_dir = f"/run/fluidvim-demo-{uuid.uuid4().hex[:8]}"
    conf = make_conf(state_dir=os.path.join(out, "state"), run_dir=run_dir,
                     backend=getattr(args, "backend", None) or vstates.QEMU)
    setup_logging(conf, args.verbose)
    mgr = VNFManager(conf)
    mgr.recover()
    for rec in mgr.list(include_pool=True):          # leftovers of an interrupted demo
        mgr.destroy(rec.id)
    be = mgr.backend()
    size = os.path.getsize(mgr.kernel)
    print(f"fluidvim demo: backend {be.name} ({be.machine}), accelerator {mgr.accel} "
          f"({mgr.accel_reason}), VNF image {mgr.kernel} ({size / 1024:.1f} KiB)")
    n = args.launches
    net = testnet.TestNet("fvd", 77)
    report = {"backend": be.name, "accel": mgr.accel, "image_bytes": size}
    try:
        # 1. cold launches: boot + configure, each destroyed after
        cold = []
        for _ in tqdm(range(n), desc="cold launches", unit="vnf"):
            res = mgr.launch(FORWARD, nics=[None, None], warm=False)
            cold.append(res)
            mgr.destroy(res.vnf_id)
        # 2. warm launches from a pool of 2 shells, refilled in the background
        key = mgr.start_pool(2, nics=2)
        warm, refill = [], []
        for _ in tqdm(range(n), desc="warm launches", unit="vnf"):
            t = time.perf_counter()
            if not mgr.wait_pool(key, 2, timeout=60):   # refill done: measure the warm path itself
                raise RuntimeError("warm pool did not refill within 60 s")
            refill.append((time.perf_counter() - t) * 1000)
            res = mgr.launch(FORWARD, nics=[None, None], warm=True)
            if res.kind != vstates.WARM:
                raise RuntimeError("expected a warm launch")
            warm.append(res)
            mgr.destroy(res.vnf_id)
        _print_table(f"cold launch ({n}x, request -> VNF forwarding)",
                     _phase_table(cold, COLD_PHASES))
        _print_table(f"warm launch ({n}x, request -> VNF forwarding)",
                     _phase_table(warm, WARM_PHASES))
        boot_us = [r.boot_us for r in cold if r.boot_us]
        cold_p50 = median(r.total_ms for r in cold)
        warm_p50 = median(r.total_ms for r in warm)
        print(f"  guest-measured boot (VM creation in QEMU -> ready): p50 {median(boot_us):.0f}"
              f" us; warm is {cold_p50 / warm_p50:.0f}x faster than cold")

        # 3. real traffic through a firewall VNF between two namespaces
        net.up()
        fw = mgr.launch(FIREWALL, name="demo-fw", nics=net.bridges, slots=4)
        print(f"\nfirewall VNF {fw.name}: {fw.kind} launch in {fw.total_ms:.2f} ms, "
              f"4 session slots, {net.ns_a} ({net.ip_a}) -> VNF -> {net.ns_b} ({net.ip_b})")
        server = net.serve_tcp(80, 22)
        try:
            replies = net.ping(3)
            print(f"  ping a -> b: {replies}/3 replies")
            web = net.tcp_connect(80)
            ssh = net.tcp_connect(22, timeout_s=1.0)
            print(f"  tcp/80 (allowed): {'connected' if web else 'FAILED'}; "
                  f"tcp/22 (denied): {'connected (WRONG)' if ssh else 'dropped'}")
            free = mgr.stats(fw.vnf_id)["slots"]["free"]
            est, holder = net.hold_connections(80, free + 2, timeout_s=1.0)
            st = mgr.stats(fw.vnf_id)
            print(f"  session slots: {free} free, {free + 2} connections tried -> {est} "
                  f"established; VNF reports {st['slots']['used']}/{st['slots']['total']} used, "
                  f"{st['slots']['rejected']} packets of new sessions rejected")
            qd = mgr.queuing_delay()
            print(f"  queuing delay (expected time to a new slot = on-demand launch): "
                  f"{qd['seconds'] * 1000:.2f} ms ({qd['basis']} launches, "
                  f"{qd['warm_shells']} warm shell(s) ready)")
            holder.terminate()
            holder.wait()
        finally:
            server.terminate()
            server.wait()
        for e in st["elements"]:
            if e["class"] == "Counter":
                print(f"  counter {e['name']:<8} {e['count']} packets")
        lat = st["latency_ns"]
        print(f"  per-packet processing latency: p50 >= {lat['p50']} ns, p99 >= {lat['p99']} ns")
        report.update({
            "cold_ms": [r.total_ms for r in cold], "warm_ms": [r.total_ms for r in warm],
            "cold_phases": [r.phases_ms for r in cold], "warm_phases": [r.phases_ms for r in warm],
            "boot_us": boot_us, "pool_refill_wait_ms": refill,
            "traffic": {"ping_replies": replies, "tcp80": web, "tcp22": ssh,
                        "slots_free": free, "tried": free + 2, "established": est},
            "firewall_stats": st, "queuing_delay": qd})
        with open(os.path.join(out, "demo.json"), "w") as f:
            json.dump(report, f, indent=2)
        png = os.path.join(out, "demo.png")
        plot(report, cold, warm, png)
        print(f"\nwrote {png} and {os.path.join(out, 'demo.json')}")
        ok = replies == 3 and web and not ssh and est == free
        ok = orchestrator_part(mgr, out, report) and ok
        with open(os.path.join(out, "demo.json"), "w") as f:
            json.dump(report, f, indent=2, default=str)
        return 0 if ok else 1
    finally:
        mgr.stop_pool()
        for rec in mgr.list(include_pool=True):
            mgr.destroy(rec.id)
        net.down()
        mgr.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def plot(report, cold, warm, path):
    import matplotlib  # lazy: ~300 ms, only when plotting (ARCHITECTURE.md: lazy imports)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fluidvim.vnf.manager import COLD_PHASES, WARM_PHASES

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    ax = axes[0]
    colors = {"spec": "#bbbbbb", "net": "#8fbc8f", "spawn": "#6495ed", "boot": "#ffa500",
              "configure": "#cd5c5c", "claim": "#9370db", "record": "#deb887"}
    for x, (_label, results, phases) in enumerate((("cold", cold, COLD_PHASES),
                                                  ("warm", warm, WARM_PHASES))):
        bottom = 0.0
        for ph in phases:
            v = median(r.phases_ms.get(ph, 0.0) for r in results)
            ax.bar(x, v, bottom=bottom, color=colors[ph], label=ph if x == 0 or ph == "claim"
                   else None, width=0.6)
            bottom += v
        ax.text(x, bottom, f"{bottom:.1f} ms", ha="center", va="bottom")
    ax.set_xticks([0, 1], ["cold", "warm"])
    ax.set_ylabel("median ms, request → forwarding")
    ax.set_title("launch phases")
    ax.legend(fontsize=8)
    ax = axes[1]
    ax.plot([r.total_ms for r in cold], "o-", label="cold")
    ax.plot([r.total_ms for r in warm], "s-", label="warm")
    ax.set_yscale("log")
    ax.set_xlabel("launch #")
    ax.set_ylabel("ms (log)")
    ax.set_title(f"{report['backend']} / {report['accel']}: each launch")
    ax.legend()
    ax = axes[2]
    buckets = report["firewall_stats"]["latency_ns"]["buckets_log2"]
    ax.bar(range(len(buckets)), buckets, color="#4682b4")
    ax.set_xlabel("processing time bucket: [2^i, 2^(i+1)) ns")
    ax.set_ylabel("packets")
    ax.set_title("firewall VNF per-packet latency")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _upgrade_own_database(url: str) -> None:
    """The demo's database (out/demo/state) is its own: a run of a newer release upgrades it in
    place, as `fluidvim-manage db sync` would, instead of refusing it as a service does."""
    from fluidvim.common import migration
    from fluidvim.common.sql import make_engine

    if not os.path.exists(url[len("sqlite:///"):]):
        return                                     # a first run: the store creates it at head
    engine = make_engine(url)
    try:
        for name in ("orchestrator", "evaluator"):
            before, after = migration.sync(engine, name)
            if before.revision != after:
                print(f"  {name} database of an earlier run: upgraded {before.revision} -> {after}")
    finally:
        engine.dispose()


def orchestrator_part(mgr, out, report) -> bool:
    """The orchestrator over the same embedded local zone (in-process, no RabbitMQ needed):
    register a service, place it (real boot and load probes), resolve sessions until the slots
    run out and a fast-track on-demand launch makes a new one, explain the decision, plot."""
    from fluidvim.evaluator import cache as pcache, probes, stage1
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.cli import print_explanation
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.service import Orchestrator
    from fluidvim.orchestrator.states import DECISION_DEPLOYED

    print("\norchestrator (embedded local zone): register, place, resolve until slots run out")
    url = "sqlite:///" + os.path.join(out, "state", "orchestrator.sqlite")
    _upgrade_own_database(url)
    oconf = orchconf.make_conf(connection=url, reservation_ttl=600.0)
    store = Store(url)
    runner = stage1.Stage1Runner(pcache.ProbeCache(store.engine), [
        probes.StaticProbe(), probes.BootProbe(n=2),
        probes.LoadProbe(sessions=(1, 10, 50), step_s=0.5, prefix="fvdlp", subnet=76)])
    orch = Orchestrator(oconf, manager=mgr, stage1=runner)
    try:
        orch.register_service("demo-fw", FORWARD, slots=2, deadline_ms=50.0,
                              max_queuing_delay_s=2.0, aliases={"premium": 2})
        placed = orch.place("demo-fw", deploy=True)
        print(f"  placement {placed['decision_id'][:8]}: demo-fw -> {placed['zone']}/"
              f"{placed['host']} in {placed['total_ms']:.0f} ms (incl. probing), deployed "
              f"{placed['instance']['name']}")
        print_explanation(orch.explain(placed["decision_id"]))
        again = orch.place("demo-fw")
        print(f"  a second placement: {again['total_ms']:.1f} ms (probe results cached, "
              f"ranking reused)")
        resolves = []
        for i in range(5):
            name = "premium" if i == 4 else "demo-fw"
            r = orch.resolve(name)
            resolves.append(r)
            how = ("existing slot" if r["kind"] == "slot" else
                   f"fast-track launch, predicted {r['predicted_delay_s'] * 1000:.1f} ms, "
                   f"slot after {r['waited_s'] * 1000:.1f} ms")
            print(f"  resolve {name:<8} -> {r['instance'][:8]} ({how}); {r['free_slots']} left")
        print(f"  instances: {len(orch.store.instances('demo-fw'))}, launches recorded: "
              f"{len(orch.store.launches(zone='local', service='demo-fw', limit=100))}")
        report["orchestrator"] = {"placement": placed, "second_placement_ms": again["total_ms"],
                                  "resolves": resolves}
        plot_orchestrator(resolves, os.path.join(out, "orchestrator.png"))
        print(f"  wrote {os.path.join(out, 'orchestrator.png')}")
        ok = (placed["status"] == DECISION_DEPLOYED and resolves[0]["kind"] == "slot"
              and any(r["kind"] == "launched" for r in resolves))
        return ns_part(orch, report) and ok
    finally:
        for inst in orch.store.instances():
            orch.terminate(inst.id)
        orch.close()
        store.close()


def ns_part(orch, report) -> bool:
    """A network service from the sample SOL006 descriptors (etc/mano): firewall and forwarder
    chained by three virtual links in the local zone, traffic from a namespace on the ``left``
    link to one on ``right``, then ``ns rm``."""
    from fluidvim.orchestrator.mano import descriptors
    from fluidvim.orchestrator.states import NS_RUNNING

    # the checkout's etc/mano (this file is fluidvim/cmd/demo.py)
    mano = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "etc",
                        "mano")
    nsd_path = os.path.join(mano, "fw_chain_ns", "fw_chain_nsd.yaml")
    vnfd_paths = [os.path.join(mano, "firewall_vnf", "firewall_vnfd.yaml"),
                  os.path.join(mano, "forwarder_vnf", "forwarder_vnfd.yaml")]
    print(f"\nnetwork service from SOL006 descriptors ({os.path.relpath(nsd_path)})")
    # the NS's bridges are named from (zone, NS name): a name of its own, so two demos at once
    # do not share (and delete) each other's virtual links
    ns_name = f"demo-ns-{uuid.uuid4().hex[:6]}"
    _plan, nsd, vnfds = descriptors.plan_files(nsd_path, vnfd_paths, name=ns_name)
    r = orch.ns.deploy(nsd.to_dict(), [v.to_dict() for v in vnfds], name=ns_name)
    try:
        for s in r["steps"]:
            print(f"  {s['step']}  [{s['ms']:.0f} ms]")
        nets = {n["link"]: n for n in r["networks"]}
        for link in ("left", "middle", "right"):
            print(f"  virtual link {link:<7} bridge {nets[link]['id']}: "
                  f"{', '.join(nets[link]['ports'])}")
        with testnet.TestNet("fvdn", 78,
                             bridges=(nets["left"]["id"], nets["right"]["id"])) as net:
            server = net.serve_tcp(80, 22)
            try:
                replies = net.ping(3)
                web = net.tcp_connect(80)
                ssh = net.tcp_connect(22, timeout_s=1.0)
            finally:
                server.terminate()
                server.wait()
        print(f"  left -> firewall -> middle -> forwarder -> right: ping {replies}/3, tcp/80 "
              f"{'connected' if web else 'FAILED'}, tcp/22 {'blocked' if not ssh else 'NOT blocked'}")
    finally:
        gone = orch.ns.delete(ns_name)
        print(f"  ns rm {gone['deleted']}: VNFs, bridges and services removed")
    report["network_service"] = {"deploy": r, "ping_replies": replies, "tcp80": web,
                                 "tcp22": ssh}
    return r["status"] == NS_RUNNING and replies >= 2 and web and not ssh


def plot_orchestrator(resolves, path):
    import matplotlib  # lazy, as in plot()

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = range(1, len(resolves) + 1)
    ax.bar(xs, [r["waited_s"] * 1000 for r in resolves],
           color=["#8fbc8f" if r["kind"] == "slot" else "#cd5c5c" for r in resolves])
    for x, r in zip(xs, resolves):
        label = "slot" if r["kind"] == "slot" else "launch"
        if r["predicted_delay_s"] is not None:
            ax.plot([x - 0.4, x + 0.4], [r["predicted_delay_s"] * 1000] * 2, "k--")
        ax.text(x, r["waited_s"] * 1000, f"{label}\n{r['service']}", ha="center", va="bottom",
                fontsize=8)
    ax.set_xlabel("resolve #")
    ax.set_ylabel("request -> slot (ms); dashed = predicted queuing delay")
    ax.set_title("resolver: free slots, then fast-track on-demand launches")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
