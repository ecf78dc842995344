# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Nova compute driver for unikernel VNFs (``driver.UnikernelDriver``, loaded by Nova as
``compute_driver = fluidvim.UnikernelDriver`` through ``nova_shim/``) and scheduler weighers."""
