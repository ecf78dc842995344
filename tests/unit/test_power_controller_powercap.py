# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/powercap's arithmetic (no VNF, no traffic): its --fixed modes and the VNF's
notifications per frame from two `stats` replies."""

from __future__ import annotations

import pytest

from bench import powercap
from fluidvim.orchestrator.power import backend


def test_fixed_modes_are_a_quota_period_poll_window_and_moderation():
    """quota/period,window (a cap on the vCPU threads) or open,window (no cap), ',hp' keeping
    the host's halt polling on, ',cN' the VNF's interrupt moderation (0 = off otherwise)."""
    assert powercap.fixed("2000/20000,50") == (2000, 50, 20000, None, 0)
    assert powercap.fixed("10000,50") == (10000, 50, 100000, None, 0)    # the flavor's period
    assert powercap.fixed("open,0") == (None, 0, 100000, None, 0)
    assert powercap.fixed("open,0,hp") == (None, 0, 100000, True, 0)
    assert powercap.fixed("1000/3500,0,hp") == (1000, 0, 3500, True, 0)
    assert powercap.fixed("open,0,c1000") == (None, 0, 100000, None, 1000)
    assert powercap.fixed("open,0,hp,c2000") == (None, 0, 100000, True, 2000)
    for bad in ("150000/100000,1000,50", "open,0,cx", "open,0,hp,hp"):
        with pytest.raises(ValueError):
            powercap.fixed(bad)


def test_fixed_modes_may_set_the_vcpu_threads_nice():
    """',nN': the nice of the VNF's vCPU threads for that mode (None: the launch's)."""
    assert powercap.fixed("open,0,c1000,n0") == powercap.fixed("open,0,c1000")
    assert powercap.fixed_nice("open,0,c1000,n0") == 0
    assert powercap.fixed_nice("open,0,n-5,c1000") == -5
    assert powercap.fixed_nice("open,0,c1000") is None


def test_vcpu_wait_is_the_schedulers_wait_per_run_and_per_second():
    a, b = {"wait_ns": 1_000_000, "runs": 100}, {"wait_ns": 5_000_000, "runs": 300}
    assert powercap.vcpu_wait(a, b, 2.0) == {"us_per_run": 20.0, "ms_per_s": 2.0,
                                             "runs_per_s": 100.0}
    assert powercap.vcpu_wait(a, a, 2.0) is None


def test_step_waits_and_the_over_target_intervals_waits():
    w0 = {"wait_ns": 0, "runs": 0, "main_wait_ns": 1_000_000}
    w1 = {"wait_ns": 2_500_000, "runs": 10, "main_wait_ns": 9_000_000}
    s0 = {"uptime_us": 0, "cpu": {"stolen_us": 0}}
    s1 = {"uptime_us": 500_000, "cpu": {"stolen_us": 100_000}}
    assert powercap.step_waits(w0, w1, s0, s1) == {"vcpu_wait_ms": 2.5, "main_wait_ms": 8.0,
                                                   "stolen": 0.2}
    assert powercap.step_waits(w0, w1, None, s1)["stolen"] is None
    step = lambda m: {"main_wait_ms": m, "vcpu_wait_ms": 1.0, "stolen": 0.1}  # noqa: E731
    trials = [{"e2e_p99_us": [2000.0, 6000.0, 7000.0], "timeline": [step(1), step(9), step(11)]},
              # counts differ: not aligned, left out
              {"e2e_p99_us": [9000.0], "timeline": [step(50), step(50)]}]
    got = powercap.over_target_waits(trials, 5000.0)
    assert (got["over"], got["within"]) == (2, 1)
    assert (got["main_wait_ms_over"], got["main_wait_ms_within"]) == (10.0, 1.0)
    assert got["stolen_over"] == 0.1
    assert powercap.over_target_waits(trials[:1], 8000.0) is None


def test_vnf_shares_carry_the_stolen_time():
    def stats(up, busy, poll, halt, stolen=None):
        cpu = {"busy_us": busy, "poll_us": poll, "halt_us": halt}
        if stolen is not None:
            cpu["stolen_us"] = stolen
        return {"uptime_us": up, "cpu": cpu}

    a, b = stats(0, 0, 0, 0, 0), stats(1000, 100, 200, 300, 400)
    assert powercap.vnf_shares(a, b) == {"busy": 0.1, "poll": 0.2, "halt": 0.3, "stolen": 0.4}
    # a VNF image without stolen_us: 0 (its steal is in the other three)
    assert powercap.vnf_shares(stats(0, 0, 0, 0), stats(1000, 100, 200, 700))["stolen"] == 0


def test_vnf_events_are_per_thousand_frames_received():
    def stats(rx, kicks, halts, wake_rx):
        cpu = {"kicks": kicks, "halts": halts, "wake_rx": wake_rx}
        return {"cpu": cpu, "nics": [{"rx": rx}, {"rx": rx // 2}]}

    a, b = stats(1000, 10, 5, 4), stats(3000, 310, 55, 44)            # 3,000 frames
    assert powercap.vnf_events(a, b) == {"kicks": 100.0, "halts": 16.7, "wake_rx": 13.3,
                                          "naps": 0.0}
    # a reply missing its NICs gives nothing
    assert powercap.vnf_events({}, b) is None


def test_intervals_are_judged_end_to_end_with_the_vnfs_own_beside():
    """pktgen recv's per-interval p99 (partial intervals with < MIN_SAMPLES frames left out)
    judges a mode against its end-to-end target; the VNF's own p99 (ns) against the same."""
    lat = {"interval_p99_us": [-1.0, 900.0, 7000.0, 1200.0, 50.0],
           "interval_samples": [0, 3000, 3000, 3000, powercap.MIN_SAMPLES - 1]}
    trial = {"e2e_p99_us": powercap.e2e_intervals(lat), "vnf_p99_ns": [8192, 16384, 8_388_608]}
    assert trial["e2e_p99_us"] == [900.0, 7000.0, 1200.0]
    assert powercap.within([trial], "e2e_p99_us", 5000) == (2, 3)
    assert powercap.within([trial], "vnf_p99_ns", 5e6) == (2, 3)
    assert powercap.pct((2, 3)) == 66.7 and powercap.pct((0, 0)) is None


def test_kvm_halt_rates_are_per_second_and_the_polling_in_cpu():
    """The host's halt polling for the VNF (KVM's halt_poll_*_ns, QMP query-stats): CPU-s/s."""
    a = {"halt_exits": 100, "halt_poll_success_ns": 0, "halt_poll_fail_ns": 0}
    b = {"halt_exits": 1100, "halt_poll_success_ns": 300_000_000, "halt_poll_fail_ns": 100_000_000}
    assert powercap.kvm_halt_rates(a, b, 2.0) == {"exits": 500.0, "poll_cpu": 0.2}
    assert powercap.kvm_halt_rates(None, b, 2.0) is None


def test_loss_added_is_judged_against_the_defaults_own_spread_across_rounds():
    """The quiet run of record at 90 % load: +1.3 pt loss added by a controller holding the
    default's settings, where the default itself lost 1.25 % in one round and 4.22 % in the
    other: within its noise, which the JSON now says (round by round too)."""
    def t(mode, r, loss, cpu=15.0):
        return {"mode": mode, "round": r, "loss": loss, "cpu_s_per_mpkt": cpu}
    trials = [t("default", 0, 0.0125, 15.5), t("controller", 0, 0.0141),
              t("open,0,c1000", 0, 0.0091), t("open,0,c1000", 1, 0.0013),
              t("controller", 1, 0.0655), t("default", 1, 0.0422, 16.0)]
    modes = {"default": {"loss": 0.02735}, "controller": {"loss": 0.0398},
             "open,0,c1000": {"loss": 0.0052}}
    n = powercap.noise(trials, modes)
    assert n == {"default_loss_pct_by_round": [1.25, 4.22], "default_loss_spread_pct": 2.97,
                 "loss_added_by_round_pct": [0.16, 2.33], "loss_added_within_noise": True,
                 "default_cpu_spread_pct": 3.2}
    assert (modes["controller"]["loss_added_pct"], modes["open,0,c1000"]["loss_added_pct"]) == (
        1.25, -2.21)
    modes["controller"]["loss"] = 0.06                # 3.3 pt over: beyond the spread
    assert powercap.noise(trials, modes)["loss_added_within_noise"] is False
    one = powercap.noise([x for x in trials if x["round"] == 0], modes)    # one round: unknown
    assert (one["default_loss_spread_pct"], one["loss_added_within_noise"]) == (None, None)


def test_reads_only_is_a_fixed_mode_with_ro_and_its_settings_unchanged():
    """',ro' after a --fixed mode: its settings, and a controller beside it that reads and
    decides but acts on nothing (the controller's per-interval reads, isolated)."""
    assert powercap.fixed("open,0,c1000,ro") == powercap.fixed("open,0,c1000")
    assert powercap.reads_only("open,0,c1000,ro") and powercap.reads_only("1000/3500,0,ro")
    assert not powercap.reads_only("open,0,c1000") and not powercap.reads_only("default")
    assert not powercap.reads_only("controller") and not powercap.reads_only(powercap.TIGHT)


def test_path_loss_says_where_the_windows_frames_went_missing():
    """Frames into the VNF's path (ns a's veth on bridge 0) less those out (ns b's veth):
    before its tap, dropped at its tap, in its ring or in it (its own NIC counters), on its
    way out; every counter read in the same instant, so a window that outlasts the sender
    loses nothing by it (the old loss, delivered against the sender's mean rate, did)."""
    a = {"in": 1000, "to_vnf": 900, "tap_dropped": 5, "from_vnf": 880, "out": 870,
         "out_dropped": 0, "softnet_dropped": 7, "t": 0.0}
    b = {"in": 11000, "to_vnf": 10880, "tap_dropped": 15, "from_vnf": 10840, "out": 10820,
         "out_dropped": 2, "softnet_dropped": 7, "t": 6.0}
    d = powercap.path_delta(a, b)
    assert d == {"in": 10000, "to_vnf": 9980, "tap_dropped": 10, "from_vnf": 9960, "out": 9950,
                 "out_dropped": 2, "softnet_dropped": 0}
    assert powercap.path_loss(d, vnf_rx=9975, vnf_tx=9965) == {
        "before_tap": 10, "tap_dropped": 10, "through_vnf": 20, "after_vnf": 10,
        "out_dropped": 2, "softnet_dropped": 0, "all": 50, "ring": 5, "in_vnf": 10,
        "vnf_to_tap": 5}
    lost = powercap.path_loss(d)
    assert "ring" not in lost and lost["all"] == d["in"] - d["out"]
    assert powercap.path_delta(a, {**b, "out": None})["out"] is None    # not read: not known


def test_path_loss_share_counts_drops_not_the_frames_queued_at_the_edges():
    """Frames queued in the tap and the VNF at the window's end (a nap, a vCPU the host held)
    are no loss; what the tap, the VNF and the way after it dropped is; in − out beside it."""
    d = {"in": 50_000, "to_vnf": 48_000, "tap_dropped": 0, "from_vnf": 47_884, "out": 47_884}
    where = powercap.path_loss(d)
    assert powercap.path_loss_share(where, d, 0) == (0.0, 0.04232)
    assert powercap.path_loss_share(where, d, 50) == (0.001, 0.04232)
    tap = {**d, "to_vnf": 49_000, "tap_dropped": 1000, "from_vnf": 49_000, "out": 48_990}
    assert powercap.path_loss_share(powercap.path_loss(tap), tap, None) == (0.0202, 0.0202)
    assert powercap.path_loss_share(where, {**d, "out": None}, 0) == (None, None)


def test_host_speed_is_the_generators_cpu_per_frame_sent():
    trials = [{"sent_pps": 8000, "cpu_per_s": {"generator": 0.24}},
              {"sent_pps": 8000, "cpu_per_s": {"generator": 0.32}},
              {"sent_pps": 8000, "cpu_per_s": {"generator": 0.28}},
              {"sent_pps": 0, "cpu_per_s": {"generator": 0.5}}]      # no frame sent: left out
    assert powercap.host_speed(trials) == 35.0
    assert powercap.host_speed([]) is None


def test_capacity_is_checked_as_a_rate_the_default_sustains(monkeypatch):
    """The searches' median is the capacity when a ``default`` trial at it (1 s of warm-up,
    --verify-s measured) drops under 0.1 % on its path, else 5 % lower until one does, at
    most --verify-steps times; every check is recorded (the quiet run 11-29 01:19: "90 %" of
    the median was past what the default held)."""
    import argparse

    losses, seen = [0.004, 0.002, 0.0005], []

    def trial(vnf, path, pps, mode, args, ctl):
        seen.append((pps, mode, args.warmup, args.measure, ctl))
        return {"loss": losses[len(seen) - 1], "loss_in_out": 0.01, "sent_pps": pps,
                "delivered_pps": pps, "path_loss": {"tap_dropped": 7}, "lat_p99_us": 900,
                "e2e_p99_us": [800.0]}

    monkeypatch.setattr(powercap, "trial", trial)
    args = argparse.Namespace(warmup=5.0, measure=6.0, verify_s=3.0, verify_steps=6)
    cap, checks = powercap.sustained(None, None, 80_000, args)
    assert cap == 72_200 and [c["pps"] for c in checks] == [80_000, 76_000, 72_200]
    assert [c["held"] for c in checks] == [False, False, True]
    assert seen[0] == (80_000, "default", 1.0, 3.0, None)
    assert (args.warmup, args.measure) == (5.0, 6.0)          # the trials' own untouched
    # none held within --verify-steps: the lowest tried, recorded as not held
    losses[:], seen[:] = [0.01] * 3, []
    args.verify_steps = 2
    cap, checks = powercap.sustained(None, None, 80_000, args)
    assert cap == 72_200 and [c["held"] for c in checks] == [False] * 3


def test_controller_limit_is_the_controller_with_moderate_at_limit_flipped():
    args = powercap.parse(["--modes", "default,controller,controller-limit", "--tight-ms", "0"])
    assert args.modes == ["default", "controller", powercap.FLIPPED]
    assert powercap.is_controller(powercap.FLIPPED)
    assert powercap.target_ms(powercap.FLIPPED, args) == args.target_ms
    for flag in (False, True):
        args.moderate_at_limit = flag
        plain = powercap.controller(None, args, 5.0)
        flipped = powercap.controller(None, args, 5.0, mode=powercap.FLIPPED)
        assert (plain.moderate_at_limit, flipped.moderate_at_limit) == (flag, not flag)
    with pytest.raises(SystemExit):
        powercap.parse(["--modes", "default,controller-wide"])


def test_controller_plain_is_the_controller_without_its_rule_on_qemus_main_thread():
    args = powercap.parse(["--modes", "default,controller,controller-plain", "--tight-ms", "0"])
    assert args.modes == ["default", "controller", powercap.PLAIN]
    assert powercap.is_controller(powercap.PLAIN)
    assert backend.BACKEND_NICE is None and backend.BACKEND_SLICE_US is None
    assert powercap.controller(None, args, 5.0).backend.want is None   # the product's: off
    tried = powercap.parse(["--backend-nice", str(backend.TRIED_NICE),
                            "--backend-slice-us", str(backend.TRIED_SLICE_US)])
    assert powercap.controller(None, tried, 5.0).backend.want == (
        backend.TRIED_NICE, backend.TRIED_SLICE_US)
    assert powercap.controller(None, args, 5.0, mode=powercap.PLAIN).backend.want is None
    assert powercap.controller(None, args, 5.0, act=False).backend.want is None
    args = powercap.parse(["--backend-nice", "none", "--backend-slice-us", "300"])
    assert powercap.controller(None, args, 5.0).backend.want == (None, 300)


def test_a_sigterm_unwinds_the_bench_through_its_finally_blocks():
    # bench/powercap and bench/slots install it: a killed run tears down its VNF and netns
    import os
    import signal

    import bench

    old = signal.getsignal(signal.SIGTERM)
    unwound = []
    try:
        bench.unwind_on_sigterm()
        with pytest.raises(SystemExit) as e:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):       # the handler runs between bytecodes
                    pass
            finally:
                unwound.append(True)
        assert e.value.code == 128 + signal.SIGTERM and unwound == [True]
    finally:
        signal.signal(signal.SIGTERM, old)


def test_controller_queue_is_the_controller_with_the_high_load_rule_before():
    args = powercap.parse(["--modes", "default,controller,controller-queue", "--tight-ms", "0"])
    assert args.modes == ["default", "controller", powercap.QUEUE]
    assert powercap.is_controller(powercap.QUEUE)
    assert powercap.controller(None, args, 5.0).release_on_queue is False
    assert powercap.controller(None, args, 5.0, mode=powercap.QUEUE).release_on_queue is True
