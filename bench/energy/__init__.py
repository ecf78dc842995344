# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/energy: one day of VNF sessions, every placement policy, one run (``python -m
bench.energy --help``). The simulator is sim.py, the contract with the schedulers policy.py."""
