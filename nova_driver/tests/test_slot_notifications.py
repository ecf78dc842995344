# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot updates from nova-compute, end to end on Nova's fixtures and a REAL RabbitMQ.

nova-compute (UnikernelDriver with ``[fluidvim] slot_notifications = true``) boots real VNFs under
QEMU and publishes their free slots on ``[oslo_messaging_notifications] transport_url`` (RabbitMQ,
while Nova's own RPC stays on its fake bus); the orchestrator's SlotListener + SlotRegistry on
the same broker and a per-test topic must see each server with the right zone, host, instance,
service and slot count, and forget it when the server is deleted. Needs root and RabbitMQ
(``tools/bootstrap.sh`` starts it).

    .venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_slot_notifications
"""

import os
import time
import uuid

import oslo_messaging as messaging

from fluidvim.nova_driver.tests import test_functional as tf
from fluidvim.orchestrator.exception import OrchestratorError
from fluidvim.orchestrator.notify import SlotListener
from fluidvim.orchestrator.rpcapi import check_broker
from fluidvim.orchestrator.slots import SlotRegistry

RABBIT = os.environ.get("FLUIDVIM_RABBIT_URL", "rabbit://guest:guest@127.0.0.1:5672/")


def wait_for(what, fn, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class SlotNotificationTest(tf._FluidvimNovaTest):
    zone = "fvs-az"

    def setUp(self):
        try:
            check_broker(tf.CONF, RABBIT)
        except OrchestratorError as e:
            if os.environ.get("CI"):
                raise
            self.skipTest(f"{e} (tools/bootstrap.sh starts it)")
        self.topic = f"fvs_slots_{uuid.uuid4().hex[:10]}"
        super().setUp()
        self.registry = SlotRegistry(ttl=600)
        self.transport = messaging.get_notification_transport(tf.CONF, url=RABBIT)
        self.addCleanup(self.transport.cleanup)
        self.listener = SlotListener(self.transport, self.topic, self.registry)
        self.listener.start()
        self.addCleanup(self.listener.stop)
        self.assertIsNotNone(self.driver._slot_notes, "init_host did not start the publisher")

    def _start_compute(self, host, *args, **kwargs):
        # set before nova-compute starts: init_host reads them (Nova's RPC stays on its fake bus)
        self.flags(transport_url=RABBIT, group="oslo_messaging_notifications")
        self.flags(slot_notifications=True, slot_topic=self.topic, slot_zone=self.zone,
                   slot_region="fvs-region", slot_interval=0.2, slot_update_min_interval=0.0,
                   group="fluidvim")
        return super()._start_compute(host, *args, **kwargs)

    def _boot(self, flavor_id, metadata=None):
        body = self._build_server(image_uuid=tf.IMAGE_ID, flavor_id=flavor_id, networks="none")
        if metadata:
            body["metadata"] = metadata
        server = self.api.post_server({"server": body})
        return self._wait_for_state_change(server, "ACTIVE")

    def _report(self, instance):
        return next((r for r in self.registry.reports() if r.instance == instance), None)

    def test_boot_publishes_slots_delete_is_gone(self):
        flavor_id = self._create_flavor(name="fvs-small", memory_mb=32, vcpu=1, disk=1,
                                        extra_spec={"resources:CUSTOM_VNF_SESSION_SLOT": "64"})
        fw = self._boot(flavor_id, {"fluidvim_service": "fvs-fw"})
        plain = self._boot(flavor_id)                 # no metadata: the flavor's name

        rep = wait_for("the update of the fvs-fw server", lambda: self._report(fw["id"]))
        self.assertEqual(("fvs-az", "host1", fw["id"], "fvs-fw", "fvs-region"),
                         (rep.zone, rep.host, rep.instance, rep.service, rep.region))
        self.assertEqual(64, rep.slots)                # a new magnitude: the exact count
        self.assertEqual(64, rep.exact)
        self.assertEqual(64, self.driver.manager.stats(fw["id"])["slots"]["free"])
        # the host's queuing delay: the launch core's median of its launches (encoded up to
        # the next 0.1*2^q step), finite since it launched two VNFs
        qd = self.driver.manager.queuing_delay()["seconds"]
        self.assertIsNotNone(rep.delay_s)
        self.assertGreaterEqual(rep.delay_s, qd)
        self.assertLess(rep.delay_s, 2 * qd + 0.1 + 1e-9)

        rep2 = wait_for("the update of the server without metadata",
                        lambda: self._report(plain["id"]))
        self.assertEqual(("fvs-small", "host1", 64), (rep2.service, rep2.host, rep2.slots))
        # the orchestrator's aggregation: instance -> host -> zone -> region
        self.assertEqual({"fvs-az/host1": 64}, self.registry.aggregate("fvs-fw", "host"))
        self.assertEqual({"fvs-region": 64}, self.registry.aggregate("fvs-small", "region"))

        self._delete_server(fw)
        wait_for("fvs-fw gone from the registry", lambda: self._report(fw["id"]) is None, 10)
        self.assertEqual({}, self.registry.aggregate("fvs-fw", "zone"))
        self.assertIsNotNone(self._report(plain["id"]))          # the other one stays
        received = self.listener.endpoint.received
        self._delete_server(plain)
        wait_for("the second server gone", lambda: self._report(plain["id"]) is None, 10)
        self.assertGreater(self.listener.endpoint.received, received)
        self.assertEqual([], self.registry.reports())

    def test_compute_restart_keeps_the_service(self):
        """The service recorded at spawn survives a nova-compute restart (SQLite), so the new
        publisher announces the running VNF under the same service."""
        flavor_id = self._create_flavor(memory_mb=32, vcpu=1, disk=1,
                                        extra_spec={"resources:CUSTOM_VNF_SESSION_SLOT": "8"})
        server = self._boot(flavor_id, {"fluidvim_service": "fvs-nat"})
        wait_for("the first update", lambda: self._report(server["id"]))
        # forgotten before the restart: the new publisher's first update (it sends on change
        # only) can come before restart_compute_service returns
        self.registry.forget(server["id"])
        self.compute = self.restart_compute_service(self.compute, keep_hypervisor_state=False)
        self.driver = self.compute.manager.driver
        self.assertIsNotNone(self.driver._slot_notes)
        rep = wait_for("an update from the restarted compute", lambda: self._report(server["id"]))
        self.assertEqual(("fvs-nat", 8), (rep.service, rep.slots))
        self._delete_server(server)
        wait_for("gone", lambda: self._report(server["id"]) is None, 10)
