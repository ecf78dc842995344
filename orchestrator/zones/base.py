# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The zone contract: moved to the neutral leaf :mod:`fluidvim.zonetypes` (the evaluator's probes
use it too); its names stay importable from here."""

from fluidvim.zonetypes import (  # noqa: F401 - re-exported
    NETWORK_NAME_RE,
    HostInfo,
    InstanceInfo,
    LaunchRequest,
    NetworkInfo,
    ZoneAdapter,
    ZoneError,
)
