# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The warm-pool contract (``contract/PROTOCOL.md`` §6) as plain functions: kernel identity, pool key,
shell transitions, what a claim sends and records, and the queuing delay.

The launch core (:mod:`fluidvim.vnf.manager`) builds its pool on these; the Go Nomad driver
implements the same functions (``nomad_driver/unikernel/pool_contract.go``), and both test suites run the
conformance vectors ``contract/vectors/pool.json`` (``tools/gen_pool_vectors.py``) against them.
"""

from __future__ import annotations

import hashlib
import os
import threading

from fluidvim.common.measure import median

from . import limits, states

KERNEL_ID_LEN = 12          # hex digits of the sha256 kept: enough to tell builds apart
REFILL_BACKOFF_S = 5.0      # a failed refill boot is retried no sooner (no tight boot loop)

# -- shell states and transitions (§6.3) --
BOOTING, READY, CLAIMED, RUNNING, REMOVED = "booting", "ready", "claimed", "running", "removed"
TRANSITIONS = {
    (BOOTING, "booted"): READY,             # `ready` seen: the shell waits, unconfigured
    (BOOTING, "failed"): REMOVED,           # boot failed or timed out: refill backs off
    (READY, "claim"): CLAIMED,              # a launch of its pool key took it (oldest first)
    (READY, "died"): REMOVED,               # its QEMU exited while it waited: refill
    (READY, "kernel_changed"): REMOVED,     # the kernel file is no longer the one it booted
    (READY, "surplus"): REMOVED,            # the pool's target shrank (or the pool stopped)
    (CLAIMED, "configured"): RUNNING,       # `configure` accepted: it is an ordinary VNF now
    (CLAIMED, "config_rejected"): READY,    # `configure` answered code `config`: give back
    (CLAIMED, "tap_taken"): READY,          # a requested tap name is taken: give back
    (CLAIMED, "failed"): REMOVED,           # anything else after the claim: destroyed
}
EVENTS = sorted({e for _, e in TRANSITIONS})


class TransitionError(ValueError):
    pass


def transition(state: str, event: str) -> str:
    """The state a shell in ``state`` is in after ``event`` (TransitionError if it cannot
    happen)."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise TransitionError(f"a shell that is {state} cannot take event {event!r}") from None


# -- kernel identity (§6.1) --
_ids: dict[tuple, str] = {}
_ids_lock = threading.Lock()


def kernel_id(path: str) -> str:
    """The first 12 hex digits of the sha256 of the kernel file's content; hashed once per
    (path, size, mtime_ns) - a rebuilt or replaced file is hashed again. OSError if it is gone."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    with _ids_lock:
        found = _ids.get(key)
    if found is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        found = h.hexdigest()[:KERNEL_ID_LEN]
        with _ids_lock:
            _ids[key] = found
    return found


# -- pool key (§6.2) --
def pool_key(backend: str, kernel_ident: str, memory_mb: int, vcpus: int, nics: int,
             flow_timeout_ms: int = limits.FLOW_TIMEOUT_MS_DEFAULT) -> str:
    """What a launch must match to take a shell: everything fixed at boot that ``configure``
    cannot change (session slots are not: ``configure`` sets them)."""
    return f"{backend}/{kernel_ident}/m{memory_mb}/c{vcpus}/n{nics}/t{flow_timeout_ms}"


def key_is_current(key) -> bool:
    """Whether ``key`` has this contract's form (a shell recorded by an older release has not:
    nothing would ever claim it)."""
    parts = key.split("/") if isinstance(key, str) else []
    return (len(parts) == 6 and len(parts[1]) == KERNEL_ID_LEN
            and [p[:1] for p in parts[2:]] == ["m", "c", "n", "t"])


def same_shape_other_kernel(key: str, other: str) -> bool:
    """Whether ``other`` is ``key``'s shape with another kernel identity (a stale shell)."""
    a, b = key.split("/"), other.split("/")
    return len(a) == len(b) == 6 and a[0] == b[0] and a[2:] == b[2:] and a[1] != b[1]


# -- claim (§6.4) --
def claim_nics(shell_nics, requests) -> tuple[list | None, list[dict]]:
    """(the ``macs`` field of the claim's ``configure`` — None: leave it out —, the NICs the
    VNF has afterwards as ``{"tap", "mac"}``) for a shell with ``shell_nics`` claimed with
    ``requests``, one per NIC (both: objects with ``tap`` and ``mac``, e.g. NicSpec and
    NicRequest; a request's None = the shell's)."""
    if len(requests) != len(shell_nics):
        raise ValueError(f"{len(shell_nics)} NICs but {len(requests)} NIC requests")
    macs = [req.mac for req in requests]
    out = [{"tap": req.tap or nic.tap, "mac": req.mac or nic.mac}
           for nic, req in zip(shell_nics, requests)]
    return (macs if any(macs) else None), out


# -- queuing delay (§6.5) --
def queuing_delay(ready_shells: int, history_ms, window: int = limits.LAUNCH_HISTORY_DEFAULT
                  ) -> dict:
    """``history_ms`` = {"warm": [...], "cold": [...]}: total times (ms) of successful launches,
    newest first. The next launch is warm when a shell is ready, else cold; its expected time is
    the median of the last ``window`` launches of that kind (None: none yet)."""
    kind = states.WARM if ready_shells > 0 else states.COLD
    samples = list(history_ms.get(kind, ()))[:window]
    m = median(samples)
    return {"seconds": None if m is None else m / 1000.0, "basis": kind,
            "samples": len(samples)}
