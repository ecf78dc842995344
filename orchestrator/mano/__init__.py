# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NFV MANO descriptors (ETSI SOL006 / OSM IM NSD and VNFD YAML) as the way to ask fluidvim for a
network service: :mod:`.descriptors` (validate + map), :mod:`.service` (deploy in the
orchestrator, RPC namespace ``ns``), :mod:`.rpcapi` (client), :mod:`.cli` (``fluidvim ns``)."""
