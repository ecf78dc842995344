# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The OpenAPI 3 description of ``fluidvim-api``: one table of operations (method, path,
operationId, policy, parameters, request body schema), from which :func:`spec` builds the
document the API serves at ``/openapi.json`` and that is checked in as ``openapi.json`` next to
this file (``python -m fluidvim.orchestrator.api.openapi > orchestrator/api/openapi.json``;
tests/unit/test_api.py checks it is current). The API validates request bodies and query
parameters against the same schemas, so a bad request is a 400 naming the field.
"""

from __future__ import annotations

import json
import sys

from fluidvim import __version__

NAME = {"type": "string", "minLength": 1, "maxLength": 255}
OBJ = {"type": "object"}
ANY_LIST = {"type": "array", "items": {}}
# the OpenStack API-SIG's error format (one error per response here)
ERROR = {"type": "object", "required": ["errors"], "properties": {"errors": {
    "type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["request_id", "code", "status", "title", "detail"],
        "properties": {"request_id": {"type": "string", "description": "oslo.middleware's, "
                                      "as in the x-openstack-request-id header"},
                       "code": {"type": "string", "description": "fluidvim.<title>, e.g. "
                                "fluidvim.not-found"},
                       "status": {"type": "integer"}, "title": {"type": "string"},
                       "detail": {"type": "string"},
                       "field": {"type": "string", "description": "the part of the request "
                                 "that is wrong, when there is one"}}}}}}

# SOL005's NsLcmOpOcc, reduced (mano.service.lcm_op_occ)
OP_OCC = {"type": "object", "required": ["id", "nsInstanceId", "operation", "operationState",
                                         "startTime", "stateEnteredTime"],
          "properties": {
              "id": {"type": "string"}, "nsInstanceId": {"type": "string"},
              "nsName": {"type": ["string", "null"]},
              "operation": {"enum": ["INSTANTIATE", "SCALE", "HEAL", "TERMINATE"]},
              "operationState": {"enum": ["PROCESSING", "COMPLETED", "FAILED", "ROLLED_BACK"]},
              "startTime": {"type": "string", "format": "date-time"},
              "stateEnteredTime": {"type": "string", "format": "date-time"},
              "isAutomaticInvocation": {"type": "boolean"},
              "error": {"type": ["object", "null"], "description": "ProblemDetails: status, "
                        "title, detail"},
              "detail": {"type": "object"}}}

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


MAX_LIMIT = 1000
LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
#: list operationId -> the page's collection key (paging.PAGED names the marker's field too)
PAGED = {"listServices": "services", "listPlacements": "placements", "listZones": "zones",
         "listInstances": "instances", "listNetworks": "networks", "listNS": "ns",
         "listOpOccs": "ns_lcm_op_occs", "listImages": "images", "listFlavors": "flavors"}
PAGE_PARAMS = [
    q("limit", LIMIT, "at most this many items; the answer is then a page: {<collection>: "
      "[...], links: [{rel: next, href}]}"),
    q("marker", {"type": "string", "minLength": 1}, "the key (name or id) of the previous "
      "page's last item: the page starts after it")]


def p(name, description=""):
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string",
                                                                       "minLength": 1},
            "description": description}


ZONE_Q = q("zone", {"type": "string", "minLength": 1}, "a zone (default: the local zone)")

# (method, path, operationId, policy, summary, parameters, request body schema, success code)
OPERATIONS = [
    ("get", "/v1/services", "listServices", "service:list", "List services", [], None, 200),
    ("post", "/v1/services", "registerService", "service:create",
     "Register or update a service", [], SERVICE_BODY, 200),
    ("get", "/v1/services/{name}", "showService", "service:get", "Show a service",
     [p("name")], None, 200),
    ("delete", "/v1/services/{name}", "removeService", "service:delete", "Remove a service",
     [p("name")], None, 204),
    ("post", "/v1/placements", "place", "placement:create",
     "Place a service (steps 0 filter, 1 probe, 2 analyze, 3 decide); deploy=true launches an "
     "instance where decided", [],
     {"type": "object", "required": ["service"], "additionalProperties": False,
      "properties": {"service": NAME, "location": {"type": ["string", "null"]},
                     "deploy": {"type": "boolean"}}}, 201),
    ("get", "/v1/placements", "listPlacements", "placement:list", "Recent placement decisions",
     [q("limit", LIMIT, "the most recent ones; with a marker, a page of them")], None, 200),
    ("get", "/v1/placements/{decision_id}", "explainPlacement", "placement:get",
     "Why a zone/host was chosen (a decision id or a unique prefix of 6+ characters)",
     [p("decision_id")], None, 200),
    ("post", "/v1/resolve", "resolve", "resolve",
     "An instance with a free session slot, else a fast-track launch", [],
     {"type": "object", "required": ["service"], "additionalProperties": False,
      "properties": {"service": NAME, "client_location": {"type": ["string", "null"]}}}, 200),
    ("get", "/v1/slots", "slots", "slots:get", "Free session slots per service",
     [q("service", NAME), q("level", {"type": "string",
                                      "enum": ["instance", "host", "zone", "region"]})],
     None, 200),
    ("get", "/v1/zones", "listZones", "zone:list", "Zones, hosts and queuing delays", [], None,
     200),
    ("get", "/v1/instances", "listInstances", "instance:list", "Instances",
     [q("service", NAME)], None, 200),
    ("delete", "/v1/instances/{instance}", "terminateInstance", "instance:delete",
     "Terminate an instance (id or name)", [p("instance")], None, 204),
    ("get", "/v1/networks", "listNetworks", "network:list", "Networks of the zones",
     [q("zone", {"type": "string", "minLength": 1})], None, 200),
    ("post", "/v1/networks", "createNetwork", "network:create",
     "Create a network in a zone (idempotent)", [],
     {"type": "object", "required": ["zone", "name"], "additionalProperties": False,
      "properties": {"zone": NAME, "name": NAME}}, 201),
    ("delete", "/v1/networks/{zone}/{network}", "deleteNetwork", "network:delete",
     "Delete a network (refused while NICs are attached)", [p("zone"), p("network")], None,
     204),
    ("get", "/v1/ns", "listNS", "ns:list", "Network services",
     [q("deleted", {"type": "boolean"}, "include deleted ones")], None, 200),
    ("post", "/v1/ns", "deployNS", "ns:create",
     "Create and instantiate a network service from an NSD and its VNFDs: 202, its "
     "operation occurrence (Location) runs in the background; poll it", [], NS_BODY, 202),
    ("post", "/v1/ns/validate", "validateNS", "ns:create",
     "Check descriptors and return the deployment plan (creates nothing)", [],
     {**NS_BODY, "properties": {k: v for k, v in NS_BODY["properties"].items()
                                if k != "zone"}}, 200),
    ("get", "/v1/ns/{name}", "showNS", "ns:get",
     "A network service (name or id), its parts and its operation steps", [p("name")], None,
     200),
    ("delete", "/v1/ns/{name}", "deleteNS", "ns:delete",
     "Terminate a network service: its instances, services and networks go (202: the "
     "operation occurrence to poll)", [p("name")], None, 202),
    ("post", "/v1/ns/{name}/scale", "scaleNS", "ns:update",
     "One step of a scaling aspect, out or in (within the descriptor's min/max): 202, the "
     "operation occurrence to poll", [p("name")],
     {"type": "object", "required": ["aspect", "direction"], "additionalProperties": False,
      "properties": {"aspect": {"type": "string", "minLength": 1, "maxLength": 255,
                                "description": "PROFILE/ASPECT or the aspect id"},
                     "direction": {"type": "string", "enum": ["out", "in"]}}}, 202),
    ("post", "/v1/ns/{name}/heal", "healNS", "ns:update",
     "Replace an instance (id or name) of the network service by a new one on the same "
     "virtual links: 202, the operation occurrence to poll", [p("name")],
     {"type": "object", "required": ["instance"], "additionalProperties": False,
      "properties": {"instance": {"type": "string", "minLength": 1, "maxLength": 255}}}, 202),
    ("get", "/v1/ns_lcm_op_occs", "listOpOccs", "ns:list",
     "Network service lifecycle operation occurrences (SOL005 NsLcmOpOcc), oldest first",
     [q("ns", NAME, "of this network service (name or id)")], None, 200),
    ("get", "/v1/ns_lcm_op_occs/{op_id}", "showOpOcc", "ns:get",
     "A lifecycle operation occurrence: operationState PROCESSING, COMPLETED, FAILED or "
     "ROLLED_BACK, its times and error", [p("op_id")], None, 200),
    ("get", "/v1/vim", "describeVim", "vim:get", "VIM API: the zone a VIM account maps to",
     [ZONE_Q], None, 200),
    ("get", "/v1/vim/images", "listImages", "vim:get", "VIM API: images (VNF kernels) of a zone",
     [ZONE_Q], None, 200),
    ("post", "/v1/vim/images", "registerImage", "vim:create",
     "VIM API: register a VNF kernel by path", [],
     {"type": "object", "required": ["name", "location"], "additionalProperties": False,
      "properties": {"name": NAME, "location": NAME, "zone": {"type": ["string", "null"]}}},
     201),
    ("delete", "/v1/vim/images/{image_id}", "deleteImage", "vim:delete",
     "VIM API: unregister an image", [p("image_id"), ZONE_Q], None, 204),
    ("get", "/v1/vim/flavors", "listFlavors", "vim:get", "VIM API: flavors", [], None, 200),
    ("post", "/v1/vim/flavors", "createFlavor", "vim:create", "VIM API: create a flavor", [],
     {"type": "object", "required": ["name", "ram", "vcpus"], "additionalProperties": False,
      "properties": {"name": NAME, "ram": {"type": "integer"}, "vcpus": {"type": "integer"},
                     "disk": {"type": ["integer", "null"]},
                     "slots": {"type": ["integer", "null"]}}}, 201),
    ("get", "/v1/vim/flavors/{flavor_id}", "showFlavor", "vim:get", "VIM API: a flavor",
     [p("flavor_id")], None, 200),
    ("delete", "/v1/vim/flavors/{flavor_id}", "deleteFlavor", "vim:delete",
     "VIM API: delete a flavor", [p("flavor_id")], None, 204),
    ("post", "/v1/vim/vms", "launchVM", "vim:create",
     "VIM API: launch one VNF with an image, a flavor, NICs and its Click configuration", [],
     {"type": "object", "required": ["name", "image_id", "flavor_id", "nics", "click_config"],
      "additionalProperties": False,
      "properties": {"name": NAME, "image_id": NAME, "flavor_id": NAME,
                     "nics": {"type": "array", "items": {"type": "string"}},
                     "click_config": {"type": "string"}, "zone": {"type": ["string", "null"]},
                     "description": {"type": "string"}, "slots": {"type": ["integer", "null"]},
                     "macs": {"type": ["array", "null"],
                              "items": {"type": ["string", "null"]}}}}, 201),
    ("post", "/v1/vim/vms/status", "vmStatus", "vim:get", "VIM API: status of VMs", [],
     {"type": "object", "required": ["vm_ids"], "additionalProperties": False,
      "properties": {"vm_ids": {"type": "array", "items": {"type": "string"}}}}, 200),
    ("get", "/v1/vim/vms/{vm_id}", "showVM", "vim:get", "VIM API: a VM", [p("vm_id")], None,
     200),
    ("delete", "/v1/vim/vms/{vm_id}", "deleteVM", "vim:delete",
     "VIM API: terminate a VM (idempotent)", [p("vm_id")], None, 204),
    ("post", "/v1/vim/vms/{vm_id}/action", "actionVM", "vim:create",
     "VIM API: pause, unpause, reboot or rebuild a VM (it keeps its id, NICs and configuration)",
     [p("vm_id")],
     {"type": "object", "required": ["action"], "additionalProperties": False,
      "properties": {"action": {"enum": ["pause", "unpause", "reboot", "rebuild"]}}}, 200),
]

# every list pages (limit, marker)
OPERATIONS = [o if o[2] not in PAGED else
              (*o[:5], o[5] + [x for x in PAGE_PARAMS if x["name"] not in
                               {y["name"] for y in o[5]}], *o[6:]) for o in OPERATIONS]

#: the creates whose 201 has a Location (app.LOCATIONS builds it)
LOCATED = ("place", "createNetwork", "deployNS", "registerImage", "createFlavor", "launchVM",
           "deleteNS", "scaleNS", "healNS")

ERRORS = {"400": "Bad request (a body or query field, or a query parameter the operation "
                 "does not have): the detail names the field",
          "401": "Not authenticated (auth_strategy keystone: no or bad X-Auth-Token)",
          "403": "The policy does not allow it (e.g. a reader changing something)",
          "404": "No such resource (or one of another project)",
          "409": "Valid, but cannot be done now (no slot, in use, name taken)",
          "503": "The orchestrator cannot be reached"}


#: operationId -> the schema of what it answers (of each item, for a list)
ITEMS = {"listOpOccs": {"$ref": "#/components/schemas/NsLcmOpOcc"},
         "showOpOcc": {"$ref": "#/components/schemas/NsLcmOpOcc"}}


def page_schema(key: str, item: dict | None = None) -> dict:
    return {"type": "object", "required": [key, "links"], "additionalProperties": False,
            "properties": {key: {"type": "array", "items": item or {}},
                           "links": {"type": "array", "items": {
                "type": "object", "required": ["rel", "href"],
                "properties": {"rel": {"enum": ["next"]}, "href": {"type": "string"}}}}}}


def spec() -> dict:
    paths: dict = {}
    for method, path, op_id, policy, summary, params, body, code in OPERATIONS:
        ok = {"description": "OK", "content": {"application/json": {"schema": {}}}}
        if op_id in PAGED:
            item = ITEMS.get(op_id, {})
            ok = {"description": "The whole list (an array); with limit or marker a page",
                  "content": {"application/json": {"schema": {"oneOf": [
                      {"type": "array", "items": item}, page_schema(PAGED[op_id], item)]}}}}
        elif op_id in ITEMS:
            ok = {**ok, "content": {"application/json": {"schema": ITEMS[op_id]}}}
        if code == 204:
            ok = {"description": "Deleted (no body)"}
        elif code == 202:
            ok = {"description": "Accepted: the operation occurrence, running in the background",
                  "content": {"application/json": {"schema": {
                      "$ref": "#/components/schemas/NsLcmOpOcc"}}}}
        elif code == 201:
            ok = {**ok, "description": "Created"}
        if code in (201, 202):
            if op_id in LOCATED:
                ok["headers"] = {"Location": {"description": "the URL of what was made",
                                              "schema": {"type": "string"}}}
        op = {"operationId": op_id, "summary": summary,
              "description": f"Policy: `fluidvim:{policy}`.", "parameters": params,
              "responses": {str(code): ok,
                            **{c: {"$ref": f"#/components/responses/E{c}"} for c in ERRORS}}}
        if body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": body}}}
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "fluidvim-api", "version": __version__,
                 "description": "The fluidvim orchestrator's REST API: services, placements, "
                                "session slots, zones, instances, networks, network services "
                                "from NFV descriptors and the VIM API OSM RO uses. "
                                "Authentication: a Keystone token in X-Auth-Token "
                                "(auth_strategy keystone, the default) or none (noauth, "
                                "a one-machine demo on loopback). /healthcheck, / (versions), "
                                "/v1 (its version document) and /openapi.json need no "
                                "token. Creates answer 201 with a Location, deletes 204; "
                                "errors are the API-SIG's, with the request id."},
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {"keystone": {"type": "apiKey", "in": "header",
                                             "name": "X-Auth-Token"}},
            "schemas": {"Error": ERROR, "NsLcmOpOcc": OP_OCC},
            "responses": {f"E{c}": {"description": d, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}} for c, d in ERRORS.items()},
        },
        "security": [{"keystone": []}, {}],
        "paths": paths,
    }


def dumps() -> str:
    return json.dumps(spec(), indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(dumps())
