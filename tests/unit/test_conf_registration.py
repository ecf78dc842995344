# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Option groups are registered once per module: each conf module's ``register_opts`` is
idempotent, and the orchestrator service's one list of them is what its sample documents."""

import importlib.metadata
import os

import pytest
from oslo_config import cfg, types

from fluidvim.evaluator import conf as evalconf
from fluidvim.nova_driver import conf as novaconf
from fluidvim.orchestrator import conf as orchconf, hierarchy, hostpower, power
from fluidvim.orchestrator.api import conf as apiconf
from fluidvim.orchestrator.osm import conf as osmconf
from fluidvim.vnf import conf as vnfconf

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODULES = (vnfconf, evalconf, orchconf, power, hierarchy, hostpower, osmconf, apiconf, novaconf)


def _override(opts):
    """An option of the group and a value it takes that is not its default."""
    for opt in opts:
        if isinstance(opt.type, types.String) and not opt.type.choices:
            return opt, "registered-once"
        if isinstance(opt.type, types.Boolean):
            return opt, not opt.default
    raise AssertionError("no string or boolean option to override")


@pytest.mark.parametrize("mod", MODULES, ids=lambda m: m.__name__)
def test_register_opts_is_idempotent(mod):
    conf = cfg.ConfigOpts()
    mod.register_opts(conf)
    conf([], project="fluidvim", default_config_files=[])
    (group, opts), = mod.list_opts()
    name = group if isinstance(group, str) else group.name
    opt, value = _override(opts)
    conf.set_override(opt.dest, value, group=name)
    mod.register_opts(conf)                       # again: no error, nothing reset
    assert conf[name][opt.dest] == value
    assert {o.dest for o in opts} <= set(conf[name])


# nova_driver.conf registers its group object itself: nova-compute has one CONF
@pytest.mark.parametrize("mod", [m for m in MODULES if m is not novaconf], ids=lambda m: m.__name__)
def test_overrides_stay_in_their_configopts(mod):
    """Two ConfigOpts in one process (two launch cores of a test) do not share an override
    (fluidvim.common.optgroups.register_group)."""
    a, b = cfg.ConfigOpts(), cfg.ConfigOpts()
    for conf in (a, b):
        mod.register_opts(conf)
        conf([], project="fluidvim", default_config_files=[])
    (group, opts), = mod.list_opts()
    opt, value = _override(opts)
    a.set_override(opt.dest, value, group=group.name)
    assert (a[group.name][opt.dest], b[group.name][opt.dest]) == (value, opt.default)


def _namespaces(gen_conf: str) -> list[str]:
    with open(os.path.join(ROOT, "etc", "oslo-config-generator", gen_conf)) as f:
        return [line.split("=", 1)[1].strip() for line in f
                if line.split("=", 1)[0].strip() == "namespace"]


def test_service_modules_are_the_sample_namespaces():
    """Every option module the orchestrator service registers is in its sample."""
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="oslo.config.opts")}
    by_function = {v.replace(":list_opts", ""): k for k, v in eps.items()}
    names = [by_function[m.__name__] for m in orchconf.service_opt_modules()]
    assert set(names) <= set(_namespaces("fluidvim-orchestrator.conf"))
    conf = cfg.ConfigOpts()
    orchconf.register_service_opts(conf)
    orchconf.register_service_opts(conf)          # idempotent as a whole
    for m in orchconf.service_opt_modules():
        for group, _ in m.list_opts():
            assert (group if isinstance(group, str) else group.name) in conf
