# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``[api]`` options of ``fluidvim-api`` (registered once per ConfigOpts by :func:`register_opts`).

The API also reads ``[orchestrator] transport_url``/``topic``/``rpc_timeout`` (how it reaches the
orchestrator), ``[keystone_authtoken]`` (keystonemiddleware, with ``auth_strategy = keystone``) and
``[oslo_policy]`` (oslo.policy: ``policy_file`` overrides the defaults in code).
"""

from __future__ import annotations

import os

from oslo_config import cfg

from fluidvim.common.optgroups import register_group

PASTE_INI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api-paste.ini")

api_group = cfg.OptGroup("api", title="fluidvim-api",
                         help="The orchestrator's REST API (fluidvim-api).")

api_opts = [
    cfg.StrOpt("auth_strategy", default="keystone", choices=[
        ("keystone", "Keystone tokens checked by keystonemiddleware's auth_token "
                     "([keystone_authtoken])"),
        ("noauth", "no authentication: every request is an admin of project "
                   "[api] noauth_project (only for a one-machine demo on loopback; set it "
                   "explicitly; logged as a WARNING at start)")],
               help="How requests are authenticated. /healthcheck, / (versions) and "
                    "/openapi.json need no token with either."),
    cfg.StrOpt("noauth_project", default="demo",
               help="With auth_strategy = noauth: the project every request acts in (a request "
                    "may name another one in the X-Project-Id header)."),
    cfg.HostAddressOpt("bind_host", default="127.0.0.1",
                       help="Address the fluidvim-api console script listens on."),
    cfg.PortOpt("bind_port", default=9740,
                help="Port the fluidvim-api console script listens on."),
    cfg.StrOpt("api_paste_config", default=PASTE_INI,
               sample_default="<fluidvim.orchestrator.api package>/api-paste.ini",
               help="The paste.deploy file with the pipelines (fluidvim-api-noauth, "
                    "fluidvim-api-keystone); default: the one shipped with the package."),
    cfg.IntOpt("max_request_body_size", default=1048576, min=1024,
               help="Largest request body accepted (bytes); larger ones get 413."),
    cfg.FloatOpt("deploy_timeout", default=600.0, min=1.0,
                 help="Seconds a network service deploy or delete may take (the request "
                      "waits for it)."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    register_group(conf, api_group, api_opts)


def list_opts():
    """Entry point for oslo-config-generator (namespace ``fluidvim.api``)."""
    return [(api_group, api_opts)]


def make_conf(args=None, default_config_files=None, **overrides) -> cfg.ConfigOpts:
    """The API's ConfigOpts: [api], [orchestrator], oslo.messaging, oslo.log, oslo.policy and
    keystonemiddleware's [keystone_authtoken]; ``overrides``: ``group__name=value``."""
    from keystonemiddleware import auth_token
    from oslo_log import log as logging
    from oslo_policy import opts as policy_opts

    from fluidvim.orchestrator import conf as orchconf

    conf = cfg.ConfigOpts()
    register_opts(conf)
    orchconf.register_opts(conf)
    orchconf.register_messaging_opts(conf)
    logging.register_options(conf)
    policy_opts.set_defaults(conf)
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    conf(args or [], project="fluidvim", prog="fluidvim-api",
         default_config_files=default_config_files,
         description="fluidvim-api: the orchestrator's REST API (docs/api.md), a client of "
                     "fluidvim-orchestrator over RPC.",
         epilog="example: fluidvim-api --config-file /etc/fluidvim/fluidvim-api.conf (wsgiref, "
                "threaded, on [api] bind_port; production: uwsgi --module "
                "fluidvim.orchestrator.api.wsgi:application, docs/api.md)")
    for key, value in overrides.items():
        group, name = key.split("__", 1)
        conf.set_override(name, value, group=group)
    return conf
