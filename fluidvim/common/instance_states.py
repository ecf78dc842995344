# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The statuses of an instance in a zone, as the orchestrator sees them (every VIM's).

One definition (as nova's ``virt/ironic/ironic_states.py``): the values are the strings of
``InstanceInfo.status``, of the orchestrator's ``instances.status`` column and of its RPC and REST
answers (``fluidvim server list``, the OSM RO plugin's ``get_vm``), so they never change.

Each zone maps its VIM's vocabulary onto these once: the local zone the launch core's VNF statuses
(``fluidvim.orchestrator.zones.local.INSTANCE_STATUS``), the Nova zone server statuses
(``zones.nova.SERVER_STATUS``), the Nomad zone allocation client statuses
(``zones.nomad.ALLOC_STATUS``); the OSM RO plugin maps these onto OSM's
(``orchestrator.osm.vimconn_fluidvim.STATUS``).
"""

BUILDING = "building"
"""Asked for and not ready yet (Nova BUILD, a pending Nomad allocation)."""

RUNNING = "running"
"""Ready: it serves its service (and may announce session slots)."""

PAUSED = "paused"
"""Stopped on purpose and kept (Nova PAUSED, a paused VNF of the launch core): it serves nothing
and offers no slot, yet is not healed (replaced) as a dead one would be."""

ERROR = "error"
"""Failed or lost: the VIM reports an error, or a status this mapping does not know."""

DELETED = "deleted"
"""Gone: terminated by the orchestrator, or no longer known to its VIM."""

STATUSES = (BUILDING, RUNNING, PAUSED, ERROR, DELETED)

LIVE = (RUNNING, BUILDING)
"""Instances that count as the service's (the store's default listing)."""
