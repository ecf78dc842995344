# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Orchestrator service (placement steps 0-3, slot registry, resolver): not built yet, see issue 5.

Today the embedded local zone is the launch core itself, :mod:`fluidvim.vnf.manager`.
"""
