# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The OSM RO plugin without a broker: how RO finds and builds it, argument checks that refuse a
request before any RPC, error mapping, and the orchestrator-side VIM logic on a synthetic zone."""

from importlib.metadata import entry_points

import oslo_messaging as messaging
import pytest

from fluidvim.orchestrator import conf as orchconf, exception as oe
from fluidvim.orchestrator.osm import vim as vimmod, vimconn_base as vc
from fluidvim.orchestrator.osm.vimconn_fluidvim import vimconnector
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.zones.synthetic import make_fleet

CLOSED = "rabbit://guest:guest@127.0.0.1:1/"      # nothing listens: any RPC would fail


def make(url=CLOSED, user=None, passwd=None, **config):
    """As RO's NS worker builds a connector (keyword arguments of its _load_vim)."""
    return vimconnector(uuid="0b5c1f0e", name="fv", tenant_id=None, tenant_name="fluidvim",
                        url=url, url_admin=None, user=user, passwd=passwd,
                        config={"zone": "local", **config}, persistent_info={})


def test_ro_finds_the_plugin_by_vim_type():
    (ep,) = entry_points(group="osm_rovim.plugins", name="rovim_fluidvim")
    cls = ep.load()
    assert cls is vimconnector and issubclass(cls, vc.VimConnector)


def test_exception_classes_both_spellings_and_codes():
    assert vc.vimconnException is vc.VimConnException
    assert vc.vimconnNotSupportedException is vc.VimConnNotSupportedException
    for cls, code in ((vc.VimConnConnectionException, 503), (vc.VimConnNotFoundException, 404),
                      (vc.VimConnConflictException, 409), (vc.VimConnNotImplemented, 501)):
        assert issubclass(cls, vc.VimConnException) and cls("x").http_code == code


def test_constructor_checks_url_and_config_without_traffic():
    vim = make(url="rabbit://10.0.0.1:5672/", user="guest", passwd="s e/cret")
    assert vim.transport_url == "rabbit://guest:s%20e%2Fcret@10.0.0.1:5672/"
    assert make(url="rabbit://a:b@h:5672/", user="x", passwd="y").transport_url == \
        "rabbit://a:b@h:5672/"
    assert vim["tenant_name"] == "fluidvim" and vim["url"] == "rabbit://10.0.0.1:5672/"
    # an http(s) URL is fluidvim-api (keystoneauth1; no broker), anything else must be a broker
    api = make(url="http://api.example:9740", user="ro", passwd="pw")
    assert api.api_url == "http://api.example:9740" and api.transport_url is None
    with pytest.raises(vc.VimConnException, match="url"):
        make(url="ftp://api.example/")
    with pytest.raises(vc.VimConnException, match="url"):
        make(url="localhost")
    with pytest.raises(vc.VimConnException, match="config.topic"):
        make(topic="")
    with pytest.raises(vc.VimConnException, match="config.rpc_timeout"):
        make(rpc_timeout="soon")


def test_broker_down_is_a_connection_error():
    vim = make()
    with pytest.raises(vc.VimConnConnectionException, match="broker"):
        vim.check_vim_connectivity()
    st = vim.refresh_vms_status(["a", "b"])
    assert {v["status"] for v in st.values()} == {"VIM_ERROR"}


VDU = dict(name="ns-1-fw-0", description="", start=True, image_id="i", flavor_id="f",
           affinity_group_list=[], net_list=[{"net_id": "fvn0", "type": "virtual"}],
           cloud_config={"user-data": "FromDevice(0) -> ToDevice(0);"})


@pytest.mark.parametrize("change,exc,text", [
    ({"net_list": [{"net_id": "n", "type": "SR-IOV"}]}, vc.VimConnNotSupportedException,
     "SR-IOV"),
    ({"net_list": [{"net_id": "n", "type": "PCI-PASSTHROUGH"}]},
     vc.VimConnNotSupportedException, "virtio"),
    ({"net_list": [{"net_id": "n", "floating_ip": True}]}, vc.VimConnNotSupportedException,
     "floating"),
    ({"net_list": [{"net_id": "n", "mac_address": "fa:16:3e"}]}, vc.VimConnException,
     r"net_list\[0\].mac_address: 'fa:16:3e' is not a unicast MAC"),
    ({"net_list": [{"net_id": "n", "mac_address": "01:00:5e:00:00:01"}]}, vc.VimConnException,
     "mac_address"),
    ({"net_list": [{"type": "virtual"}]}, vc.VimConnException, "net_id"),
    ({"disk_list": [{"size": 1}]}, vc.VimConnNotSupportedException, "volumes"),
    ({"affinity_group_list": [{"affinity_group_id": "g"}]}, vc.VimConnNotSupportedException,
     "affinity"),
    ({"start": False}, vc.VimConnNotSupportedException, "start"),
    ({"security_group_name": "default"}, vc.VimConnNotSupportedException, "security groups"),
    ({"availability_zone_index": 0, "availability_zone_list": ["nova"]},
     vc.VimConnNotSupportedException, "one VIM account per zone"),
    ({"cloud_config": None}, vc.VimConnException, "user-data: missing"),
    ({"cloud_config": {"key-pairs": ["ssh-rsa AAA"]}}, vc.VimConnException, "Click"),
    ({"cloud_config": {"user-data": "#cloud-config\nusers: []"}}, vc.VimConnException,
     "cloud-init for a Linux guest"),
    ({"cloud_config": {"user-data": ["a -> b;", "c -> d;"]}}, vc.VimConnException, "2 parts"),
    ({"cloud_config": {"user-data": "x;", "config-files": [{"dest": "/etc/x", "content": ""}]}},
     vc.VimConnNotSupportedException, "file system"),
])
def test_vdu_requests_refused_before_any_rpc(change, exc, text):
    with pytest.raises(exc, match=text) as ei:
        make().new_vminstance(**{**VDU, **change})
    assert not isinstance(ei.value, vc.VimConnConnectionException)   # never reached the broker


def test_network_flavor_action_refusals():
    vim = make()
    with pytest.raises(vc.VimConnNotSupportedException, match="SR-IOV"):
        vim.new_network("n", "data")
    with pytest.raises(vc.VimConnNotSupportedException, match="segmentation"):
        vim.new_network("n", "bridge", provider_network_profile={"segmentation-id": 100})
    with pytest.raises(vc.VimConnNotSupportedException, match="numas.*session-slots"):
        vim.new_flavor({"name": "f", "ram": 64, "vcpus": 1, "extended": {"numas": [{}]}})
    with pytest.raises(vc.VimConnException, match="flavor_data.ram"):
        vim.new_flavor({"name": "f", "vcpus": 1})
    with pytest.raises(vc.VimConnException, match="location"):
        vim.new_image({"name": "x"})
    with pytest.raises(vc.VimConnNotSupportedException, match="createImage"):
        vim.action_vminstance("vm", {"createImage": {"name": "snap"}})
    with pytest.raises(vc.VimConnException, match="one action"):
        vim.action_vminstance("vm", {"pause": None, "reboot": None})
    with pytest.raises(vc.VimConnException, match="flavor_id or flavor_name"):
        vim.get_flavor()
    with pytest.raises(vc.VimConnNotSupportedException, match="serial log"):
        vim.get_vminstance_console("vm")


def test_session_slots_directive_in_day0_config():
    assert vimconnector._slots_directive("// fluidvim: session-slots = 64\nA -> B;") == 64
    assert vimconnector._slots_directive("A -> B; //fluidvim:session-slots=3") == 3
    assert vimconnector._slots_directive("A -> B;") is None
    with pytest.raises(vc.VimConnException, match="line 2: session-slots 'many'"):
        vimconnector._slots_directive("A -> B;\n// fluidvim: session-slots = many")
    with pytest.raises(vc.VimConnException, match="1..65536"):
        vimconnector._slots_directive("// fluidvim: session-slots = 0")


def test_network_names_ro_chooses_stay_valid_and_distinct():
    assert vimconnector._net_name("ns1-mgmt") == "ns1-mgmt"
    a, b = vimconnector._net_name("my ns/left"), vimconnector._net_name("my ns left")
    assert a.startswith("my-ns-left-") and b.startswith("my-ns-left-") and a != b
    assert len(vimconnector._net_name("x" * 100)) <= 63


def test_orchestrator_errors_become_ro_exceptions():
    vim = make()
    cases = ((oe.NotFound("image_id: no image"), vc.VimConnNotFoundException, 404),
             (oe.InvalidRequest("click_config: line 2", field="click_config"),
              vc.VimConnException, 400),
             (oe.Refused("launch: zone down"), vc.VimConnException, 409),
             (oe.OrchestratorError("no reply from the orchestrator"),
              vc.VimConnConnectionException, 503),
             (messaging.MessagingTimeout("t"), vc.VimConnConnectionException, 503))
    for err, cls, code in cases:
        def boom(err=err):
            raise err
        with pytest.raises(cls) as ei:
            vim._guard(boom)
        assert ei.value.http_code == code


def test_status_and_interfaces_mapping(monkeypatch):
    vim = make()
    reply = {"a": {"status": "running", "error": None, "host": "h1", "interfaces": [
        {"vim_interface_id": "fvtap0", "mac_address": "52:54:00:01:02:03",
         "vim_net_id": "fvnabc"}]},
             "b": {"status": "error", "error": "VNF b is dead: exited", "interfaces": []},
             "c": {"status": "deleted", "error": "no such VM"},
             "p": {"status": "paused", "error": None, "interfaces": []}}
    monkeypatch.setattr(vim, "_vim", lambda method, **kw: reply)
    st = vim.refresh_vms_status(["a", "b", "c", "d", "p"])
    assert [st[k]["status"] for k in "abcdp"] == ["ACTIVE", "ERROR", "DELETED", "DELETED",
                                                  "PAUSED"]
    (i,) = st["a"]["interfaces"]
    assert (i["vim_interface_id"], i["mac_address"], i["vim_net_id"], i["ip_address"],
            i["compute_node"]) == ("fvtap0", "52:54:00:01:02:03", "fvnabc", None, "h1")
    assert st["b"]["error_msg"] == "VNF b is dead: exited"


@pytest.mark.parametrize("action,status,op", [
    ({"pause": None}, "ACTIVE", "pause"), ({"stop": None}, "ACTIVE", "pause"),
    ({"shutoff": None}, "ACTIVE", "pause"), ({"forceOff": None}, "ACTIVE", "pause"),
    ({"start": None}, "PAUSED", "unpause"), ({"resume": None}, "PAUSED", "unpause"),
    ({"start": None}, "ERROR", "rebuild"), ({"start": None}, "ACTIVE", None),
    ({"resume": None}, "ACTIVE", None), ({"start": "rebuild"}, "ACTIVE", "rebuild"),
    ({"rebuild": None}, "ERROR", "rebuild"), ({"reboot": None}, "ACTIVE", "reboot"),
    ({"reboot": {"type": "SOFT"}}, "ACTIVE", "reboot"),
    ({"reboot": {"type": "HARD"}}, "ACTIVE", "rebuild")])
def test_ro_actions_map_to_orchestrator_actions(monkeypatch, action, status, op):
    """RO's action_dict -> the orchestrator's instance action (start/resume depend on the VM's
    status, as RO's OpenStack connector's do on the server's)."""
    vim = make()
    calls = []
    monkeypatch.setattr(vim, "get_vminstance", lambda vm_id: {"id": vm_id, "status": status})
    monkeypatch.setattr(vim, "_vim", lambda method, **kw: calls.append((method, kw)))
    assert vim.action_vminstance("vm-1", action) is None
    assert calls == ([("vm_action", {"vm_id": "vm-1", "action": op})] if op else [])


def test_get_flavor_by_id_or_name(monkeypatch):
    vim = make()
    flavors = [{"id": "f1", "name": "small", "ram": 32, "vcpus": 1, "slots": None},
               {"id": "f2", "name": "big", "ram": 256, "vcpus": 2, "slots": None}]
    asked = []

    def rpc(method, **kw):
        asked.append(method)
        if method == "get_flavor":
            return next(f for f in flavors if f["id"] == kw["flavor_id"])
        return flavors
    monkeypatch.setattr(vim, "_vim", rpc)
    assert vim.get_flavor("f2")["name"] == "big" and asked == ["get_flavor"]
    assert vim.get_flavor(flavor_name="small")["id"] == "f1"
    assert vim.get_flavor(flavor_id=None, flavor_name="big")["id"] == "f2"
    with pytest.raises(vc.VimConnNotFoundException, match="flavor_name: no flavor named 'huge'"):
        vim.get_flavor(flavor_name="huge")


# -- the orchestrator side, on a zone that cannot launch --

@pytest.fixture
def vims(db_url):
    """The VIM service on SQLite, then PostgreSQL (conftest ``db_url``)."""
    conf = orchconf.make_conf(connection=db_url, local_zone=False)
    zones, _, _ = make_fleet(2, 1)
    orch = Orchestrator(conf, zones=zones, stage1=object(), stage2=object(), power=object())
    yield vimmod.VimService(orch)
    orch.close()


def test_vim_service_flavors_and_images(vims):
    zone = sorted(vims.orch.zones)[0]
    with pytest.raises(oe.NotFound, match="no local zone"):
        vims.describe()
    assert vims.describe(zone)["kind"] == "synthetic"
    with pytest.raises(oe.InvalidRequest, match="ram"):
        vims.create_flavor("big", 1 << 20, 1)
    with pytest.raises(oe.InvalidRequest, match="vcpus"):
        vims.create_flavor("wide", 64, 0)
    fl = vims.create_flavor("s", 64, 2, slots=16)
    assert vims.get_flavor(fl["id"]) == fl and vims.list_flavors() == [fl]
    im = vims.register_image(zone, "fw", "glance:vnf-fw")          # other zones: names
    assert vims.register_image(zone, "fw2", "glance:vnf-fw")["id"] == im["id"]
    assert [i["id"] for i in vims.list_images(zone)] == [im["id"]]
    with pytest.raises(oe.Refused, match="synthetic"):
        vims.launch(zone, "vm", im["id"], fl["id"], [], "FromDevice(0) -> ToDevice(0);")
    assert vims.orch.list_instances() == []
    assert vims.vm_status(["nope"])["nope"]["status"] == "deleted"
    assert vims.delete_vm("nope") == {"deleted": "nope", "existed": False}
    with pytest.raises(oe.NotFound, match="vm_id"):
        vims.vm_action("nope", "pause")
    with pytest.raises(oe.InvalidRequest, match="action: 'explode'.*pause, unpause"):
        vims.orch.instance_action("nope", "explode")
    with pytest.raises(oe.NotFound, match="instance"):
        vims.orch.instance_action("nope", "pause")
    vims.delete_image(zone, im["id"])
    vims.delete_flavor(fl["id"])
    with pytest.raises(oe.NotFound, match="flavor"):
        vims.get_flavor(fl["id"])


def test_uses_ros_own_base_class_when_installed(tmp_path):
    """Inside RO, ``osm_ro_plugin.vimconn`` is importable: the plugin must subclass RO's base and
    raise RO's exception classes (here a minimal module with the pre-RO-8 spellings)."""
    import subprocess
    import sys

    pkg = tmp_path / "osm_ro_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "vimconn.py").write_text(
        "class vimconnException(Exception):\n"
        "    def __init__(self, message, http_code=400):\n"
        "        super().__init__(message); self.http_code = http_code\n"
        "class vimconnNotSupportedException(vimconnException): pass\n"
        "class vimconnNotFoundException(vimconnException): pass\n"
        "class vimconnConnectionException(vimconnException): pass\n"
        "class vimconnConflictException(vimconnException): pass\n"
        "class VimConnector:\n"
        "    def __init__(self, uuid, name, tenant_id, tenant_name, url, url_admin=None,\n"
        "                 user=None, passwd=None, log_level=None, config={},\n"
        "                 persistent_info={}):\n"
        "        self.name, self.url, self.config = name, url, config\n")
    code = (
        "import osm_ro_plugin.vimconn as ro\n"
        "from fluidvim.orchestrator.osm import vimconn_base as vc\n"
        "from fluidvim.orchestrator.osm.vimconn_fluidvim import vimconnector\n"
        "assert vc.REAL_OSM and issubclass(vimconnector, ro.VimConnector)\n"
        "assert vc.VimConnNotSupportedException is ro.vimconnNotSupportedException\n"
        "v = vimconnector(uuid='u', name='fv', tenant_id=None, tenant_name='t',\n"
        "                 url='rabbit://127.0.0.1:1/', config={'zone': 'local'})\n"
        "try:\n"
        "    v.new_network('n', 'data')\n"
        "except ro.vimconnNotSupportedException as e:\n"
        "    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "refused: net_type 'data'" in r.stdout
