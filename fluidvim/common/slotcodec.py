# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Session slots on the wire: FUSION's compressed updates and their rate limit.

Encodings (all pure functions, each with its inverse):

* **4-bit log2 bucket** of a slot count: code 0 = 0 slots, code k = [2^(k-1), 2^k - 1]
  (1; 2-3; 4-7; ...), code 15 = 2^14 or more. Decoding gives the bucket's lower bound, so a
  decoded count never promises more slots than the instance has.
* **2-bit log10 magnitude**: 0 = none, 1 = 1-9, 2 = 10-99, 3 = 100 or more.
* **exact count** only when the log10 magnitude changed since the last update sent for that key.
* **queuing delay** Q = 0.1 * 2^q seconds in 4 bits: q = 0..14 (0.1 s .. 1638.4 s; a delay is
  rounded *up* to the next step), q = 15 = infinite (the zone cannot launch the service on demand).
  Throughout the orchestrator an infinite delay is ``None``.

A neutral leaf (standard library only; ARCHITECTURE.md): slot publishers (:mod:`fluidvim.common.slotnotify`:
the local zone's agent, nova-compute, the Nomad pollers) encode with it and the orchestrator's
registry (:mod:`fluidvim.orchestrator.slots`) decodes with it.
"""

from __future__ import annotations

import math
import time

LOG2_BITS = 4
LOG2_MAX_CODE = (1 << LOG2_BITS) - 1          # 15
DELAY_INF_CODE = 15
DELAY_BASE_S = 0.1


# -- encodings --
def encode_log2(slots: int) -> int:
    if slots < 0:
        raise ValueError("slots must be >= 0")
    return min(LOG2_MAX_CODE, int(slots).bit_length())


def decode_log2(code: int) -> int:
    """Lower bound of the bucket (0, 1, 2, 4, 8, ...)."""
    if not 0 <= code <= LOG2_MAX_CODE:
        raise ValueError(f"log2 code must be 0..{LOG2_MAX_CODE}")
    return 0 if code == 0 else 1 << (code - 1)


def log2_range(code: int) -> tuple[int, float]:
    """(lowest, highest) count of a bucket; the top bucket is open (inf)."""
    lo = decode_log2(code)
    if code == 0:
        return 0, 0
    return lo, math.inf if code == LOG2_MAX_CODE else (1 << code) - 1


def encode_log10(slots: int) -> int:
    if slots < 0:
        raise ValueError("slots must be >= 0")
    if slots == 0:
        return 0
    return 1 if slots < 10 else 2 if slots < 100 else 3


def decode_log10(code: int) -> int:
    if not 0 <= code <= 3:
        raise ValueError("log10 code must be 0..3")
    return (0, 1, 10, 100)[code]


def encode_delay(seconds: float | None) -> int:
    """q with 0.1*2^q >= seconds (smallest such q); None/inf -> 15."""
    if seconds is None or math.isinf(seconds):
        return DELAY_INF_CODE
    if seconds < 0:
        raise ValueError("delay must be >= 0")
    if seconds <= DELAY_BASE_S:
        return 0
    q = math.ceil(math.log2(seconds / DELAY_BASE_S) - 1e-12)
    return min(q, DELAY_INF_CODE - 1)


def decode_delay(code: int) -> float | None:
    if not 0 <= code <= DELAY_INF_CODE:
        raise ValueError(f"delay code must be 0..{DELAY_INF_CODE}")
    return None if code == DELAY_INF_CODE else DELAY_BASE_S * (1 << code)


def update_bandwidth(services: int, update_rate_hz: float, zones: int, bits_per_update: float) -> float:
    """FUSION's bandwidth model R = M * U * Z * B in bits/s: M services, each zone sends U updates
    per second per service, Z zones, B bits per update (8 with the 4-bit slot + 4-bit delay
    encoding, plus whatever framing the transport adds)."""
    for name, v in (("services", services), ("update_rate_hz", update_rate_hz), ("zones", zones),
                    ("bits_per_update", bits_per_update)):
        if v < 0:
            raise ValueError(f"{name} must be >= 0")
    return services * update_rate_hz * zones * bits_per_update


# -- the update message --
class SlotEncoder:
    """Turns (key, slots, delay) into compressed updates; exact counts on magnitude changes."""

    def __init__(self):
        self._magnitude: dict = {}

    def magnitude_changed(self, key, slots: int) -> bool:
        return self._magnitude.get(key) != encode_log10(slots)

    def encode(self, key, slots: int, delay_s: float | None) -> dict:
        mag = encode_log10(slots)
        msg = {"s": encode_log2(slots), "m": mag, "q": encode_delay(delay_s)}
        if self._magnitude.get(key) != mag:
            msg["exact"] = int(slots)
            self._magnitude[key] = mag
        return msg


def decode_slots(msg: dict, last_exact: int | None = None) -> int:
    """Slots an update announces: its exact count, else the log2 bucket's lower bound - or the
    last exact count if that still falls into the announced bucket."""
    if msg.get("exact") is not None:
        return int(msg["exact"])
    lo, hi = log2_range(int(msg["s"]))
    if last_exact is not None and lo <= last_exact <= hi:
        return last_exact
    return lo


class RateLimiter:
    """At most one update per key per ``min_interval`` seconds, except urgent ones."""

    def __init__(self, min_interval: float, clock=time.monotonic):
        self.min_interval = min_interval
        self.clock = clock
        self._last: dict = {}

    def allow(self, key, urgent: bool = False) -> bool:
        now = self.clock()
        last = self._last.get(key)
        if urgent or last is None or now - last >= self.min_interval:
            self._last[key] = now
            return True
        return False
