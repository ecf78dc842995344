# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``application`` for uwsgi / mod_wsgi / gunicorn::

    uwsgi --http :9740 --module fluidvim.orchestrator.api.wsgi:application \\
        --env FLUIDVIM_API_CONFIG_FILES=/etc/fluidvim/fluidvim-api.conf

The configuration files come from ``FLUIDVIM_API_CONFIG_FILES`` (comma-separated), else oslo.config's
usual search (``/etc/fluidvim/fluidvim-api.conf``, ...). The app is built on first import.
"""

from __future__ import annotations

import os

from oslo_log import log as logging

from . import conf as apiconf


def init_application():
    files = [f for f in os.environ.get("FLUIDVIM_API_CONFIG_FILES", "").split(",") if f]
    conf = apiconf.make_conf([], default_config_files=files or None)
    logging.setup(conf, "fluidvim-api")
    from .app import load_app
    return load_app(conf)


application = init_application()
