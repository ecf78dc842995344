# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim-api with real Keystone and a real orchestrator: Keystone 30 from PyPI (SQLite, Fernet
tokens; tests/e2e/nova_services.Stack.start_keystone), the orchestrator on RabbitMQ with the
local zone (VNFs under QEMU), and ``fluidvim-api`` itself as a process with ``auth_strategy =
keystone``. Clients are keystoneauth1 sessions (the API's own client, the ``fluidvim`` CLI and the
OSM RO plugin), with users in two projects:

* alice: member of project A, rita: reader of project A, bob: member of project B, admin.

Checked: no token -> 401 naming Keystone (the healthcheck needs none); reader reads but cannot
change (403); another project's resources are 404 and invisible in lists; zones are admin-only;
the admin sees and does everything; the OSM
plugin's RO call sequence through the API (VIM account = API url, user, password, project).
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid

import pytest

from fluidvim.orchestrator.apiclient import APIClient, APIError
from fluidvim.orchestrator.exception import InvalidRequest, NotFound
from fluidvim.orchestrator.osm import vimconn_base as vc
from tests.e2e import nova_services as ns

from .conftest import PASSWORD, orchestrator_env
from .test_orchestrator import rabbit_up
from .test_osm_plugin import ro_load_plugin, wait_status

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"

pytestmark = [
    pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on 127.0.0.1:5672: "
                       "run tools/bootstrap.sh"),
    pytest.mark.skipif(shutil.which("keystone-manage", path=os.path.dirname(sys.executable))
                       is None, reason="keystone is not installed (pip install -e .[e2e])"),
]


@pytest.fixture
def api(keystone, tmp_path):
    """The orchestrator (RabbitMQ, local zone) and fluidvim-api in front of it."""
    with orchestrator_env(tmp_path, "fva", 94) as env:
        orch = env.start()
        port = ns.free_ports(("api",))["api"]
        conf = tmp_path / "fluidvim-api.conf"
        conf.write_text(textwrap.dedent(f"""\
            [DEFAULT]
            debug = true
            [api]
            auth_strategy = keystone
            bind_port = {port}
            [orchestrator]
            transport_url = {env.conf.orchestrator.transport_url}
            topic = {env.conf.orchestrator.topic}
            rpc_timeout = 60
            """) + ns._authtoken(keystone.url("keystone")))
        log = open(tmp_path / "api.log", "wb")
        proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "fluidvim-api"),
                                 "--config-file", str(conf)], stdout=log,
                                stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/", timeout=2).close()
                break
            except (urllib.error.URLError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    raise AssertionError("fluidvim-api did not start:\n"
                                         + (tmp_path / "api.log").read_text()[-3000:])
                time.sleep(0.2)

        class Api:
            pass

        a = Api()
        a.url, a.orch, a.keystone, a.log = url, orch, keystone, tmp_path / "api.log"
        clients = []

        def client(user):
            name, project = keystone.users[user]
            c = APIClient(url, username=name, password=ns.ADMIN_PASSWORD if user == "admin"
                          else PASSWORD, project_name=project)
            clients.append(c)
            return c
        a.client = client
        try:
            yield a
        finally:
            for c in clients:
                c.close()
            proc.terminate()
            proc.wait(timeout=30)
            log.close()


def status(fn):
    try:
        fn()
    except APIError as e:
        return e.status
    except NotFound:
        return 404
    except InvalidRequest:
        return 400
    return 200


def test_unauthenticated_is_401_naming_keystone(api):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(api.url + "/v1/services", timeout=10)
    assert e.value.code == 401
    assert e.value.headers["WWW-Authenticate"].startswith("Keystone uri=")
    req = urllib.request.Request(api.url + "/v1/services", headers={"X-Auth-Token": "bogus"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 401
    # the description, the versions and the healthcheck need no token
    with urllib.request.urlopen(api.url + "/openapi.json", timeout=10) as r:
        assert json.load(r)["info"]["title"] == "fluidvim-api"
    with urllib.request.urlopen(api.url + "/healthcheck", timeout=10) as r:
        assert r.status == 200 and r.read() == b"OK"
    # the client finds Keystone through the API's 401 and authenticates
    assert APIClient(api.url).discover_auth_url() == api.keystone.url("keystone")
    with pytest.raises(APIError) as e:
        APIClient(api.url, username=api.keystone.users["alice"][0], password="wrong",
                  project_name=api.keystone.users["alice"][1]).list_services()
    assert e.value.status == 401


def test_projects_and_roles_with_keystone_tokens(api):
    alice, rita, bob, admin = (api.client(u) for u in ("alice", "rita", "bob", "admin"))
    assert alice.register_service("fw-a", FORWARD, slots=4)["name"] == "fw-a"
    net = alice.create_network("local", "fva-lan")
    # the reader reads, but cannot change (403)
    assert [s["name"] for s in rita.list_services()] == ["fw-a"]
    assert [n["id"] for n in rita.list_networks("local")] == [net["id"]]
    assert status(lambda: rita.register_service("fw-r", FORWARD)) == 403
    assert status(lambda: rita.remove_service("fw-a")) == 403
    assert status(lambda: rita.delete_network("local", net["id"])) == 403
    assert status(lambda: rita.place("fw-a")) == 403
    # another project's member sees nothing of it and cannot touch it (404)
    assert bob.list_services() == [] and bob.list_networks("local") == []
    assert status(lambda: bob.remove_service("fw-a")) == 404
    assert status(lambda: bob.resolve("fw-a")) == 404
    assert status(lambda: bob.delete_network("local", net["id"])) == 404
    assert status(lambda: bob.slots("fw-a")) == 404
    # zones (every host's slots and queuing delay) are infrastructure: admin only
    assert status(lambda: bob.list_zones()) == 403
    assert status(lambda: rita.list_zones()) == 403
    assert [z["name"] for z in admin.list_zones()] == ["local"]
    # the admin sees every project's resources and may change them
    assert [s["name"] for s in admin.list_services()] == ["fw-a"]
    assert admin.delete_network("local", net["id"]) == {"deleted": net["id"]}
    assert alice.remove_service("fw-a") == {"removed": "fw-a"}
    assert admin.list_services() == []


def test_cli_through_the_api_with_keystone(api, tmp_path):
    name, project = api.keystone.users["alice"]
    env = dict(os.environ, FLUIDVIM_API_URL=api.url, OS_USERNAME=name, OS_PASSWORD=PASSWORD,
               OS_PROJECT_NAME=project, OS_USER_DOMAIN_NAME="Default",
               OS_PROJECT_DOMAIN_NAME="Default")
    env.pop("OS_AUTH_URL", None)            # found through the API
    fv = os.path.join(os.path.dirname(sys.executable), "fluidvim")
    r = subprocess.run([fv, "service", "register", "fw-cli", "--config", FORWARD, "--slots",
                        "2"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([fv, "service", "list", "--json"], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and [s["name"] for s in json.loads(r.stdout)] == ["fw-cli"]
    r = subprocess.run([fv, "service", "register", "fw-cli2", "--config", FORWARD,
                        "--deadline-ms", "-1"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith(
        "fluidvim: error: deadline_ms: -1.0 is out of range")
    bob, bproject = api.keystone.users["bob"]
    benv = dict(env, OS_USERNAME=bob, OS_PROJECT_NAME=bproject)
    r = subprocess.run([fv, "service", "rm", "fw-cli"], env=benv, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "no service 'fw-cli'" in r.stderr
    assert api.client("alice").remove_service("fw-cli") == {"removed": "fw-cli"}


def test_osm_ro_sequence_through_the_api(api):
    """RO's calls of an NS instantiation and termination, VIM account = the API + Keystone user."""
    cls = ro_load_plugin("fluidvim")
    made = []

    def connector(user, password=PASSWORD):
        name, project = api.keystone.users[user]
        vim = cls(uuid=str(uuid.uuid4()), name=f"fv-{user}", tenant_id=None,
                  tenant_name=project, url=api.url, url_admin=None, user=name, passwd=password,
                  config={"zone": "local"}, persistent_info={})
        made.append(vim)
        return vim

    vim = connector("alice")
    try:
        vim.check_vim_connectivity()
        tag = uuid.uuid4().hex[:6]
        net_id, _ = vim.new_network(f"ns-{tag}-left", "bridge")
        right, _ = vim.new_network(f"ns-{tag}-right", "bridge")
        assert vim.refresh_nets_status([net_id])[net_id]["status"] == "ACTIVE"
        image_id = vim.get_image_list({"name": "fluidvim-vnf"})[0]["id"]
        flavor = {"name": "vnf.small", "ram": 32, "vcpus": 1, "disk": 0,
                  "extended": {"session-slots": 8}}
        with pytest.raises(vc.VimConnNotFoundException):
            vim.get_flavor_id_from_data(flavor)
        flavor_id = vim.new_flavor(flavor)
        assert vim.get_flavor_id_from_data(flavor) == flavor_id
        net_list = [{"name": "eth0", "net_id": net_id, "type": "virtual", "use": "data"},
                    {"name": "eth1", "net_id": right, "type": "virtual", "use": "data"}]
        vm_id, created = vim.new_vminstance(
            f"ns-{tag}-fw-0", "", True, image_id, flavor_id, [], net_list,
            cloud_config={"user-data": FORWARD})
        st = wait_status(vim, vm_id, "ACTIVE")
        assert st["status"] == "ACTIVE", st
        assert [i["vim_net_id"] for i in st["interfaces"]] == [net_id, right]
        assert net_list[0]["vim_id"] == st["interfaces"][0]["vim_interface_id"]
        # another project's account does not see the VM, and cannot delete it (404)
        other = connector("bob")
        assert other.refresh_vms_status([vm_id])[vm_id]["status"] == "DELETED"
        with pytest.raises(vc.VimConnNotFoundException):
            other.delete_vminstance(vm_id)
        assert wait_status(vim, vm_id, "ACTIVE")["status"] == "ACTIVE"
        with pytest.raises(vc.VimConnNotFoundException):
            other.get_network(net_id)
        # day-2 through the API (vnf-operate / ns-action): the owner pauses and resumes it, a
        # flavor is found by name; the other project cannot act on the VM
        assert vim.get_flavor(flavor_name="vnf.small")["id"] == flavor_id
        vim.action_vminstance(vm_id, {"pause": None})
        assert vim.refresh_vms_status([vm_id])[vm_id]["status"] == "PAUSED"
        with pytest.raises(vc.VimConnNotFoundException):
            other.action_vminstance(vm_id, {"reboot": None})
        vim.action_vminstance(vm_id, {"resume": None})
        assert vim.refresh_vms_status([vm_id])[vm_id]["status"] == "ACTIVE"
        # a wrong password is an authentication error for RO
        with pytest.raises(vc.VimConnAuthException):
            connector("alice", password="wrong").check_vim_connectivity()
        # termination, RO's order
        vim.delete_vminstance(vm_id)
        assert wait_status(vim, vm_id, "DELETED")["status"] == "DELETED"
        vim.delete_flavor(flavor_id)
        assert vim.delete_network(net_id) == net_id
        assert vim.delete_network(right) == right
        assert [n for n in api.orch.local_zone.networks() if tag in n.name] == []
    finally:
        for v in made:
            v.close()


def test_ns_lifecycle_through_the_api_with_keystone(api):
    """`fluidvim ns` through the API: the sample chain (two VNFs under QEMU, three links) deployed
    by a member, invisible to another project, not removable by a reader, removed by its owner."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    nsd = os.path.join(repo, "etc", "mano", "fw_chain_ns", "fw_chain_nsd.yaml")
    fv = os.path.join(os.path.dirname(sys.executable), "fluidvim")

    def cli(user, *argv, rc=0):
        name, project = api.keystone.users[user]
        env = dict(os.environ, FLUIDVIM_API_URL=api.url, OS_USERNAME=name,
                   OS_PASSWORD=PASSWORD, OS_PROJECT_NAME=project)
        env.pop("OS_AUTH_URL", None)
        r = subprocess.run([fv, *argv], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == rc, (argv, r.returncode, r.stdout, r.stderr[-2000:])
        return r

    name = f"fa{uuid.uuid4().hex[:6]}"
    try:
        out = cli("alice", "ns", "deploy", nsd, "--vnfd", os.path.join(repo, "etc", "mano"),
                  "--name", name, "--zone", "local").stdout
        assert f"network service {name} running" in out and f"network left: {name}-left" in out
        shown = json.loads(cli("rita", "ns", "show", name, "--json").stdout)
        assert shown["status"] == "running" and len(shown["instances"]) == 2
        assert [s["step"] for s in shown["steps"]][-1].startswith("deployed in")
        assert "no network service" in cli("bob", "ns", "show", name, rc=2).stderr
        assert json.loads(cli("bob", "ns", "list", "--json").stdout) == []
        assert "forbidden: policy does not allow fluidvim:ns:delete" in \
            cli("rita", "ns", "rm", name, rc=2).stderr
        assert f"deleted network service {name}" in cli("alice", "ns", "rm", name).stdout
    finally:
        for r in api.orch.ns.list():
            if r["name"] == name:
                api.orch.ns.delete(name)
    assert api.orch.manager.list() == []
