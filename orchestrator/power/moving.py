# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Carrying out a rebalancing move of one VNF, sessions first (issue 21).

:func:`.rebalance.rebalance_moves` names a move (a VNF, its host, the host it should run on);
:class:`Moves` does it, in the order that cuts no session:

1. the VNF stops offering slots (:meth:`SlotRegistry.withdraw`: the resolver hands out none of
   its slots; its live sessions go on);
2. its replacement starts on the target host through that zone's launch path (the launcher
   ``HostPower`` is given: ``deploy.deploy(..., host=)`` - Nova: a server on that compute;
   Nomad: the job pinned to that node; local: this machine), at once, so the service keeps its
   slots while the old VNF's sessions end (what bench/energy charges a move: a launch's CPU on
   the target and the thread the source keeps until it is gone);
3. each round (:meth:`Moves.advance`) reads the VNF's live sessions - its own count where its
   zone reads it (``instance_sessions``), else the registry's reports - and, once they are 0
   (or ``bound_s`` has passed: ``cut`` says so and the log warns), the old VNF is terminated
   and forgotten.

A replacement that fails to launch undoes the move: the VNF offers its slots again (nothing is
lost). A move in progress is kept in the source host's power record (``detail["rebalancing"]``) so
that ``fluidvim power hosts`` shows it and a restarted orchestrator continues it
(:meth:`Moves.load`); the last finished ones stay there as ``rebalanced``; ``fluidvim power
plan`` lists both.
"""

from __future__ import annotations

import dataclasses
import time

from oslo_log import log as logging

from fluidvim.common import instance_states as istates

LOG = logging.getLogger(__name__)

KEEP_DONE = 10
"""Finished moves a host's record keeps (``moved``)."""


class MoveError(Exception):
    """A move that cannot start (unknown or non-serving instance, unknown target, launch failed)."""


@dataclasses.dataclass
class Move:
    instance: str
    service: str
    src: str                        # zone/host the VNF leaves
    dst: str                        # zone/host its replacement runs on
    started: float
    replacement: str | None = None
    state: str = "draining"         # draining -> done
    ended: float | None = None
    cut: bool = False               # the bound passed with sessions left
    reason: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _split(key: str) -> tuple[str, str]:
    if "/" not in key:
        raise MoveError(f"host: {key!r} is not zone/host")
    zone, host = key.split("/", 1)
    return zone, host


class Moves:
    """Rebalancing moves in progress (module doc). ``launcher(zone, host, service) -> instance``
    starts the replacement; ``note(zone, host, rebalancing, rebalanced)`` keeps a source host's moves in
    its record (``HostPower``)."""

    def __init__(self, store, zones: dict, registry, launcher, *, bound_s: float,
                 note=None, clock=time.time):
        self.store, self.zones, self.registry = store, zones, registry
        self.launcher, self.note, self.clock = launcher, note, clock
        self.bound_s = bound_s
        self.moving: dict[str, Move] = {}
        self.done: list[Move] = []

    def held(self, since: float) -> set:
        """Instances no new move may take: those moving, and replacements started after
        ``since`` (a VNF moved in is not moved on at once)."""
        out = set(self.moving)
        out |= {m.replacement for m in (*self.moving.values(), *self.done)
                if m.replacement and m.started >= since}
        return out

    def start(self, instance: str, dst: str, reason: str = "") -> Move:
        """Withdraw ``instance``'s slots and launch its replacement on ``dst`` (zone/host).
        Raises :class:`MoveError` (and leaves the VNF serving) when it cannot."""
        if self.launcher is None:
            raise MoveError("no launcher: this orchestrator cannot start a replacement")
        if instance in self.moving:
            raise MoveError(f"instance {instance} is moving already (to {self.moving[instance].dst})")
        row = next((i for i in self.store.instances() if i.id == instance), None)
        if row is None:
            raise MoveError(f"instance: {instance!r} is not a live instance of this "
                            "orchestrator (see `fluidvim instance list`)")
        dzone, dhost = _split(dst)
        if dzone not in self.zones:
            raise MoveError(f"host: zone {dzone!r} of {dst} is not a zone of this orchestrator")
        src = f"{row.zone}/{row.host}"
        if src == dst:
            raise MoveError(f"host: instance {instance} already runs on {dst}")
        m = Move(instance, row.service, src, dst, self.clock(), reason=reason)
        self.registry.withdraw(instance, f"moving to {dst}")
        try:
            new = self.launcher(dzone, dhost, row.service)
        except Exception as e:  # noqa: BLE001 - any failure: the VNF serves again, nothing lost
            self.registry.restore(instance)
            LOG.warning("move of %s (%s) %s -> %s undone: its replacement did not start: %s",
                        instance, row.service, src, dst, e)
            raise MoveError(f"instance {instance}: the replacement on {dst} did not start: "
                            f"{e}") from e
        m.replacement = getattr(new, "id", None)
        self.moving[instance] = m
        LOG.info("move of %s (%s) %s -> %s: it offers no slots, replacement %s runs on %s; "
                 "waiting for its sessions (bound %g s)%s", instance, row.service, src, dst,
                 m.replacement, dst, self.bound_s, f": {reason}" if reason else "")
        self._note(m.src)
        return m

    def advance(self) -> list[Move]:
        """Finish the moves whose VNF has no live session left (or whose bound passed): the old
        VNF is terminated and forgotten. Returns those finished now."""
        out = []
        now = self.clock()
        if not self.moving:
            return out
        rows = {i.id: i for i in self.store.instances(statuses=None)}    # one read a round
        for iid, m in list(self.moving.items()):
            zname, _host = _split(m.src)
            z = self.zones.get(zname)
            row = rows.get(iid)
            if z is None or row is None or row.status not in istates.LIVE:
                # gone meanwhile (terminated by hand, scaled in): nothing left to do
                self._finish(m, now, cut=False, gone=True)
                out.append(m)
                continue
            try:
                used = z.instance_sessions(iid)
            except Exception as e:  # noqa: BLE001 - the zone is down: ask again next round
                LOG.warning("move of %s: cannot read its sessions: %s", iid, e)
                continue
            ended = self.registry.sessions_done(iid, int(row.slots_total or 0), since=m.started,
                                                used=used)
            if not ended and now < m.started + self.bound_s:
                continue
            if not ended:
                LOG.warning("move of %s %s -> %s: session bound %g s passed; it goes with "
                            "%s session(s)", iid, m.src, m.dst, self.bound_s,
                            used if used is not None else "some")
            try:
                z.terminate(iid)
            except Exception as e:  # noqa: BLE001 - try again next round
                LOG.warning("move of %s: terminating it failed: %s", iid, e)
                continue
            self.store.set_instance_status(iid, istates.DELETED)
            self.store.delete_slot_reports(iid)
            self._finish(m, now, cut=not ended)
            out.append(m)
        return out

    def _finish(self, m: Move, now: float, *, cut: bool, gone: bool = False) -> None:
        self.registry.forget(m.instance)
        m.state, m.ended, m.cut = ("gone" if gone else "done"), now, cut
        self.moving.pop(m.instance, None)
        self.done = [*self.done, m][-KEEP_DONE:]
        LOG.info("move of %s (%s) %s -> %s %s after %.1f s%s", m.instance, m.service, m.src,
                 m.dst, "finished" if not gone else "ended (the VNF was gone)", now - m.started,
                 " (session bound passed)" if cut else ": no session cut")
        self._note(m.src)

    def _note(self, src: str) -> None:
        if self.note is None:
            return
        zone, host = _split(src)
        self.note(zone, host, [m.to_dict() for m in self.moving.values() if m.src == src],
                  [m.to_dict() for m in self.done if m.src == src])

    def load(self, records) -> list[Move]:
        """Continue the moves of a stopped orchestrator: ``records`` are ``Move.to_dict()``s
        (a host record's ``rebalancing``); each VNF is withdrawn again."""
        out = []
        for r in records:
            m = Move(**{k: r[k] for k in r if k in Move.__dataclass_fields__})
            if m.instance in self.moving:
                continue
            self.registry.withdraw(m.instance, f"moving to {m.dst}")
            self.moving[m.instance] = m
            out.append(m)
        return out

    def status(self) -> dict:
        return {"rebalancing": [m.to_dict() for m in self.moving.values()],
                "rebalanced": [m.to_dict() for m in self.done]}
