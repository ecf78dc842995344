# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NS/VNF packages as `fluidvim ns deploy/validate` take them: OSM packages (`osm package-build`
.tar.gz: one folder with the descriptor, checksums.txt, cloud_init/, Scripts/) and SOL004 CSARs
(.zip with TOSCA-Metadata/TOSCA.meta, or a root YAML). Built here from the samples in etc/mano;
each must map to the same plan as the sample files themselves."""

import hashlib
import io
import os
import tarfile
import zipfile

import pytest

from fluidvim.cmd import cli
from fluidvim.orchestrator.mano import descriptors as d, packages

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(REPO, "etc", "mano")
NSD = os.path.join(SAMPLES, "fw_chain_ns", "fw_chain_nsd.yaml")


def read(rel):
    with open(os.path.join(SAMPLES, rel), "rb") as f:      # cloud_init/*.click may be links
        return f.read()


def osm_package(tmp_path, folder, members, checksums=True):
    """A tarball as `osm package-build` makes it: FOLDER/ with the members and checksums.txt."""
    files = dict(members)
    files.setdefault("Scripts/README", b"day-1/2 scripts live here\n")
    if checksums:
        files["checksums.txt"] = "".join(
            f"{hashlib.md5(data).hexdigest()}\t{name}\n"
            for name, data in sorted(files.items())).encode()
    path = tmp_path / f"{folder}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return str(path)


def csar(tmp_path, name, members):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return str(path)


def sample_packages(tmp_path):
    ns = osm_package(tmp_path, "fw_chain_ns", {"fw_chain_nsd.yaml": read(
        "fw_chain_ns/fw_chain_nsd.yaml")})
    fw = osm_package(tmp_path, "firewall_vnf", {
        "firewall_vnfd.yaml": read("firewall_vnf/firewall_vnfd.yaml"),
        "cloud_init/firewall.click": read("firewall_vnf/cloud_init/firewall.click")})
    return ns, fw


def same_plan(a, b):
    strip = ("source",)
    ua = [{k: v for k, v in u.items() if k not in strip} for u in a.to_dict()["units"]]
    ub = [{k: v for k, v in u.items() if k not in strip} for u in b.to_dict()["units"]]
    return ua == ub and a.networks == b.networks and a.aspects == b.aspects


def test_sample_packages_are_whole_folders():
    """Each sample VNF folder is an OSM package by itself (`osm package-build` keeps links as
    links, which would point outside it): day-0 files are copies of etc/click's, kept equal."""
    for vnf, click in (("firewall_vnf", "firewall"), ("forwarder_vnf", None),
                       ("reflector_vnf", "reflector")):
        for root, _dirs, names in os.walk(os.path.join(SAMPLES, vnf)):
            for n in names:
                assert not os.path.islink(os.path.join(root, n)), (root, n)
        if click:
            with open(os.path.join(REPO, "etc", "click", f"{click}.click"), "rb") as f:
                assert read(f"{vnf}/cloud_init/{click}.click") == f.read()


def test_osm_packages_and_a_csar_map_like_the_sample_files(tmp_path):
    want, _, _ = d.plan_files(NSD, [SAMPLES])
    ns, fw = sample_packages(tmp_path)
    # the forwarder as a SOL004 CSAR: TOSCA.meta names the descriptor in Definitions/, the
    # day-0 file is in the package's Scripts/cloud_init/
    fwd = csar(tmp_path, "forwarder.zip", {
        "TOSCA-Metadata/TOSCA.meta": "TOSCA-Meta-File-Version: 1.0\nCSAR-Version: 1.1\n"
                                     "Created-By: test\nEntry-Definitions: "
                                     "Definitions/forwarder_vnfd.yaml\n",
        "Definitions/forwarder_vnfd.yaml": read("forwarder_vnf/forwarder_vnfd.yaml"),
        "Scripts/cloud_init/forwarder.click": read("forwarder_vnf/cloud_init/forwarder.click"),
        "forwarder.mf": "vnfd_id: fluidvim-forwarder-vnf\n"})
    plan, nsd, vnfds = d.plan_files(ns, [fw, fwd])
    assert same_plan(plan, want), (plan.to_dict(), want.to_dict())
    assert nsd.source == f"{ns}:fw_chain_nsd.yaml"
    assert [v.source for v in vnfds] == [f"{fw}:firewall_vnfd.yaml",
                                         f"{fwd}:Definitions/forwarder_vnfd.yaml"]
    # what the client sends is all the orchestrator needs (the unpacked files are not read)
    again = d.build_plan(d.Document.from_dict(nsd.to_dict()),
                         [d.Document.from_dict(v.to_dict()) for v in vnfds])
    assert same_plan(again, want)
    # a CSAR without TOSCA-Metadata: the YAML at its root, cloud_init/ next to it
    bare = csar(tmp_path, "forwarder-bare.csar", {
        "forwarder_vnfd.yaml": read("forwarder_vnf/forwarder_vnfd.yaml"),
        "forwarder.mf": "vnfd_id: fluidvim-forwarder-vnf\n",
        "cloud_init/forwarder.click": read("forwarder_vnf/cloud_init/forwarder.click")})
    # ... and a directory of packages, as OSM users keep them
    (tmp_path / "pkgs").mkdir()
    os.rename(fw, tmp_path / "pkgs" / "firewall_vnf.tar.gz")
    os.rename(bare, tmp_path / "pkgs" / "forwarder-bare.csar")
    plan, _, _ = d.plan_files(ns, [str(tmp_path / "pkgs")])
    assert same_plan(plan, want)


def test_cli_validate_takes_packages(tmp_path, capsys):
    ns, fw = sample_packages(tmp_path)
    fwd = osm_package(tmp_path, "forwarder_vnf", {
        "forwarder_vnfd.yaml": read("forwarder_vnf/forwarder_vnfd.yaml"),
        "cloud_init/forwarder.click": read("forwarder_vnf/cloud_init/forwarder.click")})
    assert cli.main(["ns", "validate", ns, "--vnfd", fw, "--vnfd", fwd]) == 0
    out = capsys.readouterr().out
    assert "fw-chain-fw" in out and "fw-chain-fwd" in out


def test_a_changed_package_is_refused_by_its_checksums(tmp_path):
    ns, _ = sample_packages(tmp_path)
    fw = osm_package(tmp_path, "firewall_vnf", {
        "firewall_vnfd.yaml": read("firewall_vnf/firewall_vnfd.yaml"),
        "cloud_init/firewall.click": read("firewall_vnf/cloud_init/firewall.click")})
    # rewrite the click file after checksums.txt was made
    members = {}
    with tarfile.open(fw) as tf:
        for m in tf.getmembers():
            members[m.name.split("/", 1)[1]] = tf.extractfile(m).read()
    members["cloud_init/firewall.click"] += b"// changed\n"
    bad = osm_package(tmp_path / "..", "firewall_vnf", members, checksums=False)
    with pytest.raises(d.DescriptorError) as e:
        d.plan_files(ns, [bad])
    (p,) = e.value.problems
    assert p.source == bad and p.path.startswith("checksums.txt line")
    assert "cloud_init/firewall.click has md5" in p.message and "osm package-build" in p.fix


@pytest.mark.parametrize("members,field,text", [
    ({"../evil.yaml": "vnfd: {}"}, "../evil.yaml", "outside the package"),
    ({"TOSCA-Metadata/TOSCA.meta": "CSAR-Version: 1.1\n", "a.yaml": "vnfd: {}"},
     os.path.join("TOSCA-Metadata", "TOSCA.meta"), "no Entry-Definitions"),
    ({"TOSCA-Metadata/TOSCA.meta": "Entry-Definitions: Definitions/none.yaml\n"},
     os.path.join("TOSCA-Metadata", "TOSCA.meta"), "is not in the package"),
    ({"readme.txt": "no descriptor"}, "file", "no descriptor"),
])
def test_bad_csars_name_the_problem(tmp_path, members, field, text):
    path = csar(tmp_path, "bad.zip", members)
    with pytest.raises(d.DescriptorError) as e:
        d.load_vnfds([path])
    (p,) = e.value.problems
    assert (p.source, p.path) == (path, field) and text in p.message, p


def test_tar_members_that_escape_are_refused(tmp_path):
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        link = tarfile.TarInfo("pkg/cloud_init/fw.click")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tf.addfile(link)
    with pytest.raises(d.DescriptorError, match="refused"):
        d.load_vnfds([str(path)])


def test_a_kernel_inside_a_package_is_refused_with_the_fix(tmp_path):
    vnfd = read("firewall_vnf/firewall_vnfd.yaml").replace(
        b"image: fluidvim-vnf", b"image: images/vnf.elf")
    ns, _ = sample_packages(tmp_path)
    (tmp_path / "k").mkdir()
    fw = osm_package(tmp_path / "k", "firewall_vnf", {
        "firewall_vnfd.yaml": vnfd, "images/vnf.elf": b"\x7fELF kernel",
        "cloud_init/firewall.click": read("firewall_vnf/cloud_init/firewall.click")})
    with pytest.raises(d.DescriptorError) as e:
        d.plan_files(ns, [fw, os.path.join(SAMPLES, "forwarder_vnf")])
    (p,) = [p for p in e.value.problems if p.path == "vnfd.sw-image-desc[0].image"]
    assert "carries the kernel file firewall_vnf/images/vnf.elf" in p.message
    assert "[osm_vim] images_dir" in p.fix


def test_is_package_and_the_unpacked_folder_goes_at_exit(tmp_path):
    ns, _ = sample_packages(tmp_path)
    assert packages.is_package(ns) and not packages.is_package(NSD)
    assert not packages.is_package(str(tmp_path))
    root, files = packages.unpack(ns)
    assert [os.path.relpath(f, root) for f in files] == ["fw_chain_nsd.yaml"]
    assert packages.inside(files[0]) == os.path.join("fw_chain_ns", "fw_chain_nsd.yaml")
    packages._cleanup()                                  # what atexit runs
    assert not os.path.exists(root)
