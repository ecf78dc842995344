# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""What differs between the Nova releases the driver supports: 31 (2025.1), 32 (2025.2),
33 (2026.1) and 34 (2026.2) (docs/nova-releases.md; tox -e nova31 ... nova34).

Chosen by nova's major version, not by probing, so that a release behaving differently from
what is written here fails ``nova_driver/tests/test_compat.py`` (which checks each choice against
the installed nova) instead of silently taking another path.

``ComputeVirtAPI.wait_for_instance_event`` (a driver waiting for Neutron's network-vif-plugged):
  ======  =====================  ======================================================
  nova    its time-limit keyword  what it raises when the time is up
  ======  =====================  ======================================================
  31      ``deadline``            ``eventlet.timeout.Timeout``
  32      ``deadline``            ``nova.exception.InstanceEventTimeout`` (eventlet gone)
  33, 34  ``timeout``             ``nova.exception.InstanceEventTimeout``
  ======  =====================  ======================================================

``ComputeDriver.process_instances_at_startup`` (called by nova-compute's ``init_host`` after its
evacuation cleanup) is new in 34 (:data:`STARTUP_HOOK`). Before, the driver runs the same step
itself on the first resource update (``post_start_hook``), which nova-compute makes after
``init_host`` has cleaned up evacuations and initialised its instances.

And nova-compute completes a waiter (``InstanceEvents.pop_instance_event``'s event) with
``send(event)`` (31: eventlet's Event) or ``set(event)`` (32 on): :data:`EVENT_DELIVER`, what
the tests use when they play Neutron's part.
"""

from __future__ import annotations

from nova import exception, version

OLDEST = 31                     # 2025.1 Epoxy, the oldest SLURP release supported


def _major(version_string: str) -> int:
    return int(version_string.split(".", 1)[0])


NOVA_MAJOR = _major(version.version_string())
if NOVA_MAJOR < OLDEST:
    raise ImportError(f"fluidvim's Nova driver supports nova {OLDEST} (2025.1) and later; this "
                      f"is nova {version.version_string()}: upgrade nova, or install an older "
                      f"fluidvim")

# the keyword of wait_for_instance_event's time limit
WAIT_TIMEOUT_KW = "timeout" if NOVA_MAJOR >= 33 else "deadline"

# nova-compute calls the driver's process_instances_at_startup itself
STARTUP_HOOK = NOVA_MAJOR >= 34

# the method of a popped waiter that hands it the event (external_instance_event)
EVENT_DELIVER = "set" if NOVA_MAJOR >= 32 else "send"

if NOVA_MAJOR >= 32:
    EVENT_TIMEOUT: type[BaseException] = exception.InstanceEventTimeout
else:                          # nova 31
    import eventlet.timeout

    EVENT_TIMEOUT = eventlet.timeout.Timeout


def wait_for_instance_event(virtapi, instance, events, timeout, error_callback=None):
    """``virtapi.wait_for_instance_event`` with the time limit under this release's keyword;
    on expiry it raises :data:`EVENT_TIMEOUT`."""
    return virtapi.wait_for_instance_event(instance, events, error_callback=error_callback,
                                           **{WAIT_TIMEOUT_KW: timeout})
