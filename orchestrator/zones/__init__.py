# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Zone adapters: local (the launch core), nova (openstacksdk), nomad (python-nomad)."""
