# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The entry points: ``fluidvim`` (cli), ``fluidvim demo`` (demo), ``fluidvim-manage`` (manage).
The top layer: they import any layer below, nothing imports them (.importlinter)."""
