# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A server's launch request: its flavor, image and Neutron ports -> the launch core's
:class:`~fluidvim.vnf.spec.LaunchArgs`, in one place (as Nova's ironic driver keeps its
flavor/image -> node translation in ``patcher.py``).

What comes from where (first given wins):

* Click configuration: the server's user_data (:mod:`~fluidvim.nova_driver.userdata`), the
  flavor's ``fluidvim:click_config``, the image's ``fluidvim_click_config``, ``[fluidvim]
  default_click_config`` (its one-NIC form for a one-NIC server);
* session slots: the flavor's ``resources:CUSTOM_VNF_SESSION_SLOT`` or
  ``fluidvim:session_slots``, the image's ``fluidvim_session_slots``;
* NICs: one per Neutron port (:func:`fluidvim.nova_driver.vifs.nics_for`: bridge, MAC, tap
  name, OVS ids), then unplugged ones up to the flavor's ``fluidvim:nics`` (image
  ``fluidvim_nics``); a server without ports has ``[fluidvim] default_nics``;
* memory and vCPUs: the flavor; backend and warm: the flavor's ``fluidvim:backend`` and
  ``fluidvim:warm`` (``[fluidvim] warm``); the QoE: the flavor's ``fluidvim:qoe_*``.
"""

from __future__ import annotations

import dataclasses

from nova import exception
from oslo_log import log as logging
from oslo_utils import strutils

from fluidvim.common.zonetypes import NicRequest, QoE
from fluidvim.nova_driver import (
    conf as fconf,
    extra_specs as fextra,
    userdata,
    vifs as vifmod,
)
from fluidvim.vnf import spec as specmod

LOG = logging.getLogger(__name__)
SLOT_RC = "CUSTOM_VNF_SESSION_SLOT"     # the resource class of a host's session slots


@dataclasses.dataclass
class ServerLaunch:
    """One server's launch: what the launch core is asked (``args``), where its Click
    configuration came from (for error messages) and its VIFs (os-vif plugging, events)."""

    args: specmod.LaunchArgs
    config_source: str
    vifs: list


def _abort(instance, reason: str):
    return exception.BuildAbortException(instance_uuid=instance.uuid, reason=reason)


def spec_error_reason(e: specmod.SpecError, source: str | None) -> str:
    """A launch-argument error as the server's fault message."""
    if e.field == "click_config":
        return f"the Click configuration from {source or 'the server'}: {e}"
    return str(e)


def server_launch(instance, props, network_info, conf) -> ServerLaunch:
    """The launch of ``instance`` (its flavor and user_data), booted from an image with
    properties ``props`` on ports ``network_info``; ``conf`` = nova-compute's (``[fluidvim]``).
    BuildAbortException with the reason for anything that cannot be launched."""
    specs = dict(instance.flavor.extra_specs or {})
    props = props or {}

    def pick(spec_keys, prop_key=None):
        for k in spec_keys:
            if specs.get(k) not in (None, ""):
                return specs[k]
        if prop_key and props.get(prop_key) not in (None, ""):
            return props[prop_key]
        return None

    def as_int(value, what):
        if value is None:
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise _abort(instance, f"{what} must be an integer, not {value!r}") from None

    problems = fextra.check(specs)
    if problems:
        raise _abort(instance, "; ".join(problems))
    config, source = click_config(instance, specs, props)
    slots = as_int(pick([f"resources:{SLOT_RC}", "fluidvim:session_slots"],
                        "fluidvim_session_slots"), "session slots")
    want = as_int(pick(["fluidvim:nics"], "fluidvim_nics"), "fluidvim:nics")
    vnics = vifmod.nics_for(instance.uuid, network_info)
    nics = [NicRequest(bridge=n.bridge, mac=n.mac, tap=n.tap, ovs=n.ovs) for n in vnics]
    want = want or (0 if vnics else conf.fluidvim.default_nics)
    nics += [NicRequest()] * max(0, want - len(nics))           # unplugged ones after the ports
    if not config:
        config, source = conf.fluidvim.default_click_config, "[fluidvim] default_click_config"
        if len(nics) == 1 and config == fconf.DEFAULT_CLICK_CONFIG:
            config = fconf.ONE_NIC_CLICK_CONFIG
    warm = strutils.bool_from_string(specs.get("fluidvim:warm", conf.fluidvim.warm))
    try:
        args = specmod.LaunchArgs(
            config, nics=tuple(nics), name=instance.uuid, slots=slots,
            memory_mb=instance.flavor.memory_mb, vcpus=instance.flavor.vcpus,
            backend=specs.get("fluidvim:backend") or None, warm=None if warm else False,
            qoe=qoe(instance, specs))
    except specmod.SpecError as e:
        raise _abort(instance, spec_error_reason(e, source)) from e
    return ServerLaunch(args, source or "the server", vnics)


def qoe(instance, specs) -> QoE | None:
    """The VNF's slots at the service's QoE from the flavor's ``fluidvim:qoe_*`` extra
    specs (already checked one by one), or None when the flavor has none."""
    given = {k: specs[k] for k in fextra.QOE_SPECS if specs.get(k) not in (None, "")}
    extra = {k: specs[k] for k in fextra.QOE_OPTIONAL if specs.get(k) not in (None, "")}
    if not given and not extra:
        return None
    missing = [k for k in fextra.QOE_SPECS if k not in given]
    if missing and not given:
        raise _abort(instance, f"flavor extra spec {', '.join(extra)} is part of a QoE: set "
                               f"{', '.join(missing)} too (or unset {', '.join(extra)})")
    if missing:
        raise _abort(instance, f"flavor extra specs {', '.join(fextra.QOE_SPECS)} go together: "
                               f"set {', '.join(missing)} too (or unset {', '.join(given)})")
    cap, deadline, quantile = (given[k] for k in fextra.QOE_SPECS)
    budget, wait = (extra.get(k) for k in fextra.QOE_OPTIONAL)
    try:
        return QoE(int(cap), float(deadline), float(quantile),
                   budget_ns=int(budget) if budget is not None else None,
                   wait_ppm=int(wait) if wait is not None else 0)
    except ValueError as e:
        raise _abort(instance, "flavor extra spec "
                     f"{str(e).replace('qoe.', 'fluidvim:qoe_', 1)}") from None


def click_config(instance, specs, props):
    """(Click configuration, where it came from) of a server, or (None, None) for the
    default. First of: the server's user_data (plain Click text or its ``#click-config``
    part, :mod:`~fluidvim.nova_driver.userdata`), the flavor's ``fluidvim:click_config``,
    the image's ``fluidvim_click_config``."""
    user_data = instance.user_data if instance.obj_attr_is_set("user_data") else None
    try:
        ud = userdata.parse(user_data)
    except userdata.UserDataError as e:
        raise _abort(instance, str(e)) from None
    for note in ud.ignored:
        LOG.info("fluidvim: ignoring %s", note, instance=instance)
    if ud.config is not None:
        return ud.config, ud.source
    if specs.get("fluidvim:click_config") not in (None, ""):
        return specs["fluidvim:click_config"], "flavor extra spec fluidvim:click_config"
    if props.get("fluidvim_click_config") not in (None, ""):
        return props["fluidvim_click_config"], "image property fluidvim_click_config"
    return None, None
