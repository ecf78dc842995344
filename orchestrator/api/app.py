# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The WSGI application of ``fluidvim-api`` (webob + routes), talking to the orchestrator over its
RPC client (RPC is internal: only the API, the embedded demo and tests call it).

Every operation of the table (:data:`fluidvim.orchestrator.operations.HTTP`) is a route to its
handler ``op_<operationId>`` below (tests/unit/test_operations.py checks there is one); the
request body and query are validated against the operation's schemas first (400 naming the
field; a query parameter the operation does not have is a 400 too), then the policy is enforced
(:mod:`.policies`) with the resource's project as the target. A create answers 201 with the new
resource's ``Location`` (the table's ``location``), a delete 204 without a body. The long NS
operations (create+instantiate, scale, heal, terminate) run in the orchestrator's background and
answer 202 with their operation occurrence (SOL005's NsLcmOpOcc, reduced) and its ``Location``
(``/v1/ns_lcm_op_occs/{op_id}``), which the client polls until ``operationState`` is not
PROCESSING.
Errors are the API-SIG's ``{"errors": [{"request_id", "code", "status", "title", "detail",
"field"}]}`` (:mod:`.faults`): the orchestrator's ``InvalidRequest`` -> 400, ``NotFound`` -> 404,
``Refused`` -> 409, an orchestrator that does not answer -> 503; never a 500 for bad input.
Every list (:data:`PAGED`) pages with ``limit`` and ``marker`` (the key of the previous page's last
item): with either, the answer is the API-SIG collection ``{"<collection>": [...], "links":
[{"rel": "next", "href": ...}]}`` (no next link on the last page); without, the whole list as an
array, as before.
"""

from __future__ import annotations

import json
import threading
import urllib.parse

import jsonschema
import routes
import webob
import webob.dec
import webob.exc
from oslo_log import log as logging
from oslo_policy import policy as oslo_policy

from fluidvim.common import instance_states as istates

from ..exception import InvalidRequest, NotFound, OrchestratorError, Refused
from ..operations import HTTP, HTTP_BY_ID, MAX_LIMIT
from . import auth, policies
from .faults import HTTPError, error_response, request_id
from .paging import PAGED, paginate

LOG = logging.getLogger(__name__)


def load_app(conf, name: str = "fluidvim-api", clients=None):
    """The whole pipeline of ``[api] api_paste_config`` for this ConfigOpts; ``clients``: see
    :class:`API` (default: made from ``[orchestrator]`` on the first request)."""
    from paste import deploy

    auth.set_loading_conf(conf, clients)
    if conf.api.auth_strategy == "noauth":
        LOG.warning("fluidvim-api: auth_strategy = noauth: NO AUTHENTICATION - every request is "
                    "an admin of project %r. Only for a one-machine demo on loopback (bind_host "
                    "%s); anywhere else leave [api] auth_strategy at keystone, the default.",
                    conf.api.noauth_project, conf.api.bind_host)
    return deploy.loadapp("config:" + conf.api.api_paste_config, name=name)


def _seg(value) -> str:
    return urllib.parse.quote(str(value), safe="")


def v1_factory(global_conf, **local_conf):
    return API(auth.loading_conf(), auth.loading_clients())


def _query_value(schema, raw: str, field: str):
    t = schema.get("type")
    try:
        if t == "integer":
            return int(raw)
        if t == "boolean":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
    except ValueError:
        raise HTTPError(400, f"{field}: {raw!r} is not {'an integer' if t == 'integer' else 'a boolean'}",
                        field) from None
    return raw


class API:
    """The /v1 application."""

    def __init__(self, conf, orchestrator=None):
        """``orchestrator``: (OrchestratorAPI, NSAPI, VimAPI, OwnersAPI) to use instead of
        clients made from ``[orchestrator]`` on first use (which share one transport)."""
        self.conf = conf
        self.enforcer = policies.make_enforcer(conf)
        self._clients = orchestrator
        self._lock = threading.Lock()
        self.mapper = routes.Mapper()
        self.paths = routes.Mapper()           # without method conditions: 405 vs 404
        self.methods = {}                      # path template -> its methods (405's Allow)
        for o in HTTP:
            rel = o.path[len("/v1"):]
            self.methods.setdefault(rel, set()).add(o.method.upper())
            self.mapper.connect(rel, op=o.op_id, conditions={"method": [o.method.upper()]})
            self.paths.connect(rel, op=o.op_id)
        self.validators = {o.op_id: jsonschema.Draft202012Validator(o.body)
                           for o in HTTP if o.body is not None}

    # -- the orchestrator's clients --
    def clients(self):
        with self._lock:
            if self._clients is None:
                from ..mano.rpcapi import NSAPI
                from ..osm.vim import VimAPI
                from ..owners import OwnersAPI
                from ..rpcapi import OrchestratorAPI
                o = OrchestratorAPI(self.conf, retry=2)
                self._clients = (o, NSAPI(api=o), VimAPI(self.conf, transport=o.transport),
                                 OwnersAPI(o))
            return self._clients

    @property
    def orch(self):
        return self.clients()[0]

    @property
    def nsapi(self):
        return self.clients()[1]

    @property
    def vimapi(self):
        return self.clients()[2]

    @property
    def owners(self):
        return self.clients()[3]

    # -- dispatch --
    @webob.dec.wsgify
    def __call__(self, req):
        env = req.environ
        try:
            return self._dispatch(req)
        except HTTPError as e:
            res = error_response(e.code, e.message, e.field, env)
            if e.allow:
                res.allow = e.allow
            return res
        except NotFound as e:
            return error_response(404, e.message, e.kwargs.get("field", ""), env)
        except InvalidRequest as e:
            return error_response(400, e.message, e.field, env)
        except Refused as e:
            return error_response(409, e.message, environ=env)
        except oslo_policy.PolicyNotAuthorized as e:      # "<rule> is disallowed by policy"
            return error_response(403, f"policy does not allow {str(e).split()[0]}",
                                  environ=env)
        except OrchestratorError as e:       # broker unreachable, no reply
            LOG.warning("orchestrator unavailable: %s", e.message)
            return error_response(503, e.message, environ=env)
        except Exception:  # noqa: BLE001 - a bug: logged with its traceback, 500 without it
            LOG.exception("%s %s failed", req.method, req.path)
            return error_response(500, "internal error (the fluidvim-api log has the details; "
                                  f"request {request_id(env)})", environ=env)

    def _dispatch(self, req):
        match = self.mapper.match(req.path_info or "/", req.environ)
        if match is None:
            path = req.path_info or "/"
            if self.paths.match(path) is not None:      # (builds the routes' regexps)
                allow = sorted({m for r in self.paths.matchlist if r.match(path) is not False
                                for m in self.methods[r.routepath]})
                raise HTTPError(405, f"method {req.method} is not allowed on {req.path}; "
                                f"allowed: {', '.join(allow)}", allow=allow)
            raise HTTPError(404, f"no resource {req.path}; see /openapi.json")
        op_id = match.pop("op")
        match.pop("action", None)
        match.pop("controller", None)
        op = HTTP_BY_ID[op_id]
        ctx = req.environ.get(auth.CONTEXT_KEY)
        if ctx is None:
            raise HTTPError(401, "not authenticated")
        args = {**match, **self._query(req, op.params)}
        body = None
        if op.body is not None:
            body = self._body(req, op_id)
        page = None
        if op_id in PAGED and ("limit" in args or "marker" in args):
            page = (args.pop("limit", None), args.pop("marker", None))
            if op_id == "listPlacements":          # the page is cut from the recent ones
                args["limit"] = MAX_LIMIT
        res = getattr(self, f"op_{op_id}")(ctx, op.policy, body=body, **args)
        if page is not None:
            res = paginate(req, op_id, res, *page)
        if op.code == 204:
            return webob.Response(status=204)
        out = webob.Response(status=op.code, json_body=res, charset="utf-8")
        if op.location is not None:
            out.location = req.application_url + op.location.format_map(
                {k: _seg(v) for k, v in res.items()})
        return out

    def _query(self, req, params) -> dict:
        """The query's parameters, each checked against its schema; 400 for one the operation
        does not have."""
        known = {prm["name"] for prm in params if prm["in"] == "query"}
        for name in req.GET:
            if name not in known:
                raise HTTPError(400, f"{name}: not a query parameter of {req.method} "
                                f"{req.path_info}; its parameters: "
                                f"{', '.join(sorted(known)) or 'none'}", name)
        args = {}
        for prm in params:
            if prm["in"] == "query" and prm["name"] in req.GET:
                args[prm["name"]] = _query_value(prm["schema"], req.GET[prm["name"]],
                                                 prm["name"])
                self._check(prm["schema"], args[prm["name"]], prm["name"])
        return args

    @staticmethod
    def _check(schema, value, field):
        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as e:
            raise HTTPError(400, f"{field}: {e.message}", field) from None

    def _body(self, req, op_id):
        limit = self.conf.api.max_request_body_size
        if req.content_length is not None and req.content_length > limit:
            raise HTTPError(413, f"request body larger than {limit} bytes")
        raw = req.body_file.read(limit + 1)
        if len(raw) > limit:
            raise HTTPError(413, f"request body larger than {limit} bytes")
        try:
            body = json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError) as e:
            raise HTTPError(400, f"body: not JSON ({e})", "body") from None
        errors = sorted(self.validators[op_id].iter_errors(body), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            field = ".".join(str(x) for x in e.absolute_path) or "body"
            if e.validator == "required":
                field = e.message.split("'")[1] if "'" in e.message else field
            elif e.validator == "additionalProperties":
                field = (e.message.split("'")[1] if "'" in e.message else field)
            raise HTTPError(400, f"{field}: {e.message}", field)
        return body

    # -- policy and projects --
    def authorize(self, ctx, policy, project_id):
        self.enforcer.authorize(f"fluidvim:{policy}", {"project_id": project_id or ""}, ctx,
                                do_raise=True)

    def is_admin(self, ctx) -> bool:
        return self.enforcer.enforce("fluidvim:all_projects", {"project_id": ctx.project_id or ""},
                                     ctx)

    def owned(self, ctx, kind: str, keys) -> dict:
        return self.owners.get(kind, sorted(set(keys))) if keys else {}

    def check_owner(self, ctx, policy, kind, key, what):
        """Authorize ``policy`` on one resource; another project's is 404 to non-admins."""
        owner = self.owned(ctx, kind, [key]).get(key)
        if owner != ctx.project_id and not self.is_admin(ctx):
            raise HTTPError(404, f"{what}: no {kind} {key!r}", what)
        self.authorize(ctx, policy, owner)
        return owner

    def claim(self, ctx, kind, key):
        owner = self.owners.claim(kind, key, ctx.project_id)
        if owner != ctx.project_id:
            LOG.warning("%s %s already owned by project %s", kind, key, owner)
        return owner

    def visible(self, ctx, kind, keys) -> set:
        if self.is_admin(ctx):
            return set(keys)
        owners = self.owned(ctx, kind, keys)
        return {k for k in keys if owners.get(k) == ctx.project_id}

    def _service_precheck(self, ctx, name):
        """Creating a service: a name another project owns (or an unowned one, for a
        non-admin) is taken."""
        if not isinstance(name, str):
            return
        owner = self.owned(ctx, "service", [name]).get(name)
        exists = any(s["name"] == name for s in self.orch.list_services())
        if exists and owner != ctx.project_id and not self.is_admin(ctx):
            raise HTTPError(409, f"name: service {name!r} exists in another project", "name")

    # -- services --
    def op_listServices(self, ctx, policy, body=None):
        self.authorize(ctx, policy, ctx.project_id)
        rows = self.orch.list_services()
        keep = self.visible(ctx, "service", [r["name"] for r in rows])
        return [r for r in rows if r["name"] in keep]

    def op_registerService(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        self._service_precheck(ctx, body["name"])
        fields = {k: v for k, v in body.items() if k not in ("name", "click_config")}
        res = self.orch.register_service(body["name"], body["click_config"], **fields)
        self.claim(ctx, "service", res["name"])
        return res

    def op_showService(self, ctx, policy, body=None, name=""):
        self.check_owner(ctx, policy, "service", name, "name")
        for r in self.orch.list_services():
            if r["name"] == name:
                return r
        raise HTTPError(404, f"name: no service {name!r}", "name")

    def op_removeService(self, ctx, policy, body=None, name=""):
        self.check_owner(ctx, policy, "service", name, "name")
        res = self.orch.remove_service(name)
        self.owners.forget("service", [name])
        return res

    # -- placements, resolve, slots, zones --
    def _service_owner(self, ctx, policy, service, field="service"):
        """The service (or alias: its own owner row or that of the service that has it)."""
        owners = self.owned(ctx, "service", [service])
        if service not in owners:
            for s in self.orch.list_services():
                if service in (s.get("aliases") or {}):
                    return self.check_owner(ctx, policy, "service", s["name"], field)
        return self.check_owner(ctx, policy, "service", service, field)

    def op_place(self, ctx, policy, body):
        self._service_owner(ctx, policy, body["service"])
        return self.orch.place(body["service"], location=body.get("location"),
                               deploy=bool(body.get("deploy", False)))

    def op_listPlacements(self, ctx, policy, body=None, limit=20):
        self.authorize(ctx, policy, ctx.project_id)
        rows = self.orch.list_decisions(limit)
        keep = self.visible(ctx, "service", [r["service"] for r in rows])
        return [r for r in rows if r["service"] in keep]

    def op_explainPlacement(self, ctx, policy, body=None, decision_id=""):
        d = self.orch.explain(decision_id)
        try:
            self.check_owner(ctx, policy, "service", d["service"], "decision_id")
        except HTTPError:
            raise HTTPError(404, f"decision_id: no decision {decision_id!r}",
                            "decision_id") from None
        return d

    def op_resolve(self, ctx, policy, body):
        self._service_owner(ctx, policy, body["service"])
        return self.orch.resolve(body["service"], client_location=body.get("client_location"))

    def op_slots(self, ctx, policy, body=None, service=None, level="zone", watts=False):
        if service:
            self._service_owner(ctx, policy, service)
            return self.orch.slots(service, level, watts=watts)
        self.authorize(ctx, policy, ctx.project_id)
        res = self.orch.slots(None, level, watts=watts)
        keep = self.visible(ctx, "service", list(res))
        return {k: v for k, v in res.items() if k in keep}

    def op_listZones(self, ctx, policy, body=None):
        self.authorize(ctx, policy, ctx.project_id)
        return self.orch.list_zones()

    # -- instances --
    def _visible_instances(self, ctx, rows):
        if self.is_admin(ctx):
            return rows
        svcs = self.visible(ctx, "service", [r["service"] for r in rows])
        vms = self.visible(ctx, "vm", [r["id"] for r in rows])
        return [r for r in rows if r["service"] in svcs or r["id"] in vms]

    def op_listInstances(self, ctx, policy, body=None, service=None):
        self.authorize(ctx, policy, ctx.project_id)
        return self._visible_instances(ctx, self.orch.list_instances(service))

    def op_terminateInstance(self, ctx, policy, body=None, instance=""):
        rows = [r for r in self.orch.list_instances(None)
                if instance in (r["id"], r["name"])]
        rows = self._visible_instances(ctx, rows)
        if not rows:
            raise HTTPError(404, f"instance: no instance {instance!r}", "instance")
        r = rows[0]
        owner = (self.owned(ctx, "service", [r["service"]]).get(r["service"])
                 or self.owned(ctx, "vm", [r["id"]]).get(r["id"]))
        self.authorize(ctx, policy, owner)
        return self.orch.terminate(r["id"])

    # -- networks --
    def op_listNetworks(self, ctx, policy, body=None, zone=None):
        self.authorize(ctx, policy, ctx.project_id)
        rows = self.orch.list_networks(zone)
        keep = self.visible(ctx, "network", [f"{r['zone']}/{r['id']}" for r in rows])
        return [r for r in rows if f"{r['zone']}/{r['id']}" in keep]

    def op_createNetwork(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        zone, name = body["zone"], body["name"]
        for n in self.orch.list_networks(zone):
            if n["name"] == name:
                owner = self.owned(ctx, "network", [f"{zone}/{n['id']}"]).get(f"{zone}/{n['id']}")
                if owner != ctx.project_id and not self.is_admin(ctx):
                    raise HTTPError(409, f"name: network {name!r} exists in zone {zone} in "
                                    "another project", "name")
        res = self.orch.create_network(zone, name)
        self.claim(ctx, "network", f"{zone}/{res['id']}")
        return res

    def _network_key(self, zone, network):
        for n in self.orch.list_networks(zone):
            if network in (n["id"], n["name"]):
                return f"{zone}/{n['id']}"
        raise HTTPError(404, f"network: zone {zone} has no network {network!r}", "network")

    def op_deleteNetwork(self, ctx, policy, body=None, zone="", network=""):
        key = self._network_key(zone, network)
        self.check_owner(ctx, policy, "network", key, "network")
        res = self.orch.delete_network(zone, network)
        self.owners.forget("network", [key])
        return res

    # -- network services --
    def op_listNS(self, ctx, policy, body=None, deleted=False):
        self.authorize(ctx, policy, ctx.project_id)
        rows = self.nsapi.list(deleted=deleted)
        keep = self.visible(ctx, "ns", [r["id"] for r in rows])
        return [r for r in rows if r["id"] in keep]

    def op_validateNS(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        return self.nsapi.validate(body["nsd"], body["vnfds"], name=body.get("name"))

    def op_deployNS(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        plan = self.nsapi.validate(body["nsd"], body["vnfds"], name=body.get("name"))
        for u in plan.get("units", []):
            self._service_precheck(ctx, u.get("service"))
        op = self.nsapi.start("deploy", nsd=body["nsd"], vnfds=body["vnfds"],
                              name=body.get("name"), zone=body.get("zone"))
        self.claim(ctx, "ns", op["nsInstanceId"])
        for u in plan.get("units", []):
            self.claim(ctx, "service", u["service"])
        return op

    def _claim_ns(self, ctx, res):
        self.claim(ctx, "ns", res["id"])
        for s in res.get("services", []):
            self.claim(ctx, "service", s)
        for n in res.get("networks", []):
            self.claim(ctx, "network", f"{res['zone']}/{n['id']}")

    def _ns(self, ctx, policy, name):
        res = self.nsapi.show(name)
        try:
            self.check_owner(ctx, policy, "ns", res["id"], "name")
        except HTTPError:
            raise HTTPError(404, f"ns: no network service {name!r}", "name") from None
        return res

    def op_showNS(self, ctx, policy, body=None, name=""):
        return self._ns(ctx, policy, name)

    def _start(self, ctx, policy, what, name, **kw):
        """A long operation on the NS ``name`` in the orchestrator's background: 202, its
        operation occurrence."""
        self._ns(ctx, policy, name)
        return self.nsapi.start(what, name=name, **kw)

    def op_deleteNS(self, ctx, policy, body=None, name=""):
        return self._start(ctx, policy, "delete", name)

    def op_scaleNS(self, ctx, policy, body, name=""):
        return self._start(ctx, policy, "scale", name, aspect=body["aspect"],
                           direction=body["direction"])

    def op_healNS(self, ctx, policy, body, name=""):
        return self._start(ctx, policy, "heal", name, instance=body["instance"])

    def op_showOpOcc(self, ctx, policy, body=None, op_id=""):
        op = self.nsapi.operation(op_id)
        try:
            self.check_owner(ctx, policy, "ns", op["nsInstanceId"], "op_id")
        except HTTPError:
            raise HTTPError(404, f"op_id: no network service operation {op_id!r}",
                            "op_id") from None
        if op["operation"] == "INSTANTIATE" and op["operationState"] == "COMPLETED":
            self._claim_ns(ctx, self.nsapi.show(op["nsInstanceId"]))   # its networks too
        return op

    def op_listOpOccs(self, ctx, policy, body=None, ns=None):
        self.authorize(ctx, policy, ctx.project_id)
        if ns:
            self._ns(ctx, "ns:get", ns)
        rows = self.nsapi.operations(ns, limit=1000)
        keep = self.visible(ctx, "ns", [r["nsInstanceId"] for r in rows])
        return [r for r in rows if r["nsInstanceId"] in keep]

    # -- the VIM API (OSM RO) --
    def vim(self, method, **kw):
        return self.vimapi.vim(method, **kw)

    def op_describeVim(self, ctx, policy, body=None, zone=None):
        self.authorize(ctx, policy, ctx.project_id)
        return self.vim("describe", zone=zone)

    def op_listImages(self, ctx, policy, body=None, zone=None):
        self.authorize(ctx, policy, ctx.project_id)
        return self.vim("list_images", zone=zone)

    def op_registerImage(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        res = self.vim("register_image", name=body["name"], location=body["location"],
                       zone=body.get("zone"))
        if res.get("source") == "registered":
            self.claim(ctx, "image", res["id"])
        return res

    def op_deleteImage(self, ctx, policy, body=None, image_id="", zone=None):
        self.check_owner(ctx, policy, "image", image_id, "image_id")
        res = self.vim("delete_image", image_id=image_id, zone=zone)
        self.owners.forget("image", [image_id])
        return res

    def op_listFlavors(self, ctx, policy, body=None):
        self.authorize(ctx, policy, ctx.project_id)
        return self.vim("list_flavors")

    def op_createFlavor(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        res = self.vim("create_flavor", name=body["name"], ram=body["ram"], vcpus=body["vcpus"],
                       disk=body.get("disk") or 0, slots=body.get("slots"))
        self.claim(ctx, "flavor", res["id"])
        return res

    def op_showFlavor(self, ctx, policy, body=None, flavor_id=""):
        self.authorize(ctx, policy, ctx.project_id)
        return self.vim("get_flavor", flavor_id=flavor_id)

    def op_deleteFlavor(self, ctx, policy, body=None, flavor_id=""):
        self.check_owner(ctx, policy, "flavor", flavor_id, "flavor_id")
        res = self.vim("delete_flavor", flavor_id=flavor_id)
        self.owners.forget("flavor", [flavor_id])
        return res

    def op_launchVM(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        res = self.vim("launch", **body)
        self.claim(ctx, "vm", res["id"])
        return res

    def op_vmStatus(self, ctx, policy, body):
        self.authorize(ctx, policy, ctx.project_id)
        ids = body["vm_ids"]
        keep = self.visible(ctx, "vm", ids)
        st = self.vim("vm_status", vm_ids=[i for i in ids if i in keep])
        return {i: st.get(i, {"status": istates.DELETED, "error": "no such VM in the VIM"})
                for i in ids}

    def op_showVM(self, ctx, policy, body=None, vm_id=""):
        self.check_owner(ctx, policy, "vm", vm_id, "vm_id")
        return self.vim("get_vm", vm_id=vm_id)

    def op_actionVM(self, ctx, policy, body, vm_id=""):
        self.check_owner(ctx, policy, "vm", vm_id, "vm_id")
        return self.vim("vm_action", vm_id=vm_id, action=body["action"])

    def op_deleteVM(self, ctx, policy, body=None, vm_id=""):
        owner = self.owned(ctx, "vm", [vm_id]).get(vm_id)
        if owner is None and not self.is_admin(ctx):
            return {"deleted": vm_id, "existed": False}       # idempotent, as RO expects
        self.check_owner(ctx, policy, "vm", vm_id, "vm_id")
        res = self.vim("delete_vm", vm_id=vm_id)
        self.owners.forget("vm", [vm_id])
        return res
