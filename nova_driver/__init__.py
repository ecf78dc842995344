# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Nova compute driver for unikernel VNFs: not built yet, see issue 3."""
