# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NSD/VNFD import: schema and reference checks (every problem names its field by path), the
mapping to fluidvim (memory GB -> MiB, cpd order -> NIC order, day-0 = Click configuration,
configurable properties), ignored-field warnings, and the sample descriptors in etc/mano."""

import copy
import hashlib
import os

import pytest
import yaml

from fluidvim.orchestrator.mano import descriptors as d

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(REPO, "etc", "mano")
FW_CLICK = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"


def sample(rel):
    with open(os.path.join(SAMPLES, rel), encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture
def pkg(tmp_path):
    """A package directory: a fake kernel, cloud_init/fw.click; returns a builder of plans."""
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"\x7fELF fake kernel for descriptor tests")
    (tmp_path / "cloud_init").mkdir()
    (tmp_path / "cloud_init" / "fw.click").write_text(FW_CLICK)

    def vnfds():
        fw = sample("firewall_vnf/firewall_vnfd.yaml")
        fwd = sample("forwarder_vnf/forwarder_vnfd.yaml")
        for v in (fw, fwd):
            v["vnfd"]["sw-image-desc"][0]["image"] = str(kernel)
            v["vnfd"]["vdu"][0]["cloud-init-file"] = "fw.click"
        return fw, fwd

    class Pkg:
        dir = tmp_path
        kernel_path = str(kernel)

        @staticmethod
        def docs():
            fw, fwd = vnfds()
            return sample("fw_chain_ns/fw_chain_nsd.yaml"), fw, fwd

        @staticmethod
        def plan(nsd, *vnfds, name=None):
            return d.build_plan(d.Document(nsd, "nsd.yaml", str(tmp_path)),
                                [d.Document(v, f"vnfd{i}.yaml", str(tmp_path))
                                 for i, v in enumerate(vnfds)], name)

    return Pkg


def problems(pkg, nsd, *vnfds, name=None):
    with pytest.raises(d.DescriptorError) as e:
        pkg.plan(nsd, *vnfds, name=name)
    return e.value.problems


def only(pkg, nsd, *vnfds, name=None):
    ps = problems(pkg, nsd, *vnfds, name=name)
    assert len(ps) == 1, [str(p) for p in ps]
    return ps[0]


# -- the mapping --
def test_the_sample_chain_maps_to_two_services_and_three_links(pkg):
    plan = pkg.plan(*pkg.docs())
    assert plan.name == "fw-chain" and plan.networks == {
        "left": "fw-chain-left", "middle": "fw-chain-middle", "right": "fw-chain-right"}
    fw, fwd = plan.units
    assert (fw.service, fw.instances, fw.memory_mb, fw.vcpus) == ("fw-chain-fw", 1, 32, 1)
    assert [(n.cpd, n.network) for n in fw.nics] == [("fw-inside", "left"),
                                                     ("fw-outside", "middle")]
    assert [(n.cpd, n.network) for n in fwd.nics] == [("fwd-west", "middle"),
                                                      ("fwd-east", "right")]
    assert fw.kernel == pkg.kernel_path and fw.kernel_is_file
    assert fw.click_config == FW_CLICK
    # VDU configurable-properties (firewall), VNFD additional-configurable-property (forwarder)
    assert fw.properties == {"slots": 64, "deadline_ms": 100.0, "max_queuing_delay_s": 5.0}
    assert fwd.properties == {"slots": 128, "deadline_ms": 100.0}
    assert plan.warnings == []
    assert plan.to_dict()["units"][0]["service"] == "fw-chain-fw"


def test_the_samples_in_etc_validate_as_shipped():
    plan, nsd, vnfds = d.plan_files(os.path.join(SAMPLES, "fw_chain_ns", "fw_chain_nsd.yaml"),
                                    [SAMPLES])
    assert sorted(plan.vnfds) == ["fluidvim-firewall-vnf", "fluidvim-forwarder-vnf"]
    assert [u.service for u in plan.units] == ["fw-chain-fw", "fw-chain-fwd"]
    assert "IPFilter" in plan.units[0].click_config        # cloud_init/firewall.click
    with open(os.path.join(REPO, "etc", "click", "firewall.click")) as f:
        assert plan.units[0].click_config == f.read()
    # the image by name (OSM's rule), the exact memory from vdu-mem-requirements
    assert [(u.kernel, u.kernel_is_file, u.memory_mb) for u in plan.units] == \
        [("fluidvim-vnf", False, 32)] * 2
    # what the client sends is enough for the orchestrator: it never reads the client's disk
    again = d.build_plan(d.Document.from_dict(nsd.to_dict()),
                         [d.Document.from_dict(v.to_dict()) for v in vnfds])
    assert again.to_dict() == plan.to_dict()


@pytest.mark.parametrize("size,mib", [(0.03125, 32), (0.5, 512), (1, 1024), (0.1, 103)])
def test_memory_is_gb_to_mib_with_fractions(pkg, size, mib):
    nsd, fw, fwd = pkg.docs()
    fw["vnfd"]["virtual-compute-desc"][0]["virtual-memory"] = {"size": size}
    assert pkg.plan(nsd, fw, fwd).units[0].memory_mb == mib      # old OSM IM files: 0.03125


def test_exact_memory_from_vdu_mem_requirements(pkg):
    nsd, fw, fwd = pkg.docs()
    vm = fw["vnfd"]["virtual-compute-desc"][0]["virtual-memory"]
    vm.clear()
    vm.update({"size": 0.1, "vdu-mem-requirements": [{"key": "other", "value": "x"},
                                                    {"key": "fluidvim-memory-mib",
                                                     "value": "48"}]})
    assert pkg.plan(nsd, fw, fwd).units[0].memory_mb == 48          # wins over size
    vm["vdu-mem-requirements"][1]["value"] = "lots"
    with pytest.raises(d.DescriptorError, match=r"virtual-memory.vdu-mem-requirements\[1\]"
                       r".value: 'lots' is not an integer"):
        pkg.plan(nsd, fw, fwd)
    vm["vdu-mem-requirements"][1]["value"] = "5000"
    with pytest.raises(d.DescriptorError, match="out of range"):
        pkg.plan(nsd, fw, fwd)
    vm["size"] = 0.0001
    del vm["vdu-mem-requirements"]
    with pytest.raises(d.DescriptorError, match="fluidvim-memory-mib"):
        pkg.plan(nsd, fw, fwd)


def test_cpd_order_gives_the_nic_order(pkg):
    nsd, fw, fwd = pkg.docs()
    cpds = fw["vnfd"]["vdu"][0]["int-cpd"]
    cpds[0]["order"], cpds[1]["order"] = 1, 0             # outside first
    u = pkg.plan(nsd, fw, fwd).units[0]
    assert [(n.cpd, n.network) for n in u.nics] == [("fw-outside", "middle"),
                                                     ("fw-inside", "left")]
    for c in fwd["vnfd"]["vdu"][0]["int-cpd"]:            # no order: the list order
        assert "order" not in c
    assert [n.cpd for n in pkg.plan(nsd, fw, fwd).units[1].nics] == ["fwd-west", "fwd-east"]


def test_day0_inline_boot_data_and_file_next_to_the_descriptor(pkg):
    nsd, fw, fwd = pkg.docs()
    del fw["vnfd"]["vdu"][0]["cloud-init-file"]
    fw["vnfd"]["vdu"][0]["cloud-init"] = "FromDevice(0) -> Discard;"
    del fwd["vnfd"]["vdu"][0]["cloud-init-file"]
    fwd["vnfd"]["vdu"][0]["boot-data"] = "FromDevice(1) -> Discard;"
    a, b = pkg.plan(nsd, fw, fwd).units
    assert (a.click_config, b.click_config) == ("FromDevice(0) -> Discard;",
                                                "FromDevice(1) -> Discard;")
    (pkg.dir / "top.click").write_text("FromDevice(0) -> ToDevice(0);")
    nsd, fw, fwd = pkg.docs()
    fw["vnfd"]["vdu"][0]["cloud-init-file"] = "top.click"
    assert pkg.plan(nsd, fw, fwd).units[0].click_config == "FromDevice(0) -> ToDevice(0);"


def test_vdu_property_overrides_the_vnfd_default(pkg):
    nsd, fw, fwd = pkg.docs()
    fwd["vnfd"]["vdu"][0]["configurable-properties"] = [
        {"key": "fluidvim-session-slots", "value": "16"}, {"key": "vendor-knob", "value": 3}]
    assert pkg.plan(nsd, fw, fwd).units[1].properties == {"slots": 16, "deadline_ms": 100.0}


def test_instances_multiply_and_vdus_and_internal_links_map(pkg):
    nsd, fw, fwd = pkg.docs()
    v = fwd["vnfd"]
    v["vdu"].append(copy.deepcopy(v["vdu"][0]))
    v["vdu"][1]["id"] = "mon"
    v["vdu"][1]["int-cpd"] = [{"id": "mon-in", "int-virtual-link-desc": "inner"}]
    v["vdu"][0]["int-cpd"].append({"id": "fwd-mon", "int-virtual-link-desc": "inner"})
    v["int-virtual-link-desc"] = [{"id": "inner"}]
    v["df"][0]["vdu-profile"] = [{"id": "fwd", "min-number-of-instances": 1},
                                 {"id": "mon", "min-number-of-instances": 2}]
    nsd["nsd"]["nsd"][0]["df"][0]["vnf-profile"][1]["min-number-of-instances"] = 3
    plan = pkg.plan(nsd, fw, fwd)
    by = {u.service: u for u in plan.units}
    assert set(by) == {"fw-chain-fw", "fw-chain-fwd-fwd", "fw-chain-fwd-mon"}
    assert by["fw-chain-fwd-mon"].instances == 6 and by["fw-chain-fwd-fwd"].instances == 3
    assert plan.networks["fwd/inner"] == "fw-chain-fwd-inner"
    assert [n.network for n in by["fw-chain-fwd-fwd"].nics] == ["middle", "right", "fwd/inner"]
    assert [n.network for n in by["fw-chain-fwd-mon"].nics] == ["fwd/inner"]
    assert any("bridging loop" in w for w in plan.warnings)


def test_ext_cpd_exposing_an_internal_link_puts_it_on_the_ns_virtual_link(pkg):
    """SOL006 ext-cpd with int-virtual-link-desc: every NIC on that internal link (here of two
    VDUs) is on the NS virtual link the ext-cpd is connected to; no internal network is made."""
    nsd, fw, fwd = pkg.docs()
    v = fwd["vnfd"]
    v["vdu"].append(copy.deepcopy(v["vdu"][0]))
    v["vdu"][1]["id"] = "mon"
    v["vdu"][1]["int-cpd"] = [{"id": "mon-in", "int-virtual-link-desc": "lan"}]
    v["vdu"][0]["int-cpd"][1] = {"id": "fwd-east", "int-virtual-link-desc": "lan"}
    v["int-virtual-link-desc"] = [{"id": "lan"}]
    v["ext-cpd"][1] = {"id": "east", "int-virtual-link-desc": "lan"}
    v["df"][0]["vdu-profile"] = [{"id": "fwd", "min-number-of-instances": 1},
                                 {"id": "mon", "min-number-of-instances": 1}]
    plan = pkg.plan(nsd, fw, fwd)
    by = {u.service: u for u in plan.units}
    assert [(n.cpd, n.network) for n in by["fw-chain-fwd-fwd"].nics] == [
        ("fwd-west", "middle"), ("fwd-east", "right")]
    assert [(n.cpd, n.network) for n in by["fw-chain-fwd-mon"].nics] == [("mon-in", "right")]
    assert set(plan.networks) == {"left", "middle", "right"}            # no "fwd/lan"
    assert not any("ext-cpd" in w for w in plan.warnings)
    # not connected in the NSD: the link stays internal (a network of the VNF)
    conn = nsd["nsd"]["nsd"][0]["df"][0]["vnf-profile"][1]["virtual-link-connectivity"]
    conn[:] = [x for x in conn if x["constituent-cpd-id"][0]["constituent-cpd-id"] != "east"]
    plan = pkg.plan(nsd, fw, fwd)
    assert plan.networks["fwd/lan"] == "fw-chain-fwd-lan"
    assert any("ext-cpd 'east'" in w and "stays internal" in w for w in plan.warnings)
    # mistakes, by field
    v["ext-cpd"][1]["int-virtual-link-desc"] = "wan"
    assert [(p.path, p.message) for p in problems(pkg, nsd, fw, fwd)] == [
        ("vnfd.ext-cpd[1].int-virtual-link-desc",
         "'wan' is not one of the int-virtual-link-desc ids (lan)")]
    v["ext-cpd"][1]["int-virtual-link-desc"] = "lan"
    v["ext-cpd"].append({"id": "east2", "int-virtual-link-desc": "lan"})
    assert "already exposed" in problems(pkg, nsd, fw, fwd)[0].message
    v["ext-cpd"][-1] = {"id": "east2"}
    (p,) = problems(pkg, nsd, fw, fwd)
    assert p.path == "vnfd.ext-cpd[2].int-cpd" and "int-virtual-link-desc: LINK" in p.fix


def test_image_name_is_kept_for_glance_and_checksum_verified(pkg):
    nsd, fw, fwd = pkg.docs()
    fw["vnfd"]["sw-image-desc"][0]["image"] = "vnf-firewall"
    u = pkg.plan(nsd, fw, fwd).units[0]
    assert (u.kernel, u.kernel_is_file) == ("vnf-firewall", False)
    nsd, fw, fwd = pkg.docs()
    with open(pkg.kernel_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    fw["vnfd"]["sw-image-desc"][0]["checksum"] = {"algorithm": "sha-256", "hash": digest}
    assert pkg.plan(nsd, fw, fwd).units[0].kernel_is_file


def test_unknown_sol006_fields_are_accepted_and_reported(pkg):
    nsd, fw, fwd = pkg.docs()
    fw["vnfd"]["virtual-storage-desc"] = [{"id": "disk", "size-of-storage": 1}]
    fw["vnfd"]["vdu"][0]["virtual-storage-desc"] = ["disk"]
    fw["vnfd"]["vdu"][0]["int-cpd"][0]["virtual-network-interface-requirement"] = [
        {"name": "eth0", "virtual-interface": {"type": "PARAVIRT"}}]
    fw["vnfd"]["df"][0]["instantiation-level"] = [{"id": "default"}]
    fwd["vnfd"]["vdu"][0]["virtual-compute-dsc"] = fwd["vnfd"]["vdu"][0].pop(
        "virtual-compute-desc")
    nsd["nsd"]["nsd"][0]["virtual-link-desc"][0]["mgmt-network"] = True
    plan = pkg.plan(nsd, fw, fwd)
    text = "\n".join(plan.warnings)
    for path in ("vnfd.virtual-storage-desc", "vnfd.vdu[].virtual-storage-desc",
                 "vnfd.vdu[].int-cpd[].virtual-network-interface-requirement",
                 "nsd.nsd[].virtual-link-desc[].mgmt-network"):
        assert path in text, text
    assert "instantiation-level" not in text             # read since NS scaling (a level)
    assert "did you mean 'virtual-compute-desc'?" in text
    assert plan.units[1].memory_mb is None                 # the typo'd field is not used


def test_descriptor_directory_is_searched_for_vnfds(pkg, tmp_path):
    nsd, fw, fwd = pkg.docs()
    for name, doc in (("a/fw.yaml", fw), ("b/fwd.yml", fwd), ("b/notes.yaml", {"x": 1})):
        p = tmp_path / "pkgs" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(doc))
        (p.parent / "cloud_init").mkdir(exist_ok=True)
        (p.parent / "cloud_init" / "fw.click").write_text(FW_CLICK)
    found = d.load_vnfds([str(tmp_path / "pkgs")])
    assert sorted(x.doc["vnfd"]["id"] for x in found) == ["fluidvim-firewall-vnf",
                                                          "fluidvim-forwarder-vnf"]
    plan = d.build_plan(d.Document(nsd, "nsd", str(tmp_path)), found)
    assert len(plan.units) == 2
    assert all(x.files == {"cloud_init/fw.click": FW_CLICK} for x in found)


# -- malformed descriptors: the field by path, and the fix --
def _vdu(doc):
    return doc["vnfd"]["vdu"][0]


def _vp(nsd, i=0):
    return nsd["nsd"]["nsd"][0]["df"][0]["vnf-profile"][i]


VNFD_CASES = [
    (lambda v: _vdu(v).update({"sw-image-desc": "fwimg"}), "vnfd.vdu[0].sw-image-desc",
     "'fwimg' is not one of the sw-image-desc ids (fluidvim-vnf-kernel)"),
    (lambda v: v["vnfd"].pop("vdu"), "vnfd.vdu", "is required"),
    (lambda v: v["vnfd"].update({"vdu": []}), "vnfd.vdu", "should be non-empty"),
    (lambda v: v["vnfd"]["virtual-compute-desc"][0]["virtual-memory"].update({"size": -1}),
     "vnfd.virtual-compute-desc[0].virtual-memory.size", "less than or equal to the minimum"),
    (lambda v: v["vnfd"]["virtual-compute-desc"][0]["virtual-memory"].update({"size": 8,
                                                                     "vdu-mem-requirements": []}),
     "vnfd.virtual-compute-desc[0].virtual-memory.size", "8 GB = 8192 MiB is out of range"),
    (lambda v: v["vnfd"]["virtual-compute-desc"][0]["virtual-cpu"].update(
        {"num-virtual-cpu": 9}), "vnfd.virtual-compute-desc[0].virtual-cpu.num-virtual-cpu",
     "at most 8"),
    (lambda v: v["vnfd"]["virtual-compute-desc"][0]["virtual-cpu"].update(
        {"num-virtual-cpu": "two"}), "vnfd.virtual-compute-desc[0].virtual-cpu.num-virtual-cpu",
     "'two' is not of type integer"),
    (lambda v: _vdu(v).update({"virtual-compute-desc": "big"}), "vnfd.vdu[0].virtual-compute-desc",
     "'big' is not one of the virtual-compute-desc ids (fw-compute)"),
    (lambda v: _vdu(v).update({"cloud-init-file": "nope.click"}), "vnfd.vdu[0].cloud-init-file",
     "'nope.click' not found"),
    (lambda v: _vdu(v).update({"cloud-init-file": "../../etc/passwd"}),
     "vnfd.vdu[0].cloud-init-file", "must be a name inside the package"),
    (lambda v: _vdu(v).pop("cloud-init-file"), "vnfd.vdu[0].cloud-init-file",
     "no day-0 configuration"),
    (lambda v: _vdu(v).update({"cloud-init": "FromDevice(0) -> Discard;"}),
     "vnfd.vdu[0].cloud-init-file", "both cloud-init and cloud-init-file are set"),
    (lambda v: (_vdu(v).pop("cloud-init-file"), _vdu(v).update({"cloud-init": "  \n"})),
     "vnfd.vdu[0].cloud-init", "the Click configuration is empty"),
    (lambda v: v["vnfd"]["ext-cpd"][0]["int-cpd"].update({"cpd": "eth9"}),
     "vnfd.ext-cpd[0].int-cpd.cpd", "'eth9' is not one of the vdu 'fw' int-cpd ids"),
    (lambda v: v["vnfd"]["ext-cpd"][0]["int-cpd"].update({"vdu-id": "ghost"}),
     "vnfd.ext-cpd[0].int-cpd.vdu-id", "'ghost' is not one of the vdu ids (fw)"),
    (lambda v: v["vnfd"]["ext-cpd"][1]["int-cpd"].update({"cpd": "fw-inside"}),
     "vnfd.ext-cpd[1].int-cpd", "already exposed by another ext-cpd"),
    (lambda v: v["vnfd"]["ext-cpd"][0].pop("int-cpd"), "vnfd.ext-cpd[0].int-cpd",
     "names neither"),
    (lambda v: v["vnfd"]["vdu"].append(copy.deepcopy(_vdu(v))), "vnfd.vdu[1].id",
     "duplicate vdu id 'fw'"),
    (lambda v: v["vnfd"]["sw-image-desc"][0].update({"image": "./missing/vnf.elf"}),
     "vnfd.sw-image-desc[0].image", "does not exist"),
    (lambda v: v["vnfd"]["sw-image-desc"][0].update(
        {"checksum": {"algorithm": "sha-256", "hash": "00" * 32}}),
     "vnfd.sw-image-desc[0].checksum.hash", "not " + "00" * 32),
    (lambda v: v["vnfd"]["sw-image-desc"][0].update(
        {"checksum": {"algorithm": "crc32", "hash": "abcd"}}),
     "vnfd.sw-image-desc[0].checksum.algorithm", "unsupported algorithm 'crc32'"),
    (lambda v: _vdu(v)["configurable-properties"].__setitem__(
        0, {"key": "fluidvim-sesion-slots", "value": 4}),
     "vnfd.vdu[0].configurable-properties[0].key", "did you mean 'fluidvim-session-slots'?"),
    (lambda v: _vdu(v)["configurable-properties"].__setitem__(
        0, {"key": "fluidvim-session-slots", "value": 0}),
     "vnfd.vdu[0].configurable-properties[0].value", "0 is out of range [1, 65536]"),
    (lambda v: _vdu(v)["configurable-properties"].__setitem__(
        1, {"key": "fluidvim-deadline-ms", "value": "soon"}),
     "vnfd.vdu[0].configurable-properties[1].value", "'soon' is not a number"),
    (lambda v: _vdu(v).update({"int-cpd": [{"id": f"e{i}"} for i in range(5)]}),
     "vnfd.vdu[0].int-cpd", "at most 4 NICs"),
    (lambda v: _vdu(v).update({"int-cpd": []}), "vnfd.vdu[0].int-cpd", "needs NICs"),
    (lambda v: _vdu(v)["int-cpd"][1].pop("order"), "vnfd.vdu[0].int-cpd[1].order",
     "has none"),
    (lambda v: _vdu(v)["int-cpd"][1].update({"int-virtual-link-desc": "lan"}),
     "vnfd.vdu[0].int-cpd[1].int-virtual-link-desc", "'lan' is not one of"),
    (lambda v: v["vnfd"].update({"mgmt-cp": "mgmt"}), "vnfd.mgmt-cp",
     "'mgmt' is not one of the ext-cpd ids (inside, outside)"),
    (lambda v: v["vnfd"]["df"][0]["vdu-profile"][0].update({"id": "vm"}),
     "vnfd.df[0].vdu-profile[0].id", "'vm' is not one of the vdu ids"),
]


@pytest.mark.parametrize("mutate,path,text", VNFD_CASES,
                         ids=[f"{c[1]}:{c[2][:24]}" for c in VNFD_CASES])
def test_malformed_vnfd_names_the_field(pkg, mutate, path, text):
    nsd, fw, fwd = pkg.docs()
    mutate(fw)
    ps = problems(pkg, nsd, fw, fwd)
    p = ps[0]                          # the cause comes first (a few cases have consequences)
    assert len(ps) == 1 or path.endswith("int-cpd"), [str(x) for x in ps]
    assert p.path == path and text in p.message + "; " + p.fix, str(p)
    assert p.source == "vnfd0.yaml" and str(p).startswith(f"vnfd0.yaml: {path}: ")


NSD_CASES = [
    (lambda n: n["nsd"]["nsd"][0]["vnfd-id"].append("ids-vnf"), "nsd.nsd[0].vnfd-id[2]",
     "no VNFD with id 'ids-vnf' was given"),
    (lambda n: _vp(n)["virtual-link-connectivity"][0].update(
        {"virtual-link-profile-id": "lft"}),
     "nsd.nsd[0].df[0].vnf-profile[0].virtual-link-connectivity[0].virtual-link-profile-id",
     "'lft' is not one of"),
    (lambda n: _vp(n)["virtual-link-connectivity"][0]["constituent-cpd-id"][0].update(
        {"constituent-base-element-id": "fluidvim-firewall-vnf"}),
     "nsd.nsd[0].df[0].vnf-profile[0].virtual-link-connectivity[0].constituent-cpd-id[0]"
     ".constituent-base-element-id", "write 'fw'"),
    (lambda n: _vp(n)["virtual-link-connectivity"][0]["constituent-cpd-id"][0].update(
        {"constituent-cpd-id": "eth0"}),
     "nsd.nsd[0].df[0].vnf-profile[0].virtual-link-connectivity[0].constituent-cpd-id[0]"
     ".constituent-cpd-id", "'eth0' is not one of the VNFD fluidvim-firewall-vnf ext-cpd ids "
     "(inside, outside)"),
    (lambda n: _vp(n)["virtual-link-connectivity"][1]["constituent-cpd-id"][0].update(
        {"constituent-cpd-id": "inside"}),
     "nsd.nsd[0].df[0].vnf-profile[0].virtual-link-connectivity[1].constituent-cpd-id[0]"
     ".constituent-cpd-id", "already on virtual link 'left'"),
    (lambda n: _vp(n).update({"min-number-of-instances": 0}),
     "nsd.nsd[0].df[0].vnf-profile[0].min-number-of-instances", "less than the minimum of 1"),
    (lambda n: _vp(n).update({"flavour-id": "gold"}),
     "nsd.nsd[0].df[0].vnf-profile[0].flavour-id", "'gold' is not one of the VNFD "
     "fluidvim-firewall-vnf df ids (default-df)"),
    (lambda n: _vp(n).update({"vnfd-id": "other-vnf"}), "nsd.nsd[0].df[0].vnf-profile[0].vnfd-id",
     "'other-vnf' is not in nsd.nsd[0].vnfd-id"),
    (lambda n: n["nsd"]["nsd"][0].pop("df"), "nsd.nsd[0].df", "is required"),
    (lambda n: n["nsd"]["nsd"][0]["virtual-link-desc"].append({"id": "left"}),
     "nsd.nsd[0].virtual-link-desc[3].id", "duplicate virtual-link-desc id 'left'"),
    (lambda n: _vp(n, 1).update({"id": "fw"}), "nsd.nsd[0].df[0].vnf-profile[1].id",
     "duplicate vnf-profile id 'fw'"),
    (lambda n: _vp(n).update({"id": "a-very-long-vnf-profile-identifier-x"}),
     "nsd.nsd[0].df[0].vnf-profile[0].id", "is not a valid service name"),
    (lambda n: n["nsd"]["nsd"][0]["df"][0].update({"virtual-link-profile": [
        {"id": "lp", "virtual-link-desc-id": "nowhere"}]}),
     "nsd.nsd[0].df[0].virtual-link-profile[0].virtual-link-desc-id", "'nowhere' is not one of"),
]


@pytest.mark.parametrize("mutate,path,text", NSD_CASES,
                         ids=[f"{c[1][-40:]}:{c[2][:20]}" for c in NSD_CASES])
def test_malformed_nsd_names_the_field(pkg, mutate, path, text):
    nsd, fw, fwd = pkg.docs()
    mutate(nsd)
    ps = problems(pkg, nsd, fw, fwd)
    p = next((p for p in ps if p.path == path), None)
    assert p is not None, [str(x) for x in ps]
    assert text in p.message + "; " + p.fix, str(p)


def test_all_problems_are_reported_at_once(pkg):
    nsd, fw, fwd = pkg.docs()
    _vdu(fw)["sw-image-desc"] = "x"
    _vdu(fwd)["virtual-compute-desc"] = "y"
    paths = {(p.source, p.path) for p in problems(pkg, nsd, fw, fwd)}
    assert paths == {("vnfd0.yaml", "vnfd.vdu[0].sw-image-desc"),
                     ("vnfd1.yaml", "vnfd.vdu[0].virtual-compute-desc")}


def test_whole_document_mistakes(pkg, tmp_path):
    nsd, fw, fwd = pkg.docs()
    p = only(pkg, fw, fw, fwd)
    assert p.path == "nsd" and "this file is a VNFD" in p.message
    p = only(pkg, {"vnfd:vnfd-catalog": {"vnfd": []}}, fw, fwd)
    assert p.path == "nsd" or "nsd" in p.path
    p = only(pkg, nsd, {"vnfd-catalog": {"vnfd": [{"id": "old"}]}}, fwd)
    assert p.path == "vnfd-catalog" and "pre-SOL006" in p.message
    p = only(pkg, nsd, fw, fwd, name="no spaces")
    assert p.path == "name" and "--name" in p.fix
    p = only(pkg, nsd, fw, fw, fwd)
    assert p.path == "vnfd.id" and "also given by" in p.message
    bad = tmp_path / "bad.yaml"
    bad.write_text("nsd:\n  nsd: [\n")
    with pytest.raises(d.DescriptorError) as e:
        d.load(str(bad))
    assert e.value.path.startswith("line ") and "not valid YAML" in str(e.value)
    with pytest.raises(d.DescriptorError) as e:
        d.load(str(tmp_path / "absent.yaml"))
    assert e.value.path == "file"
    with pytest.raises(d.DescriptorError) as e:
        d.load_vnfds([str(tmp_path / "cloud_init")])
    assert e.value.path == "--vnfd" and "no VNFD" in str(e.value)


def test_orchestrator_side_documents_read_only_what_was_sent(pkg):
    nsd, fw, fwd = pkg.docs()
    doc = d.Document.from_dict({"doc": fw, "source": "fw.yaml", "base_dir": str(pkg.dir),
                                "files": {}})
    c = d._Checker()
    assert d.check_vnfd(c, doc) is not None
    assert [p.path for p in c.problems] == ["vnfd.vdu[0].cloud-init-file"]   # not read from disk
    with pytest.raises(d.DescriptorError):
        d.Document.from_dict({"doc": fw, "files": {"a": 1}})


# -- `fluidvim ns validate` (offline); its --help: tests/unit/test_cli.py --


def test_ns_validate_prints_the_mapping_or_every_error(pkg, capsys):
    import json

    from fluidvim.cmd import cli

    nsd, fw, fwd = pkg.docs()
    paths = []
    for name, doc in (("nsd.yaml", nsd), ("fw.yaml", fw), ("fwd.yaml", fwd)):
        (pkg.dir / name).write_text(yaml.safe_dump(doc))
        paths.append(str(pkg.dir / name))
    argv = ["ns", "validate", paths[0], "--vnfd", paths[1], "--vnfd", paths[2]]
    assert cli.main(argv + ["--name", "c1"]) == 0
    out = capsys.readouterr().out
    assert "network service c1 (NSD fw-chain" in out and "-> service c1-fw x1" in out
    assert "nic0: fw-inside        on left" in out and "memory 32 MiB" in out
    assert cli.main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["networks"]["middle"] == "fw-chain-middle"
    fw["vnfd"]["vdu"][0]["sw-image-desc"] = "fwimg"
    fwd["vnfd"]["vdu"][0]["virtual-compute-desc"] = "big"
    (pkg.dir / "fw.yaml").write_text(yaml.safe_dump(fw))
    (pkg.dir / "fwd.yaml").write_text(yaml.safe_dump(fwd))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"fluidvim: error: {paths[1]}: vnfd.vdu[0].sw-image-desc: 'fwimg' is not one of the "
        "sw-image-desc ids (fluidvim-vnf-kernel); name one of them, or add that sw-image-desc",
        f"fluidvim: error: {paths[2]}: vnfd.vdu[0].virtual-compute-desc: 'big' is not one of "
        "the virtual-compute-desc ids (fwd-compute); name one of them, or add that "
        "virtual-compute-desc"]
    # deploy checks the files before it reaches for the broker
    assert cli.main(["ns", "deploy", *argv[2:], "--topic", "fm-unit-nobody",
                     "--rpc-timeout", "1"]) == 2
    assert "vnfd.vdu[0].sw-image-desc" in capsys.readouterr().err


OSM_STYLE_VNFD = """
vnfd:
  id: web-vnf
  product-name: web-vnf
  provider: example
  version: '1.0'
  mgmt-cp: vnf-mgmt-ext
  virtual-compute-desc:
    - id: web-compute
      virtual-cpu: {num-virtual-cpu: 1}
      virtual-memory: {size: 0.0625}
  virtual-storage-desc:
    - id: web-storage
      size-of-storage: 10
  sw-image-desc:
    - id: web-image
      name: web-image
      image: web-image
  df:
    - id: default-df
      instantiation-level:
        - id: default-instantiation-level
          vdu-level: [{vdu-id: webVM, number-of-instances: 1}]
      vdu-profile: [{id: webVM, min-number-of-instances: 1}]
  vdu:
    - id: webVM
      name: webVM
      cloud-init-file: web.click
      sw-image-desc: web-image
      virtual-compute-desc: web-compute
      virtual-storage-desc: [web-storage]
      int-cpd:
        - id: eth0-int
          virtual-network-interface-requirement:
            - {name: eth0, virtual-interface: {type: PARAVIRT}}
  ext-cpd:
    - id: vnf-mgmt-ext
      int-cpd: {cpd: eth0-int, vdu-id: webVM}
"""
OSM_STYLE_NSD = """
nsd:
  nsd:
    - id: web-ns
      name: web-ns
      version: '1.0'
      vnfd-id: [web-vnf]
      virtual-link-desc:
        - id: mgmtnet
          mgmt-network: true
      df:
        - id: default-df
          vnf-profile:
            - id: '1'
              vnfd-id: web-vnf
              virtual-link-connectivity:
                - constituent-cpd-id:
                    - {constituent-base-element-id: '1', constituent-cpd-id: vnf-mgmt-ext}
                  virtual-link-profile-id: mgmtnet
"""


def test_an_osm_style_package_is_accepted(tmp_path):
    """An NS in the shape OSM's packages have (one VDU on the management network, an image
    name for the VIM, numeric vnf-profile ids, storage and interface details fluidvim ignores)."""
    (tmp_path / "web_vnf" / "cloud_init").mkdir(parents=True)
    (tmp_path / "web_vnf" / "cloud_init" / "web.click").write_text("FromDevice(0) -> Discard;")
    (tmp_path / "web_vnf" / "web_vnfd.yaml").write_text(OSM_STYLE_VNFD)
    (tmp_path / "web_nsd.yaml").write_text(OSM_STYLE_NSD)
    plan, _, _ = d.plan_files(str(tmp_path / "web_nsd.yaml"), [str(tmp_path)])
    (u,) = plan.units
    assert (u.service, u.memory_mb, u.kernel, u.kernel_is_file) == ("web-ns-1", 64, "web-image",
                                                                    False)
    assert [(n.cpd, n.network) for n in u.nics] == [("eth0-int", "mgmtnet")]
    assert plan.networks == {"mgmtnet": "web-ns-mgmtnet"}
    text = "\n".join(plan.warnings)
    assert "vnfd.virtual-storage-desc" in text and "mgmt-network" in text
