# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Alembic migrations of the orchestrator schema (see fluidvim.common.migration; `fluidvim-manage db sync`).

A new revision: `alembic -c tools/alembic.ini -n orchestrator revision --autogenerate -m "..."`
(from the source tree; read and edit what it wrote), then set HEAD to its id.
"""

HEAD = "0007"      # this release's head revision (tests check it against versions/)
