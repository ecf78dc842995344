# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``openstack fluidvim ...`` (the python-openstackclient plugin) and ``fluidvim --os-cloud`` the
way an operator uses them: the real Keystone and fluidvim-api of test_api_keystone (its
fixtures), fluidvim-api registered in the Keystone catalog (service type ``nfv-placement``), an
application credential made through Keystone's API, a clouds.yaml entry for it (a temporary
``OS_CLIENT_CONFIG_FILE``), and the venv's own ``openstack`` and ``fluidvim`` console scripts,
with ``-f json``, ``-f value`` and ``-c``. One call of each program runs its console script as a
subprocess; the others run the same entry point (``openstackclient.shell.main``,
``fluidvim.cmd.cli.main``) in the test's process, with the same environment and argv
(tests/clirun.py): each ``openstack`` process loads every installed client plugin, ~1.6 CPU-s
a run (docs/ci.md).
"""

import json
import os
import subprocess
import sys
import uuid

import pytest

from fluidvim.orchestrator.apiclient import SERVICE_TYPE, APIClient
from tests.clirun import run_in_process
from tests.e2e import nova_services as ns

from . import test_api_keystone as tak
from .test_api_keystone import FORWARD, PASSWORD

api = tak.api      # its fixture: orchestrator and fluidvim-api (Keystone: conftest.py, shared)

BIN = os.path.dirname(sys.executable)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDENTITY = {"endpoint_filter": {"service_type": "identity", "interface": "public"}}

pytestmark = tak.pytestmark + [
    pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "openstack")),
                       reason="python-openstackclient is not installed (pip install -e .[osc])"),
    pytest.mark.timeout(900)]


def register_in_catalog(stack, url: str) -> str:
    """What docs/api.md tells the operator: the service and its public endpoint; its id."""
    s = stack.session()
    svc = s.post("/services", json={"service": {"name": "fluidvim", "type": SERVICE_TYPE}},
                 **IDENTITY).json()["service"]
    s.post("/endpoints", json={"endpoint": {"service_id": svc["id"], "interface": "public",
                                            "url": url + "/v1", "region_id": ns.REGION}},
           **IDENTITY).raise_for_status()
    return svc["id"]


def app_credential(stack, user: str) -> tuple[str, str]:
    """(id, secret) of an application credential the user makes for itself."""
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3

    name, project = stack.users[user]
    s = ks_session.Session(auth=v3.Password(
        auth_url=stack.url("keystone") + "/v3", username=name, password=PASSWORD,
        project_name=project, user_domain_name="Default", project_domain_name="Default"),
        timeout=60)
    r = s.post(f"/users/{s.get_user_id()}/application_credentials", json={
        "application_credential": {"name": f"fluidvim-{uuid.uuid4().hex[:6]}"}}, **IDENTITY)
    ac = r.json()["application_credential"]
    return ac["id"], ac["secret"]


@pytest.fixture
def cloud(api, tmp_path):
    """fluidvim-api in the catalog; clouds.yaml with alice's application credential
    (``fv-app``), bob's password (``fv-bob``) and a region without the API (``fv-nowhere``)."""
    service_id = register_in_catalog(api.keystone, api.url)
    ac_id, ac_secret = app_credential(api.keystone, "alice")
    auth_url = api.keystone.url("keystone") + "/v3"
    bob, bproject = api.keystone.users["bob"]
    clouds = {"clouds": {
        "fv-app": {"auth_type": "v3applicationcredential", "region_name": ns.REGION,
                   "auth": {"auth_url": auth_url, "application_credential_id": ac_id,
                            "application_credential_secret": ac_secret}},
        "fv-bob": {"region_name": ns.REGION,
                   "auth": {"auth_url": auth_url, "username": bob, "password": PASSWORD,
                            "project_name": bproject, "user_domain_name": "Default",
                            "project_domain_name": "Default"}},
        "fv-nowhere": {"auth_type": "v3applicationcredential", "region_name": "Nowhere",
                       "auth": {"auth_url": auth_url, "application_credential_id": ac_id,
                                "application_credential_secret": ac_secret}}}}
    path = tmp_path / "clouds.yaml"
    path.write_text(json.dumps(clouds))            # YAML is a superset of JSON
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OS_") and k != "FLUIDVIM_API_URL"}
    env.update(OS_CLIENT_CONFIG_FILE=str(path), OS_CLOUD="fv-app")

    def run(prog, *argv, rc=0, cloud_name=None, timeout=120, console_script=False):
        e = dict(env, OS_CLOUD=cloud_name) if cloud_name else env
        if console_script:
            r = subprocess.run([os.path.join(BIN, prog), *argv], env=e, capture_output=True,
                               text=True, timeout=timeout)
        else:
            r = run_in_process(prog, argv, e)
        assert r.returncode == rc, (argv, r.returncode, r.stdout, r.stderr[-2000:])
        return r
    yield run
    # Keystone outlives this API (session scope): its endpoint goes with it
    api.keystone.session().delete(f"/services/{service_id}", **IDENTITY)


def test_openstack_plugin_with_an_application_credential(api, cloud):
    alice = api.client("alice")
    alice.register_service("fw-osc", FORWARD, slots=4, deadline_ms=5)
    osc = lambda *a, **kw: cloud("openstack", "fluidvim", *a, **kw)  # noqa: E731

    rows = json.loads(osc("service", "list", "-f", "json", console_script=True).stdout)
    assert [(r["name"], r["slots"], r["deadline_ms"]) for r in rows] == [("fw-osc", 4, 5.0)]
    assert "click_config" not in rows[0]
    long_rows = json.loads(osc("service", "list", "--long", "-f", "json").stdout)
    assert long_rows[0]["click_config"] == FORWARD
    assert osc("service", "list", "-c", "name", "-f", "value").stdout == "fw-osc\n"
    shown = json.loads(osc("service", "show", "fw-osc", "-f", "json").stdout)
    assert shown == alice.show_service("fw-osc")
    table = osc("service", "list", "-c", "name", "-c", "slots").stdout
    assert "| name   | slots |" in table and "| fw-osc |     4 |" in table
    # the API's errors are one line, exit status 1
    r = osc("service", "show", "nope", rc=1)
    assert "no service 'nope'" in r.stderr
    r = osc("zone", "list", rc=1)                  # zones are admin-only
    assert "forbidden: policy does not allow fluidvim:zone:list" in r.stderr
    # another project (password auth, same catalog) sees nothing of alice's
    assert cloud("openstack", "fluidvim", "service", "list", "-f", "json",
                 cloud_name="fv-bob").stdout.strip() == "[]"
    # a region without the endpoint: the error names the service type and the fix
    r = cloud("openstack", "fluidvim", "service", "list", rc=1, cloud_name="fv-nowhere")
    assert f"no {SERVICE_TYPE} endpoint" in r.stderr and "openstack endpoint create" in r.stderr

    # a network service: create, list, show, its instances and placements, delete
    nsd = os.path.join(REPO, "etc", "mano", "fw_chain_ns", "fw_chain_nsd.yaml")
    name = f"fo{uuid.uuid4().hex[:6]}"
    try:
        r = osc("ns", "create", nsd, "--vnfd", os.path.join(REPO, "etc", "mano"),
                "--name", name, "--zone", "local", "-f", "json", timeout=600)
        made = json.loads(r.stdout)
        assert made["name"] == name and made["status"] == "running"
        # 202 + the occurrence, polled: a progress line per state on stderr
        assert "instantiate completed [" in r.stderr, r.stderr
        assert osc("ns", "list", "-c", "name", "-c", "status", "-f", "value").stdout == \
            f"{name} running\n"
        shown = json.loads(osc("ns", "show", name, "-f", "json").stdout)
        assert len(shown["instances"]) == 2 and shown["status"] == "running"
        insts = json.loads(osc("instance", "list", "-f", "json").stdout)
        assert sorted(i["id"] for i in insts) == sorted(i["id"] for i in shown["instances"])
        one = json.loads(osc("instance", "show", insts[0]["name"], "-f", "json").stdout)
        assert one["id"] == insts[0]["id"] and one["status"] == "running"
        ops = json.loads(osc("ns", "operation", "list", name, "-f", "json").stdout)
        assert [(o["operation"], o["operationState"]) for o in ops] == [
            ("INSTANTIATE", "COMPLETED")]
        assert ops[0]["id"] == shown["operations"][0]["id"]
        decision = shown["instances"][0]["decision_id"]
        why = json.loads(osc("placement", "explain", decision, "-f", "json").stdout)
        assert why["id"] == decision and [s["name"] for s in why["steps"]][-1] == "decide"
        slots = json.loads(osc("slots", "list", "-f", "json").stdout)
        assert {r["location"] for r in slots} <= {"local"} and slots
        r = osc("ns", "delete", name, timeout=600)
        assert r.stdout == "" and "terminate completed [" in r.stderr, r.stderr
        assert alice.ns_api().list() == []
    finally:
        for r in api.orch.ns.list():
            if r["name"] == name:
                api.orch.ns.delete(name)
    alice.remove_service("fw-osc")
    assert api.orch.manager.list() == []


def test_fluidvim_cli_with_clouds_yaml_and_the_catalog(api, cloud):
    """``fluidvim --os-cloud`` (here OS_CLOUD): clouds.yaml, an application credential, the
    catalog; the same formatters as openstack's, --json still works."""
    assert APIClient(api.url).ping()["versions"] == ["v1"]      # no token, not admin-only
    r = cloud("fluidvim", "service", "register", "fw-cli", "--config", FORWARD, "--slots", "2",
              console_script=True)
    assert "service fw-cli registered" in r.stdout
    assert [s["name"] for s in json.loads(cloud("fluidvim", "service", "list", "--json").stdout)
            ] == ["fw-cli"]
    rows = json.loads(cloud("fluidvim", "service", "list", "-f", "json").stdout)
    assert rows == api.client("alice").list_services()
    assert cloud("fluidvim", "service", "list", "-c", "name", "-c", "slots", "-f",
                 "value").stdout == "fw-cli 2\n"
    r = cloud("fluidvim", "service", "list", "-c", "nope", rc=1)
    assert "-c nope: no such column" in r.stderr and "max_queuing_delay_s" in r.stderr
    assert "| fw-cli " in cloud("fluidvim", "service", "list", "-c", "name").stdout
    # --os-cloud on the command line wins over OS_CLOUD
    assert cloud("fluidvim", "service", "list", "--os-cloud", "fv-bob", "-f",
                 "json").stdout.strip() == "[]"
    r = cloud("fluidvim", "service", "rm", "fw-cli", "-f", "value")
    assert r.stdout == "fw-cli\n"
    assert api.client("alice").list_services() == []
