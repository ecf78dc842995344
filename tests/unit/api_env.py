# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""An in-process orchestrator (oslo.messaging's in-memory ``fake`` driver, an in-memory zone)
and fluidvim-api on it, for the API's unit tests and its property-based fuzz."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import types
import uuid

import webob

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.api import app as apiapp, auth, conf as apiconf
from fluidvim.orchestrator.mano.rpcapi import NSAPI
from fluidvim.orchestrator.osm.vim import VimAPI
from fluidvim.orchestrator.owners import OwnersAPI
from fluidvim.orchestrator.rpcapi import OrchestratorAPI
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.zones.synthetic import make_fleet, seed_cache

from .test_mano_service import MemoryZone

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"


class ApiZone(MemoryZone):
    """The in-memory local zone with what the VIM API reads of a launch core (``mgr``): its
    kernel file and a launched VNF's NICs."""

    def __init__(self, name, hosts, kernel):
        super().__init__(name, hosts)
        zone = self

        class Mgr:
            def get(self, vid):
                req = zone.vnfs[vid]
                nics = [types.SimpleNamespace(tap=f"{vid}-{i}", mac=n.mac, bridge=n.bridge)
                        for i, n in enumerate(req.nics)]
                return types.SimpleNamespace(name=f"{req.service}.{vid}", status="running",
                                             reason=None, spec=types.SimpleNamespace(nics=nics))
        self.mgr = Mgr()
        self.mgr.kernel = kernel


def headers(project, *roles, user="u"):
    """What keystonemiddleware's auth_token puts into a request for a valid token."""
    return {"X-Identity-Status": "Confirmed", "X-User-Id": f"{user}-{project}",
            "X-Project-Id": project, "X-Roles": ",".join(roles)}


class Env:
    def __init__(self, orch, clients, conf):
        self.orch, self.clients, self.conf = orch, clients, conf
        # what /v1 is behind auth_token: the context middleware and the API
        self.v1 = auth.ContextMiddleware(apiapp.API(conf, clients))

    def app(self, strategy):
        """The whole paste pipeline (urlmap, request id, noauth or keystone, context, API).
        ``strategy`` is always named: the default, keystone, needs [keystone_authtoken]; the
        tests that use noauth (admin of any project via a header) say so."""
        self.conf.set_override("auth_strategy", strategy, group="api")
        return apiapp.load_app(self.conf, clients=self.clients)

    def call(self, method, path, body=None, hdrs=None, app=None, raw=None):
        """(status, JSON body) of a request to /v1 ``path`` (or to ``app``: a full path)."""
        req = webob.Request.blank(path if app is not None else "/v1" + path, method=method,
                                  headers=hdrs or {})
        if app is None:
            req.script_name, req.path_info = "/v1", path.split("?")[0]
        if body is not None or raw is not None:
            req.body = raw if raw is not None else json.dumps(body).encode()
            req.content_type = "application/json"
        res = req.get_response(app if app is not None else self.v1)
        try:
            data = res.json_body
        except ValueError:
            data = res.text
        return res.status_int, data


@contextlib.contextmanager
def api_env(db_url, topic=None):
    zones, env_types, _ = make_fleet(1, 1, n_env_types=1)
    tmp = tempfile.mkdtemp(prefix="fva-")
    kernel = os.path.join(tmp, "vnf.elf")
    with open(kernel, "wb") as f:
        f.write(b"\x7fELF fake kernel for API tests")
    zone = ApiZone("mem", zones[0].hosts(), kernel)
    topic = topic or f"fva-{uuid.uuid4().hex[:8]}"
    conf = orchconf.make_conf(connection=db_url, local_zone=False, transport_url="fake:/",
                              topic=topic, rpc_timeout=10.0)
    from fluidvim.orchestrator.osm import conf as osmconf
    osmconf.register_opts(conf)
    conf.set_override("images_dir", os.path.join(tmp, "images"), group="osm_vim")
    orch = Orchestrator(conf, zones=[zone], power=lambda z, h: 1.0)
    seed_cache(orch.placement.stage1.cache, [zone], env_types)
    orch.start(server=topic, agent=False)
    t = orch._transports[0]
    o = OrchestratorAPI(conf, transport=t)
    clients = (o, NSAPI(api=o), VimAPI(conf, transport=t), OwnersAPI(o))
    aconf = apiconf.make_conf(default_config_files=[])
    env = Env(orch, clients, aconf)
    env.zone = zone
    try:
        yield env
    finally:
        orch.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
