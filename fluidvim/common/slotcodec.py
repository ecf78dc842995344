# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Session slots on the wire: FUSION's compressed updates and their rate limit.

Encodings (all pure functions, each with its inverse):

* **4-bit log2 bucket** of a slot count: code 0 = 0 slots, code k = [2^(k-1), 2^k - 1]
  (1; 2-3; 4-7; ...), code 15 = 2^14 or more. Decoding gives the bucket's lower bound, so a
  decoded count never promises more slots than the instance has.
* **2-bit log10 magnitude**: 0 = none, 1 = 1-9, 2 = 10-99, 3 = 100 or more.
* **exact count** when the log10 magnitude changed since the last update sent for that key, and
  always while the count is below :data:`EXACT_BELOW` ("nearly full": the slots a resolver may
  hand out before it hears again must be known exactly, not as a bucket's lower bound - a
  bucket of 8-15 read as 8, or 1 read as "1 or 0", refuses sessions while the instance has
  room). A publisher sends an update when the count changed, at most one per key and rate
  limit interval, except at once when it changes magnitude, crosses into nearly full, or
  reaches or leaves 0 (:func:`urgent`). Above nearly full that update is the bucket alone (2
  bytes); what it adds is its time: the registry takes the slots it handed out before it as
  shown in the count (which stays a lower bound), where a count resent only on a change of
  bucket left them counted until the heartbeat - an instance with room read as full.
* **compact batch** (:func:`pack_records`, :class:`KeyTable`, :func:`decode_batch`): the updates
  of one publisher tick as 2-6 bytes each, in one notification, instead of one JSON notification
  each (what the publishers send; :func:`decode_batch` gives back the readable JSON form).
* **sessions opened**: an update with an exact count also carries the VNF's ``opened`` counter
  (contract/PROTOCOL.md ``stats``: sessions ever opened, monotonic) when its source reads it,
  on the compact wire modulo :data:`OPENED_MOD` (1-2 bytes); :func:`opened_delta` gives back the
  sessions opened between two updates. The registry releases that many of the slots it handed
  out (they are in the count now) instead of counting them for ``reservation_ttl``. Only with
  an exact count: that is where a handed-out slot decides whether an instance has room (nearly
  full); a bucket update's count is an estimate the registry already takes the slots handed
  out before it from (:meth:`fluidvim.orchestrator.slots.SlotRegistry._estimate`). A key's
  first update (exact: a new magnitude) carries it too, so the registry's baseline is taken
  before any of its slots is handed out (a baseline taken with slots outstanding cannot tell
  which of them connected: one stayed counted for good). So an update
  stays within FUSION's ~4 bytes plus 1-2: 2 bytes as a bucket, 4-5 nearly full
  (index < 8: header 1, slot/delay 1, exact 1, opened 1-2).
* **queuing delay** Q = 0.1 * 2^q seconds in 4 bits: q = 0..14 (0.1 s .. 1638.4 s; a delay is
  rounded *up* to the next step), q = 15 = infinite (the zone cannot launch the service on demand).
  Throughout the orchestrator an infinite delay is ``None``.

A neutral leaf (standard library only; ARCHITECTURE.md): slot publishers (:mod:`fluidvim.common.slotnotify`:
the local zone's agent, nova-compute, the Nomad pollers) encode with it and the orchestrator's
registry (:mod:`fluidvim.orchestrator.slots`) decodes with it.
"""

from __future__ import annotations

import base64
import math
import time

LOG2_BITS = 4
LOG2_MAX_CODE = (1 << LOG2_BITS) - 1          # 15
DELAY_INF_CODE = 15
DELAY_BASE_S = 0.1
EXACT_BELOW = 16       # counts below this always travel exact (1 more byte in a compact record)
# ``opened`` travels modulo this (a 1-2 byte varint); a difference of half of it or more between
# two updates is taken for a restarted VNF (its counter began again at 0): nothing is released
OPENED_MOD = 1 << 14


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


def update_bandwidth(resolvers: int, services: int, update_rate_hz: float, zones: int,
                     bits_per_update: float) -> dict[str, float]:
    """FUSION's bandwidth model R = M * U * Z * B, with its terms: {"M": resolvers, "U": updates
    per second per zone, "Z": zones, "B": bits per update, "R": bits per second}. Every one of
    the M resolvers receives every update; each of the Z zones sends U = services *
    update_rate_hz updates per second (``update_rate_hz`` per service); B bits per update on the
    wire (8 with the 4-bit slot + 4-bit delay codes alone; the compact batch record is 16-32
    bits, plus the transport's framing per message: see :func:`pack_records`)."""
    for name, v in (("resolvers", resolvers), ("services", services),
                    ("update_rate_hz", update_rate_hz), ("zones", zones),
                    ("bits_per_update", bits_per_update)):
        if not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
            raise ValueError(f"{name} must be a number >= 0, got {v!r}")
    u = services * update_rate_hz
    return {"M": resolvers, "U": u, "Z": zones, "B": bits_per_update,
            "R": resolvers * u * zones * bits_per_update}


# -- the compact batch: updates as a few bytes each --
# One record per update, packed back to back:
#   varint  (index << 4) | (has_opened << 3) | (log10 magnitude << 1) | has_exact
#   byte    (log2 slot code << 4) | delay code
#   varint  exact count, only when has_exact (a change of magnitude, or nearly full)
#   varint  sessions opened modulo OPENED_MOD, only when has_opened (with an exact count)
# ``index`` names (zone, host, instance, service, region) within one publisher's key table, which
# the batch carries for new keys (and again every heartbeat, for receivers that started later).
# So a usual update is 2 bytes, one with its exact count 3-4 bytes (FUSION's ~4-byte update), and
# with the VNF's opened counter 1-2 more.

def _put_varint(out: bytearray, n: int) -> None:
    if n < 0:
        raise ValueError("varint must be >= 0")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _get_varint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("compact slot record truncated inside a varint")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise ValueError("compact slot record: varint longer than 64 bits")


def pack_records(records) -> bytes:
    """``records``: (index, s, m, q, exact or None[, opened or None]) -> the packed bytes
    (``opened`` travels modulo :data:`OPENED_MOD`, and only with an exact count)."""
    out = bytearray()
    for rec in records:
        idx, s, m, q, exact = rec[:5]
        opened = rec[5] if len(rec) > 5 else None
        if not (0 <= s <= LOG2_MAX_CODE and 0 <= m <= 3 and 0 <= q <= DELAY_INF_CODE):
            raise ValueError(f"record of key {idx}: s={s} m={m} q={q} out of range")
        if opened is not None and (exact is None or opened < 0):
            raise ValueError(f"record of key {idx}: opened={opened} needs an exact count and "
                             "must be >= 0")
        _put_varint(out, (idx << 4) | ((opened is not None) << 3) | (m << 1)
                    | (exact is not None))
        out.append((s << 4) | q)
        if exact is not None:
            _put_varint(out, exact)
        if opened is not None:
            _put_varint(out, opened % OPENED_MOD)
    return bytes(out)


def unpack_records(data: bytes) -> list[tuple[int, int, int, int, int | None, int | None]]:
    """The inverse of :func:`pack_records`: (index, s, m, q, exact, opened modulo
    :data:`OPENED_MOD`) each, None where absent; ValueError on a truncated record."""
    out, pos = [], 0
    while pos < len(data):
        head, pos = _get_varint(data, pos)
        if pos >= len(data):
            raise ValueError("compact slot record truncated before its slot/delay byte")
        sq = data[pos]
        pos += 1
        exact = opened = None
        if head & 1:
            exact, pos = _get_varint(data, pos)
        if head & 8:
            opened, pos = _get_varint(data, pos)
        out.append((head >> 4, sq >> 4, (head >> 1) & 3, sq & 15, exact, opened))
    return out


def opened_delta(previous: int, current: int) -> int | None:
    """Sessions a VNF opened between two ``opened`` readings, from their values modulo
    :data:`OPENED_MOD` (the JSON form's full values give the same); None when the difference is
    half the modulus or more: a VNF that restarted (its counter began again at 0) or readings
    too far apart to tell."""
    d = (int(current) - int(previous)) % OPENED_MOD
    return None if d >= OPENED_MOD // 2 else d


class KeyTable:
    """The publisher's side of the key table: (zone, host, instance, service, region) -> index;
    which definitions a batch must carry (new ones, and all of them every ``heartbeat`` s)."""

    def __init__(self, heartbeat: float = 30.0, clock=time.monotonic):
        self.heartbeat = heartbeat
        self.clock = clock
        self._index: dict[tuple, int] = {}
        self._defined_at: dict[int, float] = {}

    def index(self, key: tuple) -> int:
        if key not in self._index:
            self._index[key] = len(self._index)
        return self._index[key]

    def definitions(self, indices) -> dict[str, list]:
        """{"index": [zone, host, instance, service, region]} for those never (or not within a
        heartbeat) sent."""
        now = self.clock()
        keys = {i: k for k, i in self._index.items()}
        out = {}
        for i in sorted(set(indices)):
            at = self._defined_at.get(i)
            if at is None or now - at >= self.heartbeat:
                out[str(i)] = list(keys[i])
                self._defined_at[i] = now
        return out


def decode_batch(payload: dict, table: dict) -> tuple[list[dict], int]:
    """A ``fluidvim.slots.batch`` payload -> (the updates in their readable JSON form - the
    fields of a ``fluidvim.slots.update`` payload - and how many records named an index this
    receiver has no definition for yet: dropped). ``table`` = this publisher's index -> key,
    kept by the receiver between batches (updated here)."""
    for i, k in (payload.get("k") or {}).items():
        if not isinstance(k, list) or len(k) != 5:
            raise ValueError(f"key {i}: expected [zone, host, instance, service, region], got {k!r}")
        table[int(i)] = tuple(k)
    at = float(payload["t"])
    out, unknown = [], 0
    for idx, s, m, q, exact, opened in unpack_records(base64.b64decode(payload["u"])):
        key = table.get(idx)
        if key is None:
            unknown += 1
            continue
        zone, host, instance, service, region = key
        msg = {"zone": zone, "host": host, "instance": instance, "service": service,
               "region": region, "at": at, "s": s, "m": m, "q": q}
        if exact is not None:
            msg["exact"] = exact
        if opened is not None:
            msg["opened"] = opened
        out.append(msg)
    return out, unknown


# -- the update message --
def slot_code(slots: int) -> tuple[int, int | None]:
    """What an update says about ``slots``: (log2 code, the exact count while nearly full). An
    update is due whenever it changes."""
    return encode_log2(slots), (int(slots) if slots < EXACT_BELOW else None)


def urgent(old: int | None, new: int) -> bool:
    """Whether a change of the free count from ``old`` (None: never sent) to ``new`` goes out
    past the rate limit: a new order of magnitude, into or out of nearly full, to or from 0."""
    if old is None:
        return True
    return (encode_log10(old) != encode_log10(new) or (old < EXACT_BELOW) != (new < EXACT_BELOW)
            or (old == 0) != (new == 0))


class SlotEncoder:
    """Turns (key, slots, delay) into compressed updates: exact counts on magnitude changes and
    while nearly full (below :data:`EXACT_BELOW`)."""

    def __init__(self):
        self._magnitude: dict = {}

    def magnitude_changed(self, key, slots: int) -> bool:
        return self._magnitude.get(key) != encode_log10(slots)

    def encode(self, key, slots: int, delay_s: float | None) -> dict:
        mag = encode_log10(slots)
        msg = {"s": encode_log2(slots), "m": mag, "q": encode_delay(delay_s)}
        if self._magnitude.get(key) != mag or slots < EXACT_BELOW:
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
