# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The data the evaluator and the orchestrator exchange (one place for these shapes).

* :class:`EnvironmentType` - a runtime environment type. Its :attr:`~EnvironmentType.uid` is a
  content hash that does not contain the zone, so identical types in different zones are
  recognised as one (FUSION: one stage-1 probe per globally unique type, N ~ max(|V_u|, |Z|)).
* :class:`ServiceProfile` - what a service asks of an environment (static requirements, QoS).
* :class:`ProbeResult` - one stage-1 probe measurement of one environment type, valid for a period.
* :class:`Candidate` / :class:`Score` - stage-2 input (one zone/host offering an environment type,
  with prices, power, slots and queuing delay) and output (a ranking entry with its reasons).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time


def _canonical(d: dict) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


@dataclasses.dataclass(frozen=True)
class EnvironmentType:
    """What determines how a VNF behaves in an environment - and nothing about where it is."""

    launcher: str                 # how instances start: "qemu" (launch core), "libvirt", "nova", "nomad"
    accel: str                    # "kvm" | "tcg" | "xen"
    machine: str                  # QEMU machine: "microvm" | "pc"
    cpu_model: str                # host CPU model string (e.g. /proc/cpuinfo "model name")
    vcpus: int = 1
    memory_mb: int = 16
    kernel_sha256: str = ""       # the VNF image; "" = the service decides
    extra: tuple = ()             # sorted (key, value) pairs for anything else that matters

    @functools.cached_property
    def uid(self) -> str:
        """Globally unique id: sha256 of the canonical JSON of the fields (first 16 hex digits).
        Computed once per object (the type is frozen); placement asks for it per host."""
        d = dataclasses.asdict(self)
        d["extra"] = [list(kv) for kv in sorted(self.extra)]
        return hashlib.sha256(_canonical(d).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["extra"] = [list(kv) for kv in sorted(self.extra)]
        d["uid"] = self.uid
        return d

    @classmethod
    def from_dict(cls, d: dict) -> EnvironmentType:
        fields = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in fields}
        kw["extra"] = tuple(tuple(kv) for kv in kw.get("extra", ()))
        return cls(**kw)


@dataclasses.dataclass
class ServiceProfile:
    """A service as the evaluator sees it."""

    name: str
    click_config: str                       # the VNF configuration the service runs
    deadline_ms: float = 10.0               # per-packet latency bound at the QoS quantile
    qos_quantile: float = 0.99              # e.g. 0.99 = p99 must meet the deadline
    session_pps: float = 100.0              # packets/s one session sends
    max_queuing_delay_s: float | None = None  # tolerable time to a new slot (None = any)
    requirements: dict = dataclasses.field(default_factory=dict)  # static: {"accel": ["kvm"], ...}
    min_instances: int = 0


# -- stage-1 probe kinds (ProbeResult.kind, Probe.kind; the probe cache's kind column) --
# Stored and shown as they are: the values never change.

STATIC = "static"
"""The environment type's static facts checked against a service's requirements (no VNF)."""

BOOT = "boot"
"""Probe VNFs launched cold (and warm where the zone has a warm pool): instantiation times."""

LOAD = "load"
"""A probe VNF driven with a ladder of sessions: latency and loss per load, hence slots."""

PROBE_KINDS = (STATIC, BOOT, LOAD)


@dataclasses.dataclass
class ProbeResult:
    """One stage-1 measurement of one environment type (shared by every service)."""

    env_uid: str
    kind: str                               # one of PROBE_KINDS
    ok: bool
    metrics: dict                           # kind-specific, JSON-serialisable
    measured_at: float = dataclasses.field(default_factory=time.time)
    valid_for_s: float = 3600.0
    zone: str = ""                          # where it ran (informational; not part of the key)
    error: str | None = None

    @property
    def valid_until(self) -> float:
        return self.measured_at + self.valid_for_s

    def is_valid(self, now: float | None = None) -> bool:
        return (now if now is not None else time.time()) < self.valid_until


@dataclasses.dataclass
class Candidate:
    """A place a service could go: a zone (and optionally a host) offering one environment type."""

    zone: str
    env: EnvironmentType
    host: str | None = None
    price_per_hour: float = 0.0             # per instance
    power_w_marginal: float | None = None   # extra watts one more instance costs on that host/zone
    free_slots: int = 0                     # for this service (aliases already applied)
    queuing_delay_s: float | None = None    # None = cannot launch on demand (infinite)
    labels: dict = dataclasses.field(default_factory=dict)  # location, tier, ...

    @functools.cached_property
    def key(self) -> str:
        """``zone/host`` (or the zone): asked thousands of times per placement on a large zone,
        so computed once (a candidate's zone and host do not change)."""
        return f"{self.zone}/{self.host}" if self.host else self.zone


@dataclasses.dataclass
class Score:
    """One stage-2 ranking entry. Higher ``score`` is better; ``qscores`` maps QoS level -> score."""

    candidate: Candidate
    score: float
    slots_estimate: int | None = None
    qscores: dict = dataclasses.field(default_factory=dict)
    reasons: list = dataclasses.field(default_factory=list)
    feasible: bool = True                   # False: cannot serve the service (reasons say why)
