# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's high-load rule (:mod:`.controller`): **moderation, never a cap**.

At high load (the offered rate ≥ ``max_ratio`` × the capacity, or without one the VNF's
steal-free need ≥ ``max_ratio`` of its quota: the controller's ``high load`` event) a cap
would queue frames, so the quota stays the flavor's. But the host's cost there is per frame
(under PVM the VNF's ring-0 code is emulated: each kick and interrupt acknowledgement), and
interrupt moderation (the ``poll`` op's ``coalesce_us`` with the narrow window) batches it:
bench/powercap's quiet run at 90 % load, fixed ``open,0,c1000`` / ``c2000``: 24-30 % less host
CPU per frame and *less* loss than the default (0.1-0.9 % against 1.3-4.2 %), where the
controller, holding the default's settings, saved 0.3 %. So at high load the controller:

1. **measures the open cost**: the host CPU of the VNF's whole QEMU (its ``usage`` ``total``)
   per frame it took (as bench/powercap's CPU-s/Mpkt is per frame delivered), over
   ``hold_intervals`` high-load intervals open (:func:`record_cost`);
2. **moderates** (``narrow``: the window to ``min_poll_us``, moderation ``coalesce_share`` × the
   target, the quota untouched: state ``poll only``), the nap at most what fills
   ``NAP_RING_SHARE`` of the RX ring at the offered rate (:func:`nap_limit_us`), **but not
   while open is at its limit** (:func:`saturated`): in its last ``hold_intervals`` open
   intervals the host dropped ``SATURATED_DROPS`` (0.1 %) of what it took or more, or its RX
   ring carried ``ring_full`` frames or more. There the default itself loses frames, and a
   moderated interval's cost and drops cannot be told from the path's: trying it only risks
   loss the rule cannot attribute (bench/powercap's quiet run 11-29 01:19 at "90 %": the
   default lost 0.3-0.8 % with an end-to-end p99 of 67-75 ms; the controller narrowed right
   after five open intervals that dropped 458-6,802 frames each). The one exception is the
   back-off's early end below: open lost as much as moderated did; ``moderate_at_limit``
   turns the rule off (to measure it: bench/powercap ``--moderate-at-limit``);
3. **keeps it where it cuts the per-frame cost**: after ``COST_SPAN`` (5) moderated high-load
   intervals, when their median cost is not below (1 − ``min_saving``) × the open median it
   goes back open (``release``: "would not save"); poll only (its window narrowed at low
   load) when the load rises goes back open too until its open cost is measured;
4. **releases it on loss** as any poll-only state does (frames dropped, a full ring, a breach
   of its own p99 against the target less the nap), but the host's drops count only beyond
   the largest share it dropped open in its last ``OPEN_SPAN`` intervals (:func:`host_over_open`:
   at 90 % load the default itself loses 1-4 %, and such drops open are high load, not an
   event of their own); a release from ``poll only`` blocks the next
   moderation at high load for ``FLOOR_AGE`` intervals (the back-off: no flapping between
   open and moderated at every drop), **ended early when open loses as much**: after a
   release on the host's drops, once each of ``hold_intervals`` open intervals lost at least
   the share the moderated one did (:func:`back_off`). The open share it judges drops by is
   only what it measured: bench/powercap's quiet run 22:29 at 90 % load had two open
   intervals at 0 drops, so one moderated interval's burst (4,236 frames, 11 % of what it
   took, after 10 without a drop) released moderation, and the next 9 open intervals lost
   8-34 % each: 8.3 pt more than the default over the trial;
5. **leaves it on loss only** (since 11-29 09:10, :func:`keeps`): a full ring (``ring full``)
   moderated at high load holds, and "would not save" takes ``COST_SPAN`` intervals, not
   ``hold_intervals``. Why: bench/powercap's three quiet runs 11-29 06:36, 06:50 and 07:17 at
   90 % load (their per-interval logs, 288 intervals of 0.5 s): the 100 moderated intervals lost
   0.05 % of their frames at the tap (two bursts, each released on its loss), as the
   default's 144 did (0.05 %), with the end-to-end p99 within 5 ms in 68 % of them against the
   default's 33 %; the 44 open intervals after a release from moderation lost 2 % (34,818
   frames), within 5 ms in 16 %. Of the six releases there not on loss, four were a full ring
   (a moderated interval carried 243-307 frames; moderated intervals carried 200-313 without
   a drop in 06:50 round 2 and 07:17 round 2) and two "would not save" on a median of two
   intervals (11.6 and 12.9 µs against 12.7 and 13.6 open, where the medians before read 10.3-
   11.7): open after them lost 1,932-7,444 frames an interval (06:50 round 3: 5.6 % of the
   trial, the default's rounds 0.01-0.4 %) and 906 (07:17 round 3). Open costs more per frame
   (12.6-14.4 µs against 9.6-11.7 moderated), so going open with a queue in the ring leaves
   the host less CPU to drain it, and at 90 % of a capacity that only just held (06:50: the
   check at 88,033 pps had an end-to-end p99 of 5.8 ms) it did not drain for seconds. (A
   release comes in a bad stretch, so part of that loss is the stretch's own: what the
   intervals show is that moderated ones lost no more than the default's, so staying costs
   nothing measured.) Loss (the host's drops beyond open's, above) still releases it at once.
   ``release_on_queue`` brings the rule before back (bench/powercap ``--modes
   default,controller,controller-queue`` compares both in one run). Dev A/Bs 11-29
   08:32-09:08 at 90 % (docs/power.md): loss 0.27 % a trial against the rule before's 0.56 %
   and the default's 0.16 % (19-25 trials each on a busy 2-core host), 13.2 host CPU-s/Mpkt
   against 13.9 and 16.0: not yet settled.

Without ``coalesce_share`` (0) or a poller, high load holds the flavor's settings as before.
"""

from __future__ import annotations

from fluidvim.common.measure import median

NAP_RING_SHARE = 0.5                 # a nap gathers at most this share of the RX ring's frames
SATURATED_DROPS = 0.001              # the host's drops open (share of what it took): at its limit
COST_SPAN = 5                        # moderated intervals whose median cost "would not save"


def qemu_cpus(prev: tuple | None, cur: tuple | None) -> float | None:
    """CPUs the VNF's whole QEMU used between two of ``VnfState.cpu``'s readings (uptime µs,
    busy, poll, its ``usage``), None when not known."""
    if not prev or not cur or prev[3] is None or cur[3] is None or cur[0] <= prev[0]:
        return None
    return max(0.0, cur[3]["total"] - prev[3]["total"]) * 1e6 / (cur[0] - prev[0])


def record_cost(st, span: int, mod_span: int | None = None) -> None:
    """Keep this high-load interval's host CPU per frame (µs; ``st.qemu_now`` over the frames/s
    it took, ``st.taken``: the host's drops cost QEMU nothing, and per offered frame an open
    interval that dropped 25 % read cheap, its moderation "would not save") as an open or a
    moderated one (the last ``span`` open, ``mod_span`` or ``span`` moderated)."""
    if st.qemu_now is None or not st.taken:
        return
    costs = st.open_costs if st.state == "open" else st.mod_costs if st.state == "poll only" \
        else None
    if costs is not None:
        keep = span if costs is st.open_costs or mod_span is None else mod_span
        costs[:] = (costs + [1e6 * st.qemu_now / st.taken])[-max(1, keep):]


def cost_span(ctl) -> int:
    """The moderated intervals whose median cost decides "would not save": ``COST_SPAN``
    (``hold_intervals`` with ``release_on_queue``, the rule before)."""
    hold = max(1, ctl.hold_intervals)
    return hold if ctl.release_on_queue else max(hold, COST_SPAN)


def keeps(ctl, st, action: str, why: str) -> tuple[str, str]:
    """(action, why) of a full ring while ``poll only``: ``hold`` at high load (the offered
    rate ≥ ``max_ratio`` × the capacity) once its open cost is measured (module doc, 5),
    ``action`` elsewhere or with ``release_on_queue``."""
    if ctl.release_on_queue or not st.open_costs or st.capacity is None or st.rate is None \
            or st.rate < ctl.max_ratio * st.capacity:
        return action, why
    return "hold", f"{why}: moderated at high load, released on loss only"


def host_over_open(st, rx: int, dropped: int | None) -> int | None:
    """The host's drops for the VNF this interval: all of them unless moderated (``poll only``
    at the flavor's quota), then those beyond the largest share of its last open intervals
    (kept here when open, and since a loss release in ``after_loss``; a moderated interval's
    share is ``st.mod_loss_now`` when it counts, else 0)."""
    st.mod_loss_now = 0.0
    if dropped is None:
        return None
    share = dropped / max(1, rx)
    if st.state == "open":
        st.open_host_drops = (st.open_host_drops + [share])[-20:]
        if st.loss_share is not None:
            st.after_loss = (st.after_loss + [share])[-20:]
        return dropped
    if st.state != "poll only":
        return dropped
    over = beyond_open(dropped, st.open_host_drops, rx)
    if over:
        st.mod_loss_now = share
    return over


def beyond_open(count: int, open_shares: list, rx: int) -> int:
    """The frames of ``count`` beyond the largest share of ``rx`` in ``open_shares`` (the last
    open intervals'), 0 under one frame or 0.1 % of ``rx`` (noise, not an event)."""
    over = count - max(open_shares, default=0.0) * rx
    return int(over) if over >= max(1.0, 0.001 * rx) else 0


def back_off(st, intervals: int, loss: bool) -> None:
    """Block moderation at high load ``intervals`` high-load intervals after a release from
    ``poll only``; ``loss``: a release on the host's drops, whose share (``st.loss_share``)
    the open intervals after it are measured against (:func:`decide`)."""
    st.mod_block = intervals
    st.loss_share = (st.mod_loss_now or None) if loss else None
    st.after_loss = []


def nap_limit_us(st, ring_frames: int) -> float | None:
    """The longest nap (µs) whose frames at the offered rate fill ``NAP_RING_SHARE`` of the
    ring, None when the rate is not known."""
    return NAP_RING_SHARE * ring_frames * 1e6 / st.rate if st.rate else None


def saturated(ctl, st, hold: int) -> str | None:
    """Why the VNF's path open is at its limit in its last ``hold`` open intervals (the
    host dropped ``SATURATED_DROPS`` of what it took or more, or its RX ring carried
    ``ctl.ring_full`` frames or more), None when it is not (or it is not known)."""
    drops, backlogs = st.open_host_drops[-hold:], st.open_backlogs[-hold:]
    if drops and max(drops) >= SATURATED_DROPS:
        return f"the host dropped {100 * max(drops):.1f} % of what it took open"
    if backlogs and max(backlogs) >= ctl.ring_full:
        return f"its ring carried {max(backlogs)} frames open"
    return None


def decide(ctl, st, action: str, why: str) -> tuple[str, str]:
    """(action, why) at high load from ``POLICY``'s ``action`` (module doc): ``narrow`` once
    the open cost is measured, moderation is not blocked and the path open is not at its
    limit (:func:`saturated`; unless open just lost as much as moderated did), ``hold``
    while moderated and it saves, ``release`` when it does not over :func:`cost_span`."""
    hold = max(1, ctl.hold_intervals)
    if action == "narrow":
        if not ctl.coalesce_share or ctl.poller is None:
            return "hold", f"{why}: no cap, no moderation to batch with"
        open_lost = st.after_loss[-hold:]
        full = None if ctl.moderate_at_limit else saturated(ctl, st, hold)
        if st.mod_block > 0 and st.loss_share and len(open_lost) >= hold \
                and min(open_lost) >= st.loss_share:
            # open lost as much as moderated did: the release saved no frames (a burst)
            st.mod_block, full, why = 0, None, (
                f"{why}: open lost {100 * min(open_lost):.1f} % or more in {hold} intervals, "
                f"moderated {100 * st.loss_share:.1f} %")
            st.loss_share, st.after_loss = None, []
        if st.mod_block > 0:
            st.mod_block -= 1
            return "hold", f"{why}: no cap; moderation off {st.mod_block + 1} more intervals"
        if len(st.open_costs) < hold:
            return "hold", f"{why}: no cap; its host CPU per frame open measured first"
        if full:
            return "hold", f"{why}: no cap; no moderation while open is at its limit ({full})"
        st.poll_us = ctl.min_poll_us
        return "narrow", (f"{why}: no cap, moderation (open {median(st.open_costs):.1f} us "
                          f"of host CPU per frame)")
    if action == "hold" and st.state == "poll only" and not st.open_costs:
        return "release", f"{why}: its host CPU per frame open not measured yet"
    if action == "hold" and st.state == "poll only" and len(st.mod_costs) >= hold:
        o, m = median(st.open_costs), median(st.mod_costs)
        if m >= (1 - ctl.min_saving) * o and len(st.mod_costs) >= cost_span(ctl):
            back_off(st, ctl.FLOOR_AGE, loss=False)
            return "release", (f"{why}: moderation would not save {100 * ctl.min_saving:g} % "
                               f"({m:.1f} us of host CPU per frame, {o:.1f} open)")
        return "hold", f"{why}: moderated, {m:.1f} us of host CPU per frame ({o:.1f} open)"
    return action, why
