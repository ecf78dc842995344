# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Nova loads ``compute_driver = X.Y`` as ``nova.virt.X.Y``: this makes ``fluidvim.UnikernelDriver``
resolve. Only this sub-package is shipped (never nova/__init__.py or nova/virt/__init__.py)."""

from fluidvim.nova_driver.driver import UnikernelDriver  # noqa: F401

__all__ = ["UnikernelDriver"]
