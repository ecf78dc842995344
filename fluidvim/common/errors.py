# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Errors that commands catch without importing what raises them (a leaf module: importing
:mod:`fluidvim.common.migration` costs SQLAlchemy's import, which ``fluidvim vnf list`` must not pay)."""


class SchemaError(RuntimeError):
    """The database is not at the schema revision this release needs."""


class DependencyDown(RuntimeError):
    """A daemon a command needs does not answer (libvirtd, the message broker, ...): one line
    naming what is down, what failed and how to bring it back, never a traceback.

    ``what``: the daemon (``libvirtd``); ``detail``: what was tried and its error; ``fix``: the
    command or step that brings it back."""

    def __init__(self, what: str, detail: str, fix: str):
        self.what, self.detail, self.fix = what, " ".join(detail.split()), fix
        super().__init__(f"{what} is not running or not reachable ({self.detail}): {fix}")


class StoreFull(RuntimeError):
    """A state store cannot write: its disk (or the database server's) is full. The request
    that hit it recorded nothing; what was stored before is intact."""
