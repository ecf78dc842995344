# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""VNF limits are defined once (fluidvim.vnf.limits); everything else reads or is checked
against them: the spec, the [vnf] options, the orchestrator, MANO, the OSM VIM, the Nova driver,
the C kernel's #defines (here) and the Go driver (its tests load contract/vectors/limits.json)."""

import json
import os
import re
import subprocess
import sys

import pytest

import fluidvim
from fluidvim.orchestrator import rpc
from fluidvim.orchestrator.exception import InvalidRequest
from fluidvim.orchestrator.mano import descriptors
from fluidvim.vnf import conf as vnfconf, control, limits, spec

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
KERNEL = os.path.join(ROOT, "unikernel")


def _define(path, name):
    with open(os.path.join(KERNEL, path), encoding="utf-8") as f:
        m = re.search(rf"^#define {name}\s+(\d+)u?\b", f.read(), re.M)
    assert m, f"no #define {name} in {path}"
    return int(m.group(1))


def test_limits_vectors_are_current():
    with open(os.path.join(ROOT, "contract", "vectors", "limits.json")) as f:
        doc = json.load(f)
    assert doc == {"version": fluidvim.__version__, "limits": limits.as_dict()}, \
        "contract/vectors/limits.json is stale: run tools/gen_vectors.py"
    tool = os.path.join(ROOT, "tools", "gen_vectors.py")
    assert subprocess.run([sys.executable, tool, "--check"]).returncode == 0


def test_every_limit_is_exported():
    names = {k for k in vars(limits) if k.isupper()}
    assert names == set(limits.as_dict()) and len(names) >= 20
    for lo, default, hi in (("MEMORY_MB_MIN", "MEMORY_MB_DEFAULT", "MEMORY_MB_MAX"),
                            ("VCPUS_MIN", "VCPUS_DEFAULT", "VCPUS_MAX"),
                            ("SLOTS_MIN", "SLOTS_DEFAULT", "SLOTS_MAX"),
                            ("FLOW_TIMEOUT_MS_MIN", "FLOW_TIMEOUT_MS_DEFAULT",
                             "FLOW_TIMEOUT_MS_MAX")):
        assert getattr(limits, lo) <= getattr(limits, default) <= getattr(limits, hi)


def test_the_kernel_has_the_same_limits():
    assert _define("src/virtio.h", "NET_MAX_NICS") == limits.MAX_NICS
    assert _define("include/click.h", "CLICK_MAX_SLOTS") == limits.SLOTS_MAX
    assert _define("src/control.c", "MAX_LINE") == limits.MAX_CONTROL_LINE
    assert limits.MAX_CLICK_CONFIG_BYTES < limits.MAX_CONTROL_LINE


def test_spec_defaults_and_bounds_are_the_limits():
    assert spec.MAX_SLOTS == limits.SLOTS_MAX
    assert control.MAX_LINE == limits.MAX_CONTROL_LINE
    u = "6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f"
    s = spec.VNFSpec(uuid=u, name="x" * limits.MAX_NAME, kernel="/k", control_socket="/c",
                     console_log="/l")
    assert (s.memory_mb, s.vcpus, s.session_slots, s.flow_timeout_ms) == (
        limits.MEMORY_MB_DEFAULT, limits.VCPUS_DEFAULT, limits.SLOTS_DEFAULT,
        limits.FLOW_TIMEOUT_MS_DEFAULT)
    s.validate()
    edges = {"memory_mb": (limits.MEMORY_MB_MIN, limits.MEMORY_MB_MAX),
             "vcpus": (limits.VCPUS_MIN, limits.VCPUS_MAX),
             "session_slots": (limits.SLOTS_MIN, limits.SLOTS_MAX),
             "flow_timeout_ms": (limits.FLOW_TIMEOUT_MS_MIN, limits.FLOW_TIMEOUT_MS_MAX),
             "tsc_khz": (limits.TSC_KHZ_MIN, limits.TSC_KHZ_MAX)}
    for field, (lo, hi) in edges.items():
        s.with_changes(**{field: lo}).validate()
        s.with_changes(**{field: hi}).validate()
        for bad in (lo - 1, hi + 1):
            with pytest.raises(spec.SpecError, match=f"out of range {lo}..{hi}") as e:
                s.with_changes(**{field: bad}).validate()
            assert e.value.field == field
    with pytest.raises(spec.SpecError, match="name"):
        s.with_changes(name="x" * (limits.MAX_NAME + 1)).validate()


def test_vnf_options_take_the_limits():
    opts = {o.dest: o for o in vnfconf.vnf_opts}
    mem = opts["memory_mb"].type
    assert (opts["memory_mb"].default, mem.min, mem.max) == (
        limits.MEMORY_MB_DEFAULT, limits.MEMORY_MB_MIN, limits.MEMORY_MB_MAX)
    slots = opts["session_slots"].type
    assert (opts["session_slots"].default, slots.min, slots.max) == (
        limits.SLOTS_DEFAULT, limits.SLOTS_MIN, limits.SLOTS_MAX)
    assert opts["pool_size"].type.max == limits.POOL_SIZE_MAX
    assert opts["pool_nics"].type.max == limits.MAX_NICS
    assert opts["launch_history"].default == limits.LAUNCH_HISTORY_DEFAULT


@pytest.mark.parametrize("field,ok,bad", [
    ("vcpus", limits.VCPUS_MAX, limits.VCPUS_MAX + 1),
    ("memory_mb", limits.MEMORY_MB_MAX, limits.MEMORY_MB_MAX + 1),
    ("memory_mb", limits.MEMORY_MB_MIN, limits.MEMORY_MB_MIN - 1),
    ("slots", limits.SLOTS_MAX, limits.SLOTS_MAX + 1),
])
def test_service_registration_takes_the_spec_limits(field, ok, bad):
    profile, _ = rpc.validate_service("fw", "FromDevice(0) -> Discard;", **{field: ok})
    assert profile[field] == ok
    with pytest.raises(InvalidRequest) as e:
        rpc.validate_service("fw", "FromDevice(0) -> Discard;", **{field: bad})
    assert field in str(e.value)


def test_descriptors_take_the_spec_limits():
    assert descriptors.MAX_NICS == limits.MAX_NICS
    assert descriptors.MAX_VCPUS == limits.VCPUS_MAX
    assert descriptors.MEMORY_MIB == (limits.MEMORY_MB_MIN, limits.MEMORY_MB_MAX)
    assert descriptors.PROPERTIES["fluidvim-session-slots"][2:] == (limits.SLOTS_MIN,
                                                                    limits.SLOTS_MAX)
