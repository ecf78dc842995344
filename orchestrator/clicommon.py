# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers of the ``fluidvim`` commands that talk to the orchestrator over RPC
(:mod:`fluidvim.orchestrator.cli`, :mod:`fluidvim.orchestrator.mano.cli`): the lazy RPC client,
the error handling of a command (:func:`command`), output (:func:`out`: the command's text, or
cliff's formatters with ``-f table|json|value|yaml`` and ``-c COLUMN``, the ones of the
``openstack`` CLI), ``KEY=VALUE`` options (:func:`kv`) and the options every such command has
(:func:`common`).

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


def _opt(args, name, env):
    import os

    return getattr(args, name, None) or os.environ.get(env)


def cloud_api(args, url=None):
    """fluidvim-api through keystoneauth's loading as openstacksdk does it: the cloud of
    --os-cloud / OS_CLOUD in clouds.yaml (any auth type: password, application credential,
    token), OS_* variables without a cloud, --os-* options over both; the API is ``url`` when
    given, else found in the Keystone catalog (service type ``nfv-placement``)."""
    # openstacksdk's config loader (no SDK service proxies are imported): only here, it is an
    # orchestrator extra and costs start-up time
    from openstack import config as os_config, exceptions as sdk_exc

    from fluidvim.orchestrator.apiclient import APIClient, APIError

    kw = {k: v for k, v in (("region_name", _opt(args, "os_region_name", "OS_REGION_NAME")),
                            ("interface", _opt(args, "os_interface", "OS_INTERFACE")),
                            ("auth_type", getattr(args, "os_auth_type", None))) if v}
    auth = {k: getattr(args, f"os_{k}", None) for k in (
        "auth_url", "username", "password", "project_name", "project_id", "user_domain_name",
        "project_domain_name", "token", "application_credential_id",
        "application_credential_secret")}
    auth = {k: v for k, v in auth.items() if v}
    if auth:
        kw["auth"] = auth
    try:
        region = os_config.OpenStackConfig().get_one(
            cloud=_opt(args, "os_cloud", "OS_CLOUD"), **kw)
        session = region.get_session()
    except (sdk_exc.OpenStackCloudException, sdk_exc.ConfigException) as e:
        raise APIError(f"OpenStack client configuration: {e}") from None
    return APIClient.from_session(session, url=url, interface=region.get_interface(),
                                  region_name=region.get_region_name(),
                                  timeout=getattr(args, "rpc_timeout", None) or 600.0)


def make_http_api(args, url):
    """fluidvim-api through keystoneauth1: Keystone credentials from --os-* / OS_* when a user
    or token is given (the auth URL, when not given, is the one the API names), else none (an
    API with auth_strategy = noauth)."""
    from fluidvim.orchestrator.apiclient import APIClient

    def opt(name, env):
        return _opt(args, name, env)

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
    """fluidvim-api's client when a cloud (``--os-cloud`` / OS_CLOUD, or ``--os-auth-type``) or
    ``--api-url`` / FLUIDVIM_API_URL is given, else the RPC one."""
    import os

    url = getattr(args, "api_url", None) or os.environ.get("FLUIDVIM_API_URL")
    cloud = _opt(args, "os_cloud", "OS_CLOUD") or getattr(args, "os_auth_type", None)
    if url or cloud:                         # the REST API, not the message bus
        from fluidvim.orchestrator.conf import make_conf
        setup_logging(make_conf([]), args.verbose)
        return cloud_api(args, url) if cloud else make_http_api(args, url)
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


class StoreReader:
    """The read-only calls a command may answer from the orchestrator's database when the
    orchestrator does not answer (its broker, fluidvim-api or itself down): what is stored, as
    the orchestrator lists it. What only the zones know now (a host's CPU load, the queuing
    delay, a network's ports) is None, never guessed; slot figures are the last reports
    stored, each with its time (``reported_at``)."""

    def __init__(self, store, conf=None):
        self.store, self.conf = store, conf

    def list_services(self):
        return [r.as_dict() for r in self.store.services()]

    def list_instances(self, service=None):
        return [i.as_dict() for i in self.store.instances(service, statuses=_listed())]

    def list_decisions(self, limit=20):
        return [d.as_dict() for d in self.store.decisions(limit)]

    def explain(self, decision_id):
        from fluidvim.orchestrator.placement import explain

        return explain(self.store, decision_id)

    def list_zones(self):
        """Zones and hosts as last synced; per host the orchestrator's instances there and
        their slots, and the free slots of their last reports (``reported_at``: the oldest)."""
        envs = {e.uid: e.env.to_dict() for e in self.store.envs()}
        instances = self.store.instances(statuses=_listed())
        reports = self.store.slot_reports()
        out = []
        for z in self.store.zones():
            hosts = []
            for h in self.store.hosts(z.name):
                mine = [i for i in instances if (i.zone, i.host) == (z.name, h.name)]
                reps = [r for r in reports if (r.zone, r.host) == (z.name, h.name)]
                hosts.append({"name": h.name, "env_uid": h.env_uid, "env": envs.get(h.env_uid),
                              "synced_at": h.updated_at, "instances": len(mine),
                              "instance_slots": sum(i.slots_total for i in mine),
                              "reported_free": sum(r.slots for r in reps) if reps else None,
                              "reported_at": min(r.at for r in reps) if reps else None,
                              "slots_total": None, "slots_free": None, "cpu_util": None})
            out.append({"name": z.name, "kind": z.kind, "region": z.region, "error": None,
                        "synced_at": z.updated_at, "hosts": hosts, "queuing_delay": None})
        return out

    def slots(self, service=None, level="zone", watts=False):
        """Free slots per ``level`` as the last stored reports say (aliases applied, as the
        orchestrator counts them; slots handed out since a report are not subtracted):
        {service: {key: {"free": n, "reported_at": oldest report of the sum}}}, with
        ``watts`` also the reports' watts per slot weighted as the registry does."""
        import math

        from fluidvim.orchestrator.slots import _weighted

        rows = self.store.services()
        if service:
            self.store.service_or_alias(service)        # NotFound names the service
        names = [service] if service else [r.name for r in rows]
        reports = self.store.slot_reports()
        out = {}
        for name in names:
            bases = {name: 1.0, **{r.name: r.aliases[name] for r in rows if name in r.aliases}}
            per, acc = out.setdefault(name, {}), {}
            for rep in (r for r in reports if r.service in bases):
                k = {"instance": rep.instance, "host": f"{rep.zone}/{rep.host}",
                     "zone": rep.zone, "region": rep.region}[level]
                free = int(math.floor(rep.slots / bases[rep.service] + 1e-9))
                e = per.setdefault(k, {"free": 0, "reported_at": rep.at})
                e["free"] += free
                e["reported_at"] = min(e["reported_at"], rep.at)
                if rep.watts_per_slot is not None:
                    acc.setdefault(k, []).append((rep.watts_per_slot, free))
            if watts:
                for k, e in per.items():
                    e["watts_per_slot"] = _weighted(acc.get(k))
        return out

    def power_hosts(self):
        """The hosts' power records, as the orchestrator lists them (its HostPower reads
        them from the database too; the BMCs of ``[host_power] bmcs`` of --config-file)."""
        from fluidvim.orchestrator.hostpower import HostPower

        zones = {z.name: None for z in self.store.zones()}     # bmcs are checked against them
        return [v.to_dict() for v in HostPower(self.conf, self.store, zones, None).views()]

    def close(self):
        self.store.close()


def _listed():
    from fluidvim.common import instance_states as istates

    return (*istates.LIVE, istates.PAUSED)


def store_reader(args):
    """The orchestrator's database of ``--config-file`` (``[orchestrator] connection``) when
    this host has it (a SQLite file that exists, or a server URL), else None."""
    import os
    import warnings

    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")   # as command()
    from fluidvim.orchestrator.conf import make_conf
    from fluidvim.orchestrator.db import Store

    conf = make_conf(["--config-file", args.config_file] if args.config_file else [])
    url = conf.orchestrator.connection
    if url.startswith("sqlite:///") and not os.path.exists(url[len("sqlite:///"):]):
        return None
    try:
        return StoreReader(Store(url), conf)
    except Exception:  # noqa: BLE001 - no readable database here: the command's own error stands
        return None


def reads(fn):
    """Marks a command as read-only: when the orchestrator does not answer, :func:`command`
    runs it on the orchestrator's database (:class:`StoreReader`) with one warning line."""
    fn.reads_store = True
    return fn


def _from_store(fn, args, e) -> int:
    """A command the orchestrator did not answer (``e``: Unreachable): a read-only one answers
    from the database with one warning line; else, or without a database here, ``e``'s line."""
    from fluidvim.orchestrator.exception import OrchestratorError

    reader = store_reader(args) if getattr(fn, "reads_store", False) else None
    if reader is None:
        print(f"fluidvim: error: {e.message}", file=sys.stderr)
        return 2
    print(f"fluidvim: warning: {e.message}; listed from the orchestrator's database, as last "
          "stored", file=sys.stderr)
    try:
        return fn(args, reader) or 0
    except OrchestratorError as err:        # e.g. NotFound: the database has no such record
        print(f"fluidvim: error: {err.message}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - the database failed in the middle: one line
        print(f"fluidvim: error: the orchestrator's database cannot be read either: "
              f"{str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    finally:
        reader.close()


#: seconds a read-only command waits for the orchestrator's ping (at most --rpc-timeout): a
#: broker up with no orchestrator on the topic would otherwise cost the whole rpc_timeout
#: before the database answers
READ_PING_S = 10.0


def _answers(api, args) -> None:
    """Unreachable unless the orchestrator (or fluidvim-api) answers its ping in time."""
    t = getattr(args, "rpc_timeout", None)
    api.ping(timeout=min(READ_PING_S, t) if t else READ_PING_S)


def command(fn):
    """Runs ``fn(args, api)``; orchestrator errors become one clean line and exit status 2
    (a read-only command, :func:`reads`, answers from the database when it can)."""
    @functools.wraps(fn)
    def run(args):
        import warnings

        # oslo.messaging pulls in oslo.service, which warns about eventlet at import: not the
        # user's concern on every command
        warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
        import oslo_messaging as messaging

        from fluidvim.orchestrator.exception import OrchestratorError, Unreachable

        try:
            with lazy_api(args) as api:
                if getattr(fn, "reads_store", False):
                    _answers(api, args)
                return fn(args, api) or 0
        except Unreachable as e:
            return _from_store(fn, args, e)
        except OrchestratorError as e:
            print(f"fluidvim: error: {e.message}", file=sys.stderr)
            return 2
        except messaging.RemoteError as e:         # a bug on the server side, not the request
            print(f"fluidvim: error: the orchestrator failed: {e.exc_type}: {e.value} "
                  "(its log has the traceback)", file=sys.stderr)
            return 3
    return run


#: ``-f``: cliff's formatters, as the ``openstack`` CLI has them
FORMATS = ("table", "json", "value", "yaml", "csv")


def _formatter(name):
    # cliff (an API-client dependency) only when -f/-c is given: start-up time
    if name == "json":
        from cliff.formatters.json_format import JSONFormatter as F
    elif name == "value":
        from cliff.formatters.value import ValueFormatter as F
    elif name == "yaml":
        from cliff.formatters.yaml_format import YAMLFormatter as F
    elif name == "csv":
        from cliff.formatters.commaseparated import CSVLister as F
    else:
        from cliff.formatters.table import TableFormatter as F
    return F()


def cell(value, machine: bool):
    """A value as a table or value cell: nested data as compact JSON (kept as is for json and
    yaml, ``machine``)."""
    if machine or value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def select(names, wanted, what="column"):
    """``wanted`` (-c, in its order) checked against ``names``; all of them when none."""
    if not wanted:
        return list(names)
    unknown = [c for c in wanted if c not in names]
    if unknown:
        raise SystemExit(f"fluidvim: error: -c {unknown[0]}: no such {what}; the columns are "
                         f"{', '.join(names)}")
    return list(wanted)


def emit(data, fmt="table", columns=None, stdout=None):
    """``data`` (a list of mappings: one row each; a mapping: one object) through cliff's
    formatter ``fmt``, only ``columns`` when given. Columns of a list are every key, in the
    order first seen."""
    import argparse

    f = _formatter(fmt or "table")
    if fmt == "csv" and not isinstance(data, list):
        raise SystemExit("fluidvim: error: -f csv: this command prints one object; use "
                         "table, json, value or yaml")
    p = argparse.ArgumentParser(add_help=False)
    f.add_argument_group(p)
    fargs = p.parse_args([])
    machine = fmt in ("json", "yaml")
    stdout = stdout or sys.stdout
    if isinstance(data, list):
        names = []
        for row in data:
            names += [k for k in row if k not in names]
        cols = select(names, columns)
        f.emit_list(cols, [[cell(row.get(c), machine) for c in cols] for row in data], stdout,
                    fargs)
    else:
        cols = select(list(data), columns)
        f.emit_one(cols, [cell(data[c], machine) for c in cols], stdout, fargs)


def out(args, data, text=None):
    """``--json``: the data as JSON; ``-f`` / ``-c``: through cliff's formatters (a table by
    default); else the command's ``text``."""
    fmt, cols = getattr(args, "format", None), getattr(args, "columns", None)
    if fmt or cols:
        emit(data, fmt or "table", cols)
    elif args.json or text is None:
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
    a.add_argument("--os-cloud", metavar="NAME",
                   help="a cloud of clouds.yaml (env OS_CLOUD; OS_CLIENT_CONFIG_FILE names the "
                        "file): keystoneauth's loading as the openstack CLI does it, any auth "
                        "type (application credentials too); fluidvim-api is found in the "
                        "Keystone catalog (service type nfv-placement) unless --api-url is given")
    a.add_argument("--os-auth-type", metavar="TYPE",
                   help="keystoneauth plugin (password, v3applicationcredential, token, ...); "
                        "with it the --os-* options and OS_* variables are loaded as by "
                        "--os-cloud")
    for name in ("application-credential-id", "application-credential-secret", "region-name",
                 "interface"):
        a.add_argument(f"--os-{name}", metavar="VALUE", help=f"Keystone {name} (with "
                       "--os-cloud or --os-auth-type)")
    p.add_argument("--transport-url", help="override [orchestrator] transport_url")
    p.add_argument("--topic", help="override [orchestrator] topic")
    p.add_argument("--rpc-timeout", type=float, help="override [orchestrator] rpc_timeout")
    p.add_argument("--json", action="store_true", help="print JSON")
    f = p.add_argument_group("output formatters (cliff's, as the openstack CLI)")
    f.add_argument("-f", "--format", choices=FORMATS, help="the output format (default: the "
                   "command's text; with -c alone: table)")
    f.add_argument("-c", "--column", dest="columns", action="append", metavar="COLUMN",
                   help="only this column (repeat)")
    return p
