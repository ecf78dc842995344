# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot updates as oslo.messaging notifications: the publishing side.

* :class:`SlotPublisher` - what VNF hosts and drivers call: it compresses each update (4-bit log2
  slots, 2-bit log10 magnitude, exact count on magnitude changes and while nearly full, 4-bit
  delay code; see :mod:`fluidvim.common.slotcodec`), drops unchanged ones, rate-limits the rest
  per (instance, service) except the urgent ones (:func:`fluidvim.common.slotcodec.urgent`)
  and sends them (``info`` priority, on the notification topic) as ``fluidvim.slots.batch``
  notifications: the updates of one tick packed 2-4 bytes each (``wire="compact"``, the default),
  or one ``fluidvim.slots.update`` JSON notification per update (``wire="json"``: readable on
  the wire; the listener logs every decoded update at debug level either way). An update with
  an exact count carries the VNF's ``opened`` counter (sessions ever opened) when the source
  reads it (:meth:`SlotPublisher.note_opened`); a change of it alone is news (rate limited): it
  tells the registry that slots it handed out have connected.
  An update may carry the VNF's **watts per slot** (its attributed watts, ``fluidvim metrics
  serve``, over its slot capacity): ``watts_per_slot`` in the JSON form, and in a batch a
  separate field ``w`` (key index -> W/slot) beside the packed records, which stay as
  :mod:`~fluidvim.common.slotcodec` packs them. It rides on the updates sent anyway (a change of
  watts alone sends nothing).
* :class:`SlotAgent` - a small loop over a zone-like source of per-instance slots that publishes
  through a SlotPublisher: the embedded local zone (launch core), nova-compute
  (:mod:`fluidvim.nova_driver.slots`) and the orchestrator's poller of each Nomad zone run one.

A neutral module (ARCHITECTURE.md): the contract between slot reporters and the orchestrator's
listener (:mod:`fluidvim.orchestrator.notify`), so nova-compute loads no orchestrator code.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
import uuid

import oslo_messaging as messaging
from oslo_log import log as logging

from fluidvim.common.errors import DependencyDown
from fluidvim.common.slotcodec import (
    EXACT_BELOW,
    KeyTable,
    RateLimiter,
    SlotEncoder,
    encode_delay,
    pack_records,
    slot_code,
    urgent,
)
from fluidvim.common.zonetypes import ZoneError

LOG = logging.getLogger(__name__)

EVENT_UPDATE = "fluidvim.slots.update"
EVENT_GONE = "fluidvim.slots.gone"
EVENT_BATCH = "fluidvim.slots.batch"
WIRES = ("compact", "json")


class SlotPublisher:
    def __init__(self, transport, publisher_id: str, topic: str, *, min_interval: float = 1.0,
                 heartbeat: float = 30.0, clock=time.monotonic, wire: str = "compact"):
        if wire not in WIRES:
            raise ValueError(f"wire must be one of {', '.join(WIRES)}, got {wire!r}")
        self.notifier = messaging.Notifier(transport, publisher_id=publisher_id,
                                           driver="messagingv2", topics=[topic])
        self.wire = wire
        self.keys = KeyTable(heartbeat, clock)
        self.epoch = uuid.uuid4().hex[:8]   # a receiver keeps one key table per epoch
        self._pending: list | None = None   # records of the open batch()
        self._watts: dict = {}              # key index -> W/slot of the open batch()
        self._wps: dict = {}                # (instance, service) -> W/slot (set_watts)
        self.messages = 0                   # notifications sent (a batch is one)
        self.encoder = SlotEncoder()
        self.limiter = RateLimiter(min_interval, clock)
        self.heartbeat = heartbeat
        self.clock = clock
        self._last: dict = {}              # key -> (encoded tuple, sent at, count, opened)
        self._opened: dict = {}            # key -> the VNF's opened counter (note_opened)
        self.sent = 0
        self.suppressed = 0

    def publish(self, *, zone: str, host: str, instance: str, service: str, slots: int,
                delay_s: float | None, region: str = "default", force: bool = False) -> bool:
        """Send one update unless it is unchanged (and no heartbeat is due) or rate limited.
        Returns whether it was sent (with the watts per slot :meth:`set_watts` gave, if any)."""
        key = (instance, service)
        watts_per_slot = self._wps.get(key)
        last = self._last.get(key)
        # the VNF's sessions opened: with an exact count only - nearly full, and a key's first
        # update (the registry's baseline, before a slot of it is handed out), see slotcodec
        opened = self._opened.pop(key, None)
        opened = opened if slots < EXACT_BELOW or last is None else None
        code = (slot_code(slots), encode_delay(delay_s))
        now = self.clock()
        if (not force and last is not None and last[0] == code and last[2] == slots and last[3] == opened
                and now - last[1] < self.heartbeat):
            self.suppressed += 1                           # nothing new to say
            return False
        # a new order of magnitude, nearly full, 0 <-> not 0: never held back (slotcodec.urgent)
        hurry = force or urgent(last[2] if last is not None else None, slots)
        if not self.limiter.allow(key, urgent=hurry):
            self.suppressed += 1
            return False
        msg = self.encoder.encode(key, slots, delay_s)
        if opened is not None and msg.get("exact") is not None:
            msg["opened"] = int(opened)
        if self.wire == "json":
            payload = {"zone": zone, "host": host, "instance": instance, "service": service,
                       "region": region, "at": time.time(), **msg}
            if watts_per_slot is not None:
                payload["watts_per_slot"] = round(float(watts_per_slot), 6)
            self.notifier.info({}, EVENT_UPDATE, payload)
            self.messages += 1
        else:
            idx = self.keys.index((zone, host, instance, service, region))
            rec = (idx, msg["s"], msg["m"], msg["q"], msg.get("exact"), msg.get("opened"))
            if watts_per_slot is not None:
                self._watts[idx] = round(float(watts_per_slot), 6)
            if self._pending is None:
                self._send_batch([rec])
            else:
                self._pending.append(rec)
        self._last[key] = (code, now, int(slots), opened)
        self.sent += 1
        return True

    def note_opened(self, instance: str, service: str, opened: int) -> None:
        """The VNF's ``opened`` counter (contract/PROTOCOL.md ``stats``) for the next
        :meth:`publish` of (``instance``, ``service``)."""
        self._opened[(instance, service)] = int(opened)

    def set_watts(self, instance: str, service: str, watts_per_slot: float | None) -> None:
        """The VNF's watts per slot, carried by its next updates (None: not known)."""
        if watts_per_slot is None:
            self._wps.pop((instance, service), None)
        else:
            self._wps[(instance, service)] = float(watts_per_slot)

    def _send_batch(self, records: list) -> None:
        payload = {"e": self.epoch, "t": round(time.time(), 3),
                   "u": base64.b64encode(pack_records(records)).decode("ascii")}
        defs = self.keys.definitions(r[0] for r in records)
        if defs:
            payload["k"] = defs
        watts = {str(r[0]): self._watts.pop(r[0]) for r in records if r[0] in self._watts}
        if watts:
            payload["w"] = watts
        self.notifier.info({}, EVENT_BATCH, payload)
        self.messages += 1

    @contextlib.contextmanager
    def batch(self):
        """Updates published inside go out together, as one notification (compact wire)."""
        if self._pending is not None:          # nested: the outer batch sends them
            yield
            return
        self._pending = []
        try:
            yield
        finally:
            records, self._pending = self._pending, None
            if records:
                self._send_batch(records)

    def flush(self) -> None:
        """Send what the open batch holds so far (before a ``gone``, so order is kept)."""
        if self._pending:
            records, self._pending = self._pending, []
            self._send_batch(records)

    def gone(self, *, zone: str, instance: str) -> None:
        self.flush()
        self.notifier.info({}, EVENT_GONE, {"zone": zone, "instance": instance,
                                            "at": time.time()})
        self.messages += 1
        for key in [k for k in self._last if k[0] == instance]:
            self._last.pop(key)
            self._wps.pop(key, None)


def watts_per_slot(entry: dict) -> float | None:
    """W per slot of an :meth:`SlotAgent` source's entry: its ``watts`` (the VNF's attributed
    watts) over its slot capacity ``total``; None when either is unknown."""
    w, total = entry.get("watts"), entry.get("total")
    if w is None or not total or total <= 0:
        return None
    return float(w) / float(total)


class SlotAgent:
    """Publishes the slots of every VNF of a zone-like source, every ``interval`` seconds.

    ``zone`` needs ``name``, ``region``, ``host_name`` and ``instance_slots()`` ->
    {instance id: {"service", "free", ...}}. An entry may also carry ``host`` / ``zone`` (where
    that instance runs, when the source spans several hosts: Nova computes, Nomad nodes) and
    ``delay_s`` (the host's own queuing delay, used when no ``queuing`` estimator is given) and
    ``watts`` with ``total`` (:func:`watts_per_slot`);
    ``opened`` (the VNF's sessions opened, :meth:`SlotPublisher.note_opened`);
    ``free = None`` means "unknown this tick": nothing is sent and the instance is not taken for
    gone. Instances that disappear are announced ``gone``. :meth:`wake` and :meth:`forget` never
    block their caller (e.g. a spawn or a delete in nova-compute while the broker is down): they
    only make the agent's thread tick now."""

    def __init__(self, zone, publisher: SlotPublisher, queuing=None, interval: float = 1.0):
        self.zone = zone
        self.publisher = publisher
        self.queuing = queuing
        self.interval = interval
        self._stop = threading.Event()
        self._thread = None
        self._known: dict[str, str] = {}          # instance -> zone it was announced in
        self._gone: set[str] = set()              # forgotten, to announce at the next tick
        self._lock = threading.Lock()
        self._wake = threading.Event()

    def _delay(self, svc: str, entry: dict, cache: dict):
        if self.queuing is None:
            return entry.get("delay_s")
        if svc not in cache:
            cache[svc] = self.queuing.delay(self.zone, svc).seconds
        return cache[svc]

    def tick(self, force: bool = False) -> int:
        sent = 0
        per_vnf = self.zone.instance_slots()
        delays: dict = {}
        default_host = getattr(self.zone, "host_name", None)
        with self._lock, self.publisher.batch():      # one notification per tick (compact)
            forgotten, self._gone = self._gone, set()
            for vid, s in per_vnf.items():
                svc = s["service"]
                if not svc or s.get("free") is None or vid in forgotten:
                    continue          # not started for a service / no reading this tick
                zone = s.get("zone") or self.zone.name
                self.publisher.set_watts(vid, svc, watts_per_slot(s))
                if s.get("opened") is not None:
                    self.publisher.note_opened(vid, svc, s["opened"])
                sent += self.publisher.publish(zone=zone, host=s.get("host") or default_host,
                                               instance=vid, service=svc, slots=s["free"],
                                               delay_s=self._delay(svc, s, delays),
                                               region=self.zone.region, force=force)
                self._known[vid] = zone
            for vid in (set(self._known) - set(per_vnf)) | (forgotten & set(self._known)):
                self.publisher.gone(zone=self._known.pop(vid), instance=vid)
        return sent

    def wake(self) -> None:
        """Tick now rather than at the end of the interval (e.g. a VNF was just started)."""
        self._wake.set()

    def forget(self, instance: str) -> None:
        """Announce ``instance`` gone at the next tick, which happens now (e.g. its server was
        deleted), if it was announced."""
        with self._lock:
            self._gone.add(instance)
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="fluidvim-slots")
        self._thread.start()

    def _loop(self):
        while True:
            self._wake.wait(self.interval)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.tick()
            # e.g. the zone's API, or the orchestrator's database, is down: say so, keep trying
            except (ZoneError, DependencyDown) as e:
                LOG.warning("slot agent of zone %s: %s", self.zone.name, e)
            except Exception:  # noqa: BLE001 - keep publishing
                LOG.exception("slot agent tick failed")

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
