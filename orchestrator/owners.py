# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Which project owns what: the orchestrator-side record ``fluidvim-api`` scopes requests by.

The orchestrator itself has no notion of project (its RPC is internal: only the API and the
embedded demo call it). The API records the project of every resource it creates through it - a
service, a network, a network service, a VIM VM, image or flavor - in ``project_owners`` (a table of
the orchestrator's schema, so it lives next to what it describes and the API stays stateless), and
derives the rest: an instance, a placement decision and slot counts belong to the project of their
service. A resource without a row (made over RPC by the demo or before the API existed) is seen by
admins only.

:class:`OwnersEndpoint` serves it over RPC in namespace ``owners`` 1.0; :class:`OwnersAPI` is its
client.
"""

from __future__ import annotations

import time

import oslo_messaging as messaging
import sqlalchemy as sa
from sqlalchemy import orm

from .db import Base
from .exception import invalid
from .rpc import rpc_method
from .rpcapi import CallPath, OrchestratorAPI

NAMESPACE = "owners"
API_VERSION = "1.0"
KINDS = ("service", "network", "ns", "vm", "image", "flavor")


class ProjectOwner(Base):
    __tablename__ = "project_owners"
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(16), primary_key=True)
    key: orm.Mapped[str] = orm.mapped_column(sa.String(255), primary_key=True)
    project_id: orm.Mapped[str] = orm.mapped_column(sa.String(64), index=True)
    created_at: orm.Mapped[float] = orm.mapped_column(sa.Float, default=time.time)


def _kind(kind) -> str:
    if kind not in KINDS:
        raise invalid("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    return kind


def _keys(keys) -> list[str]:
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise invalid("keys", "must be a list of strings")
    return keys


class OwnersService:
    def __init__(self, engine):
        self.Session = orm.sessionmaker(engine, expire_on_commit=False)

    def claim(self, kind: str, key: str, project_id: str) -> str:
        """Record ``project_id`` as the owner unless the resource has one; returns the owner."""
        _kind(kind)
        if not isinstance(key, str) or not key or not isinstance(project_id, str) \
                or not project_id:
            raise invalid("key", "key and project_id must be non-empty strings")
        with self.Session.begin() as s:
            row = s.get(ProjectOwner, (kind, key))
            if row is not None:
                return row.project_id
            s.add(ProjectOwner(kind=kind, key=key, project_id=project_id,
                               created_at=time.time()))
        return project_id

    def get(self, kind: str, keys: list) -> dict:
        """{key: project id} of those keys that have an owner."""
        _kind(kind)
        keys = _keys(keys)
        if not keys:
            return {}
        with self.Session() as s:
            rows = s.scalars(sa.select(ProjectOwner).where(ProjectOwner.kind == kind,
                                                           ProjectOwner.key.in_(keys)))
            return {r.key: r.project_id for r in rows}

    def forget(self, kind: str, keys: list) -> int:
        _kind(kind)
        keys = _keys(keys)
        with self.Session.begin() as s:
            return s.execute(sa.delete(ProjectOwner).where(ProjectOwner.kind == kind,
                                                           ProjectOwner.key.in_(keys))).rowcount


class OwnersEndpoint:
    """RPC namespace ``owners``, API 1.0: claim, get, forget."""

    target = messaging.Target(namespace=NAMESPACE, version=API_VERSION)

    def __init__(self, orch):
        self.owners = OwnersService(orch.store.engine)

    @rpc_method
    def claim(self, ctxt, kind, key, project_id):
        return self.owners.claim(kind, key, project_id)

    @rpc_method
    def get(self, ctxt, kind, keys):
        return self.owners.get(kind, keys)

    @rpc_method
    def forget(self, ctxt, kind, keys):
        return self.owners.forget(kind, keys)


class OwnersAPI(CallPath):
    """Client of :class:`OwnersEndpoint` on the transport of an :class:`OrchestratorAPI`."""

    def __init__(self, api: OrchestratorAPI):
        api.namespace_api(self, NAMESPACE, API_VERSION)

    def claim(self, kind, key, project_id):
        return self._call("claim", kind=kind, key=key, project_id=project_id)

    def get(self, kind, keys):
        return self._call("get", kind=kind, keys=list(keys))

    def forget(self, kind, keys):
        return self._call("forget", kind=kind, keys=list(keys))
