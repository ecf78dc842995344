# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The Nomad zone's JSON job: one ``nic`` block per NIC of the LaunchRequest, in the form the
unikernel task driver decodes (nomad_driver/unikernel/config_nic_test.go decodes the same JSON
form; TestNICBlocksReachTheVNF boots a VNF from it)."""

import pytest

from fluidvim.common.zonetypes import LaunchRequest, NicRequest, ZoneError
from fluidvim.orchestrator.zones.nomad import NomadZone

FW = "FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);"


def _config(req):
    return NomadZone("n").job_spec(req, "j")["TaskGroups"][0]["Tasks"][0]["Config"]


def test_each_nic_is_one_block_with_its_fixed_mac():
    cfg = _config(LaunchRequest("fw", FW, nics=(NicRequest("br0", mac="fa:16:3e:00:00:01"),
                                                NicRequest())))
    assert cfg["nic"] == [{"bridge": "br0", "mac": "fa:16:3e:00:00:01"}, {"bridge": ""}]
    assert "nics" not in cfg and "macs" not in cfg


def test_no_nic_asked_is_one_unplugged_nic():
    assert _config(LaunchRequest("fw", FW))["nic"] == [{"bridge": ""}]


def test_a_fixed_tap_or_ovs_port_is_refused_naming_the_nic():
    zone = NomadZone("n", address="http://127.0.0.1:9")      # refused before any request
    for nic in (NicRequest("br0", tap="fvtap0"), NicRequest("br-int", ovs={"iface-id": "p"})):
        with pytest.raises(ZoneError, match=r"nics\[1\]: .*local zone"):
            zone.launch(LaunchRequest("fw", FW, nics=(NicRequest(), nic)))
