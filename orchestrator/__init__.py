# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The fluidvim orchestrator: an oslo.messaging service (:mod:`.service`, client :mod:`.rpcapi`)
with its state in SQLAlchemy (:mod:`.db`), zones (:mod:`.zones`: local, nova, nomad), session-slot
updates and their registry (:mod:`.slots`, :mod:`.notify`), queuing delay (:mod:`.queuing`),
placement steps 0-3 (:mod:`.placement`), the resolver (:mod:`.resolver`) and power models
(:mod:`.power`). The CLI commands are in :mod:`.cli`.
"""
