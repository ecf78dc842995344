# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot updates as oslo.messaging notifications.

The publishing side (:class:`SlotPublisher`, :class:`SlotAgent`, the event types) is in the neutral
:mod:`fluidvim.common.slotnotify`, which nova-compute imports without the orchestrator (import them
from there). This module adds the orchestrator's listener.

* :class:`SlotPublisher` - what VNF hosts and drivers call: it compresses each update (4-bit log2
  slots, 2-bit log10 magnitude, exact count on magnitude changes, 4-bit delay code; see
  :mod:`fluidvim.common.slotcodec`), drops unchanged ones, rate-limits the rest per (instance,
  service) and sends them as ``fluidvim.slots.batch`` notifications (compact: 2-4 bytes per
  update, one notification per tick) or ``fluidvim.slots.update`` ones (JSON, one per update).
* :class:`SlotAgent` - a small loop over a zone-like source of per-instance slots that publishes
  through a SlotPublisher: the embedded local zone (launch core), nova-compute
  (:mod:`fluidvim.nova_driver.slots`) and the orchestrator's poller of each Nomad zone run one.
* :class:`SlotListener` - the orchestrator's notification listener feeding the registry (and
  the database, so a restarted orchestrator has the last known slots).
"""

from __future__ import annotations

import oslo_messaging as messaging
from oslo_log import log as logging

from fluidvim.common.slotcodec import decode_batch
from fluidvim.common.slotnotify import EVENT_BATCH, EVENT_GONE, EVENT_UPDATE

from .slots import SlotRegistry

LOG = logging.getLogger(__name__)


def notification_transport(conf):
    return messaging.get_notification_transport(conf, url=conf.orchestrator.transport_url)


class _Endpoint:
    filter_rule = messaging.NotificationFilter(event_type=r"^fluidvim\.slots\.")

    def __init__(self, registry: SlotRegistry, store=None, on_update=None):
        self.registry = registry
        self.store = store
        self.on_update = on_update
        self.received = 0
        self.unknown_keys = 0           # compact records naming a key not yet defined: dropped
        self._tables: dict[str, dict] = {}    # publisher epoch -> index -> key

    def _update(self, event_type, payload) -> None:
        rep = self.registry.apply_message(payload)
        if self.store is not None:
            self.store.save_slot_report(rep)
        self.received += 1
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug("slot update %s", payload)        # the readable form, whatever the wire
        if self.on_update:
            self.on_update(event_type, payload)

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        try:
            if event_type == EVENT_GONE:
                self.registry.forget(payload["instance"])
                if self.store is not None:
                    self.store.delete_slot_reports(payload["instance"])
                self.received += 1
                if self.on_update:
                    self.on_update(event_type, payload)
            elif event_type == EVENT_BATCH:
                table = self._tables.setdefault(str(payload["e"]), {})
                updates, unknown = decode_batch(payload, table)
                if unknown:
                    self.unknown_keys += unknown
                    LOG.debug("%d compact slot record(s) from %s name keys not defined yet "
                              "(they come with the publisher's next heartbeat)", unknown,
                              publisher_id)
                watts = {table[int(i)][2:4]: float(w) for i, w in (payload.get("w") or {}).items()
                         if int(i) in table}
                for u in updates:
                    w = watts.get((u["instance"], u["service"]))
                    if w is not None:
                        u["watts_per_slot"] = w
                    self._update(EVENT_UPDATE, u)
            else:
                self._update(event_type, payload)
        except (KeyError, TypeError, ValueError) as e:
            LOG.warning("malformed slot update from %s dropped: %s (%r)", publisher_id, e, payload)
        return messaging.NotificationResult.HANDLED


class SlotListener:
    def __init__(self, transport, topic: str, registry: SlotRegistry, store=None, on_update=None,
                 pool: str | None = None):
        self.endpoint = _Endpoint(registry, store, on_update)
        self.listener = messaging.get_notification_listener(
            transport, [messaging.Target(topic=topic)], [self.endpoint],
            pool=pool)

    def start(self) -> None:
        self.listener.start()

    def stop(self) -> None:
        self.listener.stop()
        self.listener.wait()
