# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The host power state machine's vocabulary and its configuration (no BMC here: the Redfish
actions run against sushy-tools' emulator in tests/integration/test_hostpower.py and
tests/e2e/test_nomad_multihost.py)."""

import pytest

from fluidvim.orchestrator import hostpower as hp
from fluidvim.orchestrator.exception import InvalidRequest


def test_transition_map_is_closed_and_reaches_every_state():
    assert set(hp.TRANSITIONS) == set(hp.STATES)
    for src, dsts in hp.TRANSITIONS.items():
        assert set(dsts) <= set(hp.STATES), src
        assert src not in dsts, f"{src} lists itself"
    # the cycle of the module doc, and the two ways out of every action
    for a, b in ((hp.ON, hp.DRAINING), (hp.DRAINING, hp.POWERING_OFF),
                 (hp.POWERING_OFF, hp.OFF), (hp.OFF, hp.WAKING), (hp.WAKING, hp.ON)):
        hp.check_transition(a, b)
    for s in hp.IN_PROGRESS:
        assert hp.FAILED in hp.TRANSITIONS[s] and hp.UNREACHABLE in hp.TRANSITIONS[s], s
    # every state is reachable from on
    seen, todo = {hp.ON}, [hp.ON]
    while todo:
        for n in hp.TRANSITIONS[todo.pop()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    assert seen == set(hp.STATES)


def test_forbidden_transition_names_the_allowed_ones():
    with pytest.raises(hp.HostPowerError, match=r"host z:h1: power state off cannot go to "
                       r"draining \(allowed: waking, on, bmc_unreachable\)"):
        hp.check_transition(hp.OFF, hp.DRAINING, "z:h1")
    with pytest.raises(hp.HostPowerError, match="waking cannot go to off"):
        hp.check_transition(hp.WAKING, hp.OFF)


def test_parse_bmcs():
    got = hp.parse_bmcs(["nomad-dc1:node-3=https://10.0.0.13/redfish/v1/Systems/1",
                         " local:h=http://127.0.0.1:8000/redfish/v1/Systems/abc-1/ "])
    assert got == {("nomad-dc1", "node-3"): "https://10.0.0.13/redfish/v1/Systems/1",
                   ("local", "h"): "http://127.0.0.1:8000/redfish/v1/Systems/abc-1"}
    for bad in ("node-3=https://10.0.0.13/redfish/v1/Systems/1",       # no zone
                "z:h=https://10.0.0.13/redfish/v1",                      # no system
                "z:h=10.0.0.13/redfish/v1/Systems/1"):                   # no scheme
        with pytest.raises(InvalidRequest, match=r"host_power\.bmcs: .* is not ZONE:HOST=URL; "
                           "e.g. nomad-dc1:node-3="):
            hp.parse_bmcs([bad])
    with pytest.raises(InvalidRequest, match="host z:h is listed twice"):
        hp.parse_bmcs(["z:h=http://a/redfish/v1/Systems/1", "z:h=http://b/redfish/v1/Systems/1"])


def test_redfish_bmc_url_checked():
    bmc = hp.RedfishBMC("https://10.0.0.13:8443/redfish/v1/Systems/1")
    assert (bmc.base, bmc.system_path) == ("https://10.0.0.13:8443", "/redfish/v1/Systems/1")
    with pytest.raises(InvalidRequest, match="is not a Redfish system URL"):
        hp.RedfishBMC("https://10.0.0.13/redfish/v1/Chassis/1")


def test_options_registered_once():
    from oslo_config import cfg
    conf = cfg.ConfigOpts()
    hp.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override("wake_free_slots", 7, group="host_power")
    hp.register_opts(conf)
    assert conf.host_power.wake_free_slots == 7
    assert conf.host_power.enabled is False
