# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The operation table of the orchestrator: every RPC method (:data:`RPC`) and every operation of
``fluidvim-api`` (:data:`HTTP`), written once. The rest is derived from it or checked against it:

* the RPC clients' pass-through methods (:func:`rpcapi.bind_client`), the orchestrator endpoint's
  pass-through methods (:func:`rpc.bind_endpoint`) and each namespace's API version
  (:func:`api_version`);
* the API's routes, its request validation, its ``Location`` headers and pages
  (``api/app.py``), the OpenAPI document (``api/openapi.py``), the ``operations`` of each policy
  rule (``api/policies.py``) and the REST client's requests (``apiclient.APIClient.call``);
* what is written by hand because it does more than pass through (the API handlers
  ``op_<operationId>`` with their policy and project checks, the NS and VIM endpoints that remap
  arguments, the REST client's NS methods that poll) is checked against the table by
  tests/unit/test_operations.py: same methods, same parameters, same versions.

A leaf (standard library only) in the orchestrator's core, so that the clients import it.
"""

from __future__ import annotations

import ast
import functools
import inspect
from dataclasses import dataclass, field

#: RPC namespaces: the orchestrator's own (""), network services, the VIM API, API projects
NAMESPACES = ("", "ns", "vim", "owners")
#: seconds an NS client waits for a blocking deploy, delete, scale or heal (a deploy launches
#: every instance and may probe a new zone first)
DEPLOY_TIMEOUT = 600.0


@dataclass(frozen=True)
class Rpc:
    """An RPC method: its namespace, name, the API version that added it and its parameters as
    Python writes them (the client's; a ``timeout`` parameter is the call's timeout, not an
    argument sent)."""
    namespace: str
    method: str
    version: str
    params: str = ""
    doc: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}.{self.method}" if self.namespace else self.method

    @property
    def signature(self) -> inspect.Signature:
        return params_signature(self.params)

    @property
    def method_signature(self) -> inspect.Signature:
        """The signature of a client's method: ``self`` and the parameters."""
        sig = self.signature
        return sig.replace(parameters=[
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *sig.parameters.values()])


@functools.lru_cache(maxsize=None)
def params_signature(params: str) -> inspect.Signature:
    """``"service, location=None, **fields"`` -> its Signature (literal defaults only)."""
    args = ast.parse(f"def f({params}): pass").body[0].args        # type: ignore[attr-defined]
    out = []
    defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    for a, d in zip(args.args, defaults):
        out.append(inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                     default=inspect.Parameter.empty if d is None
                                     else ast.literal_eval(d)))
    if args.kwarg is not None:
        out.append(inspect.Parameter(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(out)


def client_method(row, send, doc: str):
    """A client method for the table row ``row`` (an ``Rpc`` or an API operation's RPC row):
    its real signature (``row.method_signature``), the arguments bound by it (a TypeError names
    the method), then ``send(self, kwargs)``. Shared by the RPC and the REST clients."""
    sig = row.signature

    def method(self, *args, **kwargs):
        try:
            kw = bound_arguments(sig, args, kwargs)
        except TypeError as e:
            raise TypeError(f"{row.method}(): {e}") from None
        return send(self, kw)

    method.__name__ = method.__qualname__ = row.method
    method.__doc__ = row.doc or doc
    method.__signature__ = row.method_signature        # type: ignore[attr-defined]
    return method


def bound_arguments(sig: inspect.Signature, args, kwargs) -> dict:
    """The arguments of a call by ``sig`` (defaults applied, ``**`` flattened); TypeError names
    the mistake."""
    b = sig.bind(*args, **kwargs)
    b.apply_defaults()
    out = {}
    for name, value in b.arguments.items():
        if sig.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[name] = value
    return out


_T = f", timeout={DEPLOY_TIMEOUT}"
RPC = [
    # the orchestrator (service.OrchestratorEndpoint -> service.Orchestrator)
    Rpc("", "ping", "1.0", "timeout=None", "The orchestrator's RPC version and zones."),
    Rpc("", "register_service", "1.0", "name, click_config, **fields"),
    Rpc("", "list_services", "1.0"),
    Rpc("", "remove_service", "1.0", "name"),
    Rpc("", "place", "1.0", "service, location=None, deploy=False"),
    Rpc("", "explain", "1.0", "decision_id"),
    Rpc("", "list_decisions", "1.0", "limit=20"),
    Rpc("", "resolve", "1.0", "service, client_location=None"),
    Rpc("", "list_zones", "1.0"),
    Rpc("", "slots", "1.4", "service=None, level='zone', watts=False",
        "Free slots per level; with watts (1.4), each with the VNFs' watts per slot."),
    Rpc("", "list_instances", "1.0", "service=None"),
    Rpc("", "terminate", "1.0", "instance"),
    Rpc("", "list_networks", "1.1", "zone=None"),
    Rpc("", "create_network", "1.1", "zone, name"),
    Rpc("", "delete_network", "1.1", "zone, network"),
    Rpc("", "power_plan", "1.2"),
    Rpc("", "power_hosts", "1.2"),
    Rpc("", "instance_action", "1.3", "instance, action",
        "pause, unpause, reboot or rebuild one instance (zonetypes.INSTANCE_ACTIONS)."),
    # network services (mano.service.NSEndpoint -> mano.service.NSManager)
    Rpc("ns", "deploy", "1.0", "nsd, vnfds, name=None, zone=None" + _T),
    Rpc("ns", "validate", "1.0", "nsd, vnfds, name=None"),
    Rpc("ns", "list", "1.0", "deleted=False"),
    Rpc("ns", "show", "1.0", "name"),
    Rpc("ns", "delete", "1.0", "name" + _T),
    Rpc("ns", "scale", "1.1", "name, aspect, direction" + _T,
        "One step of ``aspect`` (``PROFILE/ASPECT`` or the aspect id), direction out | in."),
    Rpc("ns", "heal", "1.1", "name, instance" + _T,
        "Replace ``instance`` (id or name) of the NS by a new one on the same virtual links."),
    Rpc("ns", "start", "1.2", "what, kwargs"),
    Rpc("ns", "operation", "1.2", "op_id"),
    Rpc("ns", "operations", "1.2", "ns=None, limit=200"),
    # the VIM API of the OSM RO plugin (osm.vim.VimEndpoint -> osm.vim.VimService)
    Rpc("vim", "describe", "1.0", "zone=None"),
    Rpc("vim", "list_images", "1.0", "zone=None"),
    Rpc("vim", "register_image", "1.0", "name, location, zone=None"),
    Rpc("vim", "delete_image", "1.0", "image_id, zone=None"),
    Rpc("vim", "list_flavors", "1.0"),
    Rpc("vim", "get_flavor", "1.0", "flavor_id"),
    Rpc("vim", "create_flavor", "1.0", "name, ram, vcpus, disk=0, slots=None"),
    Rpc("vim", "delete_flavor", "1.0", "flavor_id"),
    Rpc("vim", "launch", "1.0", "name, image_id, flavor_id, nics, click_config, zone=None, "
        "description='', slots=None, macs=None"),
    Rpc("vim", "vm_status", "1.0", "vm_ids"),
    Rpc("vim", "get_vm", "1.0", "vm_id"),
    Rpc("vim", "vm_action", "1.1", "vm_id, action"),
    Rpc("vim", "delete_vm", "1.0", "vm_id"),
    # fluidvim-api's record of which project owns what (owners.OwnersEndpoint)
    Rpc("owners", "claim", "1.0", "kind, key, project_id"),
    Rpc("owners", "get", "1.0", "kind, keys"),
    Rpc("owners", "forget", "1.0", "kind, keys"),
]
RPC_BY_KEY = {r.key: r for r in RPC}


def rpc_methods(namespace: str) -> list[Rpc]:
    return [r for r in RPC if r.namespace == namespace]


def api_version(namespace: str) -> str:
    """The RPC API version of ``namespace``: the newest of its methods'."""
    return max((r.version for r in rpc_methods(namespace)),
               key=lambda v: tuple(int(x) for x in v.split(".")))


# -- the REST API --
NAME = {"type": "string", "minLength": 1, "maxLength": 255}
MAX_LIMIT = 1000
LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}

SERVICE_BODY = {
    "type": "object", "required": ["name", "click_config"], "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "description": "1-40 letters, digits, '_' or '-'"},
        "click_config": {"type": "string", "description": "the VNF's Click-like configuration"},
        "deadline_ms": {"type": "number"}, "qos_quantile": {"type": "number"},
        "session_pps": {"type": "number"},
        "max_queuing_delay_s": {"type": ["number", "null"]},
        "requirements": {"type": "object", "additionalProperties": {
            "type": "array", "items": {"type": "string"}}},
        "aliases": {"type": "object", "additionalProperties": {"type": "number"}},
        "min_instances": {"type": "integer"}, "slots": {"type": ["integer", "null"]},
        "memory_mb": {"type": ["integer", "null"]}, "vcpus": {"type": "integer"},
        "kernel": {"type": ["string", "null"]},
        "max_price_per_hour": {"type": ["number", "null"]},
        "formula": {"type": ["string", "null"]}}}
NS_BODY = {"type": "object", "required": ["nsd", "vnfds"], "additionalProperties": False,
           "properties": {"nsd": {"type": "object", "description": "the NSD document (as "
                                  "`fluidvim ns validate --json` reads it: {nsd: {nsd: [...]}})"},
                          "vnfds": {"type": "array", "items": {"type": "object"}},
                          "name": {"type": ["string", "null"]},
                          "zone": {"type": ["string", "null"]}}}


def q(name, schema, description="", required=False):
    return {"name": name, "in": "query", "required": required, "schema": schema,
            "description": description}


def p(name, description=""):
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string",
                                                                       "minLength": 1},
            "description": description}


ZONE_Q = q("zone", {"type": "string", "minLength": 1}, "a zone (default: the local zone)")
PAGE_PARAMS = [
    q("limit", LIMIT, "at most this many items; the answer is then a page: {<collection>: "
      "[...], links: [{rel: next, href}]}"),
    q("marker", {"type": "string", "minLength": 1}, "the key (name or id) of the previous "
      "page's last item: the page starts after it")]
OP_OCC_REF = {"$ref": "#/components/schemas/NsLcmOpOcc"}
#: where a long NS operation's 202 points: its operation occurrence, which the client polls
OP_OCC_LOCATION = "/ns_lcm_op_occs/{id}"


@dataclass(frozen=True)
class Http:
    """An operation of fluidvim-api: ``method`` ``path`` is ``op_id`` (its handler is
    ``app.API.op_<op_id>``), allowed by policy ``fluidvim:<policy>``, with its query and path
    ``params``, request ``body`` schema and success ``code``. ``client``: the client method it
    stands for (an :data:`RPC` key, or the REST client's own name); ``page``: a list's
    collection key in a page (it then takes ``limit`` and ``marker``) and ``marker`` the item
    field a marker names; ``location``: the path below /v1 of what a 201/202 made, formatted
    from its answer; ``answer``: the schema of what it answers (of each item, for a list)."""
    method: str
    path: str
    op_id: str
    policy: str
    summary: str
    params: list = field(default_factory=list)
    body: dict | None = None
    code: int = 200
    client: str = ""
    page: str | None = None
    marker: str = "id"
    location: str | None = None
    answer: dict | None = None

    @property
    def query(self) -> list[str]:
        return [x["name"] for x in self.params if x["in"] == "query"]

    @property
    def path_params(self) -> list[str]:
        return [x["name"] for x in self.params if x["in"] == "path"]


def _paged(op: Http) -> Http:
    if op.page is None:
        return op
    have = {x["name"] for x in op.params}
    return Http(**{**op.__dict__, "params": op.params + [x for x in PAGE_PARAMS
                                                         if x["name"] not in have]})


HTTP = [_paged(o) for o in [
    Http("get", "/v1/services", "listServices", "service:list", "List services",
         client="list_services", page="services", marker="name"),
    Http("post", "/v1/services", "registerService", "service:create",
         "Register or update a service", body=SERVICE_BODY, code=201,
         client="register_service", location="/services/{name}"),
    Http("get", "/v1/services/{name}", "showService", "service:get", "Show a service",
         [p("name")], client="show_service"),
    Http("delete", "/v1/services/{name}", "removeService", "service:delete", "Remove a service",
         [p("name")], code=204, client="remove_service"),
    Http("post", "/v1/placements", "place", "placement:create",
         "Place a service (steps 0 filter, 1 probe, 2 analyze, 3 decide); deploy=true launches "
         "an instance where decided",
         body={"type": "object", "required": ["service"], "additionalProperties": False,
               "properties": {"service": NAME, "location": {"type": ["string", "null"]},
                              "deploy": {"type": "boolean"}}},
         code=201, client="place", location="/placements/{decision_id}"),
    Http("get", "/v1/placements", "listPlacements", "placement:list",
         "Recent placement decisions",
         [q("limit", LIMIT, "the most recent ones; with a marker, a page of them")],
         client="list_decisions", page="placements", marker="decision_id"),
    Http("get", "/v1/placements/{decision_id}", "explainPlacement", "placement:get",
         "Why a zone/host was chosen (a decision id or a unique prefix of 6+ characters)",
         [p("decision_id")], client="explain"),
    Http("post", "/v1/resolve", "resolve", "resolve",
         "An instance with a free session slot, else a fast-track launch",
         body={"type": "object", "required": ["service"], "additionalProperties": False,
               "properties": {"service": NAME,
                              "client_location": {"type": ["string", "null"]}}},
         client="resolve"),
    Http("get", "/v1/slots", "slots", "slots:get", "Free session slots per service",
         [q("service", NAME), q("level", {"type": "string",
                                          "enum": ["instance", "host", "zone", "region"]}),
          q("watts", {"type": "boolean"},
            "each level's free slots with the VNFs' watts per slot")],
         client="slots"),
    Http("get", "/v1/zones", "listZones", "zone:list", "Zones, hosts and queuing delays",
         client="list_zones", page="zones", marker="name"),
    Http("get", "/v1/instances", "listInstances", "instance:list", "Instances",
         [q("service", NAME)], client="list_instances", page="instances"),
    Http("delete", "/v1/instances/{instance}", "terminateInstance", "instance:delete",
         "Terminate an instance (id or name)", [p("instance")], code=204, client="terminate"),
    Http("get", "/v1/networks", "listNetworks", "network:list", "Networks of the zones",
         [q("zone", {"type": "string", "minLength": 1})], client="list_networks",
         page="networks"),
    Http("post", "/v1/networks", "createNetwork", "network:create",
         "Create a network in a zone (idempotent)",
         body={"type": "object", "required": ["zone", "name"], "additionalProperties": False,
               "properties": {"zone": NAME, "name": NAME}},
         code=201, client="create_network", location="/networks/{zone}/{id}"),
    Http("delete", "/v1/networks/{zone}/{network}", "deleteNetwork", "network:delete",
         "Delete a network (refused while NICs are attached)", [p("zone"), p("network")],
         code=204, client="delete_network"),
    Http("get", "/v1/ns", "listNS", "ns:list", "Network services",
         [q("deleted", {"type": "boolean"}, "include deleted ones")], client="ns.list",
         page="ns"),
    Http("post", "/v1/ns", "deployNS", "ns:create",
         "Create and instantiate a network service from an NSD and its VNFDs: 202, its "
         "operation occurrence (Location) runs in the background; poll it", body=NS_BODY,
         code=202, client="ns.deploy", location=OP_OCC_LOCATION),
    Http("post", "/v1/ns/validate", "validateNS", "ns:create",
         "Check descriptors and return the deployment plan (creates nothing)",
         body={**NS_BODY, "properties": {k: v for k, v in NS_BODY["properties"].items()
                                         if k != "zone"}}, client="ns.validate"),
    Http("get", "/v1/ns/{name}", "showNS", "ns:get",
         "A network service (name or id), its parts and its operation steps", [p("name")],
         client="ns.show"),
    Http("delete", "/v1/ns/{name}", "deleteNS", "ns:delete",
         "Terminate a network service: its instances, services and networks go (202: the "
         "operation occurrence to poll)", [p("name")], code=202, client="ns.delete",
         location=OP_OCC_LOCATION),
    Http("post", "/v1/ns/{name}/scale", "scaleNS", "ns:update",
         "One step of a scaling aspect, out or in (within the descriptor's min/max): 202, the "
         "operation occurrence to poll", [p("name")],
         body={"type": "object", "required": ["aspect", "direction"],
               "additionalProperties": False,
               "properties": {"aspect": {"type": "string", "minLength": 1, "maxLength": 255,
                                         "description": "PROFILE/ASPECT or the aspect id"},
                              "direction": {"type": "string", "enum": ["out", "in"]}}},
         code=202, client="ns.scale", location=OP_OCC_LOCATION),
    Http("post", "/v1/ns/{name}/heal", "healNS", "ns:update",
         "Replace an instance (id or name) of the network service by a new one on the same "
         "virtual links: 202, the operation occurrence to poll", [p("name")],
         body={"type": "object", "required": ["instance"], "additionalProperties": False,
               "properties": {"instance": {"type": "string", "minLength": 1,
                                           "maxLength": 255}}},
         code=202, client="ns.heal", location=OP_OCC_LOCATION),
    Http("get", "/v1/ns_lcm_op_occs", "listOpOccs", "ns:list",
         "Network service lifecycle operation occurrences (SOL005 NsLcmOpOcc), oldest first",
         [q("ns", NAME, "of this network service (name or id)")], client="ns.operations",
         page="ns_lcm_op_occs", answer=OP_OCC_REF),
    Http("get", "/v1/ns_lcm_op_occs/{op_id}", "showOpOcc", "ns:get",
         "A lifecycle operation occurrence: operationState PROCESSING, COMPLETED, FAILED or "
         "ROLLED_BACK, its times and error", [p("op_id")], client="ns.operation",
         answer=OP_OCC_REF),
    Http("get", "/v1/vim", "describeVim", "vim:get", "VIM API: the zone a VIM account maps to",
         [ZONE_Q], client="vim.describe"),
    Http("get", "/v1/vim/images", "listImages", "vim:get",
         "VIM API: images (VNF kernels) of a zone", [ZONE_Q], client="vim.list_images",
         page="images"),
    Http("post", "/v1/vim/images", "registerImage", "vim:create",
         "VIM API: register a VNF kernel by path",
         body={"type": "object", "required": ["name", "location"],
               "additionalProperties": False,
               "properties": {"name": NAME, "location": NAME,
                              "zone": {"type": ["string", "null"]}}},
         code=201, client="vim.register_image", location="/vim/images/{id}"),
    Http("delete", "/v1/vim/images/{image_id}", "deleteImage", "vim:delete",
         "VIM API: unregister an image", [p("image_id"), ZONE_Q], code=204,
         client="vim.delete_image"),
    Http("get", "/v1/vim/flavors", "listFlavors", "vim:get", "VIM API: flavors",
         client="vim.list_flavors", page="flavors"),
    Http("post", "/v1/vim/flavors", "createFlavor", "vim:create", "VIM API: create a flavor",
         body={"type": "object", "required": ["name", "ram", "vcpus"],
               "additionalProperties": False,
               "properties": {"name": NAME, "ram": {"type": "integer"},
                              "vcpus": {"type": "integer"},
                              "disk": {"type": ["integer", "null"]},
                              "slots": {"type": ["integer", "null"]}}},
         code=201, client="vim.create_flavor", location="/vim/flavors/{id}"),
    Http("get", "/v1/vim/flavors/{flavor_id}", "showFlavor", "vim:get", "VIM API: a flavor",
         [p("flavor_id")], client="vim.get_flavor"),
    Http("delete", "/v1/vim/flavors/{flavor_id}", "deleteFlavor", "vim:delete",
         "VIM API: delete a flavor", [p("flavor_id")], code=204, client="vim.delete_flavor"),
    Http("post", "/v1/vim/vms", "launchVM", "vim:create",
         "VIM API: launch one VNF with an image, a flavor, NICs and its Click configuration",
         body={"type": "object",
               "required": ["name", "image_id", "flavor_id", "nics", "click_config"],
               "additionalProperties": False,
               "properties": {"name": NAME, "image_id": NAME, "flavor_id": NAME,
                              "nics": {"type": "array", "items": {"type": "string"}},
                              "click_config": {"type": "string"},
                              "zone": {"type": ["string", "null"]},
                              "description": {"type": "string"},
                              "slots": {"type": ["integer", "null"]},
                              "macs": {"type": ["array", "null"],
                                       "items": {"type": ["string", "null"]}}}},
         code=201, client="vim.launch", location="/vim/vms/{id}"),
    Http("post", "/v1/vim/vms/status", "vmStatus", "vim:get", "VIM API: status of VMs",
         body={"type": "object", "required": ["vm_ids"], "additionalProperties": False,
               "properties": {"vm_ids": {"type": "array", "items": {"type": "string"}}}},
         client="vim.vm_status"),
    Http("get", "/v1/vim/vms/{vm_id}", "showVM", "vim:get", "VIM API: a VM", [p("vm_id")],
         client="vim.get_vm"),
    Http("delete", "/v1/vim/vms/{vm_id}", "deleteVM", "vim:delete",
         "VIM API: terminate a VM (idempotent)", [p("vm_id")], code=204,
         client="vim.delete_vm"),
    Http("post", "/v1/vim/vms/{vm_id}/action", "actionVM", "vim:create",
         "VIM API: pause, unpause, reboot or rebuild a VM (it keeps its id, NICs and "
         "configuration)", [p("vm_id")],
         body={"type": "object", "required": ["action"], "additionalProperties": False,
               "properties": {"action": {"enum": ["pause", "unpause", "reboot", "rebuild"]}}},
         client="vim.vm_action"),
]]
HTTP_BY_ID = {o.op_id: o for o in HTTP}
HTTP_BY_CLIENT = {o.client: o for o in HTTP}
