# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Stage-1 probes and stage-2 analyzers: not built yet, see issue 5."""
