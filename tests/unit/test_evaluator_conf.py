# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""[evaluator] options build the probes and analyzers; bad values get clear errors."""

import pytest
from oslo_config import cfg

from fluidvim.evaluator import conf as evconf
from fluidvim.evaluator.analyzers import CostBenefitAnalyzer, FormulaAnalyzer, QScoreAnalyzer
from fluidvim.evaluator.formula import FormulaError
from fluidvim.evaluator.probes import BootProbe, LoadProbe, StaticProbe


def make(**overrides):
    conf = cfg.ConfigOpts()
    evconf.register_opts(conf)
    conf([], project="fluidvim", default_config_files=[])
    for k, v in overrides.items():
        conf.set_override(k, v, group="evaluator")
    return conf


def test_defaults_build_the_standard_set(tmp_path):
    conf = make()
    probes = evconf.make_probes(conf)
    assert [type(p) for p in probes] == [StaticProbe, BootProbe, LoadProbe]
    assert probes[2].proto == "icmp" and probes[2].prefix == "fvlp" and probes[2].sessions[0] == 1
    runner = evconf.make_stage1(conf, f"sqlite:///{tmp_path}/p.sqlite", valid_for_s=60)
    assert runner.failure_valid_for_s == 300.0
    assert [p.valid_for_s for p in runner.probes[1:]] == [60, 60]
    assert isinstance(evconf.make_analyzer(conf), CostBenefitAnalyzer)


def test_analyzer_choices():
    q = evconf.make_analyzer(make(analyzer="qscore", qos_levels=["gold=0.99:10:0.05", "bronze=0.5:30"]))
    assert isinstance(q, QScoreAnalyzer) and [lv.name for lv in q.levels] == ["gold", "bronze"]
    assert q.levels[1].wtp_per_session_hour == 0.0
    f = evconf.make_analyzer(make(analyzer="formula", formula="slots - power_w"))
    assert isinstance(f, FormulaAnalyzer)
    w = evconf.make_analyzer(make(), weights={"price": 2.0})
    assert w.weights["price"] == 2.0 and w.weights["slots"] == 1.0


def test_bad_values():
    with pytest.raises(ValueError, match="qos_levels.*gold=0.99:10:0.05"):
        evconf.make_analyzer(make(analyzer="qscore", qos_levels=["gold"]))
    with pytest.raises(FormulaError, match="unknown name"):
        evconf.make_analyzer(make(analyzer="formula", formula="slots * x"))
    with pytest.raises(ValueError, match="must be a number"):
        evconf.make_analyzer(make(), weights={"price": "cheap"})
    with pytest.raises(ValueError, match="unknown weight"):
        evconf.make_analyzer(make(), weights={"cost": 1})


def test_list_opts():
    (group, opts), = evconf.list_opts()
    assert group.name == "evaluator" and {o.name for o in opts} >= {"load_probe_sessions", "analyzer"}


def test_confirm_default_is_the_placed_services_level_in_the_background():
    from fluidvim.evaluator.confirm import UNCONFIRMED_SHARE, SessionTarget
    from fluidvim.evaluator.model import ServiceProfile
    load = evconf.make_probes(make())[2]
    assert load.confirms == () and load.background                 # no fixed level ...
    assert load.unconfirmed_share == UNCONFIRMED_SHARE
    svc = ServiceProfile("fw", "", deadline_ms=25.0, qos_quantile=0.95)
    (t,) = load.targets(svc)                                       # ... the service's own
    assert (t.deadline_ms, t.quantile) == (25.0, 0.95)
    assert t == SessionTarget(25.0, 0.95)                          # default length, runs, margin
    off = evconf.make_probes(make(load_probe_confirm_levels=[]))[2]
    assert off.targets(svc) == () and off.confirm_service is None
    both = evconf.make_probes(make(load_probe_confirm_levels=["service", "basic"],
                                   load_probe_confirm_background=False))[2]
    assert not both.background and both.targets(svc) == (SessionTarget(20.0, 0.99), t)


def test_confirm_levels_named_levels_build_targets():
    from fluidvim.evaluator.confirm import (
        CONFIRM_MARGIN,
        CONFIRM_RUNS,
        DEFAULT_SESSION_S,
        SessionTarget,
    )
    conf = make(qos_levels=["gold=0.99:10:0.05", "silver=0.95:30", "alias=0.99:10"],
                load_probe_confirm_levels=["silver", "gold", "alias"], max_loss=0.02)
    load = evconf.make_probes(conf)[2]
    # one per level, in the order named; two levels at one deadline and quantile share one
    assert load.confirms == (SessionTarget(30.0, 0.95, DEFAULT_SESSION_S, max_loss=0.02),
                             SessionTarget(10.0, 0.99, DEFAULT_SESSION_S, max_loss=0.02))
    assert all(t.runs == CONFIRM_RUNS and t.margin == CONFIRM_MARGIN for t in load.confirms)
    short = evconf.make_probes(make(load_probe_confirm_levels=["basic"], load_probe_session_s=2.0,
                                    load_probe_confirm_runs=2,
                                    load_probe_confirm_margin=0.2))[2]
    assert short.confirms == (SessionTarget(20.0, 0.99, 2.0, runs=2, margin=0.2),)


def test_confirm_levels_must_name_configured_levels():
    with pytest.raises(ValueError, match="'gold' is not a QoS level of qos_levels \\(basic\\)"):
        evconf.make_probes(make(load_probe_confirm_levels=["gold"]))
    with pytest.raises(ValueError):          # below the option's minimum
        make(load_probe_session_s=0.1)
