# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""What ``fluidvim-api`` answers without a token: ``/`` (its versions), ``/v1`` (that version's
document) and ``/openapi.json`` (:func:`.auth.urlmap_factory` routes them here)."""

from __future__ import annotations

import webob
import webob.dec

from . import openapi
from .faults import error_response


def public_factory(global_conf, **local_conf):
    return PublicApp()


#: the API's versions (``/``) and each one's document (``/v1``): no token needed
VERSIONS = ("v1",)


def version_document(req, version: str) -> dict:
    return {"id": version, "status": "CURRENT",
            "links": [{"rel": "self", "href": f"{req.host_url}/{version}"},
                      {"rel": "describedby", "href": req.host_url + "/openapi.json"}],
            "media-types": [{"base": "application/json", "type": "application/json"}]}


class PublicApp:
    """``/`` (versions), ``/v1`` (its version document) and ``/openapi.json``, without
    authentication (:func:`.auth.urlmap_factory` sends ``/v1`` itself here)."""

    @webob.dec.wsgify
    def __call__(self, req):
        path = req.path_info.rstrip("/") or "/"
        if path == "/":
            doc = {"versions": [version_document(req, v) for v in VERSIONS]}
        elif path.lstrip("/") in VERSIONS:
            doc = {"version": version_document(req, path.lstrip("/"))}
        elif path == "/openapi.json":
            doc = openapi.spec()
        else:
            return error_response(404, f"no resource {req.path_info}; see /openapi.json",
                                  environ=req.environ)
        if req.method not in ("GET", "HEAD"):
            res = error_response(405, f"method {req.method} is not allowed on {req.path}",
                                 environ=req.environ)
            res.allow = ("GET", "HEAD")
            return res
        return webob.Response(json_body=doc)
