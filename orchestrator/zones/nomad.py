# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``nomad`` zone: a Nomad datacenter (optionally one node pool) running the fluidvim
``unikernel`` task driver, through python-nomad.

* hosts     = the zone's ready nodes whose ``unikernel`` driver is healthy; slots, queuing delay and
              accelerator from the driver's fingerprint attributes ``driver.unikernel.*``
              (``session_slots.total/free``, ``queuing_delay_ms``, ``accel``), CPU utilisation from
              the client's stats, the power curve from node meta ``fluidvim_power_system_id``,
              the host's watts and their source (labels ``host_watts``, ``host_watts_source``)
              when the plugin's power meter has them.
* launch    = register a one-task service job (``driver = "unikernel"``; the JSON form of
              ``etc/nomad/vnf-firewall.nomad.hcl``) named ``fluidvim-<service>-<8 hex>``, wait
              until its VNF forwards: the plugin's own ready signal, the task's vnf-stats.json
              (the driver writes it before StartTask returns), read through the client's fs
              API every ``ready_poll_s`` once the allocation is placed - not the allocation's
              status on the servers, which the client reports on a slow tick (~0.7-0.9 s after
              the VNF is up; bench/nomad); on failure (no eligible node, task failed,
              timeout) the job is purged and :class:`ZoneError` says why.
* terminate = deregister with purge and wait until the allocation stopped.
* drain     = host power (``hostpower``): :meth:`NomadZone.set_host_eligible` is the node's
              scheduling eligibility, :meth:`NomadZone.drain_host` Nomad's node drain (its
              scheduler moves the node's allocations to eligible nodes - a job pinned to the
              node, launched with a host, is unpinned first; done when none of the node's
              fluidvim allocations runs and each moved job runs elsewhere),
              :meth:`NomadZone.host_ready` the node ready with a healthy driver (eligible or
              not); :meth:`NomadZone.instance_sessions` the VNF's live sessions from its
              vnf-stats.json.
* launch times come from Nomad's and the plugin's timestamps (one host clock): job
              ``SubmitTime`` → the plugin's ``ready_at`` for the launches this adapter made, →
              the task's ``Started`` event (a few ms later) for jobs still known to Nomad;
              :meth:`NomadZone.next_launch_kind` is warm while a node has a warm shell ready.
* slots     = :meth:`NomadZone.instance_slots`, what the orchestrator's slot poller (a SlotAgent,
              every ``slot_interval`` s) publishes as slot-update notifications, so Nomad zones
              feed the registry through the same path as local and Nova VNFs. Per allocation:
              the VNF's own free slots from ``<alloc>/vnf/vnf-stats.json`` (the driver rewrites it
              every second on its own timer - Nomad calls TaskStats only when the client
              publishes allocation metrics - and first when the VNF is ready; read through
              ``/v1/client/fs/cat``) -
              an allocation still ``pending`` on the servers counts once that file is there;
              until that file exists (or when it is
              stale) the node's fingerprint ``session_slots.free`` stands in only if the node runs
              this one VNF - it is a per-node sum - else the instance is skipped that tick.
"""

from __future__ import annotations

import collections
import json
import re
import threading
import time

import nomad as pynomad
import requests
from nomad.api import exceptions as nexc

from fluidvim.common import instance_states as istates, zonetypes
from fluidvim.common.zonetypes import HostInfo, InstanceInfo, LaunchRequest, ZoneAdapter, ZoneError
from fluidvim.evaluator.model import EnvironmentType

from .nomadnet import NomadNetworks
from .nomadtext import STATS_FILE, TASK, age_s, err_text, num, placement_failure, ready_ms, task_failure

DRIVER = "unikernel"
ATTR = "driver.unikernel."
JOB_PREFIX = "fluidvim-"
META_SERVICE = "fluidvim_service"
META_POWER = "fluidvim_power_system_id"
_NAME_OK = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


# a Nomad allocation's ClientStatus -> the instance status (one not here: ERROR)
ALLOC_STATUS = {"running": istates.RUNNING, "pending": istates.BUILDING, "failed": istates.ERROR,
                "lost": istates.ERROR, "complete": istates.DELETED, "unknown": istates.ERROR}


def _job_status(allocs: list) -> tuple[str, dict | None]:
    """(instance status, newest allocation) of a job's allocations."""
    if not allocs:
        return istates.BUILDING, None
    a = max(allocs, key=lambda x: x.get("CreateIndex", 0))
    return ALLOC_STATUS.get(a.get("ClientStatus"), istates.ERROR), a


class NomadZone(NomadNetworks, ZoneAdapter):
    """One Nomad datacenter (and node pool) as a fluidvim zone."""

    kind = zonetypes.NOMAD
    kernel_source = zonetypes.KERNEL_FILE

    def __init__(self, name: str, address: str = "http://127.0.0.1:4646", datacenter: str = "dc1",
                 node_pool: str | None = None, region: str = "default", token: str | None = None,
                 namespace: str | None = None, timeout: float = 10.0, launch_timeout: float = 60.0,
                 memory_mb: int = 32, cpu_mhz: int = 100, nomad_region: str | None = None,
                 slot_interval: float = 2.0, stats_max_age: float = 30.0,
                 ready_poll_s: float = 0.01):
        super().__init__(name, region)
        m = re.match(r"^(https?)://([^:/]+)(?::(\d+))?/?$", address or "")
        if not m:
            raise ZoneError(f"zone {name}: address must look like http://host:4646, not {address!r}")
        self.address = address.rstrip("/")
        self.datacenter, self.node_pool = datacenter, node_pool
        self.launch_timeout = float(launch_timeout)
        self.memory_mb, self.cpu_mhz = int(memory_mb), int(cpu_mhz)
        self.api = pynomad.Nomad(address=self.address, token=token, namespace=namespace,
                                 timeout=int(max(1, timeout)), region=nomad_region,
                                 verify=m.group(1) == "https")
        self._lock = threading.Lock()
        self._launches: collections.deque = collections.deque(maxlen=200)   # (service, ms)
        self.slot_interval = float(slot_interval)          # the orchestrator's poller; 0 = none
        self.stats_max_age = float(stats_max_age)
        self.ready_poll_s = float(ready_poll_s)            # launch: how often it looks for ready
        self._services: dict[str, str | None] = {}         # job id -> Meta fluidvim_service
        self._envs: dict[tuple, EnvironmentType] = {}      # (node id, ModifyIndex) -> its type
        self._private: dict = {}                           # networks: private bridges (nomadnet)
        self._bridge_prefix: str | None = None

    # -- helpers ---------------------------------------------------------------------------

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except nexc.URLNotFoundNomadException:
            raise
        except (nexc.BaseNomadException, requests.RequestException) as e:
            raise ZoneError(f"zone {self.name}: {what} at {self.address} failed: "
                            f"{err_text(e)}") from None

    def _nodes(self) -> list[dict]:
        out = []
        for n in self._call("listing nodes", self.api.nodes.get_nodes):
            if n.get("Datacenter") != self.datacenter:
                continue
            if self.node_pool and n.get("NodePool") != self.node_pool:
                continue
            if n.get("Status") != "ready" or n.get("SchedulingEligibility") != "eligible":
                continue
            drv = (n.get("Drivers") or {}).get(DRIVER) or {}
            if not (drv.get("Detected") and drv.get("Healthy")):
                continue
            out.append(n)
        return out

    def _cpu_util(self, node_id: str) -> float:
        try:
            st = self.api.client.stats.read_stats(node_id)
            cpus = st.get("CPU") or []
            if cpus:
                return min(1.0, max(0.0, sum(c.get("Total", 0.0) for c in cpus) / (100.0 * len(cpus))))
        except (nexc.BaseNomadException, requests.RequestException, AttributeError, TypeError):
            pass
        return 0.0

    def _env(self, node: dict) -> EnvironmentType:
        a = node.get("Attributes") or {}
        extra = tuple(sorted((k[len(ATTR):], a[k]) for k in (ATTR + "version", ATTR + "proto")
                             if k in a))
        return EnvironmentType(launcher="nomad", accel=a.get(ATTR + "accel", "unknown"),
                               machine="microvm", cpu_model=a.get("cpu.modelname", "unknown"),
                               vcpus=1, memory_mb=self.memory_mb, extra=extra)

    # -- ZoneAdapter -----------------------------------------------------------------------

    def hosts(self) -> list[HostInfo]:
        out = []
        for stub in self._nodes():
            try:
                node = self._call("reading a node", self.api.node.get_node, stub["ID"])
            except nexc.URLNotFoundNomadException:
                continue                                   # gone meanwhile
            a = node.get("Attributes") or {}
            labels = {"zone": self.name, "region": self.region, "node_id": node["ID"],
                      "datacenter": self.datacenter, "node_pool": node.get("NodePool")}
            cpus = num(a.get("cpu.numcores"))
            if cpus:
                labels["cpus"] = int(cpus)
            qd = num(a.get(ATTR + "queuing_delay_ms"))    # a float attribute reads "109.8ms"
            if qd is not None:
                labels["queuing_delay_ms"] = qd
            hw = num(a.get(ATTR + "host_watts"))          # the plugin's power meter, with its source
            if hw is not None:
                labels["host_watts"] = hw
                labels["host_watts_source"] = a.get(ATTR + "host_watts.source")
            out.append(HostInfo(
                name=node["Name"], env=self._env(node),
                slots_total=int(num(a.get(ATTR + "session_slots.total")) or 0),
                slots_free=int(num(a.get(ATTR + "session_slots.free")) or 0),
                cpu_util=self._cpu_util(node["ID"]),
                power_system_id=(node.get("Meta") or {}).get(META_POWER) or None,
                labels=labels))
        return out

    def environments(self) -> dict[str, EnvironmentType]:
        """The ready nodes' environment types, by uid: one node listing, and a node's attributes
        read again only when the node changed (its ModifyIndex) - not :meth:`hosts`, which also
        reads every node's CPU figures from its client. The resolver's fast track asks this on
        the way to a launch (the launch's QoE), so it costs one request instead of 1 + 2 per node."""
        out, seen = {}, {}
        for stub in self._nodes():
            key = (stub["ID"], stub.get("ModifyIndex"))
            env = self._envs.get(key)
            if env is None:
                try:
                    env = self._env(self._call("reading a node", self.api.node.get_node, stub["ID"]))
                except nexc.URLNotFoundNomadException:
                    continue                                   # gone meanwhile
            seen[key] = env
            out[env.uid] = env
        self._envs = seen                                      # nodes gone or changed: dropped
        return out

    def _fluidvim_jobs(self) -> list[dict]:
        jobs = self._call("listing jobs", self.api.jobs.get_jobs, prefix=JOB_PREFIX)
        return [j for j in jobs if self.datacenter in (j.get("Datacenters") or [self.datacenter])
                and (not self.node_pool or j.get("NodePool") in (None, self.node_pool))]

    def instances(self) -> list[InstanceInfo]:
        out = []
        for stub in self._fluidvim_jobs():
            try:
                job = self._call("reading a job", self.api.job.get_job, stub["ID"])
                allocs = self._call("reading allocations", self.api.job.get_allocations, stub["ID"])
            except nexc.URLNotFoundNomadException:
                continue
            if (job.get("Meta") or {}).get(META_SERVICE) is None:
                continue                                   # not started by fluidvim
            status, alloc = _job_status(allocs)
            cfg = job["TaskGroups"][0]["Tasks"][0].get("Config") or {}
            out.append(InstanceInfo(
                id=job["ID"], name=job["ID"], service=job["Meta"][META_SERVICE],
                host=(alloc or {}).get("NodeName"), status=status,
                slots_total=int(cfg.get("session_slots") or 0),
                launch_ms=self._launch_ms(job, alloc)))
        return out

    def _service_of_job(self, job_id: str) -> str | None:
        if job_id not in self._services:
            try:
                job = self._call("reading a job", self.api.job.get_job, job_id)
            except nexc.URLNotFoundNomadException:
                return None
            self._services[job_id] = (job.get("Meta") or {}).get(META_SERVICE)
        return self._services[job_id]

    def _vnf_doc(self, alloc_id: str) -> dict | None:
        """The task's vnf-stats.json with its VNF's slots (None: not there yet, or stale)."""
        try:
            text = self.api.client.cat.read_file(alloc_id, path=f"{TASK}/{STATS_FILE}")
            doc = json.loads(text)
            if not isinstance(doc["stats"]["slots"], dict):
                return None
        except (nexc.BaseNomadException, requests.RequestException, ValueError, KeyError,
                TypeError):
            return None
        age = age_s(doc.get("time"))
        return doc if age is not None and age <= self.stats_max_age else None

    def _vnf_slots(self, alloc_id: str, key: str = "free") -> int | None:
        """The VNF's ``free`` (or ``used``) slots from the task's vnf-stats.json (None: not there
        yet, or stale)."""
        doc = self._vnf_doc(alloc_id)
        try:
            return None if doc is None else int(doc["stats"]["slots"][key])
        except (KeyError, TypeError, ValueError):
            return None

    def _vnf_free(self, alloc_id: str) -> tuple[int | None, dict]:
        """(free slots, {"total", "opened", "watts"} as far as known) of the task's VNF: its slot
        capacity, its sessions ever opened (the slot agent passes them on: the registry releases
        the slots it handed out that connected) and the watts the plugin's power meter
        attributed to it (vnf-stats.json ``power``)."""
        doc = self._vnf_doc(alloc_id)
        if doc is None:
            return None, {}
        slots = doc["stats"]["slots"]
        try:
            free = int(slots["free"])
        except (KeyError, TypeError, ValueError):
            return None, {}
        return free, {"total": slots.get("total"), "opened": slots.get("opened"),
                      "watts": (doc.get("power") or {}).get("watts")}

    def instance_slots(self) -> dict[str, dict]:
        """{job id: {"name", "service", "host", "alloc", "free", "basis", "delay_s", ...}} of
        the zone's running fluidvim allocations (see the module doc for the granularity).
        ``delay_s`` is the node's fingerprinted ``queuing_delay_ms`` (the driver's own launch
        time of the next launch's kind), None when it has none yet."""
        jobs = {j["ID"] for j in self._fluidvim_jobs()}
        listed = self._call("listing allocations", self.api.allocations.get_allocations,
                            filter_='ClientStatus == "running" or (ClientStatus == "pending" '
                                    'and DesiredStatus == "run")', task_states=False)
        allocs = [a for a in listed if a.get("JobID") in jobs and a.get("NodeID")
                  and a.get("ClientStatus") in ("running", "pending")]
        for gone in set(self._services) - jobs:
            self._services.pop(gone, None)
        per_node: dict[str, int] = collections.Counter(a.get("NodeID") for a in allocs)
        attrs: dict[str, dict] = {}
        out = {}
        for a in sorted(allocs, key=lambda x: x.get("CreateIndex", 0)):
            svc = self._service_of_job(a["JobID"])
            if svc is None:
                continue                                   # not started by fluidvim
            nid = a.get("NodeID")
            if nid not in attrs:
                try:
                    attrs[nid] = (self._call("reading a node", self.api.node.get_node, nid)
                                  .get("Attributes") or {})
                except nexc.URLNotFoundNomadException:
                    attrs[nid] = {}
            na = attrs[nid]
            (free, extra), basis = self._vnf_free(a["ID"]), "vnf-stats"
            if free is None and a.get("ClientStatus") == "pending":
                continue              # its VNF does not forward yet (no ready signal)
            if free is None:
                basis = "node"
                only_one = per_node[nid] == 1 and num(na.get(ATTR + "vnfs")) == 1
                nf = num(na.get(ATTR + "session_slots.free"))
                free = int(nf) if only_one and nf is not None else None
            qd = num(na.get(ATTR + "queuing_delay_ms"))
            out[a["JobID"]] = {"name": a["JobID"], "service": svc, "host": a.get("NodeName"),
                               "alloc": a["ID"], "free": free, "basis": basis,
                               "delay_s": None if qd is None else qd / 1000.0, **extra}
        return out

    def job_spec(self, req: LaunchRequest, job_id: str) -> dict:
        """The JSON job for one VNF (what ``nomad job run`` makes of the HCL form); one ``nic``
        block (a list of objects in JSON) per NIC: its bridge, and its MAC if fixed."""
        nics = [dict(bridge=n.bridge or "", **({"mac": n.mac} if n.mac else {}))
                for n in req.nics] or [{"bridge": ""}]
        cfg: dict = {"memory_mb": int(req.memory_mb or self.memory_mb),
                     "vcpus": int(req.vcpus or 1), "nic": nics, "name": job_id}
        if req.click_config:
            cfg["click_config"] = req.click_config
        if req.slots is not None:
            cfg["session_slots"] = int(req.slots)
        if req.kernel:
            cfg["kernel"] = req.kernel
        if req.warm is not None:
            cfg["warm"] = bool(req.warm)
        if req.qoe is not None:
            # a block in the JSON job is a list of objects (`nomad job run -output`); the task
            # driver reads deadline_ms and quantile as text (nomad_driver/unikernel/config.go)
            q = {"capacity": req.qoe.capacity, "deadline_ms": repr(float(req.qoe.deadline_ms)),
                 "quantile": repr(float(req.qoe.quantile))}
            if req.qoe.budget_ns is not None:
                q["budget_ns"] = req.qoe.budget_ns
            if req.qoe.wait_ppm:                      # the host-wait budget (0 = none: unset)
                q["wait_ppm"] = req.qoe.wait_ppm
            cfg["qoe"] = [q]
        job = {"ID": job_id, "Name": job_id, "Type": "service", "Datacenters": [self.datacenter],
               "Meta": {META_SERVICE: req.service},
               "TaskGroups": [{
                   "Name": "vnf", "Count": 1,
                   # a VNF that fails to start is the orchestrator's problem, not Nomad's to retry
                   "RestartPolicy": {"Attempts": 0, "Mode": "fail"},
                   "ReschedulePolicy": {"Attempts": 0, "Unlimited": False},
                   "Tasks": [{"Name": TASK, "Driver": DRIVER, "Config": cfg,
                              "Resources": {"CPU": self.cpu_mhz,
                                            "MemoryMB": int(req.memory_mb or self.memory_mb) + 32}}]}]}
        if self.node_pool:
            job["NodePool"] = self.node_pool
        constraints = self.private_constraint(req.bridges)
        if req.host:
            constraints.append({"LTarget": "${node.unique.name}", "RTarget": req.host,
                                "Operand": "="})
        if constraints:
            job["Constraints"] = constraints
        return job

    def launch(self, req: LaunchRequest) -> InstanceInfo:
        if not req.service or not _NAME_OK.match(req.service):
            raise ZoneError(f"service: {req.service!r} is not a valid service name for a Nomad job "
                            "(letters, digits, '_', '.', '-'; at most 100)")
        for i in [i for i, n in enumerate(req.nics) if n.tap or n.ovs][:1]:
            raise ZoneError(f"nics[{i}]: zone {self.name} (nomad): the task driver names taps "
                            "and plugs Linux bridges; fixed taps, OVS ports: local zone only")
        job_id = f"{JOB_PREFIX}{req.service}-{req.token}"
        job = self.job_spec(req, job_id)
        t0 = time.monotonic()
        try:
            resp = self._call("registering the job", self.api.job.register_job, job_id, {"Job": job})
        except nexc.URLNotFoundNomadException as e:
            raise ZoneError(f"zone {self.name}: registering the job failed: {err_text(e)}") from None
        eval_id = resp.get("EvalID")
        try:
            # the job's SubmitTime now, while Nomad places it and the VNF starts: after the
            # ready signal nothing stands between the slot and the caller
            job_now = self._call("reading the job", self.api.job.get_job, job_id)
            alloc, ready = self._wait_running(job_id, eval_id, t0)
        except BaseException as e:
            try:
                self._purge(job_id, wait=True)
            except ZoneError as pe:
                raise ZoneError(f"{e}; and removing {job_id} failed too: {pe}") from e
            raise
        wall_ms = (time.monotonic() - t0) * 1000.0
        # SubmitTime -> the plugin's ready_at (the same host clock as Nomad's timestamps), else
        # -> the task's Started event
        ms = ready_ms(job_now, ready)
        if ms is None:
            ms = self._launch_ms(job_now, alloc)
        ms = ms if ms is not None else wall_ms
        with self._lock:
            self._launches.appendleft((req.service, ms))
        slots = int(job["TaskGroups"][0]["Tasks"][0]["Config"].get("session_slots") or 0)
        if req.qoe is not None:         # the VNF announces at most its QoE capacity
            slots = min(slots, req.qoe.capacity) if slots else req.qoe.capacity
        return InstanceInfo(id=job_id, name=job_id, service=req.service, host=alloc.get("NodeName"),
                            status=istates.RUNNING, slots_total=slots, launch_ms=ms,
                            kind=(ready or {}).get("launch"))

    def _wait_running(self, job_id: str, eval_id: str | None, t0: float) -> tuple[dict, dict | None]:
        """(allocation, the task's ready document or None) once the VNF forwards: its
        vnf-stats.json is there (the driver writes it before StartTask returns; read through the
        client's fs API every ``ready_poll_s``) or, failing that, Nomad reports it running (the
        client's allocation updates reach the servers up to ~1 s later)."""
        deadline = t0 + self.launch_timeout
        placed, n = None, 0
        while True:
            # once placed, only the ready file is read each time (one request); the servers'
            # view of the allocation (failed?) every 10th time
            if placed is not None and n % 10:
                doc = self._ready(placed["ID"])
                if doc is not None:
                    return placed, doc
            else:
                if eval_id:
                    self._check_eval(job_id, eval_id)
                allocs = self._call("reading allocations", self.api.job.get_allocations, job_id)
                for a in allocs:
                    found = self._ready_alloc(job_id, a)
                    if found is not None:
                        return found
                    if a.get("ClientStatus") == "pending" and a.get("NodeID"):
                        placed = a
            n += 1
            if time.monotonic() > deadline:
                raise ZoneError(f"zone {self.name}: {job_id} not running after {self.launch_timeout:g} s "
                                "(raise launch_timeout, or check the node's unikernel driver)")
            time.sleep(self.ready_poll_s)

    def _check_eval(self, job_id: str, eval_id: str) -> None:
        """Raise ZoneError when the job's evaluation could not place it."""
        try:
            ev = self.api.evaluation.get_evaluation(eval_id)
        except (nexc.BaseNomadException, requests.RequestException):
            return
        failed = ev.get("FailedTGAllocs") or {}
        if ev.get("Status") == "complete" and failed:
            raise ZoneError(f"zone {self.name}: Nomad cannot place {job_id}: "
                            f"{placement_failure(failed)}")
        if ev.get("Status") in ("failed", "canceled"):
            raise ZoneError(f"zone {self.name}: evaluation of {job_id} {ev['Status']}: "
                            f"{ev.get('StatusDescription', '')}")

    def _ready_alloc(self, job_id: str, a: dict) -> tuple[dict, dict | None] | None:
        """(allocation, ready document) when ``a``'s VNF forwards, None while it does not yet;
        ZoneError when it failed."""
        status = a.get("ClientStatus")
        if status in ("failed", "lost"):
            raise ZoneError(f"zone {self.name}: {job_id} failed on {a.get('NodeName')}: "
                            f"{task_failure(self._alloc(a['ID']) or a)}")
        if status == "pending" and a.get("NodeID"):
            doc = self._ready(a["ID"])          # the plugin's ready signal: the VNF forwards
            return (a, doc) if doc is not None else None
        if status == "running":
            full = self._alloc(a["ID"]) or a
            st = ((full.get("TaskStates") or {}).get(TASK) or {}).get("State")
            if st in (None, "running"):
                return full, self._ready(a["ID"])
        return None

    def _ready(self, alloc_id: str) -> dict | None:
        """The task's vnf-stats.json once the driver wrote it (its ``ready_at`` is when the VNF
        was handed to Nomad configured), else None."""
        try:
            doc = json.loads(self.api.client.cat.read_file(alloc_id, path=f"{TASK}/{STATS_FILE}"))
        except (nexc.BaseNomadException, requests.RequestException, ValueError):
            return None
        return doc if isinstance(doc, dict) and doc.get("vnf_uuid") else None

    def _alloc(self, alloc_id: str) -> dict | None:
        try:
            return self.api.allocation.get_allocation(alloc_id)
        except (nexc.BaseNomadException, requests.RequestException):
            return None

    @staticmethod
    def _launch_ms(job: dict | None, alloc: dict | None) -> float | None:
        """Job SubmitTime -> the task's Started event, from Nomad's timestamps (ns)."""
        if not job or not alloc:
            return None
        events = ((alloc.get("TaskStates") or {}).get(TASK) or {}).get("Events") or []
        started = [e["Time"] for e in events if e.get("Type") == "Started"]
        if not started or not job.get("SubmitTime"):
            return None
        return (started[0] - job["SubmitTime"]) / 1e6

    def _purge(self, job_id: str, wait: bool = True, timeout: float = 30.0) -> None:
        try:
            allocs = self.api.job.get_allocations(job_id)
        except nexc.URLNotFoundNomadException:
            allocs = []
        except (nexc.BaseNomadException, requests.RequestException) as e:
            raise ZoneError(f"zone {self.name}: reading {job_id} failed: {err_text(e)}") from None
        try:
            self.api.job.deregister_job(job_id, purge=True)
        except nexc.URLNotFoundNomadException:
            pass                                           # already gone: idempotent
        except (nexc.BaseNomadException, requests.RequestException) as e:
            raise ZoneError(f"zone {self.name}: deregistering {job_id} failed: {err_text(e)}") from None
        if not wait:
            return
        # the job is gone at once; the client stops its allocations: wait until it has
        deadline = time.monotonic() + timeout
        while allocs and time.monotonic() < deadline:
            live = []
            for a in allocs:
                cur = self._alloc(a["ID"])
                if cur and cur.get("ClientStatus") in ("running", "pending"):
                    live.append(a)
            allocs = live
            if allocs:
                time.sleep(0.1)
        if allocs:
            raise ZoneError(f"zone {self.name}: {job_id} purged but its allocation is still running "
                            f"after {timeout:g} s")

    def terminate(self, instance_id: str) -> None:
        if not instance_id.startswith(JOB_PREFIX):
            raise ZoneError(f"instance_id: {instance_id!r} is not a fluidvim job of zone {self.name} "
                            f"(ids start with {JOB_PREFIX!r})")
        self._purge(instance_id, wait=True)

    def launch_times_ms(self, service: str | None = None, limit: int = 20) -> list[float]:
        with self._lock:
            mine = [ms for s, ms in self._launches if service in (None, s)]
        if len(mine) >= limit:
            return mine[:limit]
        # jobs still known to Nomad (e.g. after an orchestrator restart), newest first
        seen = []
        try:
            for inst in sorted(self.instances(), key=lambda i: i.id):
                if inst.launch_ms is not None and service in (None, inst.service):
                    seen.append(inst.launch_ms)
        except ZoneError:
            pass
        out = mine + [ms for ms in seen if ms not in mine]
        return out[:limit]

    def next_launch_kind(self, service: str) -> str | None:
        """warm while a node fingerprints a ready warm shell (its ``queuing_delay_basis``), cold
        when the nodes say cold, None when none says (no launch timed yet)."""
        try:
            nodes = self._nodes()
        except ZoneError:
            return None
        said = {((n.get("Drivers") or {}).get(DRIVER) or {}).get("Attributes", {})
                .get(ATTR + "queuing_delay_basis") for n in nodes}
        return "warm" if "warm" in said else "cold" if "cold" in said else None

    def can_launch_on_demand(self, service: str) -> bool:
        try:
            return bool(self._nodes())
        except ZoneError:
            return False

    # -- host power: eligibility, node drain ---------------------------------------------------

    can_drain = True

    def _node(self, host: str) -> dict:
        for n in self._call("listing nodes", self.api.nodes.get_nodes):
            if n.get("Name") == host and n.get("Datacenter") == self.datacenter:
                return n
        raise ZoneError(f"zone {self.name}: no Nomad node named {host!r} in datacenter "
                        f"{self.datacenter}")

    def set_host_eligible(self, host: str, eligible: bool) -> None:
        nid = self._node(host)["ID"]
        self._call("setting the node's eligibility", self.api.node.eligible_node, nid,
                   **({"eligible": True} if eligible else {"ineligible": True}))

    def _running_on(self, node_id: str) -> list[dict]:
        jobs = {j["ID"] for j in self._fluidvim_jobs()}
        allocs = self._call("reading the node's allocations", self.api.node.get_allocations,
                            node_id)
        return [a for a in allocs if a.get("JobID") in jobs
                and a.get("ClientStatus") in ("running", "pending")
                and a.get("DesiredStatus") == "run"]

    def drain_host(self, host: str, deadline_s: float) -> None:
        """Nomad's node drain (the node ineligible; its scheduler places the fluidvim jobs'
        allocations on other nodes), then wait until none runs on ``host`` and each moved job
        runs elsewhere."""
        node = self._node(host)
        moving = {a["JobID"] for a in self._running_on(node["ID"])}
        for job_id in sorted(moving):          # a job pinned to this node could not move: unpin
            job = self._call("reading a job", self.api.job.get_job, job_id)
            cons = job.get("Constraints") or []
            keep = [c for c in cons if c.get("LTarget") != "${node.unique.name}"]
            if len(keep) != len(cons):
                job["Constraints"] = keep or None
                self._call("unpinning the job", self.api.job.register_job, job_id, {"Job": job})
        spec = {"Deadline": int(deadline_s * 1e9), "IgnoreSystemJobs": False}
        self._call("draining the node", self.api.node.drain_node_with_spec, node["ID"], spec,
                   mark_eligible=False)
        deadline = time.monotonic() + deadline_s + 30.0
        while True:
            left = self._running_on(node["ID"])
            elsewhere = set()
            if not left:
                for job in moving:
                    allocs = self._call("reading allocations", self.api.job.get_allocations, job)
                    if any(a.get("ClientStatus") == "running" and a.get("NodeID") != node["ID"]
                           for a in allocs):
                        elsewhere.add(job)
                if elsewhere == moving:
                    return
            if time.monotonic() > deadline:
                stuck = {}
                for job in sorted(moving - elsewhere):
                    allocs = self._call("reading allocations", self.api.job.get_allocations, job)
                    stuck[job] = [(a.get("NodeName"), a.get("ClientStatus"),
                                   a.get("DesiredStatus"), a.get("DesiredDescription"))
                                  for a in allocs]
                raise ZoneError(
                    f"zone {self.name}: draining {host} did not finish in {deadline_s:g} s: "
                    f"{len(left)} allocation(s) still there; not running elsewhere: {stuck}")
            time.sleep(0.2)

    def host_ready(self, host: str) -> bool:
        try:
            n = self._node(host)
        except ZoneError:
            return False
        drv = (n.get("Drivers") or {}).get(DRIVER) or {}
        return n.get("Status") == "ready" and bool(drv.get("Detected") and drv.get("Healthy"))

    def instance_sessions(self, instance_id: str) -> int | None:
        try:
            allocs = self._call("reading allocations", self.api.job.get_allocations, instance_id)
        except nexc.URLNotFoundNomadException:
            return None
        running = [a for a in allocs if a.get("ClientStatus") == "running"]
        if len(running) != 1:
            return None
        return self._vnf_slots(running[0]["ID"], "used")
