# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim-api``: the orchestrator's REST API (WSGI; keystonemiddleware, oslo.context,
oslo.policy; OpenAPI 3 description in ``openapi.json``).

* :mod:`.app` - the WSGI application (webob + routes) and the paste factories;
* :mod:`.conf` - ``[api]`` options; :mod:`.policies` - policy defaults in code;
* :mod:`.auth` - the ``keystone`` (default) and ``noauth`` context middleware;
* :mod:`.owners` - the orchestrator-side record of which project owns what (RPC ``owners``);
* :mod:`.server` - the ``fluidvim-api`` console script; :mod:`.wsgi` - ``application`` for
  uwsgi / mod_wsgi.

Importing this package imports nothing of the web stack (the orchestrator imports ``.owners``).
"""
