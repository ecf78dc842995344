# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``[osm_vim]`` options: what the orchestrator offers OSM RO (and other VIM clients) as images."""

from __future__ import annotations

from oslo_config import cfg

from fluidvim.common.optgroups import register_group

osm_group = cfg.OptGroup("osm_vim", title="VIM API for OSM RO",
                         help="Images the orchestrator's VIM API (used by the OSM RO plugin "
                              "rovim_fluidvim) offers for the local zone.")

osm_opts = [
    cfg.StrOpt("images_dir", default="/var/lib/fluidvim/images",
               help="Directory of VNF kernel images (PVH ELF files) the local zone offers as VIM "
                    "images; an image's name is its file name without the .elf suffix. OSM RO "
                    "looks images up by that name, and so does a network service deploy whose "
                    "VNFD names its image (sw-image-desc.image: NAME -> NAME.elf here). Images "
                    "can also be registered by path (OSM: new_image, fluidvim: RPC "
                    "register_image)."),
    cfg.StrOpt("default_image_name", default="fluidvim-vnf",
               help="Name under which the local zone offers the launch core's own kernel "
                    "([vnf] kernel), to OSM RO and to VNFDs that name their image (the samples "
                    "in etc/mano do); empty = do not offer it."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    register_group(conf, osm_group, osm_opts)


def list_opts():
    """Entry point for oslo-config-generator (namespace ``fluidvim.osm``)."""
    return [(osm_group, osm_opts)]
