# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""oslo.config options of the evaluator (group ``[evaluator]``) and the objects they build.

The orchestrator registers these (``register_opts``) and builds its stage-1 runner and stage-2
analyzer with :func:`make_stage1` and :func:`make_analyzer`. How long probe results stay valid
and the cost-benefit weights are the orchestrator's options (``[orchestrator] probe_validity``,
``weight_*``) and are passed in, so each concept has one option.
"""

from __future__ import annotations

from oslo_config import cfg

from fluidvim.common.optgroups import register_group
from fluidvim.vnf import limits

from .confirm import (
    CONFIRM_MARGIN,
    CONFIRM_REPEATS,
    CONFIRM_RUNS,
    DEFAULT_SESSION_S,
    UNCONFIRMED_SHARE,
)
from .probes import DEFAULT_SESSIONS

evaluator_group = cfg.OptGroup("evaluator", title="Evaluator (stage-1 probes, stage-2 analyzers)",
                               help="How placement measures environment types and ranks them.")

SERVICE_LEVEL = "service"   # load_probe_confirm_levels: the placed service's deadline, quantile

evaluator_opts = [
    cfg.FloatOpt("probe_failure_valid_for", default=300.0, min=0.0,
                 help="Seconds a failed probe result is kept, so a broken environment is not "
                      "probed again on every placement."),
    cfg.IntOpt("boot_probe_launches", default=3, min=1, max=50,
               help="Launches per boot probe (cold; as many warm where the zone has a pool)."),
    cfg.ListOpt("load_probe_sessions", item_type=cfg.types.Integer(min=1, max=limits.SLOTS_MAX),
                default=[str(s) for s in DEFAULT_SESSIONS],
                help="Session counts of the load probe's ladder, measured in ascending order "
                     "until loss exceeds load_probe_stop_loss."),
    cfg.FloatOpt("load_probe_session_pps", default=100.0, min=0.1,
                 help="Packets/s each probe session sends (services with another rate are "
                      "scaled from the same curve)."),
    cfg.FloatOpt("load_probe_step", default=2.0, min=0.1, max=60.0,
                 help="Seconds each load step is measured (after a 0.3 s warm-up)."),
    cfg.IntOpt("load_probe_refine", default=3, min=0, max=20,
               help="Extra load steps measured at the saturation knee."),
    cfg.FloatOpt("load_probe_stop_loss", default=0.3, min=0.0, max=1.0,
                 help="Stop the ladder after a step losing more than this fraction."),
    cfg.StrOpt("load_probe_proto", default="icmp", choices=["icmp", "udp"],
               help="icmp: a session is an ICMP echo flow answered by the far namespace's "
                    "kernel; udp: a UDP 5-tuple per session to a user-space echo."),
    cfg.StrOpt("load_probe_traffic", default="netns", choices=["auto", "netns", "vnf"],
               help="Where a load probe's traffic comes from: netns = network namespaces on "
                    "this machine (the local zone only; elsewhere no load probe); vnf = a "
                    "generator VNF the zone runs beside the probe VNF (zones that create "
                    "networks and show a VNF's stats: Nomad clients with private_bridges), "
                    "about 20 VNF launches per environment type and probe period; auto = netns "
                    "where it can, else vnf."),
    cfg.StrOpt("load_probe_netns_prefix", default="fvlp",
               help="Prefix (<= 6 characters) of the load probe's network namespaces, veths "
                    "and bridges; a random tag follows it, unique on the host per probe run."),
    cfg.IntOpt("load_probe_subnet", default=96, min=0, max=255,
               help="The load probe's test network is 10.<subnet>.0.0/24."),
    cfg.ListOpt("load_probe_confirm_levels", default=[SERVICE_LEVEL],
                help="What stage 1's load probe confirms after its fast steps: session-length "
                     "runs (load_probe_session_s) judged one session at a time, bracketed and "
                     "bisected from the fast estimate, at a deadline and quantile. "
                     f"'{SERVICE_LEVEL}' (the default): the deadline_ms and qos_quantile of the "
                     "service being placed (services at load_probe_session_pps), so only the "
                     "levels the zone's services use are confirmed; other names: qos_levels "
                     "names, confirmed whatever is placed. A service at a confirmed deadline, "
                     "quantile and rate announces the confirmed slots (orchestrator launches, "
                     "qscore and cost-benefit ranking); until then, and at any level not "
                     "confirmed, load_probe_unconfirmed_share of the fast estimate. Costs about "
                     "load_probe_confirm_runs x (load_probe_session_s + 1 s) per level and "
                     "environment type, once per probe validity (about 2.5 min with the "
                     "defaults; in the background with load_probe_confirm_background). Empty: "
                     "no confirm phase, every service gets the fast estimate undiminished, "
                     "which was 49 % under to 60 % over the per-session reference on two "
                     "machines (bench/results/slots.md)."),
    cfg.BoolOpt("load_probe_confirm_background", default=True,
                help="Run the confirm phase in the background: stage 1 returns the fast steps' "
                     "result at once (the first placement on a new environment type waits for "
                     "the fast steps only) and it is replaced in the probe cache when the "
                     "confirm lands; meanwhile services read load_probe_unconfirmed_share of "
                     "the fast estimate. One load measurement at a time: another load probe "
                     "waits for it. False: the placement waits for the confirm."),
    cfg.FloatOpt("load_probe_unconfirmed_share", default=UNCONFIRMED_SHARE, min=0.01, max=1.0,
                 help="Share of the fast estimate a probe that confirms announces where it has "
                      "no confirmed capacity (the confirm under way or failed, a level it did "
                      "not confirm). 0.5: the fast estimate read up to 57 % over the per-session "
                      "reference on the quiet host of bench/results/slots.md, and the admission "
                      "at half of it is benched there (bench.slots qoe, 'unconfirmed')."),
    cfg.FloatOpt("load_probe_session_s", default=DEFAULT_SESSION_S, min=0.5, max=600.0,
                 help="Seconds one session lasts in the load probe's confirm runs: the session "
                      "length the confirmed slots are judged at (a 2 s step does not show what "
                      "a longer session meets at the same rate)."),
    cfg.IntOpt("load_probe_confirm_runs", default=CONFIRM_RUNS, min=1, max=30,
               help="Session-length runs at most per confirmed level (the count it announces "
                    f"is run {CONFIRM_REPEATS} times and must hold in every run)."),
    cfg.FloatOpt("load_probe_confirm_margin", default=CONFIRM_MARGIN, min=0.0, max=0.5,
                 help="The confirmed slots are at most (1 - this) x the smallest session count "
                      "that failed in any confirm run: where the knee is bimodal (a run holds or "
                      "fails for all its sessions at random, bench/results/slots.md) a count "
                      "that held right under a failure is luck. On a clean knee it costs at "
                      "most this share of the capacity (0.1: within the +-10 % issue 23 "
                      "allows); 0 = the count just under the first failure."),
    cfg.FloatOpt("max_loss", default=0.01, min=0.0, max=1.0,
                 help="Packet loss a service tolerates when its slots are read off the curve."),
    cfg.StrOpt("analyzer", default="cost-benefit", choices=["cost-benefit", "qscore", "formula"],
               help="Stage-2 analyzer."),
    cfg.ListOpt("qos_levels", default=["basic=0.99:20:0.01"],
                help="qscore levels NAME=QUANTILE:DEADLINE_MS:PRICE_PER_SESSION_HOUR, the first "
                     "is Q0 (guaranteed)."),
    cfg.FloatOpt("energy_price_per_kwh", default=0.0, min=0.0,
                 help="qscore: price of marginal energy."),
    cfg.StrOpt("formula", default="slots / max(price_per_hour, 0.01) - queuing_delay_s",
               help="formula analyzer: an arithmetic expression over the documented variables "
                    "(slots, price_per_hour, power_w, queuing_delay_s, boot_ms, ...; see "
                    "fluidvim.evaluator.analyzers.FORMULA_VARIABLES)."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [evaluator] on ``conf`` (idempotent)."""
    register_group(conf, evaluator_group, evaluator_opts)


def list_opts():
    return [(evaluator_group, evaluator_opts)]


def parse_levels(items) -> list:
    """``NAME=QUANTILE:DEADLINE_MS[:PRICE]`` strings -> QoSLevel list (clear errors)."""
    from .analyzers import QoSLevel
    levels = []
    for item in items:
        try:
            name, rest = item.split("=", 1)
            parts = rest.split(":")
            q, d = float(parts[0]), float(parts[1])
            wtp = float(parts[2]) if len(parts) > 2 else 0.0
        except (ValueError, IndexError):
            raise ValueError(f"[evaluator] qos_levels: {item!r} is not "
                             "NAME=QUANTILE:DEADLINE_MS:PRICE_PER_SESSION_HOUR "
                             "(e.g. gold=0.99:10:0.05)") from None
        levels.append(QoSLevel(name.strip(), d, q, wtp))
    return levels


def confirm_targets(conf: cfg.ConfigOpts) -> list:
    """The SessionTargets stage 1's load probe confirms whatever is placed
    (``load_probe_confirm_levels`` names other than ``service``; empty = none), one per named
    QoS level, at its deadline and quantile and ``[evaluator] max_loss``; two levels at one
    deadline and quantile share one. ValueError naming the configured levels for an unknown
    name."""
    c = conf.evaluator
    levels = {lv.name: lv for lv in parse_levels(c.qos_levels)}
    names = [n.strip() for n in c.load_probe_confirm_levels or () if n.strip()]
    targets = []
    for name in dict.fromkeys(names):
        if name == SERVICE_LEVEL:
            continue
        if name not in levels:
            raise ValueError(f"[evaluator] load_probe_confirm_levels: {name!r} is not a QoS "
                             f"level of qos_levels ({', '.join(levels) or 'none'}) nor "
                             f"{SERVICE_LEVEL!r}")
        lv = levels[name]
        t = _target(c, lv.deadline_ms, lv.quantile)
        if t not in targets:                  # two levels at one deadline and quantile: one run
            targets.append(t)
    return targets


def _target(c, deadline_ms: float, quantile: float):
    from .confirm import SessionTarget
    return SessionTarget(deadline_ms, quantile, session_s=c.load_probe_session_s,
                         max_loss=c.max_loss, runs=c.load_probe_confirm_runs,
                         margin=c.load_probe_confirm_margin)


def service_target(conf: cfg.ConfigOpts):
    """The template of the placed service's SessionTarget (``service`` in
    ``load_probe_confirm_levels``: the default): session length, runs, margin and max_loss from
    [evaluator], the deadline and quantile the service's (LoadProbe.targets); None without."""
    c = conf.evaluator
    if SERVICE_LEVEL not in [n.strip() for n in c.load_probe_confirm_levels or ()]:
        return None
    return _target(c, 10.0, 0.99)


def make_probes(conf: cfg.ConfigOpts, valid_for_s: float = 3600.0) -> list:
    from .probes import BootProbe, LoadProbe, StaticProbe
    c = conf.evaluator
    return [StaticProbe(),
            BootProbe(n=c.boot_probe_launches, valid_for_s=valid_for_s),
            LoadProbe(sessions=[int(s) for s in c.load_probe_sessions],
                      session_pps=c.load_probe_session_pps, step_s=c.load_probe_step,
                      refine=c.load_probe_refine, stop_loss=c.load_probe_stop_loss,
                      proto=c.load_probe_proto, prefix=c.load_probe_netns_prefix,
                      subnet=c.load_probe_subnet, traffic=c.load_probe_traffic,
                      confirm=confirm_targets(conf) or None,
                      confirm_service=service_target(conf),
                      background=c.load_probe_confirm_background,
                      unconfirmed_share=c.load_probe_unconfirmed_share,
                      valid_for_s=valid_for_s)]


def make_stage1(conf: cfg.ConfigOpts, engine_or_url, valid_for_s: float = 3600.0):
    """A Stage1Runner with a ProbeCache on ``engine_or_url`` (e.g. the orchestrator's engine)."""
    from .cache import ProbeCache
    from .stage1 import Stage1Runner
    return Stage1Runner(ProbeCache(engine_or_url), make_probes(conf, valid_for_s),
                        failure_valid_for_s=conf.evaluator.probe_failure_valid_for)


def make_analyzer(conf: cfg.ConfigOpts, weights: dict | None = None):
    """The [evaluator] analyzer; ``weights`` = the cost-benefit policy weights (slots, price,
    power, delay, boot) - unset ones keep their defaults."""
    from .analyzers import CostBenefitAnalyzer, FormulaAnalyzer, QScoreAnalyzer
    c = conf.evaluator
    if c.analyzer == "qscore":
        return QScoreAnalyzer(parse_levels(c.qos_levels), c.energy_price_per_kwh, c.max_loss)
    if c.analyzer == "formula":
        return FormulaAnalyzer(c.formula, c.max_loss)
    return CostBenefitAnalyzer(weights, c.max_loss)
