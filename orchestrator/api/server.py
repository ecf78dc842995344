# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim-api``: serve the API with the standard library's threaded WSGI server (the demo, a
small deployment; behind uwsgi or mod_wsgi use :mod:`.wsgi`'s ``application``)::

    fluidvim-api --config-file /etc/fluidvim/fluidvim-api.conf
"""

from __future__ import annotations

import signal
import socketserver
import sys
import threading
from wsgiref import simple_server

from oslo_log import log as logging

from . import conf as apiconf

LOG = logging.getLogger(__name__)


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Handler(simple_server.WSGIRequestHandler):
    def log_message(self, fmt, *args):           # into oslo.log, not stderr
        LOG.info("%s %s", self.address_string(), fmt % args)


def make_server(conf, app=None):
    from .app import load_app

    app = app or load_app(conf)
    return simple_server.make_server(conf.api.bind_host, conf.api.bind_port, app,
                                     server_class=_Server, handler_class=_Handler)


def main(argv=None) -> int:
    conf = apiconf.make_conf(sys.argv[1:] if argv is None else argv)
    logging.setup(conf, "fluidvim-api")
    from .auth import KeystoneNotConfigured
    try:
        server = make_server(conf)
    except KeystoneNotConfigured as e:
        print(f"fluidvim-api: error: {e}", file=sys.stderr)
        return 2
    host, port = server.server_address[:2]
    LOG.info("fluidvim-api on http://%s:%s (auth_strategy %s), orchestrator topic %s",
             host, port, conf.api.auth_strategy, conf.orchestrator.topic)
    print(f"fluidvim-api: http://{host}:{port}/ (auth_strategy {conf.api.auth_strategy})",
          flush=True)
    stop = threading.Event()

    def on_signal(*_):
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
