# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The evaluator: stage-1 probes, stage-2 analyzers, FUSION's overhead model, the probe cache.

Public API (the orchestrator imports these names; they are stable):

* :mod:`.model` - EnvironmentType, ServiceProfile, ProbeResult, Candidate, Score
* :mod:`.overhead` - relative_overhead (R1), stage1_cost (C1), stage2_cost (C2),
  break_even_probes, probe_plan, probes_needed
* :mod:`.formula` - SafeFormula, FormulaError
* :mod:`.probes` - Probe, StaticProbe, BootProbe, LoadProbe, can_inject
* :mod:`.slots` - estimate_slots, estimate_capacity, SlotsError
* :mod:`.cache` - ProbeCache (get_valid, put, valid_index, history, invalidate, purge)
* :mod:`.stage1` - Stage1Runner, Stage1Result
* :mod:`.analyzers` - CostBenefitAnalyzer, QScoreAnalyzer, QoSLevel, FormulaAnalyzer,
  FORMULA_VARIABLES, Stage2Runner, Stage2Result
* :mod:`.conf` - the [evaluator] options: register_opts, list_opts, make_probes, make_stage1,
  make_analyzer
* :mod:`.loadgen` - the load probe's traffic (``python -m fluidvim.evaluator.loadgen``)
"""
