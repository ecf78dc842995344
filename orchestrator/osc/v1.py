# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``openstack fluidvim ...`` (entry point group ``openstack.fluidvim.v1``): listers and show
commands over fluidvim-api, with cliff's formatters (``-f table|json|value|yaml|csv``, ``-c``).

Lists show a few columns; ``--long`` shows every field. Nested fields (aliases, hosts, steps)
are JSON in a table and data in ``-f json`` / ``-f yaml``. Errors of the API (400 naming the
field, 404, 409, 403) are osc's one-line command errors; deletions print nothing, as
python-openstackclient's do.
"""

from __future__ import annotations

import json

from cliff import columns as cliff_columns
from osc_lib import exceptions as osc_exc
from osc_lib.command import command

from ..exception import OrchestratorError


class JSONColumn(cliff_columns.FormattableColumn):
    """A nested value: compact JSON for people, the value itself for machines."""

    def human_readable(self):
        return json.dumps(self._value, sort_keys=True, default=str)

    def machine_readable(self):
        return self._value


def _cell(value):
    return JSONColumn(value) if isinstance(value, (dict, list, tuple)) else value


def _one(data: dict):
    """ShowOne's (columns, values) of a mapping, keys sorted as osc shows them."""
    cols = tuple(sorted(data))
    return cols, tuple(_cell(data[c]) for c in cols)


def _rows(rows: list, default: tuple, long: bool):
    """Lister's (columns, rows): the ``default`` columns, or every key with ``--long``."""
    cols = list(default)
    if long:
        for r in rows:
            cols += [k for k in r if k not in cols]
    return tuple(cols), [tuple(_cell(r.get(c)) for c in cols) for r in rows]


def _api(cmd):
    return cmd.app.client_manager.fluidvim


def _progress(cmd):
    """A long NS operation's progress (APIClient polls its occurrence): one line per state change
    and every 10 s, on stderr, so stdout stays the formatted result."""
    def progress(op, elapsed):
        cmd.app.stderr.write(f"{op['operation'].lower()} {op['operationState'].lower()} "
                             f"[{elapsed:.0f} s]\n")
        cmd.app.stderr.flush()
    return progress


# --help examples, one list per command family (each command of the family shows it)
_EXAMPLES = {
    "service": ("openstack fluidvim service list --long", "openstack fluidvim service show fw"),
    "placement": ("openstack fluidvim placement create fw --deploy",
                  "openstack fluidvim placement list --limit 5",
                  "openstack fluidvim placement explain 3f2a9c1e -f yaml"),
    "slots": ("openstack fluidvim slots list", "openstack fluidvim slots list fw --level host"),
    "zone": ("openstack fluidvim zone list --long",),
    "instance": ("openstack fluidvim instance list --service fw",
                 "openstack fluidvim instance show fw.1a2b3c4d",
                 "openstack fluidvim instance delete fw.1a2b3c4d"),
    "ns": ("openstack fluidvim ns create etc/mano/fw_chain_ns/fw_chain_nsd.yaml --vnfd etc/mano "
           "--name chain1",
           "openstack fluidvim ns list -c name -c status -f value",
           "openstack fluidvim ns show chain1",
           "openstack fluidvim ns operation list chain1",
           "openstack fluidvim ns scale refl1 sessions --out",
           "openstack fluidvim ns heal chain1 fw.1a2b3c4d",
           "openstack fluidvim ns delete chain1"),
}


def _examples(family: str) -> str:
    return "examples:\n" + "\n".join("  " + line for line in _EXAMPLES[family]) + "\n"


def _fill_lines(self, text, width, indent):
    """Description and epilog as written, line by line (cliff's formatter would run the
    examples together into one paragraph)."""
    return "".join(indent + line for line in text.splitlines(keepends=True))


class _Base:
    """Orchestrator errors (the API's 4xx/5xx, as APIClient raises them) as osc's CommandError:
    one line, exit status 1; --help keeps the examples' lines."""

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.formatter_class = type("KeepLines", (p.formatter_class,), {"_fill_text": _fill_lines})
        return p

    def run(self, parsed_args):
        try:
            return super().run(parsed_args)
        except OrchestratorError as e:
            raise osc_exc.CommandError(e.message) from None


class _Lister(_Base, command.Lister):
    DEFAULT = ()

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("--long", action="store_true", help="every field, not only "
                       + ", ".join(self.DEFAULT))
        return p


class _Show(_Base, command.ShowOne):
    pass


class _Command(_Base, command.Command):
    pass


# -- services --
class ListService(_Lister):
    """List the services the orchestrator places and resolves."""

    _epilog = _examples("service")

    DEFAULT = ("name", "deadline_ms", "max_queuing_delay_s", "slots", "aliases", "requirements")

    def take_action(self, args):
        return _rows(_api(self).list_services(), self.DEFAULT, args.long)


class ShowService(_Show):
    """Show a service (its profile: deadline, slots, aliases, requirements, Click config)."""

    _epilog = _examples("service")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("name", metavar="<service>", help="service name")
        return p

    def take_action(self, args):
        return _one(_api(self).show_service(args.name))


# -- placements --
class CreatePlacement(_Show):
    """Place a service: filter, probe, analyze, decide (steps 0-3); --deploy launches it."""

    _epilog = _examples("placement")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("service", metavar="<service>", help="service name")
        p.add_argument("--location", help="only zones/hosts at this location (hierarchical "
                       "placement: the user's ingress site)")
        p.add_argument("--deploy", action="store_true", help="launch an instance where decided")
        return p

    def take_action(self, args):
        return _one(_api(self).place(args.service, location=args.location, deploy=args.deploy))


class ExplainPlacement(_Show):
    """Why a placement chose its zone and host: each step's record."""

    _epilog = _examples("placement")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("decision", metavar="<decision>",
                       help="decision id (or a unique prefix of 6+ characters)")
        return p

    def take_action(self, args):
        return _one(_api(self).explain(args.decision))


class ListPlacement(_Lister):
    """Recent placement decisions."""

    _epilog = _examples("placement")

    DEFAULT = ("id", "service", "status", "zone", "host", "total_ms")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
        return p

    def take_action(self, args):
        return _rows(_api(self).list_decisions(args.limit), self.DEFAULT, args.long)


# -- slots, zones --
class ListSlots(_Lister):
    """Free session slots per service, summed per instance, host, zone or region."""

    _epilog = _examples("slots")

    DEFAULT = ("service", "location", "free_slots")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("service", metavar="<service>", nargs="?", help="only this service")
        p.add_argument("--level", default="zone", choices=["instance", "host", "zone", "region"],
                       help="where the slots are summed (default zone)")
        return p

    def take_action(self, args):
        per = _api(self).slots(args.service, args.level)
        rows = [{"service": svc, "location": where, "free_slots": n}
                for svc, by in sorted(per.items()) for where, n in sorted(by.items())]
        return _rows(rows, self.DEFAULT, False)


class ListZone(_Lister):
    """List zones (admin): kind, region, hosts, queuing delays."""

    _epilog = _examples("zone")

    DEFAULT = ("name", "kind", "region", "error")

    def take_action(self, args):
        return _rows(_api(self).list_zones(), self.DEFAULT, args.long)


# -- instances --
class ListInstance(_Lister):
    """List the instances the orchestrator started."""

    _epilog = _examples("instance")

    DEFAULT = ("id", "name", "service", "zone", "host", "status", "slots_total")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("--service", help="only this service's")
        return p

    def take_action(self, args):
        return _rows(_api(self).list_instances(args.service), self.DEFAULT, args.long)


class ShowInstance(_Show):
    """Show an instance."""

    _epilog = _examples("instance")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("instance", metavar="<instance>", help="instance name or id")
        return p

    def take_action(self, args):
        rows = [r for r in _api(self).list_instances()
                if args.instance in (r["id"], r["name"])]
        if not rows:
            raise osc_exc.CommandError(f"no instance {args.instance!r} (`openstack fluidvim "
                                       "instance list` lists them)")
        return _one(rows[0])


class DeleteInstance(_Command):
    """Terminate instances."""

    _epilog = _examples("instance")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("instance", metavar="<instance>", nargs="+", help="names or ids")
        return p

    def take_action(self, args):
        for inst in args.instance:
            _api(self).terminate(inst)


# -- network services --
class ListNS(_Lister):
    """List network services."""

    _epilog = _examples("ns")

    DEFAULT = ("name", "status", "zone", "nsd", "instances", "networks", "error")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("--deleted", action="store_true", help="include deleted ones")
        return p

    def take_action(self, args):
        return _rows(_api(self).ns_api().list(deleted=args.deleted), self.DEFAULT, args.long)


class ShowNS(_Show):
    """Show a network service: instances, networks, steps, scaling, operations."""

    _epilog = _examples("ns")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("name", metavar="<ns>", help="name or id")
        return p

    def take_action(self, args):
        return _one(_api(self).ns_api().show(args.name))


class ListNSOperation(_Lister):
    """List a network service's lifecycle operation occurrences (instantiate, scale, heal,
    terminate: SOL005's model), oldest first."""

    _epilog = _examples("ns")

    DEFAULT = ("id", "operation", "operationState", "startTime", "stateEnteredTime", "error")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("name", metavar="<ns>", help="name or id")
        return p

    def take_action(self, args):
        ops = _api(self).ns_api().operations(ns=args.name)     # GET /v1/ns_lcm_op_occs?ns=
        return _rows(ops, self.DEFAULT, args.long)


class CreateNS(_Show):
    """Deploy a network service from an NSD and its VNFDs (SOL006 / OSM IM)."""

    _epilog = _examples("ns")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("nsd", metavar="<nsd-file>", help="the NSD file")
        p.add_argument("--vnfd", action="append", metavar="<file-or-dir>",
                       help="a VNFD file, or a directory of VNF packages (repeat)")
        p.add_argument("--name", help="name of the network service (default: the NSD id)")
        p.add_argument("--zone", help="zone to deploy in (default: the local zone)")
        return p

    def take_action(self, args):
        from ..mano import descriptors

        try:
            _plan, nsd, vnfds = descriptors.plan_files(args.nsd, args.vnfd or [], args.name)
        except descriptors.DescriptorError as e:
            raise osc_exc.CommandError("; ".join(e.problems)) from None

        return _one(_api(self).ns_api().deploy(nsd, vnfds, name=args.name, zone=args.zone,
                                               progress=_progress(self)))


class ScaleNS(_Show):
    """Scale a network service out or in by one step of a VNFD scaling aspect."""

    _epilog = _examples("ns")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("name", metavar="<ns>", help="name or id")
        p.add_argument("aspect", metavar="<aspect>", help="scaling aspect id (PROFILE/ASPECT "
                       "when several VNF profiles have it)")
        way = p.add_mutually_exclusive_group(required=True)
        way.add_argument("--out", dest="direction", action="store_const", const="out",
                         help="add the aspect's next delta")
        way.add_argument("--in", dest="direction", action="store_const", const="in",
                         help="remove the last delta")
        return p

    def take_action(self, args):
        return _one(_api(self).ns_api().scale(args.name, args.aspect, args.direction,
                                              progress=_progress(self)))


class HealNS(_Show):
    """Replace an instance of a network service (NICs on the same virtual links)."""

    _epilog = _examples("ns")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("name", metavar="<ns>", help="name or id")
        p.add_argument("instance", metavar="<instance>", help="instance id or name")
        return p

    def take_action(self, args):
        return _one(_api(self).ns_api().heal(args.name, args.instance, progress=_progress(self)))


class DeleteNS(_Command):
    """Delete network services: their instances, networks and services go."""

    _epilog = _examples("ns")

    def get_parser(self, prog_name):
        p = super().get_parser(prog_name)
        p.add_argument("name", metavar="<ns>", nargs="+", help="names or ids")
        return p

    def take_action(self, args):
        for name in args.name:
            _api(self).ns_api().delete(name, progress=_progress(self))
