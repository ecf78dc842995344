# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The unikernel VNF's host side: launch spec, control channel, backends, warm pool (launch core)."""
