# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""SlotPublisher's rules on oslo.messaging's in-process transport (the notifier and listener
are the real ones; tests/integration/test_orchestrator.py runs them over RabbitMQ): nearly full
counts travel exact and every change of one is sent; the urgent ones pass the rate limit."""

import time
import uuid

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fluidvim.common.slotnotify import SlotPublisher
from fluidvim.orchestrator.notify import SlotListener
from fluidvim.orchestrator.slots import SlotRegistry


def wait_for(pred, what, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def bus():
    conf = cfg.ConfigOpts()
    conf([])
    transport = messaging.get_notification_transport(conf, url="fake:/")
    topic = f"slots_{uuid.uuid4().hex[:8]}"
    reg = SlotRegistry(ttl=3600)
    listener = SlotListener(transport, topic, reg)
    listener.start()
    now = [100.0]
    pub = SlotPublisher(transport, "fvo.test", topic, min_interval=30.0, heartbeat=300.0,
                        clock=lambda: now[0])
    yield pub, reg, listener, now
    listener.stop()
    transport.cleanup()


WHERE = dict(zone="z", host="h", instance="i1", service="svc", region="r")


def test_nearly_full_changes_are_sent_exact(bus):
    pub, reg, listener, now = bus

    def free():
        return reg.aggregate("svc", "instance").get("i1")

    assert pub.publish(slots=40, delay_s=0.2, **WHERE)
    wait_for(lambda: free() == 40, "the first update")
    listener_seen = [reg.reports()[0].at]
    assert not pub.publish(slots=35, delay_s=0.2, **WHERE)     # a change, but rate limited
    now[0] += 30.0
    assert pub.publish(slots=35, delay_s=0.2, **WHERE)         # the same bucket, fresh: sent
    wait_for(lambda: reg.reports()[0].at > listener_seen[0], "the bucket's refresh")
    # the bucket alone (32-63): no slot was handed out since the exact 40, which it still holds
    assert free() == 40 and reg.reports()[0].at > listener_seen[0]
    assert not pub.publish(slots=35, delay_s=0.2, **WHERE)     # unchanged: nothing new
    assert pub.publish(slots=12, delay_s=0.2, **WHERE)         # into nearly full: at once
    wait_for(lambda: free() == 12, "the exact count of nearly full")
    now[0] += 30.0                                            # past the rate limit
    assert pub.publish(slots=11, delay_s=0.2, **WHERE)        # a change within bucket 8-15
    wait_for(lambda: free() == 11, "11, not the bucket's 8")
    assert not pub.publish(slots=11, delay_s=0.2, **WHERE)     # unchanged: nothing new
    assert not pub.publish(slots=10, delay_s=0.2, **WHERE)     # changed, but rate limited
    assert pub.publish(slots=0, delay_s=0.2, **WHERE)          # full: at once
    wait_for(lambda: free() == 0, "full")
    assert pub.publish(slots=1, delay_s=0.2, **WHERE)          # room again: at once
    wait_for(lambda: free() == 1, "room again")
    assert (pub.sent, pub.suppressed) == (6, 4)
    assert listener.endpoint.received == 6
