# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Descriptors checked against ETSI's own SOL006 YANG modules (v3.6.1, shipped in
orchestrator/mano/yang): the shipped modules and their two documented corrections, ETSI's example
data (XML, converted to the JSON/YAML fluidvim reads) validating and importing, SOL006 and OSM IM
violations as fluidvim field-path problems, and a cross-check with libyang's yanglint."""

import copy
import hashlib
import json
import os
import shutil
import subprocess

import pytest
import yaml

from fluidvim.orchestrator.mano import descriptors as d, sol006

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(REPO, "etc", "mano")
EXAMPLES = os.path.join(sol006.ETSI_DIR, "example-data")
EXAMPLE_FILES = ["nfv-vnfd.xml", "complex-vnfd.xml", "nfv-nsd.xml", "nfv.xml", "nfv-pnfd.xml"]
ETSI_MODULES = ["etsi-nfv-common.yang", "etsi-nfv-descriptors.yang", "etsi-nfv-ns.yang",
                "etsi-nfv-nsd.yang", "etsi-nfv-pnf.yang", "etsi-nfv-pnfd.yang", "etsi-nfv-vnf.yang",
                "etsi-nfv-vnfd.yang"]
CLICK = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"


def sample(rel):
    with open(os.path.join(SAMPLES, rel), encoding="utf-8") as f:
        return yaml.safe_load(f)


def converted(name):
    """ETSI's example as fluidvim reads it: {top-level key: RFC 7951 JSON}."""
    key, raw = sol006.xml_to_raw(os.path.join(EXAMPLES, name))
    return {key: raw}


def yang_problems(*docs, source="doc.yaml"):
    """(SOL006 problems, warnings) of descriptor documents checked together, as build_plan does."""
    c = d._Checker()
    parts = [p for i, doc in enumerate(docs) for p in d.split(d.Document(doc, f"{i}-{source}"))]
    nsd = next((x for kind, x in parts if kind == "nsd"), None)
    vnfds = [x for kind, x in parts if kind == "vnfd"]
    pnfds = [x for kind, x in parts if kind == "pnfd"]
    for kind, x in parts:
        c.yang_check(x, kind)
    c.yang_tree(nsd, vnfds, pnfds)
    return c.yang, c.warnings


# -- the modules --
def test_the_shipped_modules_are_etsis_3_6_1_with_licence_and_load_once():
    for name in ETSI_MODULES:
        with open(os.path.join(sol006.ETSI_DIR, name), encoding="utf-8") as f:
            text = f.read()
        assert "revision 2022-03-08" in text and "deref(" in text or name not in (
            "etsi-nfv-ns.yang", "etsi-nfv-vnf.yang"), name          # unmodified: deref() is there
        assert "revision 2022-03-08" in text, name
    with open(os.path.join(sol006.ETSI_DIR, "LICENSE"), encoding="utf-8") as f:
        licence = f.read()
    assert "Copyright 2019 ETSI" in licence and "Redistribution and use" in licence
    for name in ("ietf-yang-types@2013-07-15.yang", "ietf-inet-types@2013-07-15.yang"):
        with open(os.path.join(sol006.IETF_DIR, name), encoding="utf-8") as f:
            assert "RFC 6991" in f.read()
    assert sol006.data_model() is sol006.data_model()            # loaded once per process
    nfv = sol006.data_model().schema.get_data_child("nfv", sol006.NFV)
    assert {c.name for c in nfv.data_children()} == {"vnfd", "nsd", "pnfd"}


def test_only_the_documented_corrections_are_made(tmp_path):
    assert sol006.write_patched_modules(str(tmp_path)) == len(sol006.LEAFREF_FIXES) + len(
        sol006.WHEN_FIX_LINES) == 17 + 9
    for name in ETSI_MODULES:
        with open(tmp_path / name, encoding="utf-8") as f:
            patched = f.read()
        for line in patched.splitlines():
            assert not (line.strip().startswith("path") and "deref(" in line), (name, line)
        assert "'IPv4'" not in patched and '= "nfv:block"' not in patched
    # a deref() path the table does not know (a new ETSI version) is refused, not loaded wrongly
    with pytest.raises(RuntimeError, match="no rewrite"):
        sol006.patch_module("x.yang", 'leaf a { type leafref { path "deref(../b)/../c"; } }')
    assert sol006.fix_when("../type-of-storage = \"nfv:block\"") == \
        "derived-from-or-self(../type-of-storage, 'nfv:block')"
    assert sol006.fix_when("(../associated-layer-protocol = 'IPv4') or (../x = 'IPv6')") == (
        "(derived-from-or-self(../associated-layer-protocol, 'nfv:ipv4')) or "
        "(derived-from-or-self(../x, 'nfv:ipv6'))")


# -- ETSI's example data --
@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_etsi_examples_convert_and_validate(name, tmp_path):
    doc = converted(name)
    (key,) = doc
    assert sol006.TOP_KEYS[key][1]                       # module-qualified: claims SOL006
    path = tmp_path / (name + ".yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    again = d.load(str(path)).doc
    assert again == doc                                  # YAML round trip, what users hand in
    problems, warnings = yang_problems(again)
    assert problems == [] and warnings == [], [str(p) for p in problems] + warnings
    # and yangson's full validation saw every descriptor of the file
    parts = d.split(d.Document(copy.deepcopy(doc), name))
    assert all(x.sol006 for _, x in parts) and len(parts) == {
        "nfv-vnfd.xml": 1, "complex-vnfd.xml": 1, "nfv-nsd.xml": 2, "nfv.xml": 4,
        "nfv-pnfd.xml": 1}[name]
    # fluidvim's own checks then refuse only what a unikernel VNF cannot be (these are VMs)
    for kind, x in parts:
        if kind == "vnfd":
            c = d._Checker()
            d.check_vnfd(c, x)
            assert c.yang == []
            for p in c.problems:
                assert any(why in p.message for why in (
                    "is a URL", "no day-0 configuration", "this one names neither",
                    f"a VNF has at most {d.MAX_NICS} NICs", f"a VNF has at most {d.MAX_VCPUS}",
                    "MiB is out of range")), str(p)


def test_etsi_examples_violations_are_caught():
    """The same examples with one mistake each: the YANG check is not a no-op."""
    vnfd = converted("nfv-vnfd.xml")
    v = vnfd["etsi-nfv-vnfd:vnfd"]
    v.pop("software-version")
    (p,), _ = yang_problems(vnfd)
    assert (p.path, p.message) == ("vnfd.software-version", "SOL006: is required")
    assert "mandatory" in p.fix

    vnfd = converted("nfv-vnfd.xml")
    vnfd["etsi-nfv-vnfd:vnfd"]["vdu"][0]["virtual-storage-desc"] = ["no-such-storage"]
    (p,), _ = yang_problems(vnfd)
    assert p.path == "vnfd.vdu[0].virtual-storage-desc[0]"
    assert "'no-such-storage' refers to nothing" in p.message

    nfv = converted("nfv-nsd.xml")
    nsd = nfv["etsi-nfv-descriptors:nfv"]["nsd"][0]
    nsd["df"][0]["vnf-profile"][0]["flavour-id"] = "gold"       # not a df of VNFD ASA
    (p,), _ = yang_problems(nfv, source="nfv.yaml")
    assert p.source == "0-nfv.yaml (etsi-nfv-descriptors:nfv.nsd)"
    assert p.path == "nsd.nsd[0].df[0].vnf-profile[0].flavour-id"
    assert "'gold' refers to nothing" in p.message


def test_an_etsi_example_imports_once_it_has_a_kernel_and_a_day0_configuration(tmp_path):
    """ETSI's NSD example (an nfv container holding the VNFD and the NSD) deploys as it is but for
    what a unikernel needs: the kernel file and the Click configuration in boot-data."""
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"\x7fELF fake kernel")
    nfv = converted("nfv-nsd.xml")
    path = tmp_path / "nfv-nsd.yaml"
    path.write_text(yaml.safe_dump(nfv, sort_keys=False))
    with pytest.raises(d.DescriptorError) as e:
        d.plan_files(str(path), [])
    # as published: only what fluidvim needs, and SOL006 itself has nothing to say
    assert sorted(p.path for p in e.value.problems) == ["vnfd.sw-image-desc[0].image",
                                                         "vnfd.vdu[0].boot-data"]
    assert "is a URL" in str(e.value) and "boot-data (inline) in SOL006" in str(e.value)
    assert not any(p.message.startswith("SOL006") for p in e.value.problems)
    v = nfv["etsi-nfv-descriptors:nfv"]["vnfd"][0]
    v["sw-image-desc"][0]["image"] = str(kernel)
    v["sw-image-desc"][0]["checksum"] = {
        "algorithm": "etsi-nfv-descriptors:sha-256",
        "hash": hashlib.sha256(kernel.read_bytes()).hexdigest()}
    v["vdu"][0]["boot-data"] = CLICK
    path.write_text(yaml.safe_dump(nfv, sort_keys=False))
    plan, nsd, vnfds = d.plan_files(str(path), [])
    (u,) = plan.units
    assert (plan.name, plan.nsd, u.vnfd, u.service) == ("firewall-nsd", "firewall-nsd", "ASA",
                                                         "firewall-nsd-firewall")
    assert (u.memory_mb, u.vcpus, u.kernel, u.click_config) == (4096, 2, str(kernel), CLICK)
    assert [n.cpd for n in u.nics] == ["inside", "management", "outside"]
    assert all(n.network is None for n in u.nics)        # the example NSD has no virtual links
    assert any("is on no virtual link" in w for w in plan.warnings)
    # what the CLI sends is what the orchestrator validates again
    again = d.build_plan(d.Document.from_dict(nsd.to_dict()),
                         [d.Document.from_dict(x.to_dict()) for x in vnfds])
    assert again.to_dict() == plan.to_dict()


# -- fluidvim's own descriptors: OSM IM vs SOL006 --
def test_the_samples_are_osm_im_and_pass_the_sol006_subset_check():
    docs = [sample("fw_chain_ns/fw_chain_nsd.yaml"), sample("firewall_vnf/firewall_vnfd.yaml"),
            sample("forwarder_vnf/forwarder_vnfd.yaml")]
    assert yang_problems(*docs) == ([], [])


def test_the_samples_qualified_as_sol006_are_held_to_it():
    """The same VNFD under etsi-nfv-vnfd:vnfd claims SOL006: OSM's extensions are errors, and so
    are finer memory sizes than SOL006's 0.1 GB (which old OSM IM files may have; the samples
    give 0.1 and the exact MiB in vdu-mem-requirements); then every missing mandatory field."""
    v = sample("firewall_vnf/firewall_vnfd.yaml")["vnfd"]
    assert v["virtual-compute-desc"][0]["virtual-memory"]["size"] == 0.1
    v["virtual-compute-desc"][0]["virtual-memory"]["size"] = 0.03125
    problems, _ = yang_problems({"etsi-nfv-vnfd:vnfd": v})
    by = {p.path: p for p in problems}
    assert set(by) == {"vnfd.description", "vnfd.mgmt-cp", "vnfd.vdu[0].cloud-init-file",
                       "vnfd.virtual-compute-desc[0].virtual-memory.size"}
    assert "is not a field of SOL006 3.6.1 here" in by["vnfd.mgmt-cp"].message
    assert "OSM IM" in by["vnfd.mgmt-cp"].fix
    assert "more than the 1 decimal(s) SOL006 allows" in by[
        "vnfd.virtual-compute-desc[0].virtual-memory.size"].message
    for k in ("description", "mgmt-cp"):
        del v[k]
    v["virtual-compute-desc"][0]["virtual-memory"]["size"] = 0.1
    v["vdu"][0]["boot-data"] = v["vdu"][0].pop("cloud-init-file")
    problems, _ = yang_problems({"etsi-nfv-vnfd:vnfd": v})
    # every missing mandatory node at once (yangson's validate() alone stops at the first)
    assert [(p.path, p.message) for p in problems] == [
        (f"vnfd.{path}", "SOL006: is required") for path in (
            "software-version", "vnfm-info", "sw-image-desc[0].checksum",
            "sw-image-desc[0].min-disk", "sw-image-desc[0].size", "df[0].instantiation-level",
            "df[0].lcm-operations-configuration", "df[0].vdu-profile[0].nfvi-maintenance-info")]
    assert all("mandatory" in p.fix for p in problems)


def sol006_chain(kernel):
    """The sample chain (OSM IM) rewritten as pure SOL006: one nfv container, every mandatory
    field, boot-data for the Click configuration, memory in SOL006's 0.1 GB steps."""
    nsd = sample("fw_chain_ns/fw_chain_nsd.yaml")["nsd"]["nsd"][0]
    vnfds = [sample("firewall_vnf/firewall_vnfd.yaml")["vnfd"],
             sample("forwarder_vnf/forwarder_vnfd.yaml")["vnfd"]]
    digest = hashlib.sha256(kernel.read_bytes()).hexdigest()
    for v in vnfds:
        v["product-info-description"] = v.pop("description")
        v.pop("mgmt-cp", None)
        v.update({"software-version": "1.0", "vnfm-info": ["fluidvim"]})
        v["virtual-compute-desc"][0]["virtual-memory"]["size"] = 0.1
        for vdu in v["vdu"]:
            vdu.pop("cloud-init-file")
            vdu["boot-data"] = CLICK
        for sw in v["sw-image-desc"]:
            sw.update({"image": str(kernel), "min-disk": 0, "size": 1,
                       "checksum": {"algorithm": "sha-256", "hash": digest}})
        for df in v["df"]:
            df["instantiation-level"] = [{"id": "default", "vdu-level": [
                {"vdu-id": p["id"], "number-of-instances": 1} for p in df["vdu-profile"]]}]
            none = {"parameter": [{"key": "none", "value": "none"}]}
            df["lcm-operations-configuration"] = {"create-snapshot-vnf-op-config": none,
                                                  "revert-to-snapshot-vnf-op-config": none}
            for p in df["vdu-profile"]:
                p["nfvi-maintenance-info"] = {"impact-notification-lead-time": 1}
    nsd.pop("description")
    for vl in nsd["virtual-link-desc"]:
        vl.update({"connectivity-type": {"layer-protocol": ["ethernet"]}, "df": [{"id": "l2"}]})
    df = nsd["df"][0]
    df["virtual-link-profile"] = [{"id": vl["id"], "virtual-link-desc-id": vl["id"], "flavour-id":
                                   "l2", "max-bitrate-requirements": {"root": 10 ** 9},
                                   "min-bitrate-requirements": {"root": 0}}
                                  for vl in nsd["virtual-link-desc"]]
    df["ns-instantiation-level"] = [{"id": "default", "vnf-to-level-mapping": [
        {"vnf-profile-id": p["id"], "number-of-instances": 1} for p in df["vnf-profile"]]}]
    for p in df["vnf-profile"]:
        p.update({"flavour-id": "default-df", "instantiation-level": "default"})
    return {"nfv": {"vnfd": vnfds, "nsd": [nsd]}}


def test_the_sample_chain_in_pure_sol006_validates_in_full_and_maps_the_same(tmp_path):
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"\x7fELF fake")
    doc = sol006_chain(kernel)
    assert yang_problems(copy.deepcopy(doc)) == ([], [])
    (tmp_path / "chain.yaml").write_text(yaml.safe_dump(doc))
    plan, _, _ = d.plan_files(str(tmp_path / "chain.yaml"), [])
    assert plan.networks == {"left": "fw-chain-left", "middle": "fw-chain-middle",
                             "right": "fw-chain-right"}
    fw, fwd = plan.units
    assert (fw.service, fw.memory_mb, fw.kernel, fw.click_config) == (
        "fw-chain-fw", 32, str(kernel), CLICK)       # vdu-mem-requirements, not 0.1 GB
    assert [(n.cpd, n.network) for n in fw.nics] == [("fw-inside", "left"),
                                                     ("fw-outside", "middle")]
    assert [(n.cpd, n.network) for n in fwd.nics] == [("fwd-west", "middle"),
                                                      ("fwd-east", "right")]
    assert fw.properties == {"slots": 64, "deadline_ms": 100.0, "max_queuing_delay_s": 5.0}
    # SOL006 checks what fluidvim does not: the flavour-id of a vnf-profile must be a df of its
    # VNFD -- fluidvim names it too, and its message is the one shown
    doc["nfv"]["nsd"][0]["df"][0]["vnf-profile"][0]["flavour-id"] = "gold"
    (tmp_path / "chain.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(d.DescriptorError) as e:
        d.plan_files(str(tmp_path / "chain.yaml"), [])
    (p,) = e.value.problems
    assert p.path == "nsd.nsd[0].df[0].vnf-profile[0].flavour-id"
    assert p.message == "'gold' is not one of the VNFD fluidvim-firewall-vnf df ids (default-df)"
    # ... and what only SOL006 knows: a virtual-link-profile's flavour must be one of its VLD's
    doc["nfv"]["nsd"][0]["df"][0]["vnf-profile"][0]["flavour-id"] = "default-df"
    doc["nfv"]["nsd"][0]["df"][0]["virtual-link-profile"][1]["flavour-id"] = "l3"
    (tmp_path / "chain.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(d.DescriptorError) as e:
        d.plan_files(str(tmp_path / "chain.yaml"), [])
    (p,) = e.value.problems
    assert p.source.endswith("chain.yaml (nfv.nsd)")
    assert p.path == "nsd.nsd[0].df[0].virtual-link-profile[1].flavour-id"
    assert p.message.startswith("SOL006: 'l3' refers to nothing")


@pytest.fixture
def pkg(tmp_path):
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"\x7fELF fake")
    (tmp_path / "cloud_init").mkdir()
    (tmp_path / "cloud_init" / "fw.click").write_text(CLICK)
    nsd = sample("fw_chain_ns/fw_chain_nsd.yaml")
    fw = sample("firewall_vnf/firewall_vnfd.yaml")
    fwd = sample("forwarder_vnf/forwarder_vnfd.yaml")
    for v in (fw, fwd):
        v["vnfd"]["sw-image-desc"][0]["image"] = str(kernel)
        v["vnfd"]["vdu"][0]["cloud-init-file"] = "fw.click"

    def plan(nsd=nsd, fw=fw, fwd=fwd):
        return d.build_plan(d.Document(nsd, "nsd.yaml", str(tmp_path)),
                            [d.Document(fw, "fw.yaml", str(tmp_path)),
                             d.Document(fwd, "fwd.yaml", str(tmp_path))])
    return nsd, fw, fwd, plan


YANG_ONLY_CASES = [   # fields fluidvim does not read: only SOL006 knows they are wrong
    (lambda v: v["vdu"][0]["int-cpd"][0].update({"bitrate-requirement": "fast"}),
     "vnfd.vdu[0].int-cpd[0].bitrate-requirement", "SOL006: 'fast' is not a valid uint64",
     "write an integer (uint64)"),
    (lambda v: v["vdu"][0]["int-cpd"][0].update({"layer-protocol": ["ethernett"]}),
     "vnfd.vdu[0].int-cpd[0].layer-protocol[0]", "SOL006: 'ethernett'",
     "write one of ethernet, ipv4, ipv6, mpls, odu2, pseudo-wire"),
    (lambda v: v["vdu"][0]["int-cpd"][0].update({"layer-protocol": "ethernet"}),
     "vnfd.vdu[0].int-cpd[0].layer-protocol", "'ethernet' is not a list",
     "write a list: ['ethernet']"),
    (lambda v: v.update({"virtual-storage-desc": [{"id": "d", "type-of-storage": "block",
                                                   "block-storage-data": {"size-of-storage": -1}}]}),
     "vnfd.virtual-storage-desc[0].block-storage-data.size-of-storage",
     "SOL006: -1", "write an integer (uint64)"),
    (lambda v: v["df"][0].update({"instantiation-level": [{"vdu-level": []}]}),
     "vnfd.df[0].instantiation-level[0].id", "SOL006: is required (the key of the list)",
     "give every instantiation-level entry its id"),
    (lambda v: v["df"][0].update({"instantiation-level": {"id": "x"}}),
     "vnfd.df[0].instantiation-level", "is a list in SOL006", "write a list of entries"),
]


@pytest.mark.parametrize("mutate,path,text,fix", YANG_ONLY_CASES,
                         ids=[c[1] for c in YANG_ONLY_CASES])
def test_sol006_violations_in_osm_im_documents_name_the_field(pkg, mutate, path, text, fix):
    nsd, fw, fwd, plan = pkg
    mutate(fw["vnfd"])
    with pytest.raises(d.DescriptorError) as e:
        plan()
    ps = e.value.problems
    p = next((p for p in ps if p.path == path), None)
    assert p is not None, [str(x) for x in ps]
    assert text in p.message and fix in p.fix, str(p)
    assert p.source == "fw.yaml" and str(p).startswith(f"fw.yaml: {path}: SOL006: ")


def test_fluidvims_message_wins_where_both_catch_the_same_field(pkg):
    nsd, fw, fwd, plan = pkg
    fw["vnfd"]["virtual-compute-desc"][0]["virtual-cpu"]["num-virtual-cpu"] = "two"
    fw["vnfd"]["sw-image-desc"][0]["checksum"] = {"algorithm": "crc32", "hash": "ab"}
    fw["vnfd"]["vdu"][0]["int-cpd"][0]["bitrate-requirement"] = "fast"
    with pytest.raises(d.DescriptorError) as e:
        plan()
    ps = [(p.path, p.message) for p in e.value.problems]
    # the num-virtual-cpu type error stops fluidvim's checks of that VNFD, YANG's is dropped
    assert ps[0] == ("vnfd.virtual-compute-desc[0].virtual-cpu.num-virtual-cpu",
                     "'two' is not of type integer")
    # fields only YANG checks are still reported, after fluidvim's
    assert [p for p, _ in ps] == ["vnfd.virtual-compute-desc[0].virtual-cpu.num-virtual-cpu",
                                  "vnfd.sw-image-desc[0].checksum.algorithm",
                                  "vnfd.vdu[0].int-cpd[0].bitrate-requirement"]
    assert ps[1][1].startswith("SOL006: 'crc32'")          # fluidvim stopped before checksums


def test_osm_im_names_outside_sol006_are_a_warning_not_an_error(pkg):
    nsd, fw, fwd, plan = pkg
    fw["vnfd"]["vdu"][0]["virtual-compute-dsc"] = "fw-compute"
    fw["vnfd"]["vdu"][0]["int-cpd"][0]["port-security-enabled"] = False      # OSM: no warning
    (w,) = [w for w in plan().warnings if "not in SOL006" in w]
    assert w == "fw.yaml: not in SOL006 3.6.1 nor a known OSM IM extension: " \
                "vnfd.vdu[].virtual-compute-dsc"


def test_rfc7951_numbers_as_strings_are_read(pkg):
    nsd, fw, fwd, plan = pkg
    fw["vnfd"]["virtual-compute-desc"][0]["virtual-memory"] = {"size": "0.5"}   # decimal64
    assert plan().units[0].memory_mb == 512


def test_ns_convert_then_validate(tmp_path, capsys):
    from fluidvim.cmd import cli

    out = tmp_path / "nfv-nsd.yaml"
    assert cli.main(["ns", "convert", os.path.join(EXAMPLES, "nfv-nsd.xml"), "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text()) == converted("nfv-nsd.xml")
    assert cli.main(["ns", "convert", os.path.join(EXAMPLES, "nfv-vnfd.xml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["etsi-nfv-vnfd:vnfd"]["id"] == "ASA"
    assert cli.main(["ns", "validate", str(out)]) == 2
    err = capsys.readouterr().err
    assert "vnfd.vdu[0].boot-data: the VDU has no day-0 configuration" in err
    assert "SOL006" not in err.replace("in SOL006", "")
    assert cli.main(["ns", "convert", str(tmp_path / "absent.xml")]) == 2


# -- cross-check with libyang (Debian libyang2-tools; tools/bootstrap.sh installs it) --
@pytest.mark.skipif(shutil.which("yanglint") is None, reason="yanglint (libyang2-tools) absent")
def test_yanglint_agrees(tmp_path):
    mods = tmp_path / "yang"
    mods.mkdir()
    sol006.write_patched_modules(str(mods))
    schema = [str(mods / m) for m in ("etsi-nfv-descriptors.yang", "etsi-nfv-vnfd.yang",
                                      "etsi-nfv-nsd.yang", "etsi-nfv-pnfd.yang")]
    base = ["yanglint", "-p", str(mods), "-p", sol006.IETF_DIR, *schema, "-t", "config"]
    for name in EXAMPLE_FILES:
        data = tmp_path / (name + ".json")
        data.write_text(json.dumps(converted(name)))      # fluidvim's conversion ...
        for f in (os.path.join(EXAMPLES, name), str(data)):     # ... and ETSI's XML
            r = subprocess.run([*base, f], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, (f, r.stderr[-2000:])
    # libyang finds the same mistake yangson does
    bad = converted("nfv-vnfd.xml")
    bad["etsi-nfv-vnfd:vnfd"]["vdu"][0]["virtual-storage-desc"] = ["no-such-storage"]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    r = subprocess.run([*base, str(tmp_path / "bad.json")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "no-such-storage" in r.stderr
    # and ETSI's modules as published do not load (deref() in leafref paths)
    r = subprocess.run(["yanglint", "-p", sol006.ETSI_DIR, "-p", sol006.IETF_DIR,
                        os.path.join(sol006.ETSI_DIR, "etsi-nfv-vnfd.yang")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "deref" in r.stderr


@pytest.mark.skipif(shutil.which("yanglint") is None, reason="yanglint (libyang2-tools) absent")
def test_yanglint_accepts_the_samples_memory_and_refuses_finer_sizes(tmp_path):
    """libyang agrees that the samples' memory (size 0.1 GB + vdu-mem-requirements with the exact
    MiB) is SOL006 - what OSM's onboarding checks - and that 0.03125 GB is not."""
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"\x7fELF fake")
    mods = tmp_path / "yang"
    mods.mkdir()
    sol006.write_patched_modules(str(mods))
    schema = [str(mods / m) for m in ("etsi-nfv-descriptors.yang", "etsi-nfv-vnfd.yang",
                                      "etsi-nfv-nsd.yang", "etsi-nfv-pnfd.yang")]
    for v in sol006_chain(kernel)["nfv"]["vnfd"]:
        problems, unknown, raw, _ = sol006.check_document("vnfd", v, True, "vnfd")
        assert (problems, unknown) == ([], [])
        assert raw["virtual-compute-desc"][0]["virtual-memory"] == {
            "size": "0.1", "vdu-mem-requirements": [{"key": "fluidvim-memory-mib",
                                                     "value": "32"}]}
        for size, ok in (("0.1", True), ("0.03125", False)):
            raw["virtual-compute-desc"][0]["virtual-memory"]["size"] = size
            f = tmp_path / f"{v['id']}.json"
            f.write_text(json.dumps({"etsi-nfv-vnfd:vnfd": raw}))
            r = subprocess.run(["yanglint", "-p", str(mods), "-p", sol006.IETF_DIR, *schema,
                                "-t", "config", str(f)], capture_output=True, text=True,
                               timeout=60)
            assert (r.returncode == 0) == ok, r.stderr[-2000:]
            if not ok:
                assert "fraction digits" in r.stderr
