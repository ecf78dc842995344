# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A dead orchestrator's network service operations, resumed by the survivor (``active_active``).

When a worker dies (its heartbeat stops, ha.Membership), the peer that claims it first runs
:meth:`Orchestrator.recover_worker`: its launches in flight are closed (an instance that runs is
adopted into the instances table, one that does not is removed), then :func:`take_over` takes its
processing NS operations (``ns_operations``): the operation and the NS's operation lock
(``ns_locks``) pass to the survivor, which continues the operation in a thread of its own from
what its steps recorded. Every step is recorded as it is done (the NS record's networks, services
and instances; the operation's ``target`` / ``remove`` / ``old_id`` at its start):

==========================  ================================  ==================================
step                        recorded in                       on take-over
==========================  ================================  ==================================
virtual link network        record ``networks``               resumed: one of the plan not
                                                              recorded is looked up by its name
                                                              in the zone (adopted) or created
service registration        record ``services``               resumed: adopted if registered,
                                                              else registered
instance launch (deploy,    record ``instances``; the         resumed (:func:`reconcile`):
scale out, heal)            operation's ``target`` per        recorded ones kept, a running
                            service (deploy: the plan's       unrecorded one of the service
                            counts)                           adopted up to the target, extra
                                                              ones terminated, the rest launched
a launch cut in its middle  the launch record (its token)     rolled back by recover_worker
(instance not running)                                        (removed); launched again here
removal (scale in, heal's   the operation's ``remove`` /      resumed: removing again is
old instance, terminate)    ``old_id``; the record            idempotent (gone = done)
==========================  ================================  ==================================

Rolled back, as before resuming existed: an operation recorded without its steps (``target`` /
``remove`` missing: started by an older orchestrator), a deploy whose NS is no longer
``deploying``, and any operation whose resumption fails (zone gone, a launch refused): a deploy
is deleted (everything its record says was made goes), a scale or heal is failed and instances of
the NS's services outside its record are terminated.

A lone orchestrator (not ``active_active``) restarted after a death does the same with what it
had under way itself (:func:`restart`): every earlier owner of a launch or NS operation in flight
is a dead worker, taken over at start by :meth:`Orchestrator.recover_worker` as a peer would.
"""

from __future__ import annotations

import contextlib
import threading
import time

from oslo_log import log as logging

from fluidvim.common import instance_states as istates
from fluidvim.common.measure import elapsed_ms

from .. import states
from ..exception import LeaseLost, NotFound, Refused

LOG = logging.getLogger(__name__)

RESUME, ROLL_BACK = "resume", "roll back"


def action(op_type: str, detail: dict, ns_status: str) -> str:
    """What a survivor does with a dead worker's processing operation: RESUME or ROLL_BACK."""
    if op_type == states.OP_INSTANTIATE:
        return RESUME if ns_status == states.NS_DEPLOYING else ROLL_BACK
    if op_type == states.OP_TERMINATE:
        return RESUME if ns_status == states.NS_DELETING else ROLL_BACK
    if ns_status != states.NS_RUNNING:
        return ROLL_BACK
    if op_type == states.OP_SCALE:
        key = "target" if detail.get("direction") == "out" else "remove"
        return RESUME if isinstance(detail.get(key), (dict, list)) else ROLL_BACK
    if op_type == states.OP_HEAL:
        return RESUME if "old_id" in detail and "target" in detail else ROLL_BACK
    return ROLL_BACK


def reconcile(recorded: int, unrecorded_running: list, target: int) -> tuple[list, list, int]:
    """One service's launches of an interrupted operation: (instances to adopt, instances to
    terminate, launches still to do) to reach ``target`` instances in the record that has
    ``recorded`` of them; ``unrecorded_running`` = the service's running instances the record
    does not have (made by the dead worker between its launch and its record update)."""
    if recorded < 0 or target < 0:
        raise ValueError(f"recorded {recorded} and target {target} must be >= 0")
    room = max(0, target - recorded)
    adopt = list(unrecorded_running[:room])
    return adopt, list(unrecorded_running[room:]), room - len(adopt)


def take_over(nsm, dead: str) -> dict:
    """Resume (in the background) or roll back each NS operation the worker ``dead`` had under
    way; {"resumed": [op ids], "rolled_back": [NS names], "removed": [...], "errors": [...]}."""
    store = nsm.store
    out: dict = {"resumed": [], "rolled_back": [], "removed": [], "errors": []}
    for op in store.processing_ops(dead):
        try:
            row = store.network_service(op.ns_id)
        except NotFound:
            store.op_finished(op.id, states.OP_FAILED, "its network service is gone")
            continue
        if action(op.type, op.detail, row.status) != RESUME:
            continue                        # abandoned below, as before
        lock = contextlib.ExitStack()
        lock.enter_context(nsm._op_lock(row, op.type, op_id=op.id, steal_from=dead))
        store.adopt_op(op.id)               # this worker runs it now (not abandoned below)
        store.update_ns(row.id)
        store.op_progress(op.id, resumed_by=store.owner, resumed_at=time.time())
        threading.Thread(target=_run, args=(nsm, op, row, lock), daemon=True,
                         name=f"ns-resume-{op.type}").start()
        out["resumed"].append(op.id)
    ns_ids = store.in_flight_ns([dead])
    store.abandon_ns(owners=[dead])         # the rest failed; then rolled back
    for ns_id in ns_ids:
        try:
            _roll_back(nsm, ns_id, out)
        except Exception as e:  # noqa: BLE001 - reported; `ns rm` / the next tick remain
            LOG.warning("ns %s: take-over failed: %s", ns_id, e)
            out["errors"].append(f"{ns_id}: {e}")
    return out


def restart(orch) -> dict:
    """A lone orchestrator's start: it is the only process on its database, so each other
    owner of a launch in flight, a processing NS operation or a deploy/delete under way is a
    dead predecessor (``None``: one from before owners were recorded), taken over by
    :meth:`Orchestrator.recover_worker` (launches closed, NS operations resumed or rolled back
    by :func:`take_over`). The NS operation locks they held go first: nobody else holds one.
    {dead owner: what recover_worker did}."""
    store = orch.store
    for lock in store.ns_locks():
        store.release_ns_lock(lock.ns_id, lock.op_id, any_owner=True)
    dead = {row.owner for row in store.launches(in_flight=True, limit=1_000_000)}
    dead |= {o.owner for o in store.ns_operations(limit=None, state=states.OP_PROCESSING)}
    dead |= {r.owner for r in store.network_services() if r.status in states.NS_IN_PROGRESS}
    dead.discard(store.owner)
    return {d: orch.recover_worker(d) for d in sorted(dead, key=lambda d: d or "")}


def _roll_back(nsm, ns_id: str, out: dict) -> None:
    """An interrupted deploy or delete: the NS is deleted; a scale or heal of a running NS: the
    instances of its services outside its record are terminated."""
    row = nsm.store.network_service(ns_id)
    if row.status == states.NS_FAILED:
        nsm.delete(row.name)
        out["rolled_back"].append(row.name)
    elif row.status == states.NS_RUNNING:
        with nsm._op_lock(row, "take-over", wait=True):
            out["removed"] += _unrecorded(nsm, nsm.store.network_service(ns_id), terminate=True)


def _unrecorded(nsm, row, terminate: bool = False, service: str | None = None) -> list:
    """Instances of the NS's services (or of ``service``) that its record does not have."""
    recorded = {i["id"] for i in row.get("instances")}
    found = [inst.id for svc in row.get("services") if service in (None, svc)
             for inst in nsm.store.instances(service=svc) if inst.id not in recorded
             and (terminate or inst.status == istates.RUNNING)]
    if terminate:
        for iid in found:
            nsm.orch.terminate(iid)
    return found


def _run(nsm, op, row, lock: contextlib.ExitStack) -> None:
    t0 = time.perf_counter()
    with lock, nsm.store.fenced(row.id, op.id, nsm._lease):
        try:
            done = _STEPS[op.type](nsm, op, row)
            LOG.warning("ns %s: %s operation %s of a dead orchestrator resumed and completed "
                        "(%.0f ms): %s", row.name, op.type, op.id, elapsed_ms(t0, 1), done)
            return
        except LeaseLost as e:              # its new holder has it: no rollback
            LOG.error("ns %s: resumed %s operation %s: %s", row.name, op.type, op.id, e.message)
            return
        except Exception as e:  # noqa: BLE001 - rolled back below
            err = f"resumed after its orchestrator died, then failed: " \
                  f"{getattr(e, 'message', None) or e}"
            LOG.warning("ns %s: %s operation %s: %s; rolling back", row.name, op.type, op.id,
                        err)
            fail = ({"status": states.NS_FAILED, "error": err}
                    if op.type in (states.OP_INSTANTIATE, states.OP_TERMINATE) else None)
            nsm.store.op_finished(op.id, states.OP_FAILED, err, ns=fail)
    out: dict = {"rolled_back": [], "removed": [], "errors": []}
    try:
        _roll_back(nsm, row.id, out)
    except Exception as e:  # noqa: BLE001 - `ns rm` remains
        LOG.warning("ns %s: rollback after a failed resume failed: %s", row.name, e)


def _fill(nsm, row, svc: str, target: int, what: str) -> tuple[list, list]:
    """Bring the record's instances of ``svc`` to ``target`` (:func:`reconcile`); the records
    added: (adopted, launched)."""
    row = nsm.store.network_service(row.id)
    instances = list(row.get("instances"))
    recorded = sum(1 for i in instances if i["service"] == svc)
    by_id = {i.id: i for i in nsm.store.instances(service=svc)}
    adopt, extra, n = reconcile(recorded, _unrecorded(nsm, row, service=svc), target)
    u = nsm._units(row)[svc]
    added = []
    for iid in adopt:
        rec = {"id": iid, "name": by_id[iid].name, "service": svc, "profile": u["profile"],
               "vdu": u["vdu"], "decision_id": None,
               "nics": [{"cpd": x["cpd"], "network": x["network"]} for x in u["nics"]]}
        instances.append(rec)
        added.append(rec)
    nsm.store.update_ns(row.id, instances=instances)
    for iid in extra:
        nsm.orch.terminate(iid)
    launched, err = nsm._launch(row, {svc: n}, instances, what) if n else ([], None)
    if err:
        raise Refused(err)
    return added, launched


def _deploy(nsm, op, row) -> dict:
    z = nsm.orch.zones.get(row.zone)
    if z is None:
        raise Refused(f"zone {row.zone} is gone")
    plan = row.get("plan")
    nets = dict(row.get("networks"))
    live = {n.name: n for n in z.networks()} if len(nets) < len(plan["networks"]) else {}
    for key, name in plan["networks"].items():
        if key not in nets:
            info = live.get(name) or z.create_network(name)
            nets[key] = {"id": info.id, "name": info.name}
            nsm.store.update_ns(row.id, networks=nets)
    services = list(row.get("services"))
    fields = {}
    for u in plan["units"]:
        fields[u["service"]] = {"memory_mb": u["memory_mb"], "vcpus": u["vcpus"],
                                "kernel": u["kernel"], **u["properties"],
                                "requirements": {"zones": [z.name]}}
        if u["service"] not in services:
            try:
                nsm.store.service(u["service"])         # registered, not recorded: adopted
            except NotFound:
                nsm.orch.register_service(u["service"], u["click_config"],
                                          **{**fields[u["service"]], "max_queuing_delay_s": None})
            services.append(u["service"])
            nsm.store.update_ns(row.id, services=services)
    adopted, launched = [], []
    for u in plan["units"]:
        a, b = _fill(nsm, row, u["service"], u["instances"], f"deploy {u['service']}")
        adopted += a
        launched += b
    added = adopted + launched
    for u in plan["units"]:
        if fields[u["service"]].get("max_queuing_delay_s") is not None:
            nsm.orch.register_service(u["service"], u["click_config"], **fields[u["service"]])
    steps = list(nsm.store.network_service(row.id).get("steps"))
    steps.append({"step": f"resumed by {nsm.store.owner} after its orchestrator died: "
                          f"{len(adopted)} instance(s) adopted, {len(launched)} launched",
                  "ms": 0.0})
    nsm.store.op_finished(op.id, states.OP_COMPLETED,
                          ns={"status": states.NS_RUNNING, "steps": steps},
                          resumed=[i["name"] for i in added],
                          adopted=[i["name"] for i in adopted],
                          launched=[i["name"] for i in launched])
    return {"instances": [i["name"] for i in added]}


def _scale(nsm, op, row) -> dict:
    d = op.detail
    key = d["aspect"]
    if d["direction"] == "out":
        added = []
        for svc, n in d["target"].items():
            added += sum(_fill(nsm, row, svc, n, f"scale out {key}"), [])
        detail = {"added": [i["name"] for i in added]}
    else:
        left = nsm._teardown(None, {}, [], [i for i in row.get("instances")
                                            if i["id"] in d["remove"]])
        if left:
            raise Refused("; ".join(left))
        instances = [i for i in row.get("instances") if i["id"] not in d["remove"]]
        nsm.store.update_ns(row.id, instances=instances)
        detail = {"removed": d["remove"]}
    row = nsm.store.network_service(row.id)
    new = d["from_level"] + (1 if d["direction"] == "out" else -1)
    nsm.store.op_finished(op.id, states.OP_COMPLETED, ns={"scale": {**row.get("scale"), key: new}},
                          to_level=new, **detail)
    nsm._last_scale[row.id] = (d["direction"], time.time())
    return {"level": new, **detail}


def _heal(nsm, op, row) -> dict:
    d = op.detail
    old = [i for i in row.get("instances") if i["id"] == d["old_id"]]
    if old:
        left = nsm._teardown(None, {}, [], old)
        if left:
            raise Refused("; ".join(left))
        nsm.store.update_ns(row.id, instances=[i for i in row.get("instances")
                                               if i["id"] != d["old_id"]])
    ((svc, target),) = d["target"].items()
    added = sum(_fill(nsm, row, svc, target, f"heal {d['instance']}"), [])
    instances = list(nsm.store.network_service(row.id).get("instances"))
    for new in added:                               # back where the old one was
        instances.remove(new)
        instances.insert(min(d["pos"], len(instances)), new)
    new_name = added[0]["name"] if added else None
    nsm.store.op_finished(op.id, states.OP_COMPLETED, ns={"instances": instances},
                          replaced_by=new_name)
    return {"replaced_by": new_name}


def _terminate(nsm, op, row) -> dict:
    return nsm.terminate(row.id, op.id)


_STEPS = {states.OP_INSTANTIATE: _deploy, states.OP_SCALE: _scale, states.OP_HEAL: _heal,
          states.OP_TERMINATE: _terminate}

