# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The spec -> QEMU argv / libvirt XML mapping, pinned by contract/vectors/spec.json."""

import dataclasses
import json
import os
import xml.etree.ElementTree as ET

import pytest

from fluidvim.common import zonetypes
from fluidvim.vnf import spec as S

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "contract", "vectors", "spec.json")


def load():
    with open(VECTORS) as f:
        return json.load(f)


V = load()


@pytest.mark.parametrize("case", V["cases"], ids=lambda c: c["name"])
def test_mapping_matches_vector(case):
    sp = S.VNFSpec.from_dict(case["spec"])
    assert S.kernel_cmdline(sp) == case["cmdline"]
    if "qemu_argv" in case:
        assert S.qemu_argv(sp, qemu=V["qemu_binary"], control_fd=V["control_fd"],
                           qmp_fd=V["qmp_fd"]) == case["qemu_argv"]
        with pytest.raises(S.SpecError) as e:
            S.libvirt_xml(sp)
        assert e.value.field == "machine"
    else:
        assert S.libvirt_xml(sp, emulator=V["emulator"]) == case["libvirt_xml"]
        with pytest.raises(S.SpecError):
            S.qemu_argv(sp)


@pytest.mark.parametrize("case", V["invalid"], ids=lambda c: c["name"])
def test_invalid_specs_name_the_field(case):
    with pytest.raises(S.SpecError) as e:
        S.VNFSpec.from_dict(case["spec"]).validate()
    assert e.value.field == case["field"]
    assert case["field"] in str(e.value)


def test_libvirt_xml_is_minimal_and_round_trips():
    case = next(c for c in V["cases"] if c["name"] == "pc-kvm-2nics")
    sp = S.VNFSpec.from_dict(case["spec"])
    root = ET.fromstring(case["libvirt_xml"])
    assert root.get("type") == "kvm"
    assert root.find("os/loader").text == S.QBOOT_ROM
    assert root.find("os/kernel").text == sp.kernel
    assert root.find("os/type").get("machine") == "pc"
    devices = root.find("devices")
    # no disks, graphics, video, balloon or USB: only what a unikernel needs
    assert devices.findall("disk") == [] and devices.findall("graphics") == []
    assert devices.findall("video") == []
    assert devices.find("memballoon").get("model") == "none"
    assert devices.find("controller[@type='usb']").get("model") == "none"
    assert [s.get("type") for s in devices.findall("serial")] == ["file"]
    console = devices.find("console")
    assert console.find("target").get("type") == "virtio"
    assert console.find("source").get("path") == sp.control_socket
    assert devices.find("controller[@type='virtio-serial']").get("ports") == "1"
    assert [i.find("target").get("dev") for i in devices.findall("interface")] == \
        [n.tap for n in sp.nics]
    assert root.find("cpu/feature").get("name") == "arch-capabilities"
    meta = ET.tostring(root.find("metadata")[0], encoding="unicode")
    assert S.spec_from_libvirt_metadata(meta) == sp


def test_microvm_argv_has_no_firmware_and_both_serials():
    case = next(c for c in V["cases"] if c["name"] == "microvm-kvm-2nics")
    argv = case["qemu_argv"]
    assert "-bios" not in argv and "-nodefaults" in argv
    assert argv[argv.index("-cpu") + 1] == "max,-arch-capabilities"
    assert argv.count("-serial") == 1
    assert "virtconsole,chardev=ctl,nr=0" in argv
    assert argv.count("virtio-net-device,netdev=net0,mac=52:54:00:b0:35:06") == 1


def test_tcg_uses_plain_max_cpu():
    case = next(c for c in V["cases"] if c["name"] == "microvm-tcg-0nics")
    argv = case["qemu_argv"]
    assert argv[argv.index("-accel") + 1] == "tcg"
    assert argv[argv.index("-cpu") + 1] == "max"
    assert "-netdev" not in argv


def test_names_fit_ifnamsiz_and_macs_are_stable_unicast():
    u = "6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f"
    for i in range(4):
        assert len(S.tap_for(u, i)) <= 15
        mac = S.mac_for(u, i)
        assert mac == S.mac_for(u, i) and int(mac[:2], 16) & 1 == 0
    assert len({S.mac_for(u, i) for i in range(4)}) == 4


def test_unknown_field_is_named():
    d = V["cases"][0]["spec"] | {"colour": "blue"}
    with pytest.raises(S.SpecError) as e:
        S.VNFSpec.from_dict(d)
    assert e.value.field == "colour"


def test_vectors_are_current():
    import subprocess
    import sys

    tool = os.path.join(os.path.dirname(VECTORS), "..", "..", "tools", "gen_vectors.py")
    assert subprocess.run([sys.executable, tool, "--check"]).returncode == 0, \
        "contract/vectors/spec.json is stale: run tools/gen_vectors.py and review the diff"


@pytest.mark.parametrize("field,value", [("name", "fw1\n"), ("name", "fw 1")])
def test_names_with_newlines_or_spaces_are_refused(field, value):
    d = V["cases"][0]["spec"] | {field: value}
    with pytest.raises(S.SpecError) as e:
        S.VNFSpec.from_dict(d).validate()
    assert e.value.field == field


def test_tap_and_mac_with_trailing_newline_are_refused():
    good = V["cases"][0]["spec"]
    for key, bad in (("tap", "fvx0\n"), ("mac", "52:54:00:00:00:01\n")):
        nic = dict(good["nics"][0]) | {key: bad}
        with pytest.raises(S.SpecError) as e:
            S.VNFSpec.from_dict(good | {"nics": [nic]}).validate()
        assert e.value.field == f"nics[0].{key}"


@pytest.mark.parametrize("mac,problem", [
    ("fa:16:3e:00:00:01", None),
    ("FA:16:3E:00:00:01", "lower-case"),
    ("fa:16:3e:00:00", "not a MAC"),
    (None, "not a MAC"),
    ("01:00:5e:00:00:01", "multicast"),
    ("00:00:00:00:00:00", "all-zero"),
])
def test_mac_problem(mac, problem):
    got = zonetypes.mac_problem(mac)
    assert (got is None) if problem is None else (problem in got)


def test_launch_args_check_each_nic_and_name_the_field():
    from fluidvim.vnf.manager import VNFManager

    NR = zonetypes.NicRequest
    a = S.LaunchArgs("x", nics=["br0", None, NR(mac="fa:16:3e:00:00:01", tap="tapfw0001")])
    assert a.nics == (NR(bridge="br0"), NR(), NR(mac="fa:16:3e:00:00:01", tap="tapfw0001"))
    for nics, field, why in (
            ([None, NR(mac="01:00:5e:00:00:01")], "nics[1].mac", "multicast"),
            ([NR(tap="x" * 16), None], "nics[0].tap", "interface name"),
            ([NR(tap="tapfw0001"), NR(tap="tapfw0001")], "nics[1].tap", "nics[0].tap"),
            ([NR(ovs={"iface-id": "p"})], "nics[0].ovs", "without a bridge"),
            ([NR(bridge="br-int", ovs={"iface-id": 5})], "nics[0].ovs", "not a mapping"),
            ([5], "nics", "not a NicRequest"),
            ([None] * (S.MAX_NICS + 1), "nics", "at most")):
        with pytest.raises(S.SpecError) as e:
            S.LaunchArgs("x", nics=nics)
        assert e.value.field == field and why in str(e.value), (nics, e.value)
    with pytest.raises(S.SpecError) as e:
        S.LaunchArgs("x" * (S.MAX_CLICK_CONFIG_BYTES + 1))
    assert e.value.field == "click_config"
    # what the host must offer: a tap name not in use (lo exists on every host)
    with pytest.raises(S.SpecError) as e:
        VNFManager._check_host_nics(S.LaunchArgs("x", nics=[None, NR(tap="lo")]).nics)
    assert e.value.field == "nics[1].tap" and "already exists" in str(e.value)
    VNFManager._check_host_nics(S.LaunchArgs("x", nics=[None, NR(tap="tapfw0001")]).nics)


def test_qoe_round_trips_in_the_spec_and_is_left_out_when_unset():
    u = "6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f"
    spec = S.VNFSpec(uuid=u, name="fw", kernel="/k", control_socket="/c", console_log="/l")
    assert "qoe" not in spec.to_dict()       # stored specs, vectors and the Go driver's as before
    q = zonetypes.QoE(capacity=10, deadline_ms=5.0, quantile=0.99, budget_ns=4096)
    d = spec.with_changes(qoe=q).validate().to_dict()
    assert d["qoe"] == {"capacity": 10, "deadline_ms": 5.0, "quantile": 0.99, "budget_ns": 4096}
    assert S.VNFSpec.from_dict(json.loads(json.dumps(d))).qoe == q
    # a host-wait budget (qoeslots) is kept with it
    w = dataclasses.replace(q, wait_ppm=250_000)
    dw = spec.with_changes(qoe=w).validate().to_dict()
    assert dw["qoe"]["wait_ppm"] == 250_000
    assert S.VNFSpec.from_dict(json.loads(json.dumps(dw))).qoe == w
    with pytest.raises(S.SpecError) as e:
        S.VNFSpec.from_dict(d | {"qoe": {"capacity": 0, "deadline_ms": 5.0, "quantile": 0.99}})
    assert e.value.field == "qoe" and "capacity" in str(e.value)


def test_ovs_nic_round_trips_and_is_left_out_when_unset():
    u = "6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f"
    ids = {"iface-id": "0b7e6c1a-2f3d-4e5a-8b9c-d0e1f2a3b4c5", "vm-uuid": u}
    spec = S.VNFSpec(uuid=u, name="fw", kernel="/k", control_socket="/c", console_log="/l",
                     nics=(S.NicSpec(tap="tap0b7e6c1a-2f", mac="fa:16:3e:00:00:01",
                                     bridge="br-int", ovs=ids),
                           S.NicSpec(tap="fvx1", mac="fa:16:3e:00:00:02", bridge="brx"))).validate()
    d = spec.to_dict()
    assert d["nics"][0]["ovs"] == ids
    assert "ovs" not in d["nics"][1]          # specs without OVS NICs are as before (vectors, Go)
    back = S.VNFSpec.from_dict(json.loads(json.dumps(d)))
    assert back == spec and back.nics[0].ovs == ids and back.nics[1].ovs is None
    # the argv does not depend on where a NIC is attached
    plain = spec.with_changes(nics=(S.NicSpec(tap="tap0b7e6c1a-2f", mac="fa:16:3e:00:00:01",
                                              bridge="br-int"), spec.nics[1]))
    assert S.qemu_argv(spec) == S.qemu_argv(plain)


@pytest.mark.parametrize("nic, problem", [
    (S.NicSpec(tap="t0", mac="fa:16:3e:00:00:01", ovs={"iface-id": "p"}), "without a bridge"),
    (S.NicSpec(tap="t0", mac="fa:16:3e:00:00:01", bridge="br-int", ovs={"iface-id": 5}),
     "not a mapping"),
])
def test_bad_ovs_nics_are_refused(nic, problem):
    with pytest.raises(S.SpecError) as e:
        nic.validate(0)
    assert e.value.field == "nics[0].ovs" and problem in str(e.value)


def test_ovs_external_ids_add_mac_and_status():
    from fluidvim.vnf import ovs
    assert ovs.external_ids({"iface-id": "p1", "vm-uuid": "u"}, "fa:16:3e:00:00:01") == {
        "iface-id": "p1", "vm-uuid": "u", "attached-mac": "fa:16:3e:00:00:01",
        "iface-status": "active"}


@pytest.mark.parametrize("rule", V["qemu_binary_rule"],
                         ids=lambda r: f"{r['machine']}-{r['accel']}-{r['requested'][-10:]}-"
                                       f"{'mvm' if r['microvm_installed'] else 'nomvm'}")
def test_qemu_binary_rule(rule):
    """[vnf] qemu_binary = auto: the microvm build for a microvm spec on KVM when installed."""
    sp = S.VNFSpec.from_dict(next(c["spec"] for c in V["cases"]
                                  if c["spec"]["machine"] == rule["machine"]))
    sp = S.VNFSpec.from_dict({**sp.to_dict(), "accel": rule["accel"]})
    seen = []

    def available(name):
        seen.append(name)
        return rule["microvm_installed"]
    assert S.qemu_binary(sp, rule["requested"], available=available) == rule["binary"]
    assert set(seen) <= {S.QEMU_MICROVM}


def test_a_zones_launch_request_takes_nic_requests():
    NR = zonetypes.NicRequest
    req = zonetypes.LaunchRequest("fw", "x", nics=["net-a", None, NR("net-b", "fa:16:3e:00:00:01")])
    assert req.nics == (NR("net-a"), NR(), NR("net-b", "fa:16:3e:00:00:01"))
    assert req.bridges == ("net-a", None, "net-b")
    for nics, why in (([None, NR(mac="FA:16:3E:00:00:01")], "nics[1].mac: "),
                      (["net-a", 7], "nics[1]: 7 is not a NicRequest"),
                      ("net-a", "not a list of NICs")):
        with pytest.raises(ValueError) as e:
            zonetypes.LaunchRequest("fw", "x", nics=nics)
        assert str(e.value).startswith(why) or why in str(e.value), e.value
