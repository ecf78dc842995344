# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Errors the orchestrator sends back to its clients.

They cross oslo.messaging as *expected* exceptions: the server does not log a traceback for them
and a client that lists this module in ``allowed_remote_exmods`` (:mod:`.rpcapi` does) gets the
same class back. oslo.messaging appends the remote traceback to ``str()``; :attr:`message` is the
clean text, which names the field at fault and how to fix it.
"""

from __future__ import annotations

from fluidvim.common.errors import DependencyDown


class OrchestratorError(Exception):
    """Base class; ``args[0]`` is the message."""

    def __init__(self, message: str, **kwargs):
        super().__init__(message)
        self.kwargs = kwargs                # oslo.messaging re-creates us with these

    @property
    def message(self) -> str:
        return self.args[0] if self.args else ""


class InvalidRequest(OrchestratorError):
    """A request field is malformed; ``field`` names it."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message, field=field)
        self.field = field


class NotFound(OrchestratorError):
    """A named object (service, decision, zone, instance) does not exist."""


class Refused(OrchestratorError):
    """The request is valid but cannot be served (no slot, no zone within tolerance, ...)."""


class LeaseLost(Refused):
    """This orchestrator no longer holds the operation lock of the network service it runs an
    operation on (its lease expired while its heartbeat stalled and another operation took it,
    or a peer took the operation over as a dead worker's): the operation stops where it is,
    without rolling back - what it did belongs to the lock's new holder. ``unrecorded``: the
    instances it launched but could not add to the NS record."""

    unrecorded: tuple = ()


class Unreachable(OrchestratorError):
    """No answer: the message broker or fluidvim-api cannot be reached, or no orchestrator
    replied in time. The message names what and how to bring it back; read-only commands then
    answer from the orchestrator's database when this host has it (:mod:`.clicommon`)."""


class DatabaseDown(OrchestratorError, DependencyDown):
    """The orchestrator's database server does not answer (killed, refused, restarted under an
    open connection): the launch core's :class:`~fluidvim.common.errors.DependencyDown`, as an
    error that crosses RPC - one line naming the database and how to start it. Raised by
    :mod:`.db` in place of the driver's exception; the request's open transaction is rolled
    back, what it committed before stands."""

    def __init__(self, message: str, what: str = "", detail: str = "", fix: str = ""):
        Exception.__init__(self, message)       # (not DependencyDown's: the message is made)
        self.kwargs = {"what": what, "detail": detail, "fix": fix}    # to re-create it
        self.what, self.detail, self.fix = what, detail, fix

    @classmethod
    def of(cls, what: str, detail: str, fix: str) -> DatabaseDown:
        down = DependencyDown(what, detail, fix)            # its one-line message
        return cls(str(down), what=what, detail=down.detail, fix=fix)


def invalid(field: str, problem: str, fix: str = "") -> InvalidRequest:
    """``InvalidRequest`` with the message format every check uses: ``field: problem; fix``."""
    return InvalidRequest(f"{field}: {problem}" + (f"; {fix}" if fix else ""), field=field)


ALL = (InvalidRequest, NotFound, Refused, DatabaseDown)
