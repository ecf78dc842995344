# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Errors that commands catch without importing what raises them (a leaf module: importing
:mod:`fluidvim.common.migration` costs SQLAlchemy's import, which ``fluidvim vnf list`` must not pay)."""


class SchemaError(RuntimeError):
    """The database is not at the schema revision this release needs."""
