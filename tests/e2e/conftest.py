# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The run's one cloud of real OpenStack services (tests/e2e/nova_cloud.py)."""

import pytest

from tests.e2e import nova_cloud


@pytest.fixture(scope="session")
def nova_shared_cloud():
    """Shared by test_nova_e2e and test_nova_moves_e2e; started by the first of them, stopped
    by the last (or here, at the end of the run, whatever stopped them)."""
    try:
        yield nova_cloud.SHARED
    finally:
        nova_cloud.SHARED.close()
