# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The paste pipeline pieces: the ``auth_strategy`` switch, keystonemiddleware's ``auth_token``
on the API's own ConfigOpts, the ``noauth`` stand-in and the oslo.context middleware."""

from __future__ import annotations

import re

import webob.dec
from oslo_context import context as oslo_context
from oslo_log import log as logging

from .faults import error_response

LOG = logging.getLogger(__name__)
CONTEXT_KEY = "fluidvim.context"
_CONF = None            # the ConfigOpts the app is being loaded with (see app.load_app)
_CLIENTS = None         # and the orchestrator's clients, when the caller brings them


def set_loading_conf(conf, clients=None) -> None:
    global _CONF, _CLIENTS
    _CONF, _CLIENTS = conf, clients


def loading_clients():
    return _CLIENTS


def loading_conf():
    if _CONF is None:
        raise RuntimeError("load the API with fluidvim.orchestrator.api.app.load_app(conf)")
    return _CONF


def urlmap_factory(loader, global_conf, **local_conf):
    """``/v1/...`` to the authenticated pipeline, everything else to the public app (versions,
    ``/v1`` itself - its version document -, /openapi.json): a request never reaches the API
    without passing through auth."""
    apps = sorted(((prefix.rstrip("/"), loader.get_app(name, global_conf=global_conf))
                   for prefix, name in local_conf.items()), key=lambda x: -len(x[0]))
    versions = {p for p, _ in apps if re.fullmatch(r"/v[0-9]+", p)}

    def urlmap(environ, start_response):
        path = environ.get("PATH_INFO", "") or "/"
        if path.rstrip("/") in versions:         # GET /v1: the version document, no token
            return apps[-1][1](environ, start_response)
        for prefix, app in apps:
            if prefix and (path == prefix or path.startswith(prefix + "/")):
                environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
                environ["PATH_INFO"] = path[len(prefix):]
                return app(environ, start_response)
        return apps[-1][1](environ, start_response)
    return urlmap


def pipeline_factory(loader, global_conf, **local_conf):
    """The pipeline named after ``[api] auth_strategy`` (noauth, keystone), as Nova does."""
    strategy = loading_conf().api.auth_strategy
    pipeline = local_conf[strategy].split()
    filters = [loader.get_filter(n) for n in pipeline[:-1]]
    app = loader.get_app(pipeline[-1])
    for f in reversed(filters):
        app = f(app)
    return app


class KeystoneNotConfigured(RuntimeError):
    """``auth_strategy = keystone`` (the default) without a Keystone in ``[keystone_authtoken]``:
    auth_token could neither name Keystone in a 401 nor check a token."""


def check_keystone_conf(conf) -> None:
    """Refuse to build the keystone pipeline when ``[keystone_authtoken]`` names no Keystone
    (otherwise every request without a token ends in a 500 from auth_token)."""
    ka = conf.keystone_authtoken
    if ka.www_authenticate_uri or ka.auth_type:
        return
    raise KeystoneNotConfigured(
        "[api] auth_strategy is keystone (the default) but [keystone_authtoken] names no "
        "Keystone: set www_authenticate_uri, auth_type = password, auth_url, username, "
        "password, ... (etc/fluidvim-api/fluidvim-api.conf.sample), or set [api] "
        "auth_strategy = noauth for a one-machine demo on loopback")


def authtoken_factory(global_conf, **local_conf):
    from keystonemiddleware import auth_token

    check_keystone_conf(loading_conf())
    conf = dict(global_conf, **local_conf, oslo_config_config=loading_conf())

    def filt(app):
        return _SigErrors(auth_token.AuthProtocol(app, conf))
    return filt


class _SigErrors:
    """auth_token's own 401 body (``{"error": {...}}``) in the API-SIG shape of every other
    error, with the request id; its WWW-Authenticate header (naming Keystone) is kept."""

    def __init__(self, app):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req):
        res = req.get_response(self.app)
        if res.status_int != 401 or res.content_type != "application/json":
            return res
        try:
            msg = res.json_body["error"]["message"]
        except (ValueError, KeyError, TypeError):
            return res
        out = error_response(401, msg, environ=req.environ)
        if "WWW-Authenticate" in res.headers:
            out.headers["WWW-Authenticate"] = res.headers["WWW-Authenticate"]
        return out


class NoAuth:
    """``auth_strategy = noauth``: every request is an admin (roles admin, member, reader) of
    ``[api] noauth_project`` or of the project its X-Project-Id header names."""

    def __init__(self, app, project):
        self.app, self.project = app, project

    @webob.dec.wsgify
    def __call__(self, req):
        project = req.headers.get("X-Project-Id") or self.project
        for h in list(req.headers):
            if h.lower().startswith(("x-user", "x-project", "x-roles", "x-domain",
                                     "x-identity-status", "x-service", "x-system")):
                del req.headers[h]
        req.headers.update({"X-Identity-Status": "Confirmed", "X-User-Id": "noauth",
                            "X-User-Name": "noauth", "X-Project-Id": project,
                            "X-Project-Name": project, "X-Roles": "admin,member,reader"})
        return req.get_response(self.app)


def noauth_factory(global_conf, **local_conf):
    project = loading_conf().api.noauth_project
    return lambda app: NoAuth(app, project)


class ContextMiddleware:
    """An oslo.context RequestContext from the identity headers auth_token (or noauth) set."""

    def __init__(self, app):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req):
        if req.headers.get("X-Identity-Status") != "Confirmed":
            return error_response(401, "not authenticated: give a valid Keystone token in "
                                  "X-Auth-Token", environ=req.environ)
        ctx = oslo_context.RequestContext.from_environ(req.environ)
        req.environ[CONTEXT_KEY] = ctx
        return req.get_response(self.app)


def context_factory(global_conf, **local_conf):
    return ContextMiddleware
