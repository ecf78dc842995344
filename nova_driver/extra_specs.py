# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Flavor extra-spec validators of the ``fluidvim`` namespace, for nova-api.

Registered through the ``nova.api.extra_spec_validators`` entry point (as Nova's own ``hw``,
``quota``, … validators are), so nova-api refuses an unknown ``fluidvim:*`` key or a value out of
range with 400 Bad Request. Nova validates extra specs only in requests at compute API
microversion 2.86 or later (``openstack --os-compute-api-version 2.86 flavor set …``; older
microversions store anything). The compute driver checks the same rules again when it builds a
server (:func:`check`), so a flavor made at an older microversion fails its build with the reason
instead of being half-understood.
"""

from __future__ import annotations

from nova import exception
from nova.api.validation.extra_specs import base

from fluidvim.vnf import limits, states as vstates

NAMESPACE = "fluidvim"

EXTRA_SPEC_VALIDATORS = [
    base.ExtraSpecValidator(
        name="fluidvim:click_config",
        description=(
            "The Click configuration the VNF runs (its element graph), e.g. "
            "'FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);'. A server's "
            "user_data (plain Click text or a #click-config part) takes precedence over it; it "
            "takes precedence over the image property fluidvim_click_config and [fluidvim] "
            "default_click_config. The VNF checks the syntax when the server is built (the "
            "server's fault then names line and column). Only supported by the fluidvim "
            "(unikernel VNF) virt driver."
        ),
        value={"type": str, "description": "Click configuration text (not empty)",
               "pattern": r"(?s).*\S.*"},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:session_slots",
        description=(
            "Session slots (size of the 5-tuple flow table) of the VNF when the flavor does not "
            "ask for resources:CUSTOM_VNF_SESSION_SLOT (which wins and is also what Placement "
            "accounts). Overrides the image property fluidvim_session_slots and [vnf] "
            "session_slots. Only supported by the fluidvim virt driver."
        ),
        value={"type": int, "min": limits.SLOTS_MIN, "max": limits.SLOTS_MAX},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:nics",
        description=(
            "NICs of the VNF: with no VIF (--nic none) it gets this many unplugged NICs; with "
            "fewer VIFs than this the rest are unplugged. Overrides the image property "
            "fluidvim_nics and [fluidvim] default_nics. Only supported by the fluidvim virt "
            "driver."
        ),
        value={"type": int, "min": 1, "max": limits.MAX_NICS},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:warm",
        description=(
            "false: always boot the VNF cold, never from a warm shell of the compute's pool. "
            "Default: [fluidvim] warm. Only supported by the fluidvim virt driver."
        ),
        value={"type": bool},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:backend",
        description=(
            "The launch backend of the VNF on the compute: qemu (QEMU microvm, started "
            "directly) or libvirt (a transient libvirt domain). Default: [vnf] backend. Only "
            "supported by the fluidvim virt driver."
        ),
        value={"type": str, "enum": list(vstates.BACKENDS)},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:qoe_capacity",
        description=(
            "Session slots at the service's QoE (issue 23): the sessions the VNF serves within "
            "fluidvim:qoe_deadline_ms at fluidvim:qoe_quantile (the stage-1 load probe's "
            "capacity). The VNF then announces min(flow-table free, capacity - used) as its free "
            "slots and corrects the capacity from its own latency. It goes together with "
            "fluidvim:qoe_deadline_ms and fluidvim:qoe_quantile (fluidvim:qoe_budget_ns and "
            "fluidvim:qoe_wait_ppm are optional). Only supported by the fluidvim virt driver."
        ),
        value={"type": int, "min": 1, "max": limits.SLOTS_MAX},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:qoe_deadline_ms",
        description=(
            "The service's latency deadline in milliseconds (> 0, e.g. 5 or 0.5) for "
            "fluidvim:qoe_capacity. Only supported by the fluidvim virt driver."
        ),
        value={"type": str, "description": "a positive number of milliseconds",
               "pattern": r"(?!0*\.?0*$)[0-9]*\.?[0-9]+"},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:qoe_quantile",
        description=(
            "The quantile the deadline applies to, in (0, 1), e.g. 0.99 for "
            "fluidvim:qoe_capacity. Only supported by the fluidvim virt driver."
        ),
        value={"type": str, "description": "a number in (0, 1), e.g. 0.99",
               "pattern": r"0?\.(?!0*$)[0-9]+"},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:qoe_budget_ns",
        description=(
            "The VNF's own latency budget for fluidvim:qoe_capacity (optional, nanoseconds, "
            "1..60000000000): its in-VNF tail at fluidvim:qoe_quantile that goes with meeting "
            "the deadline, past which it shrinks its capacity (the stage-1 load probe's "
            "qoe_params give it: 2 x the highest in-VNF tail at the loads that met the "
            "deadline). Unset = the whole deadline. Needs the three other fluidvim:qoe_* specs. "
            "Only supported by the fluidvim virt driver."
        ),
        value={"type": int, "min": 1, "max": 60_000_000_000},
    ),
    base.ExtraSpecValidator(
        name="fluidvim:qoe_wait_ppm",
        description=(
            "The VNF's host-wait budget for fluidvim:qoe_capacity (optional, 0..1000000): the "
            "share of a correction window (ppm) its vCPU may wait for a CPU (KVM steal) before "
            "the VNF shrinks its capacity as for a late tail; the stage-1 load probe's "
            "qoe_params give it from the probe's steal shares. Unset or 0 = no host-wait rule. "
            "Needs the three other fluidvim:qoe_* specs. Only supported by the fluidvim virt "
            "driver."
        ),
        value={"type": int, "min": 0, "max": 1_000_000},
    ),
]

QOE_SPECS = ("fluidvim:qoe_capacity", "fluidvim:qoe_deadline_ms", "fluidvim:qoe_quantile")
QOE_OPTIONAL = ("fluidvim:qoe_budget_ns", "fluidvim:qoe_wait_ppm")   # with QOE_SPECS

KEYS = {v.name: v for v in EXTRA_SPEC_VALIDATORS}


def register():
    """What ``nova.api.validation.extra_specs.validators.load_validators`` calls."""
    return EXTRA_SPEC_VALIDATORS


def check(extra_specs: dict) -> list[str]:
    """Problems of a flavor's ``fluidvim:*`` extra specs by the rules nova-api applies (one
    message per bad key; empty if all are fine). Keys of other namespaces are not looked at."""
    problems = []
    for key in sorted(extra_specs or {}):
        if not key.startswith(f"{NAMESPACE}:"):
            continue
        validator = KEYS.get(key)
        if validator is None:
            problems.append(f"unknown flavor extra spec {key} (known: {', '.join(sorted(KEYS))})")
            continue
        try:
            validator.validate(key, str(extra_specs[key]))
        except exception.ValidationError as e:
            problems.append(f"flavor extra spec {key}: {e.format_message()}")
    return problems
