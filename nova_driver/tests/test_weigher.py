# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Scheduler weighers on fluidvim host stats (Nova's weight handler, fake host states).

    /tmp/nova-venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_weigher
"""

from nova import test
from nova.scheduler import weights
from nova.tests.unit.scheduler import fakes

from fluidvim.nova_driver import weigher


def _host(name, **stats):
    return fakes.FakeHostState(name, name, {"stats": {k: str(v) for k, v in stats.items()},
                                            "aggregates": []})


class WeigherTestCase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.handler = weights.HostWeightHandler()

    def _best(self, weigher_cls, hosts):
        weighed = self.handler.get_weighed_objects([weigher_cls()], hosts, {})
        return [w.obj.host for w in weighed]

    def test_loadable_by_nova(self):
        classes = self.handler.get_matching_classes(
            ["fluidvim.nova_driver.weigher.QueuingDelayWeigher",
             "fluidvim.nova_driver.weigher.FreeSlotsWeigher"])
        self.assertEqual([weigher.QueuingDelayWeigher, weigher.FreeSlotsWeigher], classes)

    def test_queuing_delay_prefers_soonest(self):
        hosts = [_host("slow", fluidvim_queuing_delay_ms=120.0),
                 _host("warm", fluidvim_queuing_delay_ms=1.5),
                 _host("cold", fluidvim_queuing_delay_ms=60.0)]
        self.assertEqual(["warm", "cold", "slow"], self._best(weigher.QueuingDelayWeigher, hosts))

    def test_unknown_delay_weighs_as_the_worst_known(self):
        hosts = [_host("new", fluidvim_queuing_delay_ms=""), _host("other"),
                 _host("fast", fluidvim_queuing_delay_ms=2.0),
                 _host("slow", fluidvim_queuing_delay_ms=90.0)]
        ranked = self._best(weigher.QueuingDelayWeigher, hosts)
        self.assertEqual("fast", ranked[0])
        weighed = self.handler.get_weighed_objects([weigher.QueuingDelayWeigher()], hosts, {})
        by_host = {w.obj.host: w.weight for w in weighed}
        self.assertEqual(by_host["slow"], by_host["new"])
        self.assertEqual(by_host["slow"], by_host["other"])

    def test_multiplier_negative_inverts(self):
        self.flags(queuing_delay_weight_multiplier=-1.0, group="fluidvim")
        hosts = [_host("a", fluidvim_queuing_delay_ms=1.0),
                 _host("b", fluidvim_queuing_delay_ms=50.0)]
        self.assertEqual(["b", "a"], self._best(weigher.QueuingDelayWeigher, hosts))

    def test_free_slots_spreads(self):
        hosts = [_host("full", fluidvim_slot_capacity=4096, fluidvim_slots_total=4096),
                 _host("half", fluidvim_slot_capacity=4096, fluidvim_slots_total=2048),
                 _host("empty", fluidvim_slot_capacity=2048, fluidvim_slots_total=0),
                 _host("libvirt-host")]
        self.assertEqual(["half", "empty"], self._best(weigher.FreeSlotsWeigher, hosts)[:2])
        self.assertEqual("full", self._best(weigher.FreeSlotsWeigher, hosts)[-2])

    def test_free_slots_aggregate_multiplier(self):
        hosts = [_host("a", fluidvim_slot_capacity=100, fluidvim_slots_total=0),
                 _host("b", fluidvim_slot_capacity=100, fluidvim_slots_total=90)]
        for h in hosts:
            h.aggregates = [fakes.objects.Aggregate(
                id=1, name="stack", hosts=["a", "b"],
                metadata={"free_slots_weight_multiplier": "-1.0"})]
        self.assertEqual(["b", "a"], self._best(weigher.FreeSlotsWeigher, hosts))
