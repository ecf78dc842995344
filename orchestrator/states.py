# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator's own state vocabularies: network services, their lifecycle operations and
placement decisions.

One definition of each (as nova's ``virt/ironic/ironic_states.py``): the values are the strings
of the ``network_services.status``, ``ns_operations.type`` / ``.state`` and ``decisions.status``
columns and of the RPC and REST answers built from them, so they never change (no migration, no
protocol change). Code compares with these names, never with literals. Instance statuses (of
VNFs in zones) are :mod:`fluidvim.common.instance_states`; a VNF's in the launch core
:mod:`fluidvim.vnf.states`.
"""

# -- network service statuses (NetworkServiceRow.status) --

NS_DEPLOYING = "deploying"
"""Being instantiated: networks, services and instances are being created."""

NS_RUNNING = "running"
"""Instantiated: every VNF runs; it can be scaled, healed and deleted."""

NS_FAILED = "failed"
"""An operation failed and could not be fully rolled back (``error`` says what is left);
deleting it again removes what is left."""

NS_DELETING = "deleting"
"""Being terminated: its instances, services and networks are being removed."""

NS_DELETED = "deleted"
"""Terminated; kept as history (``fluidvim ns list --deleted``)."""

NS_STATUSES = (NS_DEPLOYING, NS_RUNNING, NS_FAILED, NS_DELETING, NS_DELETED)

NS_LIVE = (NS_DEPLOYING, NS_RUNNING, NS_FAILED, NS_DELETING)
"""Statuses of an NS that still exists (its name is taken)."""

NS_IN_PROGRESS = (NS_DEPLOYING, NS_DELETING)
"""Statuses while an operation runs: an orchestrator that stopped during one leaves them,
and the next one marks them failed."""

# -- NS lifecycle operation types (NSOperation.type; SOL005 LcmOpOcc, reduced) --

OP_INSTANTIATE = "instantiate"
OP_SCALE = "scale"
OP_HEAL = "heal"
OP_TERMINATE = "terminate"
OP_TYPES = (OP_INSTANTIATE, OP_SCALE, OP_HEAL, OP_TERMINATE)

# -- NS lifecycle operation states (NSOperation.state) --

OP_PROCESSING = "processing"
"""Running now (or its orchestrator stopped during it)."""

OP_COMPLETED = "completed"
"""Done as asked."""

OP_FAILED = "failed"
"""Failed, and what it had done could not all be undone (the NS is failed)."""

OP_ROLLED_BACK = "rolled_back"
"""Failed, and everything it had done was undone (the NS is as before)."""

OP_STATES = (OP_PROCESSING, OP_COMPLETED, OP_FAILED, OP_ROLLED_BACK)

# -- placement decision statuses (Decision.status, Placement.status) --

DECISION_DECIDED = "decided"
"""A zone and host were chosen; nothing was deployed (yet)."""

DECISION_DEPLOYED = "deployed"
"""Chosen and the instance was launched there."""

DECISION_REFUSED = "refused"
"""No candidate passed the filters (``rule`` says why)."""

DECISION_FAILED = "failed"
"""Chosen, but the launch there failed."""

DECISION_STATUSES = (DECISION_DECIDED, DECISION_DEPLOYED, DECISION_REFUSED, DECISION_FAILED)
