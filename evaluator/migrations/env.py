# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Alembic environment of the evaluator schema (shared body: fluidvim.common.migration.run_env)."""

from fluidvim.common.migration import run_env

run_env("evaluator")
