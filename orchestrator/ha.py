# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Several orchestrators on one database and one message bus (``[orchestrator] active_active``).

Every orchestrator process serves the same RPC topic (RabbitMQ hands each call to one of them)
and consumes the same slot notifications; what must be shared lives in the database:

* slot reports and the slots the resolver handed out (:class:`~.slots.SharedSlotRegistry`), and
  one resolve decision at a time across processes (``Store.lock``): a slot is never handed out
  twice, whichever orchestrator is asked;
* each process is a **worker** (``workers`` table) with a heartbeat every
  ``worker_heartbeat_interval``; a worker whose heartbeat is older than ``worker_dead_after`` is
  dead (killed, host lost). The first survivor to notice claims it (a conditional delete: one
  winner) and recovers what it left in flight: its unfinished launch records are failed and the
  instances those launches created in the zone but never recorded are terminated - nothing
  leaks, and the queuing delay does not count a launch nobody finished.

A network service has one lifecycle operation at a time across the orchestrators: a lock row
(``ns_locks``) taken atomically, held on a lease this heartbeat renews (``worker_dead_after``); a
second scale, heal or delete meanwhile, at either orchestrator, is refused (409) naming the
operation under way. A dead worker's NS operations are resumed by the survivor from their
recorded steps, or rolled back where they cannot be (:mod:`.mano.resume`).

An orchestrator that finds its own worker row gone (it stalled longer than
``worker_dead_after`` and a peer took over) registers again and logs an error: its launches in
flight at that moment have been failed by the peer.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid

from oslo_log import log as logging

from fluidvim.common.errors import DependencyDown

LOG = logging.getLogger(__name__)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Membership:
    """This process as a worker of the shared database: heartbeat, and recovery of dead peers.

    ``recover(worker_id)`` is called (in the membership thread) for each dead worker this
    process claimed; :meth:`Orchestrator.recover_worker` does the work. :meth:`start` beats from
    the moment the worker is registered (a slow start must not look like a death); looking for
    dead peers waits for :meth:`ready` (the process must know its zones to recover anything).
    """

    def __init__(self, store, interval: float, dead_after: float, recover=None):
        self.store = store
        self.interval = interval
        self.dead_after = dead_after
        self.recover = recover
        self.id = worker_id()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.recovered: list[str] = []          # dead workers this one took over

    def register(self) -> "Membership":
        self.store.owner = self.id
        self.store.register_worker(self.id, socket.gethostname(), os.getpid())
        LOG.info("orchestrator worker %s registered (heartbeat every %.1f s, dead after %.1f s)",
                 self.id, self.interval, self.dead_after)
        return self

    def ready(self) -> None:
        """From now on each beat also looks for dead peers."""
        self._ready.set()

    def start(self) -> "Membership":
        self._thread = threading.Thread(target=self._run, name="fluidvim-membership",
                                        daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except DependencyDown as e:     # the database is down: one line, keep beating
                LOG.warning("worker %s: heartbeat: %s", self.id, e)
            except Exception:  # noqa: BLE001 - a database hiccup must not end the heartbeat
                LOG.exception("worker %s: heartbeat/recovery pass failed", self.id)

    def tick(self) -> list[str]:
        """One heartbeat and one pass over the dead; returns the workers taken over."""
        if not self.store.heartbeat(self.id):
            LOG.error("worker %s was declared dead by a peer (no heartbeat for %.1f s) and its "
                      "launches in flight were failed; registering again", self.id,
                      self.dead_after)
            self.store.register_worker(self.id, socket.gethostname(), os.getpid())
        self.store.renew_ns_locks(self.dead_after)      # the leases of its NS operations
        return self.reap() if self._ready.is_set() else []

    def reap(self) -> list[str]:
        cutoff = time.time() - self.dead_after
        taken = []
        for w in self.store.workers():
            if w.id == self.id or w.heartbeat_at >= cutoff:
                continue
            if not self.store.claim_dead_worker(w.id, cutoff):
                continue                        # a peer was first, or it came back
            LOG.warning("worker %s (%s pid %d) is dead: last heartbeat %.1f s ago; %s takes "
                        "over", w.id, w.host, w.pid, time.time() - w.heartbeat_at, self.id)
            if self.recover is not None:
                self.recover(w.id)
            taken.append(w.id)
        self.recovered.extend(taken)
        return taken

    def is_leader(self) -> bool:
        """Whether this worker is the oldest live one: the one that runs what must run once
        (the NS scaler and healer). Leadership passes on when the leader dies or leaves."""
        cutoff = time.time() - self.dead_after
        live = [w for w in self.store.workers() if w.heartbeat_at >= cutoff or w.id == self.id]
        return bool(live) and min(live, key=lambda w: (w.started_at, w.id)).id == self.id

    def stop(self) -> None:
        """Leave cleanly (the row goes: peers do not wait ``dead_after`` to know)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.store.remove_worker(self.id)
