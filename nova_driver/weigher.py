# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Nova scheduler weighers on what fluidvim compute nodes report in ``host_state.stats``.

``UnikernelDriver.get_available_resource`` puts ``fluidvim_*`` keys into the compute node's stats
(refreshed by the resource tracker's periodic update and on each claim):

* ``fluidvim_queuing_delay_ms`` — expected time until a new slot exists on that host = median of
  its recent launch times of the kind its next launch would be (warm when a shell is ready);
  empty while the host has no launch history;
* ``fluidvim_slot_capacity`` / ``fluidvim_slots_total`` / ``fluidvim_slots_free`` — the host's
  session-slot capacity, slots of its running VNFs, and free slots inside those VNFs.

Enable them with, in nova.conf of the scheduler::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
                     fluidvim.nova_driver.weigher.QueuingDelayWeigher,
                     fluidvim.nova_driver.weigher.FreeSlotsWeigher

Multipliers: ``[fluidvim] queuing_delay_weight_multiplier`` and ``free_slots_weight_multiplier``,
overridable per aggregate with metadata of the same names (like Nova's own weighers).
"""

from __future__ import annotations

import nova.conf
from nova.scheduler import utils, weights

from fluidvim.nova_driver import conf as fconf

CONF = nova.conf.CONF
fconf.register_opts(CONF)


def _stat(host_state, key):
    """A numeric fluidvim stat of a host, or None (not a fluidvim host, or no value yet)."""
    value = (getattr(host_state, "stats", None) or {}).get(key)
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class QueuingDelayWeigher(weights.BaseHostWeigher):
    """Prefer hosts whose next VNF launch is expected soonest.

    Hosts without a known delay (no launch history yet, or not fluidvim hosts) weigh as the worst
    known delay among the candidates, so they are neither favoured nor excluded.
    """

    def weight_multiplier(self, host_state):
        return utils.get_weight_multiplier(
            host_state, "queuing_delay_weight_multiplier",
            CONF.fluidvim.queuing_delay_weight_multiplier)

    def _weigh_object(self, host_state, weight_properties):
        delay = _stat(host_state, "fluidvim_queuing_delay_ms")
        return -delay if delay is not None else None

    def weigh_objects(self, weighed_obj_list, weight_properties):
        raw = [self._weigh_object(o.obj, weight_properties) for o in weighed_obj_list]
        known = [w for w in raw if w is not None]
        worst = min(known) if known else 0.0
        return [worst if w is None else w for w in raw]


class FreeSlotsWeigher(weights.BaseHostWeigher):
    """Spread by session-slot capacity not yet given to VNFs (capacity − slots of running VNFs).

    A negative multiplier stacks instead. Hosts that report no fluidvim stats weigh 0.
    """

    minval = 0

    def weight_multiplier(self, host_state):
        return utils.get_weight_multiplier(
            host_state, "free_slots_weight_multiplier",
            CONF.fluidvim.free_slots_weight_multiplier)

    def _weigh_object(self, host_state, weight_properties):
        capacity = _stat(host_state, "fluidvim_slot_capacity")
        if capacity is None:
            return 0.0
        return capacity - (_stat(host_state, "fluidvim_slots_total") or 0.0)
