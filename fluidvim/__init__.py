# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim: unikernel VNFs for OpenStack Nova and HashiCorp Nomad."""

__version__ = "0.1.0"
