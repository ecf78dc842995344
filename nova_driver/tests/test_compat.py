# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""nova_driver/compat.py against the nova it runs with (CI: nova 34 and a SLURP release; every
supported release with ``tox -e nova31`` ... ``nova34``): each choice compat makes by release is
what that nova really does.

    .venv/bin/python -m testtools.run fluidvim.nova_driver.tests.test_compat
"""

import inspect
import types
import uuid

from nova import context as nova_context, exception, objects, test, version
from nova.compute import manager as compute_manager
from nova.tests.unit import fake_instance
from nova.virt import virtapi

from fluidvim.nova_driver import compat


class ReleaseTestCase(test.NoDBTestCase):

    def test_major_is_the_installed_novas(self):
        self.assertEqual(int(version.version_string().split(".")[0]), compat.NOVA_MAJOR)
        self.assertGreaterEqual(compat.NOVA_MAJOR, compat.OLDEST)

    def test_the_table_of_releases(self):
        """The per-release choices of the module docstring, release by release."""
        expected = {31: ("deadline", "Timeout", "send", False),
                    32: ("deadline", "InstanceEventTimeout", "set", False),
                    33: ("timeout", "InstanceEventTimeout", "set", False),
                    34: ("timeout", "InstanceEventTimeout", "set", True)}
        want = expected.get(compat.NOVA_MAJOR, expected[max(expected)])   # newer: as the newest
        self.assertEqual(want, (compat.WAIT_TIMEOUT_KW, compat.EVENT_TIMEOUT.__name__,
                                compat.EVENT_DELIVER, compat.STARTUP_HOOK))

    def test_startup_hook_is_novas(self):
        """nova-compute calls process_instances_at_startup exactly where compat says it does
        (the driver runs it itself otherwise: test_moves and test_slot_notifications check the
        effects on every release)."""
        from nova.virt import driver

        self.assertEqual(compat.STARTUP_HOOK,
                         hasattr(driver.ComputeDriver, "process_instances_at_startup"))
        src = inspect.getsource(compute_manager.ComputeManager.init_host)
        self.assertEqual(compat.STARTUP_HOOK, "process_instances_at_startup" in src)
        if compat.NOVA_MAJOR >= 32:
            self.assertIs(exception.InstanceEventTimeout, compat.EVENT_TIMEOUT)
        else:
            self.assertEqual("eventlet.timeout", compat.EVENT_TIMEOUT.__module__)

    def test_keyword_is_the_one_nova_declares(self):
        for cls in (virtapi.VirtAPI, compute_manager.ComputeVirtAPI):
            params = inspect.signature(cls.wait_for_instance_event).parameters
            self.assertIn(compat.WAIT_TIMEOUT_KW, params, cls)
            other = {"timeout", "deadline"} - {compat.WAIT_TIMEOUT_KW}
            self.assertFalse(other & set(params), (cls, list(params)))

    def _virtapi(self):
        ctx = nova_context.get_admin_context()
        instance = fake_instance.fake_instance_obj(ctx, uuid=str(uuid.uuid4()))
        events = compute_manager.InstanceEvents()
        compute = types.SimpleNamespace(instance_events=events, reportclient=None)
        return compute_manager.ComputeVirtAPI(compute), events, instance

    def test_a_delivered_event_ends_the_wait(self):
        """As nova-compute's external_instance_event: pop the waiter, hand it the event with
        compat.EVENT_DELIVER; the wait ends well before its time limit."""
        api, events, instance = self._virtapi()
        tag = str(uuid.uuid4())
        event = objects.InstanceExternalEvent(name="network-vif-plugged", tag=tag,
                                              status="completed", instance_uuid=instance.uuid)
        delivered = []
        with compat.wait_for_instance_event(api, instance, [("network-vif-plugged", tag)],
                                            timeout=60):
            waiter = events.pop_instance_event(instance, event)
            self.assertIsNotNone(waiter)
            getattr(waiter, compat.EVENT_DELIVER)(event)
            delivered.append(tag)
        self.assertEqual([tag], delivered)
        self.assertIsNone(events.pop_instance_event(instance, event))    # nothing left waiting

    def test_an_unsent_event_raises_event_timeout(self):
        """nova-compute's own ComputeVirtAPI and InstanceEvents, an event nobody sends: the
        wait ends with compat.EVENT_TIMEOUT (what the driver catches to honour
        vif_plugging_is_fatal), after the time limit given under compat's keyword."""
        api, _, instance = self._virtapi()
        ran = []
        with self.assertRaises(compat.EVENT_TIMEOUT):
            with compat.wait_for_instance_event(api, instance,
                                                [("network-vif-plugged", str(uuid.uuid4()))],
                                                timeout=0.2):
                ran.append(True)
        self.assertEqual([True], ran)
