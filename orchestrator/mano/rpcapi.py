# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Client of the orchestrator's ``ns`` RPC namespace (API 1.2: deploy, validate, list, show,
delete; scale, heal; start in the background, operation occurrences), sharing the transport,
topic and error handling of :class:`OrchestratorAPI`. Its methods are the table's
(:data:`..operations.RPC`, namespace ``ns``; :func:`..rpcapi.bind_client`), but for those that
turn descriptors into dicts first."""

from __future__ import annotations

from ..operations import DEPLOY_TIMEOUT
from ..rpcapi import CallPath, OrchestratorAPI, bind_client
from .descriptors import Document
from .service import NAMESPACE, NS_API_VERSION


class NSAPI(CallPath):
    """``NSAPI(api=OrchestratorAPI(conf))`` (or ``NSAPI(conf)``: its own OrchestratorAPI)."""

    def __init__(self, conf=None, *, api: OrchestratorAPI | None = None,
                 version_cap: str | None = None, **kwargs):
        self._own_api = api is None
        self._api = api if api is not None else OrchestratorAPI(conf, **kwargs)
        self._api.namespace_api(self, NAMESPACE, NS_API_VERSION, version_cap)

    def close(self) -> None:
        if self._own_api:
            self._api.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _docs(nsd, vnfds):
        def as_dict(d):
            return d.to_dict() if isinstance(d, Document) else d
        return as_dict(nsd), [as_dict(d) for d in vnfds]

    def deploy(self, nsd, vnfds, name: str | None = None, zone: str | None = None,
               timeout: float | None = DEPLOY_TIMEOUT):
        """``nsd``/``vnfds``: descriptors.Document (or their to_dict())."""
        nsd, vnfds = self._docs(nsd, vnfds)
        return self._call("deploy", timeout=timeout, nsd=nsd, vnfds=vnfds, name=name, zone=zone)

    def validate(self, nsd, vnfds, name: str | None = None):
        nsd, vnfds = self._docs(nsd, vnfds)
        return self._call("validate", nsd=nsd, vnfds=vnfds, name=name)

    def start(self, method: str, **kwargs) -> dict:
        """``method`` (deploy, scale, heal, delete; their arguments) in the orchestrator's
        background; its operation occurrence (SOL005 NsLcmOpOcc shape) as soon as it exists."""
        if method == "deploy":
            kwargs["nsd"], kwargs["vnfds"] = self._docs(kwargs["nsd"], kwargs["vnfds"])
        return self._call("start", version="1.2", what=method, kwargs=kwargs)


bind_client(NSAPI, "ns")
