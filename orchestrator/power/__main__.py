# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``python -m fluidvim.orchestrator.power`` (see :mod:`.cli`)."""

from .cli import main

raise SystemExit(main())
