# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""oslo.config options of the Nova driver and its weighers (group ``[fluidvim]``).

The launch core's own options stay in ``[vnf]`` (``fluidvim.vnf.conf``); nova-compute reads both
from nova.conf.
"""

from __future__ import annotations

from oslo_config import cfg

from fluidvim.vnf import limits

DEFAULT_CLICK_CONFIG = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"
# what a one-NIC server (one Neutron port) runs when nothing is configured: a reflector
ONE_NIC_CLICK_CONFIG = "FromDevice(0) -> EtherMirror -> ToDevice(0);\n"

fluidvim_group = cfg.OptGroup("fluidvim", title="fluidvim Nova driver",
                              help="The unikernel VNF compute driver and its scheduler weighers.")

driver_opts = [
    cfg.StrOpt("image_cache_dir", default=None,
               help="Where Glance images (VNF kernels) are cached, one file per image id and "
                    "checksum. Default: <[vnf] state_dir>/images."),
    cfg.IntOpt("session_slot_capacity", default=0, min=0,
               help="Total CUSTOM_VNF_SESSION_SLOT inventory of this compute node. 0 = as many "
                    "VNFs of [vnf] memory_mb as fit in the host's memory, times [vnf] "
                    "session_slots."),
    cfg.StrOpt("default_click_config", default=DEFAULT_CLICK_CONFIG,
               help="Click configuration for servers whose user_data (plain Click text or a "
                    "#click-config part), flavor (extra spec fluidvim:click_config) and image "
                    "(property fluidvim_click_config) give none, in that order. The default "
                    "is a bump in the wire between NIC 0 and NIC 1 (a server "
                    "with a single NIC then reflects frames with EtherMirror instead)."),
    cfg.IntOpt("default_nics", default=2, min=1, max=limits.MAX_NICS,
               help="NICs of a VNF whose server has no VIF (``--nic none``) and whose flavor "
                    "(fluidvim:nics) or image (fluidvim_nics) does not say; they stay unplugged."),
    cfg.BoolOpt("warm", default=True,
                help="Use a warm shell of the launch core's pool when one of the right shape is "
                     "ready (never for servers whose VIFs bring fixed MAC addresses)."),
]

slot_opts = [
    cfg.BoolOpt("slot_notifications", default=False,
                help="Publish the session slots of this compute's VNFs (free slots per server, "
                     "the host's queuing delay) as compact fluidvim.slots.batch notifications for the "
                     "fluidvim orchestrator, on Nova's notification transport "
                     "([oslo_messaging_notifications] transport_url, else [DEFAULT] "
                     "transport_url). The service is the server's metadata fluidvim_service, "
                     "else its flavor name; a deleted server is announced fluidvim.slots.gone."),
    cfg.StrOpt("slot_zone", default=None,
               help="Zone name in the updates; must match the orchestrator's zone for these "
                    "computes ([orchestrator] zones nova:NAME:...). Default: the server's "
                    "availability zone, else [DEFAULT] default_availability_zone, else nova."),
    cfg.StrOpt("slot_region", default="default",
               help="Region in the updates (the orchestrator's [orchestrator] region)."),
    cfg.StrOpt("slot_topic", default="fluidvim_slots",
               help="Notification topic; the orchestrator's [orchestrator] notification_topic."),
    cfg.FloatOpt("slot_interval", default=1.0, min=0.05,
                 help="Seconds between two polls of the VNFs' slots."),
    cfg.FloatOpt("slot_update_min_interval", default=1.0, min=0.0,
                 help="At most one update per server per this many seconds (a change in order "
                      "of magnitude is sent at once)."),
    cfg.FloatOpt("slot_heartbeat_interval", default=30.0, min=0.5,
                 help="Re-send an unchanged update at least this often (the orchestrator drops "
                      "reports older than its [orchestrator] slot_report_ttl)."),
]

weigher_opts = [
    cfg.FloatOpt("queuing_delay_weight_multiplier", default=1.0,
                 help="Multiplier of QueuingDelayWeigher. Positive prefers hosts whose next "
                      "launch is expected soonest (warm shells ready, fast recent launches)."),
    cfg.FloatOpt("free_slots_weight_multiplier", default=1.0,
                 help="Multiplier of FreeSlotsWeigher. Positive spreads by free session slots."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [fluidvim] on ``conf`` (nova's global CONF; idempotent: the driver and the
    weigher both call it)."""
    if fluidvim_group.name in conf:
        return
    conf.register_group(fluidvim_group)
    conf.register_opts(driver_opts + slot_opts + weigher_opts, group=fluidvim_group)


def list_opts():
    return [(fluidvim_group, driver_opts + slot_opts + weigher_opts)]
