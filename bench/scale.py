# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/scale: a network service that scales with its session slots, and heals.

The sample NS ``etc/mano/reflector_ns`` (reflector VNFs on one virtual link, 16 session slots per
instance, 1..4 instances, aspect ``sessions`` one instance per step, tolerable queuing delay
0.05 s - less than a launch, so a session that finds no free slot is refused rather than waiting
for a fast-track launch) is deployed in the orchestrator's embedded local zone, in-process, with
real VNFs under QEMU. Sessions are ``resolve`` calls (each holds a slot: the reservation does not
expire during the run). In one run:

1. **ramp** - sessions arrive at ``--rate`` per second for ``--duration`` seconds, twice: without
   the scaler (only the instantiation level's instance) and with the slot-driven scaler
   (``NSManager.start_scaler``): sessions refused in each, and their ratio;
2. **reaction** - the free slots are exhausted at once (every free slot taken in a burst):
   time from the moment the last slot is taken to the moment the scale-out's new slots exist in
   the slot registry (scaler detection + launch + bookkeeping), ``--reps`` times;
3. **heal** - the QEMU of an instance is killed (SIGKILL): time until the healed replacement runs
   with its NIC on the virtual link (detection by the launch core's pidfd, the scaler's next tick,
   the replacement launch), split into detection and replacement, ``--reps`` times.

Not a test: no thresholds. Needs root (bridges, taps) and the VNF kernel (``make -C unikernel``).

    sudo .venv/bin/python -m bench.scale            # ~2 min; bench/results/scale.{json,png}
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid

from fluidvim.common.measure import quantile
from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.exception import Refused
from fluidvim.orchestrator.mano import descriptors
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.vnf import netdev

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NSD = os.path.join(REPO, "etc", "mano", "reflector_ns", "reflector_nsd.yaml")
VNFD = os.path.join(REPO, "etc", "mano", "reflector_vnf", "reflector_vnfd.yaml")
INTERVAL = 0.2                        # scaler tick




class Bench:
    def __init__(self, workdir):
        self.tag = uuid.uuid4().hex[:6]
        self.run_dir = f"/run/fluidvim-fsc-{self.tag}"
        conf = orchconf.make_conf(connection=f"sqlite:///{workdir}/scale.sqlite",
                                  reservation_ttl=3600.0, vnf_state_dir=f"{workdir}/state",
                                  vnf_run_dir=self.run_dir)
        self.orch = Orchestrator(conf)
        _plan, nsd, vnfds = descriptors.plan_files(NSD, [VNFD])
        self.docs = nsd.to_dict(), [v.to_dict() for v in vnfds]
        self.n = 0

    def deploy(self):
        self.n += 1
        name = f"fsc{self.tag}{self.n}"
        r = self.orch.ns.deploy(*self.docs, name=name)
        return name, r["services"][0]

    def free(self, service):
        return sum(free for _rep, free in self.orch.registry.entries(service))

    def close(self):
        self.orch.ns.stop_scaler()
        for row in self.orch.store.network_services():
            try:
                self.orch.ns.delete(row.id)
            except Exception as e:  # noqa: BLE001
                print(f"cleanup: {e}", file=sys.stderr)
        for rec in self.orch.manager.store.list():
            self.orch.manager.destroy(rec.id)
        self.orch.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    # -- 1. ramp --
    def ramp(self, rate, duration, scaler: bool):
        name, svc = self.deploy()
        if scaler:
            self.orch.ns.start_scaler(INTERVAL)
        t0 = time.time()
        timeline, refused, granted = [], 0, 0
        k = 0
        try:
            while True:
                due = t0 + k / rate
                if due - t0 > duration:
                    break
                time.sleep(max(0.0, due - time.time()))
                try:
                    self.orch.resolve(svc)
                    granted += 1
                    ok = True
                except Refused:
                    refused += 1
                    ok = False
                k += 1
                row = self.orch.store.network_service(name)
                sc = self.orch.ns.scaler
                last = next(iter(sc.decisions.values()), None) if sc is not None else None
                timeline.append({"t": round(time.time() - t0, 3), "ok": ok,
                                 "free": self.free(svc), "instances": len(row.get("instances")),
                                 "scaler": last.reason if last is not None else None})
        finally:
            self.orch.ns.stop_scaler()
        ops = self.orch.ns.show(name)["operations"]
        self.orch.ns.delete(name)
        outs = [o for o in ops if o["type"] == "scale" and o["state"] == "completed"]
        return {"scaler": scaler, "sessions": k, "granted": granted, "refused": refused,
                "scale_outs": len(outs),
                "scale_out_ms": [round((o["ended_at"] - o["started_at"]) * 1000, 1) for o in outs],
                "timeline": timeline}

    # -- 2. reaction: exhaustion -> new slots --
    def reaction(self, reps):
        out = []
        for _ in range(reps):
            name, svc = self.deploy()
            self.orch.ns.start_scaler(INTERVAL)
            try:
                before = {i["id"] for i in self.orch.ns.show(name)["instances"]}
                while self.free(svc) > 0:                    # take every free slot at once
                    self.orch.resolve(svc)
                t_exhausted = time.time()
                deadline = t_exhausted + 60
                while self.free(svc) == 0 and time.time() < deadline:
                    time.sleep(0.002)
                t_new = time.time()
                while time.time() < deadline:                # the operation's record, once done
                    after = self.orch.ns.show(name)
                    op = next((o for o in after["operations"] if o["type"] == "scale"), None)
                    if op is not None and op["state"] != "processing":
                        break
                    time.sleep(0.01)
                new = [i for i in after["instances"] if i["id"] not in before]
                out.append({"reaction_ms": round((t_new - t_exhausted) * 1000, 1),
                            "detect_ms": round((op["started_at"] - t_exhausted) * 1000, 1),
                            "operation_ms": round((op["ended_at"] - op["started_at"]) * 1000, 1),
                            "new_instances": len(new)})
                print(f"  reaction {out[-1]}", flush=True)
            finally:
                self.orch.ns.stop_scaler()
                self.orch.ns.delete(name)
        return out

    # -- 3. heal --
    def heal(self, reps):
        name, _svc = self.deploy()
        out = []
        self.orch.ns.start_scaler(INTERVAL)
        try:
            for _ in range(reps):
                shown = self.orch.ns.show(name)
                victim = shown["instances"][0]
                heals = len([o for o in shown["operations"] if o["type"] == "heal"])
                pid = self.orch.manager.get(victim["id"]).pid
                t_kill = time.time()
                os.kill(pid, signal.SIGKILL)
                deadline = t_kill + 60
                while time.time() < deadline:
                    shown = self.orch.ns.show(name)
                    done = [o for o in shown["operations"] if o["type"] == "heal"
                            and o["state"] != "processing"]
                    if len(done) > heals:
                        break
                    time.sleep(0.005)
                op = done[-1]
                if op["state"] != "completed":
                    out.append({"state": op["state"], "error": op["error"]})
                    print(f"  heal {out[-1]}", flush=True)
                    continue
                new = shown["instances"][0]
                br = shown["networks"][0]["id"]
                out.append({"state": op["state"],
                            "heal_ms": round((op["ended_at"] - t_kill) * 1000, 1),
                            "detect_ms": round((op["started_at"] - t_kill) * 1000, 1),
                            "replace_ms": round((op["ended_at"] - op["started_at"]) * 1000, 1),
                            "on_link": any(netdev.master_of(p) == br
                                           for p in shown["networks"][0]["ports"]),
                            "new_instance": new["id"] != victim["id"]})
                print(f"  heal {out[-1]}", flush=True)
        finally:
            self.orch.ns.stop_scaler()
            self.orch.ns.delete(name)
        return out


def summary(xs, key):
    v = [x[key] for x in xs if x.get(key) is not None]
    return {"n": len(v), "p50": quantile(v, 0.5), "p90": quantile(v, 0.9), "min": min(v) if v else None,
            "max": max(v) if v else None, "mean": statistics.mean(v) if v else None}


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    for run, colour in zip(result["ramp"], ("tab:red", "tab:blue")):
        tl = run["timeline"]
        lab = "with slot-driven scaling" if run["scaler"] else "without scaling"
        ax.step([x["t"] for x in tl], [x["free"] for x in tl], where="post", color=colour,
                label=f"free slots, {lab}")
        ref = [x["t"] for x in tl if not x["ok"]]
        ax.plot(ref, [0] * len(ref), "x", color=colour, label=f"refused ({len(ref)}), {lab}")
    ax.set_xlabel("s since the ramp started")
    ax.set_ylabel("free session slots")
    ax.set_title(f"ramp {result['rate']}/s: sessions refused")
    ax.legend(fontsize=7)
    ax = axes[1]
    data = [[x["reaction_ms"] for x in result["reaction"]], [x["heal_ms"] for x in result["heal"]]]
    ax.boxplot(data, tick_labels=["scale-out reaction\n(exhaustion -> new slots)",
                             "heal\n(QEMU killed -> replaced)"])
    ax.set_ylabel("ms")
    ax.set_title("reaction times (real VNFs, local zone)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=8.0, help="sessions per second in the ramp")
    ap.add_argument("--duration", type=float, default=7.0, help="seconds of the ramp")
    ap.add_argument("--reps", type=int, default=5, help="reaction and heal repetitions")
    ap.add_argument("--out", default="bench/results", help="directory for scale.{json,png}")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/scale needs root (bridges, taps)", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="fsc-bench-")
    b = Bench(workdir)
    try:
        ramp = []
        for scaler in (False, True):
            ramp.append(b.ramp(args.rate, args.duration, scaler))
            r = ramp[-1]
            print(f"ramp {'with' if scaler else 'without'} scaling: {r['sessions']} sessions, "
                  f"{r['refused']} refused, {r['scale_outs']} scale-out(s)", flush=True)
        reaction = b.reaction(args.reps)
        heal = b.heal(args.reps)
    finally:
        b.close()
        shutil.rmtree(workdir, ignore_errors=True)
    without, with_ = ramp
    result = {
        "rate": args.rate, "duration_s": args.duration, "scaler_interval_s": INTERVAL,
        "ramp": ramp,
        "refused_without": without["refused"], "refused_with": with_["refused"],
        "refused_ratio_with_vs_without": (with_["refused"] / without["refused"]
                                          if without["refused"] else None),
        "reaction": reaction, "reaction_summary": {k: summary(reaction, k) for k in
                                                   ("reaction_ms", "detect_ms", "operation_ms")},
        "heal": heal, "heal_summary": {k: summary(heal, k) for k in
                                       ("heal_ms", "detect_ms", "replace_ms")},
        "cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg(),
    }
    with open(os.path.join(args.out, "scale.json"), "w") as f:
        json.dump(result, f, indent=2)
    plot(result, os.path.join(args.out, "scale.png"))
    print(json.dumps({k: v for k, v in result.items() if k not in ("ramp", "reaction", "heal")},
                     indent=1))
    print(f"wrote {args.out}/scale.json and scale.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
