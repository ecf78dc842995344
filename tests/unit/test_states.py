# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The state vocabularies are stored in databases and sent on the wire: their values never
change (a change would need a migration and a protocol version)."""

import json

from fluidvim.common import instance_states as istates, zonetypes
from fluidvim.evaluator import model
from fluidvim.orchestrator import states
from fluidvim.orchestrator.zones import local, nomad, nova
from fluidvim.vnf import states as vstates


def test_values_are_the_stored_strings():
    assert vstates.STATUSES == ("booting", "pool", "running", "paused", "crashed", "stopped")
    assert vstates.LAUNCH_KINDS == ("cold", "warm")
    assert vstates.BACKENDS == ("qemu", "libvirt")
    assert istates.STATUSES == ("building", "running", "paused", "error", "deleted")
    assert zonetypes.KINDS == ("local", "nova", "nomad", "synthetic")
    assert states.NS_STATUSES == ("deploying", "running", "failed", "deleting", "deleted")
    assert states.OP_TYPES == ("instantiate", "scale", "heal", "terminate")
    assert states.OP_STATES == ("processing", "completed", "failed", "rolled_back")
    assert states.DECISION_STATUSES == ("decided", "deployed", "refused", "failed")
    assert model.PROBE_KINDS == ("static", "boot", "load")
    for value in (*vstates.STATUSES, *istates.STATUSES, *states.NS_STATUSES, *states.OP_STATES):
        assert type(value) is str and json.loads(json.dumps(value)) == value


def test_one_mapping_each():
    assert local.INSTANCE_STATUS == {"booting": "building", "running": "running", "paused": "paused",
                                     "crashed": "error"}
    assert set(nova.SERVER_STATUS.values()) <= set(istates.STATUSES)
    assert set(nomad.ALLOC_STATUS.values()) <= set(istates.STATUSES)
    assert nova._status("SHELVED") == istates.ERROR and nova._status(None) == istates.ERROR


def test_capabilities_not_kinds():
    assert (local.LocalZone.kernel_source, local.LocalZone.in_process) == (zonetypes.KERNEL_FILE, True)
    assert nomad.NomadZone.kernel_source == zonetypes.KERNEL_FILE and not nomad.NomadZone.in_process
    assert nova.NovaZone.kernel_source == zonetypes.KERNEL_IMAGE and not nova.NovaZone.in_process
    assert zonetypes.ZoneAdapter.slot_interval == 0.0
