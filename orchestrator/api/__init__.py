# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim-api``: the orchestrator's REST API (WSGI; keystonemiddleware, oslo.context,
oslo.policy; OpenAPI 3 description in ``openapi.json``).

* :mod:`.app` - the WSGI application (webob + routes) and the paste factories; its routes,
  validation and the OpenAPI document (:mod:`.openapi`) come from the operation table
  (:mod:`fluidvim.orchestrator.operations`);
* :mod:`.conf` - ``[api]`` options; :mod:`.policies` - policy defaults in code;
* :mod:`.auth` - the ``keystone`` (default) and ``noauth`` context middleware;
* :mod:`.server` - the ``fluidvim-api`` console script; :mod:`.wsgi` - ``application`` for
  uwsgi / mod_wsgi.

Importing this package imports nothing of the web stack. (Which project owns what is recorded
by the orchestrator: :mod:`fluidvim.orchestrator.owners`, RPC namespace ``owners``.)
"""
