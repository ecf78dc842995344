# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot-driven scaling of network services: the decision (pure functions) and the scaler loop.

FUSION's point: session slots and queuing delay let the orchestrator act *ahead* of demand. For
each scaling aspect of a running NS whose scaling is automatic, the scaler keeps a history of the
aspect's slots (free and total over the NS's instances of the services the aspect scales, as the
slot registry has them: reports from the VNFs, minus sessions the resolver handed out) and decides:

* **out** when the free slots would run out before a new instance can exist: with ``rate`` the
  demand (sessions/s: growth of the used slots over the last ``window_s``) and ``lead_s`` the time
  a scale-out takes to give slots, it scales out when ``free <= max(headroom, rate * lead_s)``
  (so also when free = 0). ``lead_s`` is one scaler tick plus, when the zone's queuing delay for
  the service (the time a new VNF takes to come up) exceeds the delay a session may tolerate
  (``fluidvim-max-queuing-delay-s``), that queuing delay (or, when longer, the 90th percentile
  of the same launch times or the NS's recent scale-out durations): a session that finds no
  slot is then refused, so the new slots must exist before the last one is taken; within the
  tolerance it waits for an on-demand scale-out (the resolver asks the NS). ``headroom`` is the aspect's
  ``fluidvim-scale-out-free-slots`` (default 0). A scale-out may follow a scale-out at once (its
  slots are already counted); after a scale-in it waits for the cool-down.
* **in** when slots stay idle: over the whole last ``idle_s`` seconds (and since the last
  operation), the free slots minus those the scale-in step removes stayed above twice the
  scale-out threshold and above zero (hysteresis: the step back cannot trigger a scale-out), the
  cool-down since the last operation passed, and the instances to remove are idle (no slot used).

Never beyond max-number-of-instances / max-scale-level, never below min-number-of-instances /
scale level 0: the caller says whether a step is possible (``can_out`` / ``can_in``).

:class:`Scaler` runs :func:`decide` for every NS every ``interval`` seconds and also heals: an
instance the zone no longer runs (its QEMU died, its host is gone) is replaced
(:meth:`NSManager.heal`).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time

from oslo_log import log as logging

from fluidvim.common.errors import DependencyDown

from .. import states
from ..demand import Sample, demand_rate

LOG = logging.getLogger(__name__)

HYSTERESIS = 2.0            # scale in only when free - step > HYSTERESIS x the scale-out threshold


@dataclasses.dataclass
class Decision:
    action: str | None      # "out" | "in" | None
    reason: str
    rate: float = 0.0       # demand estimate, sessions/s
    threshold: float = 0.0  # scale out at free <= threshold

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def decide(history: list[Sample], *, now: float, lead_s: float, cooldown_s: float, idle_s: float,
           last_op: tuple[str, float] | None, can_out: bool, can_in: bool, step_in_slots: int,
           in_idle: bool = True, window_s: float = 5.0, headroom: int = 0) -> Decision:
    """What to do for one aspect now. ``history``: its samples, oldest first (the last one is now);
    ``last_op``: (\"out\" | \"in\" | other, time.time()) of the NS's last scale/heal operation;
    ``step_in_slots``: slots the scale-in step would remove; ``in_idle``: the instances it would
    remove have no slot in use; ``headroom``: free slots to keep at least (scale out at or below)."""
    if not history:
        return Decision(None, "no slot reading yet")
    cur = history[-1]
    rate = demand_rate(history, now, window_s)
    threshold = max(float(headroom), rate * max(0.0, lead_s))
    since = now - last_op[1] if last_op else float("inf")
    cooled = since >= cooldown_s
    if cur.free <= threshold:
        why = (f"{cur.free} free slot(s) <= {threshold:.2f} (demand {rate:.2f}/s x lead "
               f"{lead_s:.2f} s" + (f", headroom {headroom}" if headroom else "") + ")")
        if not can_out:
            return Decision(None, f"{why}, but the aspect is at its maximum", rate, threshold)
        if last_op and last_op[0] == "in" and not cooled:
            return Decision(None, f"{why}, but cooling down ({since:.1f} of {cooldown_s:g} s "
                            "after a scale-in)", rate, threshold)
        return Decision("out", why, rate, threshold)
    if not can_in:
        return Decision(None, f"{cur.free} free slot(s) > {threshold:.2f}; at the minimum", rate,
                        threshold)
    if not cooled:
        return Decision(None, f"cooling down ({since:.1f} of {cooldown_s:g} s)", rate, threshold)
    start = now - idle_s
    if last_op and last_op[1] > start:
        start = last_op[1]
    span = [s for s in history if s.t >= start]
    if not span or history[0].t > now - idle_s or (last_op and last_op[1] > now - idle_s):
        return Decision(None, f"idle for less than {idle_s:g} s", rate, threshold)
    low = min(s.free for s in span)
    keep = low - step_in_slots
    if keep <= 0 or keep <= HYSTERESIS * threshold:
        return Decision(None, f"{low} free slot(s) at least over {idle_s:g} s; a step in would "
                        f"leave {keep} (must be > max(0, {HYSTERESIS:g} x {threshold:.2f}))",
                        rate, threshold)
    if not in_idle:
        return Decision(None, "slots idle but no instance to remove is idle", rate, threshold)
    return Decision("in", f"at least {low} free slot(s) for {idle_s:g} s; {keep} stay free",
                    rate, threshold)


class Scaler:
    """The orchestrator's NS scaler and healer: one tick every ``interval`` seconds."""

    def __init__(self, nsm, interval: float = 0.5, window_s: float = 5.0):
        self.nsm = nsm
        self.interval = interval
        self.window_s = window_s
        self.history: dict = {}                  # (ns id, aspect key) -> deque of Samples
        self.decisions: dict = {}                # (ns id, aspect key) -> last Decision
        self._stop = threading.Event()
        self._thread = None

    def _samples(self, key, keep_s: float):
        h = self.history.get(key)
        if h is None:
            h = self.history[key] = collections.deque()
        while h and h[-1].t - h[0].t > keep_s:
            h.popleft()
        return h

    def tick(self, now: float | None = None) -> list:
        """One round over the running network services; returns [(ns, what, detail)] done."""
        done = []
        live = {}
        for row in self.nsm.store.network_services():
            if row.status != states.NS_RUNNING:
                continue
            try:
                done += self.nsm.heal_dead(row, live)
            except Exception:  # noqa: BLE001 - the next tick tries again
                LOG.exception("ns %s: heal check failed", row.name)
            try:
                row = self.nsm.store.network_service(row.id)    # as healing left it
            except Exception:  # noqa: BLE001 - deleted meanwhile
                continue
            for a in row.get("plan").get("aspects", []):
                if not a.get("auto") or row.status != states.NS_RUNNING:
                    continue
                key = (row.id, self.nsm.aspect_key(a))
                try:
                    r = self._aspect(row, a, key, time.time() if now is None else now)
                except Exception:  # noqa: BLE001
                    LOG.exception("ns %s: scaler failed for aspect %s", row.name, a["name"])
                    continue
                if r:
                    done.append(r)
        known = {r.id for r in self.nsm.store.network_services()}
        for key in [k for k in self.history if k[0] not in known]:
            self.history.pop(key, None)
            self.decisions.pop(key, None)
        return done

    def _aspect(self, row, a, key, now):
        st = self.nsm.aspect_state(row, a)
        h = self._samples(key, max(a["idle_s"], self.window_s) + 2 * self.interval)
        h.append(Sample(now, st["free"], st["total"]))
        lead = st["lead_s"] + self.interval
        d = decide(list(h), now=now, lead_s=lead, cooldown_s=a["cooldown_s"], idle_s=a["idle_s"],
                   last_op=st["last_op"], can_out=st["can_out"] is None,
                   can_in=st["can_in"] is None, step_in_slots=st["step_in_slots"],
                   in_idle=st["in_idle"], window_s=self.window_s,
                   headroom=a.get("headroom", 0))
        self.decisions[key] = d
        if d.action is None:
            return None
        LOG.info("ns %s aspect %s: scale %s: %s", row.name, a["name"], d.action, d.reason)
        try:
            r = self.nsm.scale(row.id, self.nsm.aspect_key(a), d.action, trigger="slots",
                               reason=d.reason)
        except Exception as e:  # noqa: BLE001 - recorded as the operation's error
            LOG.warning("ns %s aspect %s: scale %s failed: %s", row.name, a["name"], d.action,
                        getattr(e, "message", e))
            return None
        return (row.name, f"scale {d.action}", r)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="fluidvim-ns-scaler")
        self._thread.start()

    def _leader(self) -> bool:
        # active-active: one scaler for all the orchestrators, the oldest live worker's
        members = getattr(self.nsm.orch, "members", None)
        return members is None or members.is_leader()

    def _loop(self):
        while not self._stop.wait(self.interval):
            try:
                if self._leader():
                    self.tick()
            except DependencyDown as e:     # the database is down: one line, keep trying
                LOG.warning("ns scaler: %s", e)
            except Exception:  # noqa: BLE001 - keep scaling
                LOG.exception("ns scaler tick failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
