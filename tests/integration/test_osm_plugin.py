# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The OSM RO plugin against a real orchestrator: RabbitMQ, the local zone, VNFs under QEMU.

No OSM exists here, so the test plays RO: it loads ``vimconnector`` through RO's entry point,
builds it with the keyword arguments RO's NS worker passes, and makes RO's calls of an NS
instantiation (VIM check, virtual links, image and flavor lookup/creation, VDU creation with
day-0 config, status polling) and termination, then checks nothing is left on the host.
"""

import os
import shutil
import signal
import time
import uuid
from importlib.metadata import entry_points

import pytest

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.osm import conf as osmconf, vimconn_base as vc
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.vnf import netdev, testnet

from .conftest import leaked_taps
from .test_orchestrator import rabbit_up

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
BAD_CLICK = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> Countr -> ToDevice(0);"

pytestmark = pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on "
                                "127.0.0.1:5672: run tools/bootstrap.sh")


def ro_load_plugin(vim_type):
    """What RO's NS worker does for a VIM account of type ``vim_type``."""
    eps = list(entry_points(group="osm_rovim.plugins", name="rovim_" + vim_type))
    assert eps, "entry point osm_rovim.plugins:rovim_fluidvim missing (pip install -e .)"
    return eps[0].load()


@pytest.fixture
def env(tmp_path):
    tag = uuid.uuid4().hex[:8]
    run_dir = f"/run/fluidvim-fo-{tag}"
    images = tmp_path / "images"
    images.mkdir()
    opts = dict(connection=f"sqlite:///{tmp_path}/orch.sqlite", topic=f"fo-{tag}",
                notification_topic=f"fo_slots_{tag}", agent_interval=0.5, rpc_timeout=60.0,
                vnf_state_dir=str(tmp_path / "state"), vnf_run_dir=run_dir)
    conf = orchconf.make_conf(**opts)
    orchconf.disable_rabbit_heartbeat(conf)
    osmconf.register_opts(conf)
    conf.set_override("images_dir", str(images), group="osm_vim")
    orch = Orchestrator(conf)
    orch.start(server=f"fo-{tag}")
    made = []

    class Env:
        pass

    e = Env()
    e.tag, e.orch, e.images = tag, orch, images

    def connector(**config):
        cls = ro_load_plugin("fluidvim")
        # the keyword arguments of RO's _load_vim, from `osm vim-create --account_type fluidvim
        # --auth_url rabbit://127.0.0.1:5672/ --user guest --password guest --tenant fluidvim`
        vim = cls(uuid=str(uuid.uuid4()), name=f"fv-{tag}", tenant_id=None,
                  tenant_name="fluidvim", url="rabbit://127.0.0.1:5672/", url_admin=None,
                  user="guest", passwd="guest",
                  config={"topic": f"fo-{tag}", "zone": "local", **config}, persistent_info={})
        made.append(vim)
        return vim

    e.connector = connector
    yield e
    for vim in made:
        vim.close()
    mgr = orch.manager
    ids = {r.id for r in mgr.store.list()} | {i["id"] for i in orch.list_instances()}
    orch.stop()
    for rec in mgr.store.list():
        mgr.destroy(rec.id)
    leftover = [n for n in orch.local_zone.networks() if tag in n.name]
    for n in leftover:
        netdev.delete_link(n.id)
    orch.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    assert not leaked_taps(ids)
    assert not leftover, f"networks leaked: {leftover}"


def wait_status(vim, vm_id, want, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        st = vim.refresh_vms_status([vm_id])[vm_id]
        if st["status"] == want or time.monotonic() > deadline:
            return st
        time.sleep(0.2)


def test_ns_instantiate_and_terminate(env):
    vim = env.connector()
    vim.check_vim_connectivity()
    tag = env.tag
    # virtual links
    left, created = vim.new_network(f"ns-{tag}-left", "bridge",
                                    ip_profile={"ip_version": "IPv4",
                                                "subnet_address": "10.77.0.0/24"})
    assert created == {}
    right, _ = vim.new_network(f"ns-{tag}-right", "bridge")
    assert left != right and netdev.exists(left) and netdev.exists(right)
    nets = vim.refresh_nets_status([left, right])
    assert nets[left]["status"] == nets[right]["status"] == "ACTIVE"
    assert vim.get_network(left)["name"] == f"ns-{tag}-left"
    assert [n["id"] for n in vim.get_network_list({"name": f"ns-{tag}-right"})] == [right]
    # images: RO looks images up by name; a kernel in images_dir and one registered by path
    kernel = env.orch.manager.kernel
    shutil.copy(kernel, env.images / "dir-fw.elf")
    (env.images / "notes.txt").write_text("not a kernel")
    listed = {im["name"]: im for im in vim.get_image_list()}
    assert {"fluidvim-vnf", "dir-fw"} <= set(listed) and "notes" not in listed
    path = str(env.images.parent / "vnf-fw.elf")
    shutil.copy(kernel, path)
    image_id = vim.new_image({"name": "vnf-fw", "location": path, "disk_format": "raw"})
    assert vim.new_image({"name": "vnf-fw", "location": path}) == image_id    # idempotent
    assert vim.get_image_id_from_path(path) == image_id
    assert [im["id"] for im in vim.get_image_list({"name": "vnf-fw"})] == [image_id]
    # flavor: RO asks for a matching one first and creates it when there is none
    flavor = {"name": "vnf.small", "ram": 32, "vcpus": 1, "disk": 0,
              "extended": {"session-slots": 8}}
    with pytest.raises(vc.VimConnNotFoundException):
        vim.get_flavor_id_from_data(flavor)
    flavor_id = vim.new_flavor(flavor)
    assert vim.get_flavor_id_from_data(flavor) == flavor_id
    assert vim.get_flavor(flavor_id)["slots"] == 8
    # the VDU: two NICs, Click as day-0
    # eth1 with the MAC RO asks for (a Neutron-style one, upper case), eth0 assigned
    net_list = [{"name": "eth0", "net_id": left, "type": "virtual", "use": "data"},
                {"name": "eth1", "net_id": right, "type": "virtual", "use": "data",
                 "mac_address": "FA:16:3E:12:34:56"}]
    vm_id, created = vim.new_vminstance(
        name=f"ns-{tag}-1-fw-0", description="firewall VDU", start=True, image_id=image_id,
        flavor_id=flavor_id, affinity_group_list=[], net_list=net_list,
        cloud_config={"user-data": FORWARD}, disk_list=None, availability_zone_index=None,
        availability_zone_list=None)
    assert created == {}
    st = wait_status(vim, vm_id, "ACTIVE")
    assert st["status"] == "ACTIVE", st
    ifaces = st["interfaces"]
    assert [i["vim_net_id"] for i in ifaces] == [left, right]
    assert [i["vim_interface_id"] for i in ifaces] == [n["vim_id"] for n in net_list]
    rec = env.orch.manager.get(vm_id)
    assert [i["mac_address"] for i in ifaces] == [n.mac for n in rec.spec.nics]
    assert ifaces[0]["mac_address"].startswith("52:54:00:")
    assert ifaces[1]["mac_address"] == "fa:16:3e:12:34:56"
    assert [n["mac"] for n in env.orch.manager.stats(vm_id)["nics"]] == \
        [i["mac_address"] for i in ifaces]                  # the VNF itself uses it
    for i in ifaces:
        assert netdev.master_of(i["vim_interface_id"]) == i["vim_net_id"]
    assert rec.spec.kernel == path and rec.spec.memory_mb == 32
    assert rec.spec.session_slots == 8
    inst = {i["id"]: i for i in env.orch.list_instances()}[vm_id]     # fluidvim instance list
    assert inst["slots_total"] == 8 and inst["zone"] == "local"
    vm = vim.get_vminstance(vm_id)
    assert vm["status"] == "ACTIVE" and vm["name"] == f"ns-{tag}-1-fw-0"
    assert vm["image_id"] == image_id and vm["flavor_id"] == flavor_id
    # traffic between two namespaces on the two networks crosses the VNF
    with testnet.TestNet("fo", 77, bridges=(left, right)) as tn:
        assert [netdev.master_of(tn.host_a), netdev.master_of(tn.host_b)] == [left, right]
        assert tn.ping(count=3) >= 1
    # a network with a VM on it cannot go
    with pytest.raises(vc.VimConnConflictException, match="delete their VMs first"):
        vim.delete_network(left)
    # termination, in RO's order: VDUs, then virtual links, flavor, image
    taps = [i["vim_interface_id"] for i in ifaces]
    assert vim.delete_vminstance(vm_id, created) == vm_id
    assert vim.delete_vminstance(vm_id, created) == vm_id                 # idempotent
    assert vim.refresh_vms_status([vm_id])[vm_id]["status"] == "DELETED"
    with pytest.raises(vc.VimConnNotFoundException):
        vim.get_vminstance(vm_id)
    assert not any(netdev.exists(t) for t in taps)
    assert vim.delete_network(left) == left and vim.delete_network(right) == right
    with pytest.raises(vc.VimConnNotFoundException):
        vim.delete_network(left)
    assert vim.refresh_nets_status([left])[left]["status"] == "DELETED"
    assert not netdev.exists(left) and not netdev.exists(right)
    assert vim.delete_flavor(flavor_id) == flavor_id
    assert vim.delete_image(image_id) == image_id
    assert env.orch.manager.list() == []
    assert env.orch.list_instances() == []


def test_vnf_operate_day2(env):
    """RO's day-2 calls (vnf-operate start/stop/rebuild, ns-action pause/resume/reboot) on one
    VM: it keeps its id, taps, MACs and networks; traffic stops while paused; a crashed VNF
    comes back with start; a flavor is found by name."""
    vim = env.connector()
    left, _ = vim.new_network(f"op-{env.tag}-l", "bridge")
    right, _ = vim.new_network(f"op-{env.tag}-r", "bridge")
    image_id = vim.get_image_list({"name": "fluidvim-vnf"})[0]["id"]
    flavor_id = vim.new_flavor({"name": f"op-{env.tag}", "ram": 32, "vcpus": 1})
    assert vim.get_flavor(flavor_name=f"op-{env.tag}")["id"] == flavor_id
    assert vim.get_flavor(flavor_id=flavor_id)["name"] == f"op-{env.tag}"
    with pytest.raises(vc.VimConnNotFoundException, match="flavor_name"):
        vim.get_flavor(flavor_name=f"op-{env.tag}-none")
    vm_id, created = vim.new_vminstance(
        name=f"op-{env.tag}-fw-0", description="", start=True, image_id=image_id,
        flavor_id=flavor_id, affinity_group_list=[],
        net_list=[{"net_id": left, "type": "virtual"},
                  {"net_id": right, "type": "virtual", "mac_address": "fa:16:3e:00:00:07"}],
        cloud_config={"user-data": FORWARD})
    st = wait_status(vim, vm_id, "ACTIVE")
    ifaces = [(i["vim_interface_id"], i["mac_address"], i["vim_net_id"])
              for i in st["interfaces"]]
    mgr = env.orch.manager

    def same_vm(want):
        st = vim.refresh_vms_status([vm_id])[vm_id]
        assert st["status"] == want, st
        assert [(i["vim_interface_id"], i["mac_address"], i["vim_net_id"])
                for i in st["interfaces"]] == ifaces
        for tap, _mac, br in ifaces:
            assert netdev.master_of(tap) == br
        return {i["id"]: i for i in env.orch.list_instances()}[vm_id]

    with testnet.TestNet("fp", 78, bridges=(left, right)) as tn:
        assert tn.ping(count=3) >= 1
        for action in ({"pause": None}, {"stop": None}, {"shutoff": None}, {"forceOff": None}):
            assert vim.action_vminstance(vm_id, action, created) is None
            assert same_vm("PAUSED")["status"] == "paused"      # fluidvim instance list too
            assert mgr.get(vm_id).status == "paused"
        assert tn.ping(count=2, timeout_s=1) == 0              # vCPUs halted: nothing crosses
        vim.action_vminstance(vm_id, {"start": None})
        assert same_vm("ACTIVE")["status"] == "running"
        assert tn.ping(count=3) >= 1
        vim.action_vminstance(vm_id, {"pause": None})
        vim.action_vminstance(vm_id, {"resume": None})
        vim.action_vminstance(vm_id, {"resume": None})         # running: nothing to do
        same_vm("ACTIVE")
        pid = mgr.get(vm_id).pid
        # soft reboot: the Click graph restarts in the same VNF (counters reset)
        vim.action_vminstance(vm_id, {"reboot": {"type": "SOFT"}})
        same_vm("ACTIVE")
        assert mgr.get(vm_id).pid == pid
        assert tn.ping(count=3) >= 1
        # rebuild: a new boot of the same VNF (new process, same id, taps and MACs)
        vim.action_vminstance(vm_id, {"rebuild": None})
        same_vm("ACTIVE")
        assert mgr.get(vm_id).pid != pid
        assert [n["mac"] for n in mgr.stats(vm_id)["nics"]] == [m for _t, m, _b in ifaces]
        assert tn.ping(count=3) >= 1
        # the VNF dies: ERROR; RO's start boots it again
        os.kill(mgr.get(vm_id).pid, signal.SIGKILL)
        assert wait_status(vim, vm_id, "ERROR")["status"] == "ERROR"
        vim.action_vminstance(vm_id, {"start": None})
        same_vm("ACTIVE")
        assert tn.ping(count=3) >= 1
    with pytest.raises(vc.VimConnNotSupportedException, match="createImage"):
        vim.action_vminstance(vm_id, {"createImage": {"name": "snap"}})
    with pytest.raises(vc.VimConnNotFoundException, match="no VM"):
        vim.action_vminstance("no-such-vm", {"pause": None})
    assert vim.action_vminstance(vm_id, {"terminate": None}, created) is None
    assert vim.refresh_vms_status([vm_id])[vm_id]["status"] == "DELETED"
    assert mgr.list() == []
    vim.delete_network(left)
    vim.delete_network(right)
    vim.delete_flavor(flavor_id)


def test_errors_leave_nothing(env):
    vim = env.connector()
    net, _ = vim.new_network(f"err-{env.tag}", "bridge")
    image_id = vim.get_image_list({"name": "fluidvim-vnf"})[0]["id"]
    flavor_id = vim.new_flavor({"name": "tiny", "ram": 32, "vcpus": 1})

    def launch(**kw):
        args = dict(name=f"err-{env.tag}", description="", start=True, image_id=image_id,
                    flavor_id=flavor_id, affinity_group_list=[],
                    net_list=[{"net_id": net, "type": "virtual"},
                              {"net_id": net, "type": "virtual"}],
                    cloud_config={"user-data": FORWARD})
        args.update(kw)
        return vim.new_vminstance(**args)

    # the VNF rejects a bad Click configuration: the error names the line; nothing is left
    with pytest.raises(vc.VimConnException) as ei:
        launch(cloud_config={"user-data": BAD_CLICK})
    assert "line 2" in str(ei.value) and "Countr" in str(ei.value), ei.value
    assert env.orch.manager.list() == [] and env.orch.list_instances() == []
    assert vim.get_network(net)["ports"] == []
    with pytest.raises(vc.VimConnNotFoundException, match="image"):
        launch(image_id=str(uuid.uuid4()))
    with pytest.raises(vc.VimConnNotFoundException, match="flavor"):
        launch(flavor_id=str(uuid.uuid4()))
    with pytest.raises(vc.VimConnNotFoundException, match="network"):
        launch(net_list=[{"net_id": "fvnnosuchbr", "type": "virtual"}])
    with pytest.raises(vc.VimConnNotFoundException):
        vim.get_flavor_id_from_data({"ram": 64, "vcpus": 2})
    assert env.orch.manager.list() == []
    # session slots from the day-0 config's directive line (a Click comment for the VNF)
    vm_id, _ = launch(cloud_config={"user-data": "// fluidvim: session-slots = 5\n" + FORWARD})
    assert env.orch.manager.get(vm_id).spec.session_slots == 5
    vim.delete_vminstance(vm_id)
    # an orchestrator that does not answer on the topic: connection error, not a hang
    silent = env.connector(topic=f"fo-nobody-{env.tag}", rpc_timeout=2)
    with pytest.raises(vc.VimConnConnectionException, match="no reply"):
        silent.check_vim_connectivity()
    assert silent.refresh_vms_status(["x"])["x"]["status"] == "VIM_ERROR"
    vim.delete_network(net)
    vim.delete_flavor(flavor_id)


def test_broker_down():
    cls = ro_load_plugin("fluidvim")
    vim = cls(uuid="u", name="fv-down", tenant_id=None, tenant_name="t",
              url="rabbit://guest:guest@127.0.0.1:1/", url_admin=None, user=None, passwd=None,
              config={}, persistent_info={})
    with pytest.raises(vc.VimConnConnectionException, match="broker"):
        vim.check_vim_connectivity()
    assert vim.refresh_nets_status(["n"])["n"]["status"] == "VIM_ERROR"
