# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots ``nomad`` part (issue 23 item 4): Nomad job register -> first session served
through the orchestrator, warm, in a real multi-client Nomad cluster.

A real cluster (tests/e2e/nomad_cluster.py: one server, ``--clients`` client agents on this
machine, each with the unikernel plugin and a warm pool of one 1-NIC shell) is one ``nomad``
zone of an in-process orchestrator (its store, registry, queuing estimator and resolver; the
zone without a slot poller). A service whose graph mirrors every frame back
(``FromDevice(0) -> EtherMirror -> ToDevice(0)``) has no instance; each round, once every
client's warm pool is full again:

1. the client asks ``resolve(service)``: no free slot, so the resolver's fast track deploys an
   instance in the zone (the job is registered, the zone waits for the plugin's ready signal:
   the task's vnf-stats.json through the client fs API) and returns the session's slot;
2. the session is served: the bench brings the VNF's tap up (its NIC has no bridge) and sends
   an Ethernet frame into it every 5 ms until the VNF's mirrored copy comes back;
3. the instance is terminated through the orchestrator (purge; its slots leave the registry).

Per round, on the host clock Nomad's timestamps use: register (the job's ``SubmitTime``) ->
the plugin's ``ready_at`` (the VNF forwards) -> resolve returned (the slot exists for the
orchestrator); register -> session served = register -> slot + the frame's time from plugging
the tap to its mirrored copy (the bench's own look-ups of the allocation and tap between the two
are left out); the orchestrator's predicted queuing delay for that launch (the resolver's
``predicted_delay_s``: the median of its own recent launch records of the kind the next launch
will be, request -> slot) against the observed request -> slot (``waited_s``); and what the
Nomad servers said of the allocation when the slot existed (``pending``: the client had not
reported it yet), and when they first report it running (polled every 10 ms after the session
was served: what a zone waiting for Nomad's API would have waited for). The first round is a
warm-up (no launch record yet: a default delay).

    sudo .venv/bin/python -m bench.slots nomad --launches 12     # ~1.5 min
"""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from fluidvim.common.measure import quantile

MIRROR = "FromDevice(0) -> EtherMirror -> ToDevice(0);"
ETH_P_ALL, PACKET_OUTGOING = 0x0003, 4
ETHERTYPE = b"\x88\xb5"                      # IEEE local experimental


def serve_frame(tap: str, bridge: str, timeout: float = 5.0) -> float:
    """Plug ``tap`` into ``bridge`` (which brings it up), send a frame into the VNF every 5 ms
    until its mirrored copy comes back; the milliseconds that took."""
    from fluidvim.vnf import netdev

    t0 = time.perf_counter()
    netdev.plug(tap, bridge)
    token = uuid.uuid4().bytes
    frame = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + ETHERTYPE + token + bytes(46)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        s.bind((tap, 0))
        s.settimeout(0.005)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.send(frame)
            try:
                while True:
                    data, addr = s.recvfrom(2048)
                    if addr[2] != PACKET_OUTGOING and token in data:
                        return (time.perf_counter() - t0) * 1000.0
            except TimeoutError:
                continue
    finally:
        s.close()
    raise RuntimeError(f"no mirrored frame from the VNF on {tap} in {timeout:g} s")


class Marks:
    """Wall-clock marks (ns) of one round inside the orchestrator and its Nomad zone: the job
    register call sent and answered, the zone's first sight of the plugin's ready file, the
    zone's launch returned. The zone's own methods are wrapped for the round only."""

    def __init__(self, zone):
        self.zone, self.t = zone, {}
        self._saved = (zone.api.job.register_job, zone._ready, zone.launch)

    def __enter__(self):
        job, ready, launch = self._saved

        def register_job(*a, **kw):
            self.t.setdefault("register_sent", time.time_ns())
            try:
                return job(*a, **kw)
            finally:
                self.t.setdefault("register_answered", time.time_ns())

        def read_ready(*a, **kw):
            doc = ready(*a, **kw)
            self.t["ready_reads"] = self.t.get("ready_reads", 0) + 1
            if doc is not None:
                self.t.setdefault("ready_seen", time.time_ns())
            return doc

        def zone_launch(*a, **kw):
            try:
                return launch(*a, **kw)
            finally:
                self.t.setdefault("zone_returned", time.time_ns())

        self.zone.api.job.register_job, self.zone._ready, self.zone.launch = (
            register_job, read_ready, zone_launch)
        return self

    def __exit__(self, *exc):
        self.zone.api.job.register_job, self.zone._ready, self.zone.launch = self._saved


def _iso_ns(text: str) -> int:
    """RFC 3339 time with up to nanoseconds (Go's time.Time JSON) -> ns since the epoch."""
    import datetime

    head, _, frac = text.rstrip("Z").partition(".")
    secs = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.timezone.utc).timestamp()
    return int(secs) * 1_000_000_000 + int((frac + "000000000")[:9])


def phases(marks: dict, t_ask: int, submit: int, doc: dict, t_slot: int, events: list) -> dict:
    """Where a round's time went, ms: the orchestrator before its register call, the call, Nomad
    (SubmitTime -> the client received the allocation -> the task's setup -> the driver's
    StartTask returned = the task's Started event; the plugin's own launch time, from its
    launch task event's launch_ms, splits setup -> Started), the plugin's ready_at, the
    zone's sight of the ready file, the zone's return, and the orchestrator after it (registry,
    records) -> slot."""
    def ms(a, b):
        return None if a is None or b is None else round((b - a) / 1e6, 2)

    ev, plugin_ms = {}, None
    for e in events:
        ev.setdefault(e.get("Type"), e.get("Time"))
        launch_ms = (e.get("Details") or {}).get("launch_ms")      # the plugin's launch event
        plugin_ms = float(launch_ms) if launch_ms and plugin_ms is None else plugin_ms
    ready_at = _iso_ns(doc["ready_at"]) if doc.get("ready_at") else None
    # the plugin's StartTask began its launch ~plugin_ms before ready_at (its record step after)
    start_task = None if ready_at is None or plugin_ms is None else ready_at - int(plugin_ms * 1e6)
    return {"orchestrator_before_register": ms(t_ask, marks.get("register_sent")),
            "register_call": ms(marks.get("register_sent"), marks.get("register_answered")),
            "submit_to_received": ms(submit, ev.get("Received")),
            "received_to_setup": ms(ev.get("Received"), ev.get("Task Setup")),
            "setup_to_started": ms(ev.get("Task Setup"), ev.get("Started")),
            "setup_to_plugin_start_task": ms(ev.get("Task Setup"), start_task),
            "plugin_start_task": plugin_ms,
            "submit_to_ready_at": ms(submit, ready_at),
            "ready_at_to_started_event": ms(ready_at, ev.get("Started")),
            "ready_at_to_zone_saw_it": ms(ready_at, marks.get("ready_seen")),
            "zone_saw_to_zone_returned": ms(marks.get("ready_seen"), marks.get("zone_returned")),
            "zone_returned_to_slot": ms(marks.get("zone_returned"), t_slot),
            "ready_file_reads": marks.get("ready_reads", 0)}


def one_round(orch, zone, service: str, bridge: str) -> dict:
    from fluidvim.vnf import spec as vspec

    t_ask = time.time_ns()
    p0 = time.perf_counter()
    with Marks(zone) as marks:
        res = orch.resolve(service)
    t_slot = t_ask + int((time.perf_counter() - p0) * 1e9)
    if res["kind"] != "launched":
        raise RuntimeError(f"resolve took an existing slot, not a launch: {res}")
    inst = res["instance"]
    # the bench's own look-ups (which allocation, which tap) are not the session's: the frame
    # is timed from plugging the tap on, and added to register -> slot
    (alloc,) = zone.api.job.get_allocations(inst)
    server_said = alloc["ClientStatus"]
    doc = zone._ready(alloc["ID"])
    frame_ms = serve_frame(vspec.tap_for(doc["vnf_uuid"], 0), bridge)
    submit = zone.api.job.get_job(inst)["SubmitTime"]
    (row,) = [i for i in orch.list_instances(service) if i["id"] == inst]
    running = server_running_ns(zone, inst)         # what waiting for Nomad's API would give
    from fluidvim.orchestrator.zones.nomadtext import TASK
    events = (((zone._alloc(alloc["ID"]) or {}).get("TaskStates") or {}).get(TASK) or {}).get(
        "Events") or []
    orch.terminate(inst)
    slot_ms = (t_slot - submit) / 1e6
    return {"instance": inst, "node": alloc.get("NodeName"), "launch": doc.get("launch"),
            "server_status_at_slot": server_said,
            "ask_to_register_ms": round((submit - t_ask) / 1e6, 2),
            "register_to_ready_ms": round(row["launch_ms"], 2),      # SubmitTime -> ready_at
            "register_to_slot_ms": round(slot_ms, 2),
            "slot_to_frame_ms": round(frame_ms, 2),
            "register_to_session_ms": round(slot_ms + frame_ms, 2),
            "register_to_server_running_ms": round((running - submit) / 1e6, 2),
            "predicted_delay_s": res["predicted_delay_s"], "observed_delay_s": res["waited_s"],
            "phases_ms": phases(marks.t, t_ask, submit, doc, t_slot, events)}


def server_running_ns(zone, job_id: str, timeout: float = 30.0) -> int:
    """The wall clock (ns) when the servers first report the job's allocation running (polled
    every 10 ms, as bench/nomad)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(a["ClientStatus"] == "running" for a in zone.api.job.get_allocations(job_id)):
            return time.time_ns()
        time.sleep(0.01)
    raise RuntimeError(f"{job_id}: not reported running in {timeout:g} s")




def summarize(runs: list[dict]) -> dict:
    reg = [r["register_to_session_ms"] for r in runs]
    slot = [r["register_to_slot_ms"] for r in runs]
    err = [100.0 * (r["predicted_delay_s"] - r["observed_delay_s"]) / r["observed_delay_s"]
           for r in runs]
    pred = statistics.median(r["predicted_delay_s"] for r in runs)
    obs = statistics.median(r["observed_delay_s"] for r in runs)
    return {
        "launches": len(runs),
        "warm": sum(r["launch"] == "warm" for r in runs),
        "nomad_register_to_session_ms_p50": round(statistics.median(reg), 1),
        "register_to_session_ms_p90": round(quantile(reg, 0.9, method="nearest"), 1),
        "register_to_session_ms_min": round(min(reg), 1),
        "register_to_slot_ms_p50": round(statistics.median(slot), 1),
        "register_to_server_running_ms_p50": round(statistics.median(
            r["register_to_server_running_ms"] for r in runs), 1),
        "register_to_ready_ms_p50": round(statistics.median(r["register_to_ready_ms"]
                                                            for r in runs), 1),
        "ask_to_register_ms_p50": round(statistics.median(r["ask_to_register_ms"]
                                                          for r in runs), 1),
        "slot_to_frame_ms_p50": round(statistics.median(r["slot_to_frame_ms"] for r in runs), 2),
        "server_pending_at_slot": sum(r["server_status_at_slot"] == "pending" for r in runs),
        "phases_ms_p50": {k: round(statistics.median(v), 2) for k, v in (
            (k, [r["phases_ms"][k] for r in runs if r["phases_ms"].get(k) is not None])
            for k in runs[0]["phases_ms"]) if v},
        "predicted_delay_ms_p50": round(1000 * pred, 1),
        "observed_delay_ms_p50": round(1000 * obs, 1),
        "queuing_delay_error_pct_p50": round(100.0 * (pred - obs) / obs, 1),
        "queuing_delay_abs_error_pct_median": round(statistics.median(abs(e) for e in err), 1),
        "queuing_delay_within_25pct": sum(abs(e) <= 25.0 for e in err),
    }


def cmd_nomad(a) -> dict:
    """The ``nomad`` part of bench/results/slots.json."""
    from fluidvim.vnf import netdev
    from tests.e2e import test_nomad as tn

    if os.geteuid() != 0:
        raise SystemExit("bench/slots nomad needs root (Nomad clients, taps, /dev/kvm)")
    if not os.path.exists(tn.NOMAD):
        raise SystemExit(f"missing {tn.NOMAD} (tools/build-nomad.sh)")
    tmp = Path(tempfile.mkdtemp(prefix="fvns-"))
    service = f"nsess{uuid.uuid4().hex[:6]}"
    load_before = os.getloadavg()
    runs: list[dict] = []
    bridge = f"fvns{uuid.uuid4().hex[:6]}"
    netdev.ensure_bridge(bridge)
    try:
        _rounds(a, tmp, service, bridge, runs)
    finally:
        netdev.delete_link(bridge)
    out = summarize(runs)
    out.update(runs=runs, clients=a.clients, loadavg_before=load_before,
               command=f"python -m bench.slots nomad --launches {a.launches} "
                       f"--clients {a.clients}",
               graph=MIRROR)
    return out


def _rounds(a, tmp: Path, service: str, bridge: str, runs: list) -> None:
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.service import Orchestrator
    from fluidvim.orchestrator.zones.nomad import NomadZone
    from tests.e2e.nomad_cluster import NomadCluster

    with NomadCluster(tmp, clients=a.clients, warm_pool=(1, 1)) as cluster:
        cluster.wait_ready()
        zone = NomadZone("nomad", address=cluster.address, slot_interval=0)
        conf = orchconf.make_conf(connection=f"sqlite:///{tmp}/orch.sqlite", local_zone=False)
        orch = Orchestrator(conf, zones=[zone])
        try:
            orch.register_service(service, MIRROR, slots=64, memory_mb=32)
            for i in range(a.launches + 1):
                cluster.wait_ready()                # every warm pool full again
                r = one_round(orch, zone, service, bridge)
                print(f"round {i}{' (warm-up)' if i == 0 else ''}: {r}", flush=True)
                if i:
                    runs.append(r)
        finally:
            for row in orch.store.instances(service):
                orch.terminate(row.id)
            orch.close()
