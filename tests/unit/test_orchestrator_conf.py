# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""etc/fluidvim-orchestrator.conf.sample is what oslo-config-generator makes from the code."""

import os

from fluidvim.orchestrator import conf as orchconf

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_defaults_and_overrides():
    conf = orchconf.make_conf(connection="sqlite://", vnf_memory_mb=64)
    o = conf.orchestrator
    assert o.transport_url == "rabbit://guest:guest@127.0.0.1:5672/"
    assert o.connection == "sqlite://" and conf.vnf.memory_mb == 64
    # a second ConfigOpts does not see the first one's overrides
    assert orchconf.make_conf().orchestrator.connection.startswith("sqlite:////var/lib/")
    names = {o.name for _, opts in orchconf.list_opts() for o in opts}
    assert {"connection", "transport_url", "topic", "notification_topic", "probe_validity",
            "slot_update_min_interval", "decision_tolerance"} <= names


def test_zone_specs():
    import pytest

    from fluidvim.orchestrator.zones import build_zones, parse_zone_spec

    assert parse_zone_spec("nomad:dc1:address=http://h:4646,datacenter=dc1") == (
        "nomad", "dc1", {"address": "http://h:4646", "datacenter": "dc1"})
    assert parse_zone_spec("nova:az1") == ("nova", "az1", {})
    for bad, why in (("nomad", "KIND:NAME"), ("xen:z", "kind must be"),
                     ("nomad:z:address", "not KEY=VALUE")):
        with pytest.raises(ValueError, match=why):
            parse_zone_spec(bad)
    with pytest.raises(ValueError, match="colour"):
        build_zones(["nomad:z:colour=red"])
