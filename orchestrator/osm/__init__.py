# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""OSM RO VIM-connector plugin: OSM's Resource Orchestrator drives fluidvim as VIM type
``fluidvim``.

* :mod:`.vimconn_fluidvim` - ``vimconnector``, the class RO loads (entry point
  ``osm_rovim.plugins: rovim_fluidvim``); a client of the orchestrator over oslo.messaging;
* :mod:`.vimconn_base` - the connector base class and exceptions: OSM's own
  ``osm_ro_plugin.vimconn`` when installed, else a compatible stand-in;
* :mod:`.vim` - the orchestrator side: images, flavors and VMs of VIM accounts (own tables in the
  orchestrator's database) and the RPC endpoint ``namespace="vim"``, version 1.1;
* :mod:`.conf` - ``[osm_vim]`` options of the orchestrator.
"""
