# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The contract every zone adapter implements (local, nova, nomad), and its value types.

A zone is one place the orchestrator can run VNFs (the embedded local zone, a Nova availability
zone/aggregate, a Nomad datacenter/node pool). The orchestrator only talks to zones through this
interface, so placement, probes and the resolver do not care which VIM is behind a zone.

A neutral leaf (ARCHITECTURE.md): the orchestrator's zones implement it and the evaluator's probes
launch through it, so neither imports the other for it.
"""

from __future__ import annotations

import abc
import dataclasses
import re
import typing
import uuid

if typing.TYPE_CHECKING:            # annotations only: a leaf imports no layer above it
    from fluidvim.evaluator.model import EnvironmentType

NETWORK_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_MAC_RE = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")
_IFNAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,15}")

# -- zone kinds (ZoneAdapter.kind; the orchestrator's zones.kind column, `fluidvim zone list`) --
# Code asks a zone what it can do (the capability attributes of ZoneAdapter), not which kind it
# is: the kind names the adapter for people and for [orchestrator] zones.

LOCAL = "local"
"""The orchestrator's embedded zone: VNFs run on its own host through its own launch core."""

NOVA = "nova"
"""An OpenStack Nova availability zone/aggregate (openstacksdk; the fluidvim compute driver)."""

NOMAD = "nomad"
"""A Nomad datacenter/node pool (python-nomad; the fluidvim unikernel task driver)."""

SYNTHETIC = "synthetic"
"""A simulated fleet (tests, benchmarks): no VIM behind it."""

KINDS = (LOCAL, NOVA, NOMAD, SYNTHETIC)

CONFIGURED_KINDS = (NOVA, NOMAD)
"""The kinds ``[orchestrator] zones`` takes (``KIND:NAME``); the local zone has options of its own."""

# -- what LaunchRequest.kernel names in a zone (ZoneAdapter.kernel_source) --

KERNEL_FILE = "file"
"""A path to a PVH ELF kernel on the zone's hosts."""

KERNEL_IMAGE = "image"
"""The name or id of an image in the VIM's image service (Glance)."""


# -- day-2 actions on one instance (ZoneAdapter.instance_action) --

PAUSE = "pause"
"""Stop the instance's vCPUs; it keeps its memory, flows and NICs and forwards nothing."""

UNPAUSE = "unpause"
"""Let a paused instance run again."""

REBOOT = "reboot"
"""Restart the instance's packet processing in place (its Click graph: flows and counters
reset); same id, NICs and configuration."""

REBUILD = "rebuild"
"""Boot the instance again from its image and configuration (same id and NICs); a crashed one
comes back."""

INSTANCE_ACTIONS = (PAUSE, UNPAUSE, REBOOT, REBUILD)


class ZoneError(Exception):
    """A zone could not do what was asked; the message says what and how to fix it."""


@dataclasses.dataclass
class HostInfo:
    name: str
    env: EnvironmentType
    slots_total: int = 0
    slots_free: int = 0
    cpu_util: float = 0.0                  # 0..1, for power models
    power_system_id: str | None = None     # a row of shared/data/specpower_curves.csv, if known
    labels: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class InstanceInfo:
    id: str                                # the zone's id (VNF id, Nova server id, Nomad alloc/job id)
    name: str
    service: str
    host: str | None
    status: str                            # one of fluidvim.common.instance_states.STATUSES
    slots_total: int = 0
    slots_used: int = 0
    launch_ms: float | None = None         # request -> ready, as measured by the zone
    kind: str | None = None                # fluidvim.vnf.states COLD | WARM when the zone knows


@dataclasses.dataclass(frozen=True)
class QoE:
    """Session slots at the service's QoE (issue 23): what a launched VNF is told with its
    ``qoe`` control op (contract/PROTOCOL.md §4) right after it is configured, before the zone
    reports it: from then on its free slots are ``min(flow-table free, capacity - used)``.

    ``capacity``: sessions at the service's deadline and quantile (the stage-1 load probe of
    the environment, :func:`fluidvim.evaluator.qoeslots.qoe_params`); ``deadline_ms`` and
    ``quantile``: the service's; ``budget_ns``: the VNF's own latency tail at that quantile that
    goes with meeting the deadline (from the probe); None = the whole deadline; ``wait_ppm``:
    the VNF's host-wait budget, the share of a correction window its vCPU may wait for a CPU
    (ppm, from the probe's steal shares; 0 = no such rule)."""
    capacity: int
    deadline_ms: float
    quantile: float
    budget_ns: int | None = None
    wait_ppm: int = 0

    def __post_init__(self):
        def bad(field, why):
            return ValueError(f"qoe.{field}: {why}")
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) \
                or self.capacity < 1:
            raise bad("capacity", f"{self.capacity!r} is not a whole number of sessions >= 1 "
                      "(the load probe's capacity at the deadline)")
        if isinstance(self.deadline_ms, bool) or not isinstance(self.deadline_ms, (int, float)) \
                or not 0 < self.deadline_ms < float("inf"):
            raise bad("deadline_ms", f"{self.deadline_ms!r} is not a positive number of "
                      "milliseconds, e.g. 5")
        if isinstance(self.quantile, bool) or not isinstance(self.quantile, (int, float)) \
                or not 0 < self.quantile < 1:
            raise bad("quantile", f"{self.quantile!r} is not in (0, 1), e.g. 0.99")
        if self.budget_ns is not None and (isinstance(self.budget_ns, bool)
                                           or not isinstance(self.budget_ns, int)
                                           or self.budget_ns < 1):
            raise bad("budget_ns", f"{self.budget_ns!r} is not a whole number of "
                      "nanoseconds >= 1 (or None = the deadline)")
        if isinstance(self.wait_ppm, bool) or not isinstance(self.wait_ppm, int) \
                or not 0 <= self.wait_ppm <= 1_000_000:
            raise bad("wait_ppm", f"{self.wait_ppm!r} is not a whole number of ppm in "
                      "0..1000000 (a share of a window; 0 = no host-wait rule)")

    @property
    def quantile_ppm(self) -> int:
        return max(1, min(999_999, round(self.quantile * 1_000_000)))

    def request(self) -> dict:
        """The fields of the VNF's ``qoe`` request."""
        budget = self.budget_ns if self.budget_ns is not None else int(self.deadline_ms * 1e6)
        out = {"capacity": self.capacity, "budget_ns": budget,
               "quantile_ppm": self.quantile_ppm}
        return {**out, "wait_ppm": self.wait_ppm} if self.wait_ppm else out


def mac_problem(mac) -> str | None:
    """Why ``mac`` cannot be a NIC's address, or None (one rule for NIC requests, specs and the
    OSM connector)."""
    if not isinstance(mac, str) or not _MAC_RE.fullmatch(mac):
        return f"{mac!r} is not a MAC address like 52:54:00:12:34:56 (lower-case hex)"
    if int(mac[:2], 16) & 1:
        return f"{mac} is a multicast address; use a unicast one (even first octet)"
    if mac == "00:00:00:00:00:00":
        return f"{mac} is the all-zero address; use a unicast one"
    return None


def ifname_problem(name) -> str | None:
    """Why ``name`` cannot be a tap device name, or None."""
    if not isinstance(name, str) or not _IFNAME_RE.fullmatch(name):
        return f"{name!r} is not a valid interface name (1-15 characters of A-Z a-z 0-9 _ . -)"
    return None


@dataclasses.dataclass(frozen=True)
class NicRequest:
    """One NIC asked of a launch (Firecracker's ``NetworkInterfaceConfig`` is the model): what
    the caller fixes; everything left None the launch chooses.

    ``bridge``: where the NIC is plugged - in a zone's :class:`LaunchRequest` a network of the
    zone (:attr:`NetworkInfo.id`), in the launch core a bridge on the host (None: unplugged).
    ``mac``: the NIC's address (None: generated). ``tap``: the host tap's name (a Neutron port's
    devname; None: generated; launch core only). ``ovs``: Open vSwitch Interface external ids
    (``iface-id``, ``vm-uuid``, ...), making ``bridge`` an OVS bridge (launch core only).

    A new per-NIC field goes here, in :meth:`problem`, in :class:`fluidvim.vnf.spec.NicSpec`
    and in the backends (ARCHITECTURE.md "Where to change what")."""

    bridge: str | None = None
    mac: str | None = None
    tap: str | None = None
    ovs: dict | None = dataclasses.field(default=None, hash=False)

    def problem(self) -> tuple[str, str] | None:
        """(field, why) of the first thing wrong with this NIC, or None."""
        if self.bridge is not None and not isinstance(self.bridge, str):
            return "bridge", f"{self.bridge!r} is not a bridge or network name (or None)"
        for field, rule in (("mac", mac_problem), ("tap", ifname_problem)):
            value = getattr(self, field)
            why = rule(value) if value is not None else None
            if why:
                return field, why
        if self.ovs is not None:
            if self.bridge is None:
                return "ovs", ("OVS external ids for a NIC without a bridge: name its OVS "
                               "bridge (e.g. br-int) in bridge")
            if not isinstance(self.ovs, dict) or not all(
                    isinstance(k, str) and k and isinstance(v, str) for k, v in self.ovs.items()):
                return "ovs", f"{self.ovs!r} is not a mapping of external id names to strings"
        return None


def as_nics(entries) -> tuple[NicRequest, ...]:
    """``entries`` as NIC requests: a :class:`NicRequest` as it is, a bridge/network name or
    None as a NIC on it (None: unplugged). TypeError for anything else."""
    if isinstance(entries, (str, bytes, dict)):
        raise TypeError(f"nics: {entries!r} is not a list of NICs; give one entry per NIC")
    out = []
    for i, e in enumerate(entries or ()):
        if isinstance(e, NicRequest):
            out.append(e)
        elif e is None or isinstance(e, str):
            out.append(NicRequest(bridge=e))
        else:
            raise TypeError(f"nics[{i}]: {e!r} is not a NicRequest, a bridge name or None")
    return tuple(out)


def nics_problem(nics) -> tuple[str, str] | None:
    """(field, why) of the first thing wrong with a launch's NICs (``nics[i].mac``, ...), or
    None: each NIC's own rules, and no tap name asked for twice."""
    taps: dict = {}
    for i, nic in enumerate(nics):
        p = nic.problem()
        if p:
            return f"nics[{i}].{p[0]}", p[1]
        if nic.tap is not None:
            if nic.tap in taps:
                return f"nics[{i}].tap", (f"{nic.tap} is also nics[{taps[nic.tap]}].tap: each "
                                          "NIC needs its own tap")
            taps[nic.tap] = i
    return None


@dataclasses.dataclass
class LaunchRequest:
    service: str
    click_config: str
    name: str | None = None
    slots: int | None = None
    memory_mb: int | None = None
    vcpus: int = 1
    kernel: str | None = None              # path (local/nomad) or image name/id (nova)
    # NICs (NicRequest; a network name or None stands for a NIC on it): bridge = a network of
    # the zone, mac = None (the zone assigns) or the NIC's; () = the zone's default NICs
    nics: tuple = ()
    host: str | None = None                # pin to a host when the zone allows it
    warm: bool | None = None               # use a warm shell if the zone has one (None = if ready)
    qoe: QoE | None = None                 # slots at the service's QoE (None = the flow table's)
    # unique per launch, part of the instance's name in the zone: an orchestrator that takes over
    # a dead one's launch finds by it an instance the launch made but never recorded (ha.py)
    token: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex[:8])

    def __post_init__(self):
        if self.qoe is not None and not isinstance(self.qoe, QoE):
            raise ValueError(f"qoe: {self.qoe!r} is not a QoE(capacity, deadline_ms, quantile) "
                             "(or None = the flow table's slots)")
        try:
            self.nics = as_nics(self.nics)
        except TypeError as e:
            raise ValueError(str(e)) from None
        problem = nics_problem(self.nics)
        if problem:
            raise ValueError(f"{problem[0]}: {problem[1]}")

    @property
    def bridges(self) -> tuple:
        """The NICs' networks, one per NIC (None: the zone's choice / unplugged)."""
        return tuple(n.bridge for n in self.nics)


@dataclasses.dataclass
class NetworkInfo:
    id: str                                # what a LaunchRequest NIC's bridge names
    name: str                              # the name it was created with
    zone: str
    ports: list = dataclasses.field(default_factory=list)    # NICs attached, when known


class ZoneAdapter(abc.ABC):
    """One zone. Implementations must be safe to call from several threads."""

    kind: str = "abstract"                 # one of KINDS

    # -- capabilities: what callers ask instead of branching on the kind --
    kernel_source: str | None = None
    """What ``LaunchRequest.kernel`` names here: KERNEL_FILE, KERNEL_IMAGE, or None (either)."""

    in_process = False
    """The zone runs its VNFs through this process's own launch core (``mgr``), on this host:
    its kernels are files here, and its VNFs' records (NICs, why one stopped) can be read."""

    slot_interval = 0.0
    """Seconds between the orchestrator's polls of this zone's VNF stats, published as slot
    notifications on the zone's behalf; 0 = none (its hosts publish their own, or it has none)."""

    def __init__(self, name: str, region: str = "default"):
        self.name = name
        self.region = region

    @abc.abstractmethod
    def hosts(self) -> list[HostInfo]:
        """Hosts of the zone with their environment type and slots."""

    def environments(self) -> dict[str, EnvironmentType]:
        """Unique environment types of the zone, by uid."""
        return {h.env.uid: h.env for h in self.hosts()}

    @abc.abstractmethod
    def instances(self) -> list[InstanceInfo]:
        """Instances the zone runs for fluidvim."""

    @abc.abstractmethod
    def launch(self, req: LaunchRequest) -> InstanceInfo:
        """Start an instance and return when it is ready (raises ZoneError, leaves nothing behind)."""

    @abc.abstractmethod
    def terminate(self, instance_id: str) -> None:
        """Stop and remove an instance (idempotent)."""

    # -- day-2 actions on one instance (INSTANCE_ACTIONS); zones that cannot do one say so --
    def instance_action(self, instance_id: str, action: str) -> str:
        """Do ``action`` (one of INSTANCE_ACTIONS) to an instance; return its status after it
        (fluidvim.common.instance_states). ZoneError when the zone cannot, or it failed."""
        raise ZoneError(f"zone {self.name} ({self.kind}) cannot {action} instances; "
                        "terminate and launch instead")

    def can_launch_on_demand(self, service: str) -> bool:
        """Whether this zone can start ``service`` on demand (else its queuing delay is infinite)."""
        return True

    # -- host power (fluidvim.orchestrator.hostpower): zones whose scheduler can empty a host --
    can_drain = False
    """The zone can stop placing on a host and move its instances elsewhere (drain_host)."""

    def set_host_eligible(self, host: str, eligible: bool) -> None:
        """Let (or stop) the zone's own scheduler place instances on ``host``."""
        raise ZoneError(f"zone {self.name} ({self.kind}) cannot change a host's eligibility")

    def drain_host(self, host: str, deadline_s: float) -> None:
        """Move every instance off ``host`` (the zone starts them elsewhere); return when none
        is left there; ZoneError if that does not happen within ``deadline_s``."""
        raise ZoneError(f"zone {self.name} ({self.kind}) cannot drain a host")

    def host_ready(self, host: str) -> bool:
        """Whether ``host`` is up in the zone (after a power-on), eligible or not."""
        return any(h.name == host for h in self.hosts())

    def instance_sessions(self, instance_id: str) -> int | None:
        """Live sessions of an instance as its VNF counts them now (None: unknown here)."""
        return None

    def next_launch_kind(self, service: str) -> str | None:
        """fluidvim.vnf.states WARM or COLD: what the next on-demand launch would be (None = the zone cannot
        tell). The queuing delay is estimated from past launches of that kind."""
        return None

    # -- networks (NFV virtual links): zones that cannot create them say how to bring one --
    def networks(self) -> list[NetworkInfo]:
        """Networks this zone created for fluidvim."""
        return []

    def create_network(self, name: str) -> NetworkInfo:
        """Create network ``name`` (idempotent: an existing one of that name is returned)."""
        raise ZoneError(f"zone {self.name} ({self.kind}) cannot create networks: create "
                        f"{name!r} in the VIM and name it in the request instead")

    def delete_network(self, network_id: str) -> None:
        """Delete a network this zone created; refused while NICs are attached."""
        raise ZoneError(f"zone {self.name} ({self.kind}) does not manage networks: delete "
                        f"{network_id!r} in the VIM")

    @abc.abstractmethod
    def launch_times_ms(self, service: str | None = None, limit: int = 20) -> list[float]:
        """Recent request->ready times measured by the zone (newest first), for queuing delay."""
