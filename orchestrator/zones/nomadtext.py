# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""What the ``nomad`` zone (:mod:`.nomad`) reads out of Nomad's answers: attribute numbers,
timestamps, error texts and failure reasons."""

from __future__ import annotations

import datetime
import re
import time

import requests

TASK = "vnf"                                          # the task of a fluidvim job
STATS_FILE = "vnf-stats.json"                         # nomad_driver/unikernel: vnfStatsFile


def num(v) -> float | None:
    """A Nomad attribute's number (attributes are strings, with the unit appended)."""
    m = re.match(r"^\s*(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)", v or "")
    return float(m.group(1)) if m else None


def epoch_s(stamp) -> float | None:
    """A Go RFC 3339 timestamp as seconds since the epoch (nanoseconds cut to microseconds)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$",
                 stamp if isinstance(stamp, str) else "")
    if not m:
        return None
    frac = (m.group(2) or ".0")[:7]
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.datetime.fromisoformat(m.group(1) + frac + tz).timestamp()


def age_s(stamp) -> float | None:
    """Seconds since a Go RFC 3339 timestamp."""
    t = epoch_s(stamp)
    return None if t is None else time.time() - t


def ready_ms(job: dict, ready: dict | None) -> float | None:
    """Job SubmitTime (ns) -> the plugin's ``ready_at`` in the task's vnf-stats.json."""
    t = epoch_s((ready or {}).get("ready_at"))
    if t is None or not job.get("SubmitTime"):
        return None
    return (t * 1e9 - job["SubmitTime"]) / 1e6


def err_text(e) -> str:
    r = getattr(e, "nomad_resp", None)
    if isinstance(r, requests.Response):
        return f"HTTP {r.status_code}: {r.text.strip()[:300]}"
    return str(r if r is not None else e)[:300]


def placement_failure(failed: dict) -> str:
    parts = []
    for tg, m in failed.items():
        bits = [f"{m.get('NodesEvaluated', 0)} node(s) evaluated"]
        for k in ("ConstraintFiltered", "ClassFiltered", "DimensionExhausted"):
            if m.get(k):
                bits.append(f"{k}={m[k]}")
        if m.get("NodesAvailable") is not None and not m.get("NodesEvaluated"):
            bits.append(f"no node in the datacenter/pool (available: {m.get('NodesAvailable')})")
        parts.append(f"group {tg}: " + ", ".join(bits))
    return "; ".join(parts)


def task_failure(alloc: dict) -> str:
    ts = ((alloc.get("TaskStates") or {}).get(TASK) or {})
    msgs = [e.get("DisplayMessage") or e.get("DriverError") or e.get("Type")
            for e in ts.get("Events") or [] if e.get("Type") in ("Driver Failure", "Terminated",
                                                                   "Failed Validation", "Not Restarting",
                                                                   "Setup Failure", "Task hook failed")]
    return "; ".join(m for m in msgs if m) or alloc.get("ClientDescription") or "unknown failure"
