# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim-api in-process: routing and the OpenAPI description, error mapping (400 naming the
field, 404, 405, 409, 503), the policy defaults with project scoping (reader / member / admin,
another project's resources are 404) and the noauth pipeline. The orchestrator is real (in-process
over oslo.messaging's in-memory driver, an in-memory zone); the identity headers are what
keystonemiddleware sets for a valid token (tests/integration/test_api_keystone.py has the real
Keystone)."""

import json
import logging
import os
import subprocess
import sys
import time

import pytest

from fluidvim.orchestrator.api import openapi, policies
from fluidvim.orchestrator.operations import HTTP

from .api_env import FORWARD, api_env, headers
from .test_mano_descriptors import pkg  # noqa: F401 - the descriptor package fixture
from .test_mano_service import bundle

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
A_READER = headers("proj-a", "reader")
A_MEMBER = headers("proj-a", "member", "reader")
B_MEMBER = headers("proj-b", "member", "reader")
ADMIN = headers("proj-admin", "admin", "member", "reader")


@pytest.fixture
def env(tmp_path):
    with api_env(f"sqlite:///{tmp_path}/orch.sqlite") as e:
        yield e


# -- the description --
def test_checked_in_openapi_is_current():
    with open(os.path.join(ROOT, "orchestrator", "api", "openapi.json")) as f:
        assert f.read() == openapi.dumps(), \
            "regenerate: python -m fluidvim.orchestrator.api.openapi > orchestrator/api/openapi.json"


def test_every_operation_has_a_handler_and_a_policy():
    from fluidvim.orchestrator.api.app import API

    rules = {r.name for r in policies.list_rules()}
    ops = [o.op_id for o in HTTP]
    assert len(ops) == len(set(ops))
    for o in HTTP:
        assert hasattr(API, f"op_{o.op_id}"), o.op_id
        assert f"fluidvim:{o.policy}" in rules, o.op_id
    documented = {(o["method"], o["path"]) for r in policies.api_rules for o in r.operations}
    assert {(o.method.upper(), o.path) for o in HTTP} <= documented


def test_policy_sample_is_current(tmp_path):
    gen = os.path.join(os.path.dirname(sys.executable), "oslopolicy-sample-generator")
    out = tmp_path / "policy.yaml"
    subprocess.run([gen, "--namespace", "fluidvim", "--output-file", str(out)], check=True,
                   capture_output=True)
    with open(os.path.join(ROOT, "etc", "fluidvim-api", "policy.yaml.sample")) as f:
        assert f.read() == out.read_text(), ("regenerate: oslopolicy-sample-generator "
                                             "--config-file etc/oslo-policy-generator/fluidvim-api.conf")


def test_public_root_and_openapi_without_auth(env):
    env.conf.set_override("www_authenticate_uri", "http://127.0.0.1:1/identity",
                          group="keystone_authtoken")
    app = env.app("keystone")           # auth_token is never reached for these
    st, body = env.call("GET", "/", app=app)
    assert st == 200 and body["versions"][0]["id"] == "v1"
    st, body = env.call("GET", "/openapi.json", app=app)
    assert st == 200 and body == json.loads(openapi.dumps())


# -- routing and errors --
def test_unknown_path_and_wrong_method(env):
    st, body = env.call("GET", "/nothing", hdrs=ADMIN)
    assert st == 404 and "see /openapi.json" in body["errors"][0]["detail"]
    st, body = env.call("PUT", "/services/fw", hdrs=ADMIN)
    assert st == 405 and body["errors"][0]["detail"] == ("method PUT is not allowed on "
                                                         "/v1/services/fw; allowed: DELETE, GET")


def test_bad_bodies_are_400_naming_the_field(env):
    st, body = env.call("POST", "/services", raw=b"{not json", hdrs=ADMIN)
    assert st == 400 and body["errors"][0]["field"] == "body"
    st, body = env.call("POST", "/services", {"name": "fw"}, hdrs=ADMIN)
    assert st == 400 and body["errors"][0]["field"] == "click_config"
    st, body = env.call("POST", "/services", {"name": "fw", "click_config": FORWARD,
                                              "slotz": 3}, hdrs=ADMIN)
    assert st == 400 and body["errors"][0]["field"] == "slotz"
    st, body = env.call("POST", "/services", {"name": "fw", "click_config": FORWARD,
                                              "slots": "many"}, hdrs=ADMIN)
    assert st == 400 and body["errors"][0]["field"] == "slots"
    # the orchestrator's own validation, mapped to 400 with its field
    st, body = env.call("POST", "/services", {"name": "fw", "click_config": FORWARD,
                                              "deadline_ms": -1}, hdrs=ADMIN)
    assert st == 400 and body["errors"][0]["field"] == "deadline_ms"
    assert body["errors"][0]["detail"].startswith("deadline_ms: -1 is out of range")
    st, body = env.call("POST", "/services", {"name": "bad name!", "click_config": FORWARD},
                        hdrs=ADMIN)
    assert st == 400 and body["errors"][0]["field"] == "name"
    st, body = env.call("GET", "/placements?limit=x", hdrs=ADMIN)
    err = body["errors"][0]
    assert st == 400 and err.pop("request_id").startswith("req-") and err == {
        "code": "fluidvim.bad-request", "status": 400, "title": "Bad Request",
        "detail": "limit: 'x' is not an integer", "field": "limit"}
    st, body = env.call("GET", "/slots?level=rack", hdrs=ADMIN)
    assert st == 400 and body["errors"][0]["field"] == "level"


def test_not_found_and_refused(env):
    st, body = env.call("GET", "/placements/abcdef12", hdrs=ADMIN)
    assert st == 404
    st, body = env.call("POST", "/networks", {"zone": "nowhere", "name": "lan"}, hdrs=ADMIN)
    assert st == 404 and body["errors"][0]["field"] == "zone"
    assert env.call("POST", "/services", {"name": "strict", "click_config": FORWARD,
                                          "max_queuing_delay_s": 0.0}, hdrs=ADMIN)[0] == 201
    st, body = env.call("POST", "/resolve", {"service": "strict"}, hdrs=ADMIN)
    assert st == 409 and "strict" in body["errors"][0]["detail"]


def test_orchestrator_that_does_not_answer_is_503(env):
    from fluidvim.orchestrator.api.app import API
    from fluidvim.orchestrator.api.auth import ContextMiddleware
    from fluidvim.orchestrator.mano.rpcapi import NSAPI
    from fluidvim.orchestrator.osm.vim import VimAPI
    from fluidvim.orchestrator.owners import OwnersAPI
    from fluidvim.orchestrator.rpcapi import OrchestratorAPI

    t = env.orch._transports[0]
    o = OrchestratorAPI(env.orch.conf, transport=t, topic="fva-nobody", timeout=1.0)
    env.v1 = ContextMiddleware(API(env.conf, (o, NSAPI(api=o), VimAPI(env.orch.conf,
                                                                      transport=t), OwnersAPI(o))))
    st, body = env.call("GET", "/zones", hdrs=ADMIN)
    assert st == 503 and "no reply from the orchestrator" in body["errors"][0]["detail"]


# -- policy and projects --
def test_no_identity_is_401(env):
    # auth_token with delay_auth_decision marks a bad token Invalid; the context refuses it
    st, body = env.call("GET", "/services", hdrs={"X-Identity-Status": "Invalid"})
    assert st == 401 and "X-Auth-Token" in body["errors"][0]["detail"]
    assert env.call("GET", "/services", hdrs={})[0] == 401
    # a token without a role in any project
    st, body = env.call("GET", "/services", hdrs=headers("proj-a"))
    assert st == 403 and body["errors"][0]["detail"] == "policy does not allow fluidvim:service:list"


def test_projects_roles_and_admin(env):
    svc = {"name": "fw-a", "click_config": FORWARD, "slots": 4}
    # a reader cannot change anything, a member of the project can
    st, body = env.call("POST", "/services", svc, hdrs=A_READER)
    assert st == 403 and "fluidvim:service:create" in body["errors"][0]["detail"]
    assert env.call("POST", "/services", svc, hdrs=A_MEMBER)[0] == 201
    assert [s["name"] for s in env.call("GET", "/services", hdrs=A_READER)[1]] == ["fw-a"]
    assert env.call("GET", "/services/fw-a", hdrs=A_READER)[0] == 200
    # another project sees nothing of it: lists are empty, direct access is 404
    assert env.call("GET", "/services", hdrs=B_MEMBER) == (200, [])
    for method, path, body in [("GET", "/services/fw-a", None), ("DELETE", "/services/fw-a", None),
                               ("POST", "/placements", {"service": "fw-a"}),
                               ("POST", "/resolve", {"service": "fw-a"}),
                               ("GET", "/slots?service=fw-a", None)]:
        st, res = env.call(method, path, body, hdrs=B_MEMBER)
        assert st == 404, (method, path, res)
    # nor can it take the name
    st, body = env.call("POST", "/services", {**svc, "slots": 1}, hdrs=B_MEMBER)
    assert st == 409 and body["errors"][0]["field"] == "name"
    # placement and its instance belong to the service's project
    st, placed = env.call("POST", "/placements", {"service": "fw-a", "deploy": True},
                          hdrs=A_MEMBER)
    assert st == 201 and placed["status"] == "deployed"
    assert env.call("POST", "/placements", {"service": "fw-a"}, hdrs=A_READER)[0] == 403
    dec = placed["decision_id"]
    assert env.call("GET", f"/placements/{dec[:8]}", hdrs=A_READER)[0] == 200
    assert env.call("GET", f"/placements/{dec[:8]}", hdrs=B_MEMBER)[0] == 404
    assert [d["id"] for d in env.call("GET", "/placements", hdrs=A_READER)[1]] == [dec]
    assert env.call("GET", "/placements", hdrs=B_MEMBER) == (200, [])
    inst = placed["instance"]["id"]
    assert [i["id"] for i in env.call("GET", "/instances", hdrs=A_READER)[1]] == [inst]
    # its free slots, with watts per slot on request (none reported by a VNF here: null)
    st, free = env.call("GET", "/slots?service=fw-a&level=instance", hdrs=A_READER)
    assert st == 200 and set(free["fw-a"]) == {inst}, free
    st, body = env.call("GET", "/slots?service=fw-a&level=instance&watts=true", hdrs=A_READER)
    assert st == 200 and body == {"fw-a": {inst: {"free": free["fw-a"][inst],
                                                  "watts_per_slot": None}}}, body
    assert env.call("GET", "/instances", hdrs=B_MEMBER) == (200, [])
    assert env.call("DELETE", f"/instances/{inst}", hdrs=B_MEMBER)[0] == 404
    assert env.call("DELETE", f"/instances/{inst}", hdrs=A_READER)[0] == 403
    # zones (every host's slots and queuing delay) are infrastructure: admin only
    assert env.call("GET", "/zones", hdrs=B_MEMBER)[0] == 403
    # networks
    st, net = env.call("POST", "/networks", {"zone": "mem", "name": "lan-a"}, hdrs=A_MEMBER)
    assert st == 201
    assert env.call("GET", "/networks", hdrs=B_MEMBER) == (200, [])
    assert env.call("POST", "/networks", {"zone": "mem", "name": "lan-a"},
                    hdrs=B_MEMBER)[0] == 409
    assert env.call("DELETE", f"/networks/mem/{net['id']}", hdrs=B_MEMBER)[0] == 404
    # the admin sees and may do everything, in every project
    assert [s["name"] for s in env.call("GET", "/services", hdrs=ADMIN)[1]] == ["fw-a"]
    assert env.call("DELETE", f"/instances/{inst}", hdrs=ADMIN) == (204, "")
    assert env.call("DELETE", f"/networks/mem/{net['id']}", hdrs=A_MEMBER) == (204, "")
    assert env.call("DELETE", "/services/fw-a", hdrs=A_MEMBER) == (204, "")
    assert env.call("GET", "/services", hdrs=ADMIN) == (200, [])


def test_resources_made_over_rpc_are_admin_only(env):
    env.orch.register_service("legacy", FORWARD)          # the demo's way: no project
    assert env.call("GET", "/services", hdrs=A_MEMBER) == (200, [])
    assert env.call("GET", "/services/legacy", hdrs=A_MEMBER)[0] == 404
    assert env.call("POST", "/services", {"name": "legacy", "click_config": FORWARD},
                    hdrs=A_MEMBER)[0] == 409
    assert env.call("GET", "/services/legacy", hdrs=ADMIN)[0] == 200


def _done(env, st, op, hdrs=None):
    """A 202's operation occurrence, polled until it is no longer PROCESSING."""
    assert st == 202 and op["operationState"] in ("PROCESSING", "COMPLETED"), (st, op)
    for _ in range(600):
        if op["operationState"] != "PROCESSING":
            return op
        time.sleep(0.1)
        st, op = env.call("GET", f"/ns_lcm_op_occs/{op['id']}", hdrs=hdrs or A_READER)
        assert st == 200, op
    raise AssertionError(f"operation still processing: {op}")


def test_network_service_lifecycle(env, pkg):  # noqa: F811
    nsd, vnfds = bundle(pkg, *pkg.docs())
    st, plan = env.call("POST", "/ns/validate", {"nsd": nsd, "vnfds": vnfds, "name": "c1"},
                        hdrs=A_READER)
    assert st == 403
    st, plan = env.call("POST", "/ns/validate", {"nsd": nsd, "vnfds": vnfds, "name": "c1"},
                        hdrs=A_MEMBER)
    assert st == 200 and plan["name"] == "c1" and len(plan["units"]) == 2
    st, op = env.call("POST", "/ns", {"nsd": nsd, "vnfds": vnfds, "name": "c1"}, hdrs=A_MEMBER)
    op = _done(env, st, op)
    assert op["operation"] == "INSTANTIATE" and op["operationState"] == "COMPLETED", op
    assert op["nsName"] == "c1" and op["startTime"] <= op["stateEnteredTime"], op
    assert env.call("GET", f"/ns_lcm_op_occs/{op['id']}", hdrs=B_MEMBER)[0] == 404
    assert env.call("GET", "/ns_lcm_op_occs/no-such", hdrs=A_READER)[0] == 404
    st, ns = env.call("GET", "/ns/c1", hdrs=A_READER)
    assert st == 200 and ns["status"] == "running" and ns["id"] == op["nsInstanceId"], ns
    assert ns["steps"][0]["step"].startswith("validated 2 VNF(s), 3 virtual link(s)")
    assert [x["name"] for x in env.call("GET", "/ns", hdrs=A_READER)[1]] == ["c1"]
    assert env.call("GET", "/ns", hdrs=B_MEMBER) == (200, [])
    assert env.call("GET", "/ns/c1", hdrs=B_MEMBER)[0] == 404
    assert env.call("DELETE", "/ns/c1", hdrs=B_MEMBER)[0] == 404
    assert env.call("DELETE", "/ns/c1", hdrs=A_READER)[0] == 403
    # its services and networks are the project's too
    assert sorted(s["name"] for s in env.call("GET", "/services", hdrs=A_READER)[1]) == \
        ["c1-fw", "c1-fwd"]
    assert len(env.call("GET", "/networks", hdrs=A_READER)[1]) == 3
    st, shown = env.call("GET", f"/ns/{ns['id'][:8]}", hdrs=A_READER)
    assert st == 200 and shown["name"] == "c1" and len(shown["instances"]) == 2
    # the same name again: the orchestrator's validation, 400 naming the field
    st, body = env.call("POST", "/ns", {"nsd": nsd, "vnfds": vnfds, "name": "c1"},
                        hdrs=A_MEMBER)
    assert st == 400 and body["errors"][0]["field"] == "name"
    st, body = env.call("POST", "/ns", {"nsd": nsd, "vnfds": "x"}, hdrs=A_MEMBER)
    assert st == 400 and body["errors"][0]["field"] == "vnfds"
    st, op = env.call("DELETE", "/ns/c1", hdrs=A_MEMBER)
    assert _done(env, st, op)["operationState"] == "COMPLETED", op
    assert env.call("GET", "/ns?deleted=true", hdrs=A_READER)[1][0]["status"] == "deleted"
    st, ops = env.call("GET", "/ns_lcm_op_occs?ns=" + ns["id"], hdrs=A_READER)
    assert [(o["operation"], o["operationState"]) for o in ops] == [
        ("INSTANTIATE", "COMPLETED"), ("TERMINATE", "COMPLETED")], ops
    assert env.call("GET", "/ns_lcm_op_occs", hdrs=B_MEMBER) == (200, [])
    assert env.call("DELETE", "/ns/c1", hdrs=A_MEMBER)[0] == 404


def test_scale_and_heal_a_network_service(env, pkg):  # noqa: F811
    from .test_mano_scaling import scaled

    nsd, fw, fwd = scaled(pkg)
    fw["vnfd"]["df"][0]["scaling-aspect"][0]["scaling-policy"] = [
        {"name": "p", "scaling-type": "manual"}]
    nsd, vnfds = bundle(pkg, nsd, fw, fwd)
    st, op = env.call("POST", "/ns", {"nsd": nsd, "vnfds": vnfds, "name": "s1"}, hdrs=A_MEMBER)
    assert _done(env, st, op)["operationState"] == "COMPLETED"
    out = {"aspect": "fw/fw-pool", "direction": "out"}
    assert env.call("POST", "/ns/s1/scale", out, hdrs=A_READER)[0] == 403
    assert env.call("POST", "/ns/s1/scale", out, hdrs=B_MEMBER)[0] == 404
    st, body = env.call("POST", "/ns/s1/scale", {"aspect": "fw/fw-pool", "direction": "up"},
                        hdrs=A_MEMBER)
    assert st == 400 and body["errors"][0]["field"] == "direction"
    st, r = env.call("POST", "/ns/s1/scale", out, hdrs=A_MEMBER)
    r = _done(env, st, r)["detail"]
    assert r["to_level"] == 1 and len(r["added"]) == 1, r
    st, shown = env.call("GET", "/ns/s1", hdrs=A_READER)
    assert [o["type"] for o in shown["operations"]] == ["instantiate", "scale"]
    fws = [i for i in shown["instances"] if i["service"] == "s1-fw"]
    assert len(fws) == 2
    st, healed = env.call("POST", "/ns/s1/heal", {"instance": fws[0]["name"]}, hdrs=A_MEMBER)
    healed = _done(env, st, healed)
    assert healed["operation"] == "HEAL" and healed["operationState"] == "COMPLETED", healed
    assert healed["detail"]["instance"] == fws[0]["name"] and healed["detail"]["replaced_by"]
    st, body = env.call("POST", "/ns/s1/heal", {"instance": "no-such"}, hdrs=A_MEMBER)
    assert st in (400, 404) and body["errors"][0]["field"] == "instance", body
    st, r = env.call("POST", "/ns/s1/scale", {"aspect": "fw/fw-pool", "direction": "in"},
                     hdrs=A_MEMBER)
    assert _done(env, st, r)["detail"]["to_level"] == 0, r
    st, op = env.call("DELETE", "/ns/s1", hdrs=A_MEMBER)
    assert _done(env, st, op)["operationState"] == "COMPLETED"


def test_default_config_is_keystone_and_a_request_without_token_is_401(env):
    from fluidvim.orchestrator.api import app as apiapp, auth, conf as apiconf

    conf = apiconf.make_conf(default_config_files=[])
    assert conf.api.auth_strategy == "keystone"
    # keystone without a Keystone named: refused at load, saying what to set (not a 500 later)
    with pytest.raises(auth.KeystoneNotConfigured) as e:
        apiapp.load_app(conf, clients=env.clients)
    assert "[keystone_authtoken] names no Keystone: set www_authenticate_uri" in str(e.value)
    assert "auth_strategy = noauth for a one-machine demo" in str(e.value)
    conf.set_override("www_authenticate_uri", "http://127.0.0.1:1/identity",
                      group="keystone_authtoken")
    app = apiapp.load_app(conf, clients=env.clients)
    # no token, but the headers noauth would set: auth_token drops them, nothing is created
    spoof = {"X-Identity-Status": "Confirmed", "X-Roles": "admin,member,reader",
             "X-Project-Id": "demo", "X-User-Id": "noauth"}
    for method, path, body in [("GET", "/v1/zones", None), ("GET", "/v1/services", None),
                               ("POST", "/v1/services", {"name": "fw",
                                                         "click_config": FORWARD})]:
        st, res = env.call(method, path, body, hdrs=spoof, app=app)
        assert st == 401, (method, path, res)
        assert set(res) == {"errors"} and res["errors"][0]["status"] == 401
        assert res["errors"][0]["title"] == "Unauthorized" and res["errors"][0]["detail"]
    assert env.orch.list_services() == []


def test_zones_and_hosts_are_admin_only(env):
    for hdrs in (A_READER, A_MEMBER, B_MEMBER):
        st, body = env.call("GET", "/zones", hdrs=hdrs)
        err = body["errors"][0]
        assert st == 403 and err.pop("request_id") and err == {
            "code": "fluidvim.forbidden", "status": 403, "title": "Forbidden",
            "detail": "policy does not allow fluidvim:zone:list"}, body
    st, zones = env.call("GET", "/zones", hdrs=ADMIN)
    assert st == 200 and [z["name"] for z in zones] == ["mem"]
    assert [h["name"] for h in zones[0]["hosts"]] == [h.name for h in env.zone.hosts()]
    assert all("slots_free" in h for h in zones[0]["hosts"])


def test_healthcheck_without_token(env):
    env.conf.set_override("www_authenticate_uri", "http://127.0.0.1:1/identity",
                          group="keystone_authtoken")
    app = env.app("keystone")
    import webob
    res = webob.Request.blank("/healthcheck").get_response(app)
    assert res.status_int == 200 and res.text == "OK"
    res = webob.Request.blank("/healthcheck", headers={"Accept": "application/json"}) \
        .get_response(app)
    assert res.status_int == 200 and res.json_body["reasons"] == ["OK"]
    # and /v1 behind it still wants one
    assert webob.Request.blank("/v1/zones").get_response(app).status_int == 401


def test_noauth_pipeline_is_admin_and_logs_a_warning(env, caplog):
    with caplog.at_level(logging.WARNING, logger="fluidvim.orchestrator.api.app"):
        app = env.app("noauth")
    assert any("NO AUTHENTICATION" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    st, body = env.call("POST", "/v1/services", {"name": "fw", "click_config": FORWARD},
                        app=app)
    assert st == 201
    # noauth acts in [api] noauth_project; X-Project-Id picks another, still as an admin
    st, body = env.call("GET", "/v1/services", app=app, hdrs={"X-Project-Id": "elsewhere"})
    assert st == 200 and [s["name"] for s in body] == ["fw"]
    owner = env.clients[3].get("service", ["fw"])
    assert owner == {"fw": "demo"}


def test_keystone_pipeline_without_token_is_401(env):
    env.conf.set_override("www_authenticate_uri", "http://127.0.0.1:1/identity",
                          group="keystone_authtoken")
    app = env.app("keystone")
    import webob
    res = webob.Request.blank("/v1/services").get_response(app)
    assert res.status_int == 401
    assert res.headers["WWW-Authenticate"] == 'Keystone uri="http://127.0.0.1:1/identity"'


def test_cli_through_the_noauth_api(env, pkg, capsys, monkeypatch):  # noqa: F811
    """`fluidvim --api-url` against fluidvim-api served over HTTP (the console script's server)."""
    import threading

    from fluidvim.cmd import cli
    from fluidvim.orchestrator.api import server

    env.conf.set_override("bind_port", 0, group="api")
    srv = server.make_server(env.conf, env.app("noauth"))
    url = "http://127.0.0.1:%d" % srv.server_address[1]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    for k in ("OS_USERNAME", "OS_TOKEN", "OS_AUTH_URL", "FLUIDVIM_API_URL"):
        monkeypatch.delenv(k, raising=False)
    try:
        assert cli.main(["service", "register", "fw", "--config", FORWARD, "--slots", "4",
                         "--api-url", url]) == 0
        capsys.readouterr()
        monkeypatch.setenv("FLUIDVIM_API_URL", url)
        assert cli.main(["service", "list", "--json"]) == 0
        assert [s["name"] for s in json.loads(capsys.readouterr().out)] == ["fw"]
        assert cli.main(["place", "fw", "--deploy", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["status"] == "deployed"
        # the orchestrator's validation error, one clean line, exit 2
        assert cli.main(["slots", "nope"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("fluidvim: error: service: no service named 'nope'; register it"), err
        assert cli.main(["network", "create", "--zone", "nowhere", "lan"]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("fluidvim: error: zone: no zone 'nowhere'"), err
        # a network service: 202, polled by the client, a progress line per state
        import yaml
        nsd, fw, fwd = pkg.docs()
        files = []
        for fname, doc in (("nsd.yaml", nsd), ("vnfd0.yaml", fw), ("vnfd1.yaml", fwd)):
            (pkg.dir / fname).write_text(yaml.safe_dump(doc))
            files.append(str(pkg.dir / fname))
        assert cli.main(["ns", "deploy", files[0], "--vnfd", files[1], "--vnfd", files[2],
                         "--name", "cli1"]) == 0
        out = capsys.readouterr().out
        assert "  instantiate completed [" in out, out
        assert "network service cli1 running" in out, out
        ops = env.clients[1].operations("cli1")
        assert [(o["operation"], o["operationState"]) for o in ops] == [
            ("INSTANTIATE", "COMPLETED")], ops
        assert cli.main(["ns", "rm", "cli1"]) == 0
        assert "deleted network service cli1" in capsys.readouterr().out
    finally:
        srv.shutdown()
        srv.server_close()
    # no API there: one clear line
    assert cli.main(["zone", "list", "--api-url", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"fluidvim: error: cannot reach fluidvim-api at {url}"), err


def test_conventions_clients_rely_on(env):
    """Through the whole pipeline (noauth): versions at / and /v1 without a token, 201 with the
    Location of what was made, 204 on delete, 400 for a query parameter the operation does not
    have, and the API-SIG error body with oslo.middleware's request id."""
    import webob

    app = env.app("noauth")

    def req(method, path, body=None):
        r = webob.Request.blank(path, method=method)
        if body is not None:
            r.body, r.content_type = json.dumps(body).encode(), "application/json"
        return r.get_response(app)

    root = req("GET", "/")
    assert root.status_int == 200 and [v["id"] for v in root.json_body["versions"]] == ["v1"]
    for path in ("/v1", "/v1/"):
        res = req("GET", path)
        assert res.status_int == 200, res.text
        assert res.json_body["version"]["id"] == "v1"
        assert res.json_body["version"]["links"][0]["href"] == "http://localhost/v1"
    res = req("POST", "/v1")
    assert res.status_int == 405 and res.headers["Allow"] == "GET, HEAD"
    # 405 names the methods the path has, in the Allow header too
    res = req("PATCH", "/v1/ns/c9")
    assert res.status_int == 405 and res.headers["Allow"] == "DELETE, GET"
    res = req("PUT", "/v1/networks")
    assert res.status_int == 405 and res.headers["Allow"] == "GET, POST"
    made = req("POST", "/v1/services", {"name": "svc-l", "click_config": FORWARD})
    assert made.status_int == 201 and made.location == "http://localhost/v1/services/svc-l"
    made = req("POST", "/v1/networks", {"zone": "mem", "name": "lan-l"})
    assert made.status_int == 201
    assert made.location == f"http://localhost/v1/networks/mem/{made.json_body['id']}"
    res = req("GET", "/v1/networks?zone=mem&colour=red")
    err = res.json_body["errors"][0]
    assert res.status_int == 400 and err["field"] == "colour"
    assert err["detail"] == ("colour: not a query parameter of GET /networks; its parameters: "
                             "limit, marker, zone")
    assert err["request_id"] == res.headers["x-openstack-request-id"]
    assert err["request_id"].startswith("req-") and err["code"] == "fluidvim.bad-request"
    gone = req("DELETE", made.location[len("http://localhost"):])
    assert gone.status_int == 204 and gone.body == b""
    res = req("GET", "/v1/nothing-here")
    assert res.status_int == 404
    assert res.json_body["errors"][0]["request_id"] == res.headers["x-openstack-request-id"]
    res = req("GET", "/nothing-here")                   # the public app: a request id too
    assert res.status_int == 404
    assert res.json_body["errors"][0]["request_id"] == res.headers["x-openstack-request-id"]


def test_lists_page_with_limit_and_marker(env):
    import urllib.parse

    names = ["pg-a", "pg-b", "pg-c"]
    for n in names:
        assert env.call("POST", "/services", {"name": n, "click_config": FORWARD},
                        hdrs=A_MEMBER)[0] == 201
    st, whole = env.call("GET", "/services", hdrs=A_READER)       # no limit: the array
    assert st == 200 and [s["name"] for s in whole] == names
    seen, path, pages = [], "/services?limit=2", 0
    while path:
        st, page = env.call("GET", path, hdrs=A_READER)
        assert st == 200 and set(page) == {"services", "links"}, page
        assert len(page["services"]) <= 2
        seen += [s["name"] for s in page["services"]]
        pages += 1
        nxt = [x["href"] for x in page["links"] if x["rel"] == "next"]
        u = urllib.parse.urlsplit(nxt[0]) if nxt else None
        path = u.path[len("/v1"):] + "?" + u.query if u else None
    assert seen == names and pages == 2
    st, page = env.call("GET", "/services?marker=pg-a", hdrs=A_READER)
    assert st == 200 and [s["name"] for s in page["services"]] == ["pg-b", "pg-c"]
    assert page["links"] == []
    for query, field in [("limit=0", "limit"), ("limit=x", "limit"), ("limit=1001", "limit"),
                         ("marker=no-such", "marker")]:
        st, body = env.call("GET", "/services?" + query, hdrs=A_READER)
        assert st == 400 and body["errors"][0]["field"] == field, (query, body)
    st, body = env.call("GET", "/services?marker=no-such", hdrs=A_READER)
    assert "give the name of the last item of the previous page" in \
        body["errors"][0]["detail"], body
    # another project's items are no markers: its list does not have them
    assert env.call("GET", "/services?marker=pg-a", hdrs=B_MEMBER)[0] == 400
    # every list operation takes them
    for op in HTTP:
        if op.page is not None:
            assert {"limit", "marker"} <= set(op.query), op.op_id
    st, page = env.call("GET", "/instances?limit=5", hdrs=A_READER)
    assert st == 200 and page == {"instances": [], "links": []}
