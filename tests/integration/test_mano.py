# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Network services from the sample NSD/VNFDs (etc/mano) end to end: the ``ns`` RPC namespace over
real RabbitMQ, the orchestrator's local zone with real VNFs under QEMU, one bridge per virtual
link, and real traffic from a network namespace on the ``left`` link through firewall ->
``middle`` -> forwarder to a namespace on the ``right`` link. A restarted orchestrator still
shows the NS; ``ns rm`` leaves no VNF, tap, bridge or service; a deploy whose second VNF rejects
its Click configuration rolls back completely.

Names: NS ``fm<hex>`` (its networks' bridges are derived from it), netns/veths ``fm<hex>``, run
dirs /run/fluidvim-fm-*.
"""

import copy
import os
import uuid

import pytest

from fluidvim.orchestrator.exception import InvalidRequest, NotFound, Refused
from fluidvim.orchestrator.mano import descriptors
from fluidvim.orchestrator.mano.rpcapi import NSAPI
from fluidvim.vnf import netdev, spec, testnet

from .conftest import leaked_taps, orchestrator_env
from .test_orchestrator import rabbit_up

pytestmark = pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on "
                                "127.0.0.1:5672: run tools/bootstrap.sh")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NSD = os.path.join(REPO, "etc", "mano", "fw_chain_ns", "fw_chain_nsd.yaml")
VNFDS = [os.path.join(REPO, "etc", "mano", "firewall_vnf", "firewall_vnfd.yaml"),
         os.path.join(REPO, "etc", "mano", "forwarder_vnf", "forwarder_vnfd.yaml")]


@pytest.fixture
def env(tmp_path):
    with orchestrator_env(tmp_path, "fm", 87) as e:
        yield e


def docs():
    """The sample descriptors as the CLI sends them (with the cloud-init files they name)."""
    _plan, nsd, vnfds = descriptors.plan_files(NSD, VNFDS)
    return nsd.to_dict(), [v.to_dict() for v in vnfds]


def counter(stats, name):
    return next(e["count"] for e in stats["elements"] if e["name"] == name)


def test_sample_chain_deploys_passes_traffic_survives_restart_and_goes(env):
    orch = env.start()
    ns_api = NSAPI(api=env.api())
    name = f"fm{uuid.uuid4().hex[:6]}"
    nsd, vnfds = docs()
    r = ns_api.deploy(nsd, vnfds, name=name)
    try:
        assert r["status"] == "running" and r["zone"] == orch.local_zone.name, r
        assert sorted(r["services"]) == [f"{name}-fw", f"{name}-fwd"]
        nets = {n["link"]: n for n in r["networks"]}
        assert set(nets) == {"left", "middle", "right"}
        insts = {i["profile"]: i for i in r["instances"]}
        fw, fwd = insts["fw"], insts["fwd"]
        # the VNFs run, with their NICs (taps) on the virtual links' bridges in cpd order
        for i in (fw, fwd):
            assert orch.manager.get(i["id"]).status == "running"
        tap = spec.tap_for
        assert nets["left"]["ports"] == [tap(fw["id"], 0)]
        assert sorted(nets["middle"]["ports"]) == sorted([tap(fw["id"], 1), tap(fwd["id"], 0)])
        assert nets["right"]["ports"] == [tap(fwd["id"], 1)]
        for n in nets.values():
            assert netdev.master_of(n["ports"][0]) == n["id"]
        assert [x["name"] for x in ns_api.list()] == [name]
        listed = {n["name"]: n for n in env.api().list_networks(orch.local_zone.name)}
        assert {f"{name}-left", f"{name}-middle", f"{name}-right"} <= set(listed)
        # traffic: left namespace -> fw -> middle -> fwd -> right namespace
        # (the namespaces hang on the NS's edge bridges, which stay the NS's to delete)
        with testnet.TestNet("fm", 87,
                             bridges=(nets["left"]["id"], nets["right"]["id"])) as net:
            assert net.ping(count=3) >= 2
            server = net.serve_tcp(80, 22)
            try:
                assert net.tcp_connect(80)                   # the firewall lets web out
                assert not net.tcp_connect(22, timeout_s=1.0)  # ... and drops ssh
            finally:
                server.terminate()
                server.wait()
        fw_stats, fwd_stats = orch.manager.stats(fw["id"]), orch.manager.stats(fwd["id"])
        assert counter(fw_stats, "out") > 0 and counter(fw_stats, "denied") > 0
        assert counter(fwd_stats, "east") > 0 and counter(fwd_stats, "west") > 0
        # show, after a restart of the orchestrator (same database)
        orch.stop()
        orch = env.start()
        ns_api = NSAPI(api=env.api())
        shown = ns_api.show(name)
        assert shown["status"] == "running" and shown["id"] == r["id"]
        assert {i["id"]: i["status"] for i in shown["instances"]} == {
            fw["id"]: "running", fwd["id"]: "running"}
        assert all(n["exists"] for n in shown["networks"])
        assert {n["link"]: len(n["ports"]) for n in shown["networks"]} == {
            "left": 1, "middle": 2, "right": 1}
        with pytest.raises(InvalidRequest) as e:            # one live NS per name
            ns_api.deploy(nsd, vnfds, name=name)
        assert e.value.field == "name"
        out = ns_api.delete(name)
    finally:
        remove_ns(orch, name)
    assert out["deleted"] == name
    # nothing left: VNFs, taps, bridges, services, instances
    assert orch.manager.list() == []
    assert not leaked_taps({fw["id"], fwd["id"]})
    assert not any(netdev.exists(n["id"]) for n in nets.values())
    api = env.api()
    assert api.list_services() == [] and api.list_instances() == []
    assert ns_api.list() == [] and ns_api.list(deleted=True)[0]["status"] == "deleted"


def test_deploy_failing_midway_rolls_back_completely(env):
    orch = env.start()
    ns_api = NSAPI(api=env.api())
    name = f"fm{uuid.uuid4().hex[:6]}"
    nsd, vnfds = docs()
    bad = copy.deepcopy(vnfds)
    vdu = bad[1]["doc"]["vnfd"]["vdu"][0]                    # the forwarder, launched second
    vdu.pop("cloud-init-file")
    vdu["cloud-init"] = "FromDevice(0) -> Countr -> ToDevice(1);"   # the VNF rejects it
    with pytest.raises(Refused) as e:
        ns_api.deploy(nsd, bad, name=name)
    msg = e.value.message
    assert f"instance 1/1 of {name}-fwd failed" in msg and "Countr" in msg, msg
    assert "rolled back" in msg
    (rec,) = ns_api.list()
    assert rec["status"] == "failed" and rec["instances"] == 0 and rec["networks"] == 0
    shown = ns_api.show(name)
    assert [s["step"].split(" ")[0] for s in shown["steps"]][:4] == [
        "validated", "network", "network", "network"]
    assert orch.manager.list() == []
    api = env.api()
    assert api.list_services() == [] and api.list_instances() == []
    assert not [n for n in api.list_networks() if n["name"].startswith(name)]
    launched = [x for x in orch.store.launches(limit=50)]
    assert launched and not leaked_taps({x.instance_id for x in launched})
    # bad descriptors are refused over RPC before anything is created, with the field path
    nsd2 = copy.deepcopy(nsd)
    nsd2["doc"]["nsd"]["nsd"][0]["df"][0]["vnf-profile"][0]["virtual-link-connectivity"][0][
        "virtual-link-profile-id"] = "lft"
    with pytest.raises(InvalidRequest) as e:
        ns_api.deploy(nsd2, vnfds, name=name + "b")
    assert e.value.field.endswith("virtual-link-connectivity[0].virtual-link-profile-id")
    assert len(ns_api.list()) == 1 and api.list_services() == []
    assert ns_api.validate(nsd, vnfds, name=name + "c")["networks"]["left"] == f"{name}c-left"
    ns_api.delete(name)
    assert ns_api.list() == []


def test_cli_deploy_show_rm(env):
    """`fluidvim ns` as a user runs it, against the orchestrator of this test."""
    import json
    import subprocess
    import sys

    orch = env.start()
    exe = os.path.join(os.path.dirname(sys.executable), "fluidvim")
    topic = ["--topic", env.conf.orchestrator.topic]

    def cli(*argv, ok=True):
        r = subprocess.run([exe, *argv, *topic], capture_output=True, text=True, timeout=300)
        assert (r.returncode == 0) == ok, (argv, r.returncode, r.stdout, r.stderr[-2000:])
        return r

    name = f"fm{uuid.uuid4().hex[:6]}"
    try:
        out = cli("ns", "deploy", NSD, "--vnfd", os.path.join(REPO, "etc", "mano"),
                  "--name", name).stdout
        assert "validated" in out and f"deploying {name} through the orchestrator" in out
        assert f"network left: {name}-left" in out and f"network service {name} running" in out
        show = cli("ns", "show", name).stdout
        assert f"network service {name}" in show and show.count("  instance ") == 2
        assert "ports fv" in show
        rows = json.loads(cli("ns", "list", "--json").stdout)
        assert [r["name"] for r in rows] == [name]
        again = cli("ns", "deploy", NSD, "--vnfd", os.path.join(REPO, "etc", "mano"), "--name", name,
                    ok=False)
        assert again.returncode == 2 and "fluidvim: error: name: a network service named" in \
            again.stderr
        assert f"deleted network service {name}" in cli("ns", "rm", name).stdout
    finally:
        remove_ns(orch, name)
    assert json.loads(cli("ns", "list", "--json").stdout) == []
    assert orch.manager.list() == []


def test_cli_deploys_osm_packages_and_a_csar(env, tmp_path):
    """`fluidvim ns deploy` with an NS package and VNF packages as `osm package-build` makes them
    (.tar.gz: a folder with the descriptor, checksums.txt, cloud_init/) and a SOL004 CSAR (.zip
    with TOSCA-Metadata): the same NS runs on the local zone; unpacked files do not outlive the
    CLI."""
    import glob
    import hashlib
    import subprocess
    import sys
    import tarfile
    import zipfile

    def package(folder, files):
        sums = "".join(f"{hashlib.md5(open(f, 'rb').read()).hexdigest()}  {rel}\n"
                       for rel, f in sorted(files.items()))
        (tmp_path / "checksums.txt").write_text(sums)
        path = str(tmp_path / f"{folder}.tar.gz")
        with tarfile.open(path, "w:gz", dereference=True) as tf:
            for rel, f in {**files, "checksums.txt": str(tmp_path / "checksums.txt")}.items():
                tf.add(f, f"{folder}/{rel}")
        return path

    mano = os.path.join(REPO, "etc", "mano")
    ns = package("fw_chain_ns", {"fw_chain_nsd.yaml": NSD})
    fw = package("firewall_vnf", {
        "firewall_vnfd.yaml": VNFDS[0],
        "cloud_init/firewall.click": os.path.join(mano, "firewall_vnf", "cloud_init",
                                                  "firewall.click")})
    fwd = str(tmp_path / "forwarder.zip")
    with zipfile.ZipFile(fwd, "w") as zf:
        zf.writestr("TOSCA-Metadata/TOSCA.meta", "TOSCA-Meta-File-Version: 1.0\n"
                    "Entry-Definitions: Definitions/forwarder_vnfd.yaml\n")
        zf.write(VNFDS[1], "Definitions/forwarder_vnfd.yaml")
        zf.write(os.path.join(mano, "forwarder_vnf", "cloud_init", "forwarder.click"),
                 "Scripts/cloud_init/forwarder.click")
    orch = env.start()
    exe = os.path.join(os.path.dirname(sys.executable), "fluidvim")
    name = f"fm{uuid.uuid4().hex[:6]}"
    before = set(glob.glob("/tmp/fluidvim-pkg-*"))
    try:
        r = subprocess.run([exe, "ns", "deploy", ns, "--vnfd", fw, "--vnfd", fwd, "--name", name,
                            "--topic", env.conf.orchestrator.topic],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        row = orch.ns.show(name)
        assert row["status"] == "running" and len(row["instances"]) == 2
        by = {i["service"]: i for i in row["instances"]}
        fw_rec = orch.manager.get(by[f"{name}-fw"]["id"])
        assert "IPFilter" in fw_rec.config                     # cloud_init/ of the tarball
        assert fw_rec.spec.kernel == orch.manager.kernel       # image by name: fluidvim-vnf
        assert fw_rec.spec.memory_mb == 32                     # vdu-mem-requirements
        assert set(glob.glob("/tmp/fluidvim-pkg-*")) == before
    finally:
        remove_ns(orch, name)
    assert orch.manager.list() == []


def remove_ns(orch, name):
    """Whatever a failed assertion left behind: the NS's instances, services and networks."""
    try:
        orch.ns.delete(name)
    except (NotFound, Refused):
        pass
