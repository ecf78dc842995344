# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers of the ``fluidvim`` commands that talk to the orchestrator over RPC
(:mod:`fluidvim.orchestrator.cli`, :mod:`fluidvim.orchestrator.mano.cli`): the lazy RPC client,
the error handling of a command (:func:`command`), output (:func:`out`), ``KEY=VALUE`` options
(:func:`kv`) and the options every such command has (:func:`common`).

oslo.messaging and the orchestrator's configuration are imported when a command runs, not at
import: ``fluidvim --help`` and the launch core's commands stay fast (bench/cli.py).
"""

from __future__ import annotations

import functools
import json
import sys

from fluidvim.common.clicommon import setup_logging


class LazyAPI:
    """The orchestrator client (RPC or fluidvim-api), made on first use: a command checks its
    own arguments before it reaches the broker or the API, so a typo is reported as a typo even
    when they are down."""

    def __init__(self, args):
        self._args, self._api = args, None

    def __getattr__(self, name):
        if self._api is None:
            self._api = make_api(self._args)
        return getattr(self._api, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._api is not None:
            self._api.close()


def lazy_api(args):
    return LazyAPI(args)


def make_http_api(args, url):
    """fluidvim-api through keystoneauth1: Keystone credentials from --os-* / OS_* when a user
    or token is given (the auth URL, when not given, is the one the API names), else none (an
    API with auth_strategy = noauth)."""
    import os

    from fluidvim.orchestrator.apiclient import APIClient

    def opt(name, env):
        return getattr(args, name, None) or os.environ.get(env)

    return APIClient(url, auth_url=opt("os_auth_url", "OS_AUTH_URL"),
                     username=opt("os_username", "OS_USERNAME"),
                     password=opt("os_password", "OS_PASSWORD"),
                     project_name=opt("os_project_name", "OS_PROJECT_NAME"),
                     project_id=opt("os_project_id", "OS_PROJECT_ID"),
                     user_domain_name=opt("os_user_domain_name", "OS_USER_DOMAIN_NAME")
                     or "Default",
                     project_domain_name=opt("os_project_domain_name", "OS_PROJECT_DOMAIN_NAME")
                     or "Default",
                     token=opt("os_token", "OS_TOKEN"),
                     timeout=getattr(args, "rpc_timeout", None) or 600.0)


def make_api(args):
    """fluidvim-api's client when ``--api-url`` / FLUIDVIM_API_URL is given, else the RPC one."""
    import os

    url = getattr(args, "api_url", None) or os.environ.get("FLUIDVIM_API_URL")
    if url:                                  # the REST API, not the message bus
        from fluidvim.orchestrator.conf import make_conf
        setup_logging(make_conf([]), args.verbose)
        return make_http_api(args, url)
    from fluidvim.orchestrator.conf import disable_rabbit_heartbeat, make_conf
    from fluidvim.orchestrator.rpcapi import OrchestratorAPI

    overrides = {}
    if getattr(args, "transport_url", None):
        overrides["transport_url"] = args.transport_url
    if getattr(args, "topic", None):
        overrides["topic"] = args.topic
    if getattr(args, "rpc_timeout", None):
        overrides["rpc_timeout"] = args.rpc_timeout
    conf = make_conf(["--config-file", args.config_file] if args.config_file else [], **overrides)
    disable_rabbit_heartbeat(conf)           # one call and exit: no heartbeat thread to wait for
    setup_logging(conf, args.verbose)
    return OrchestratorAPI(conf)


def command(fn):
    """Runs ``fn(args, api)``; orchestrator errors become one clean line and exit status 2."""
    @functools.wraps(fn)
    def run(args):
        import warnings

        # oslo.messaging pulls in oslo.service, which warns about eventlet at import: not the
        # user's concern on every command
        warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
        import oslo_messaging as messaging

        from fluidvim.orchestrator.exception import OrchestratorError

        try:
            with lazy_api(args) as api:
                return fn(args, api) or 0
        except OrchestratorError as e:
            print(f"fluidvim: error: {e.message}", file=sys.stderr)
            return 2
        except messaging.RemoteError as e:         # a bug on the server side, not the request
            print(f"fluidvim: error: the orchestrator failed: {e.exc_type}: {e.value} "
                  "(its log has the traceback)", file=sys.stderr)
            return 3
    return run


def out(args, data, text=None):
    if args.json or text is None:
        print(json.dumps(data, indent=2, default=str))
    else:
        text(data)


def kv(items, what, number=False):
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"fluidvim: error: {what} {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        if number:
            out[k] = v
        else:
            out.setdefault(k, []).extend(v.split(","))
    return out


def common(p):
    """The options of every command that talks to the orchestrator."""
    a = p.add_argument_group("fluidvim-api (instead of the message bus)")
    a.add_argument("--api-url", metavar="URL",
                   help="fluidvim-api's URL (env FLUIDVIM_API_URL); with it the command goes "
                        "through the REST API, authenticated by Keystone with the --os-* "
                        "options (env OS_*) when a user or token is given")
    for name, env in (("auth-url", "OS_AUTH_URL"), ("username", "OS_USERNAME"),
                      ("password", "OS_PASSWORD"), ("project-name", "OS_PROJECT_NAME"),
                      ("project-id", "OS_PROJECT_ID"),
                      ("user-domain-name", "OS_USER_DOMAIN_NAME"),
                      ("project-domain-name", "OS_PROJECT_DOMAIN_NAME"),
                      ("token", "OS_TOKEN")):
        a.add_argument(f"--os-{name}", metavar="VALUE", help=f"Keystone {name} (env {env})")
    p.add_argument("--transport-url", help="override [orchestrator] transport_url")
    p.add_argument("--topic", help="override [orchestrator] topic")
    p.add_argument("--rpc-timeout", type=float, help="override [orchestrator] rpc_timeout")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p
