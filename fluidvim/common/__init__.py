# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The neutral leaves: what several layers share (errors, the zone contract, the slot codec and
its notifications, instance states, CLI logging, statistics, the SQL engine, schema migrations).
Nothing here imports a layer above it (.importlinter, ARCHITECTURE.md)."""
