# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The OpenAPI 3 description of ``fluidvim-api``, built by :func:`spec` from the operation table
(:data:`fluidvim.orchestrator.operations.HTTP`: method, path, operationId, policy, parameters,
request body schema, success code). The API serves it at ``/openapi.json``; it is checked in as
``openapi.json`` next to this file (``python -m fluidvim.orchestrator.api.openapi >
orchestrator/api/openapi.json``; tests/unit/test_api.py checks it is current). The API validates
request bodies and query parameters against the same schemas, so a bad request is a 400 naming
the field.
"""

from __future__ import annotations

import json
import sys

from fluidvim import __version__

from ..operations import HTTP

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

ERRORS = {"400": "Bad request (a body or query field, or a query parameter the operation "
                 "does not have): the detail names the field",
          "401": "Not authenticated (auth_strategy keystone: no or bad X-Auth-Token)",
          "403": "The policy does not allow it (e.g. a reader changing something)",
          "404": "No such resource (or one of another project)",
          "409": "Valid, but cannot be done now (no slot, in use, name taken)",
          "503": "The orchestrator cannot be reached"}


def page_schema(key: str, item: dict | None = None) -> dict:
    return {"type": "object", "required": [key, "links"], "additionalProperties": False,
            "properties": {key: {"type": "array", "items": item or {}},
                           "links": {"type": "array", "items": {
                "type": "object", "required": ["rel", "href"],
                "properties": {"rel": {"enum": ["next"]}, "href": {"type": "string"}}}}}}


def _answer(op) -> dict:
    """The success response of ``op``."""
    if op.code == 204:
        return {"description": "Deleted (no body)"}
    if op.code == 202:
        ok = {"description": "Accepted: the operation occurrence, running in the background",
              "content": {"application/json": {"schema": {
                  "$ref": "#/components/schemas/NsLcmOpOcc"}}}}
    elif op.page is not None:
        item = op.answer or {}
        ok = {"description": "The whole list (an array); with limit or marker a page",
              "content": {"application/json": {"schema": {"oneOf": [
                  {"type": "array", "items": item}, page_schema(op.page, item)]}}}}
    else:
        ok = {"description": "Created" if op.code == 201 else "OK",
              "content": {"application/json": {"schema": op.answer or {}}}}
    if op.location is not None:
        ok["headers"] = {"Location": {"description": "the URL of what was made",
                                      "schema": {"type": "string"}}}
    return ok


def spec() -> dict:
    paths: dict = {}
    for o in HTTP:
        op = {"operationId": o.op_id, "summary": o.summary,
              "description": f"Policy: `fluidvim:{o.policy}`.", "parameters": o.params,
              "responses": {str(o.code): _answer(o),
                            **{c: {"$ref": f"#/components/responses/E{c}"} for c in ERRORS}}}
        if o.body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": o.body}}}
        paths.setdefault(o.path, {})[o.method] = op
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
