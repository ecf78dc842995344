# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim ns``: network services from NSD/VNFD files (validate offline; deploy, list, show,
rm through the orchestrator's ``ns`` RPC namespace)."""

from __future__ import annotations

import argparse
import sys

from fluidvim.orchestrator.clicommon import command as _command, common, out as _out, reads as _reads

EXAMPLES = """examples:
  fluidvim ns validate etc/mano/fw_chain_ns/fw_chain_nsd.yaml --vnfd etc/mano   # offline
  fluidvim ns deploy etc/mano/fw_chain_ns/fw_chain_nsd.yaml \\
      --vnfd etc/mano/firewall_vnf/firewall_vnfd.yaml \\
      --vnfd etc/mano/forwarder_vnf/forwarder_vnfd.yaml --name chain1 --zone local
  fluidvim ns list
  fluidvim ns show chain1            # instances, networks (bridges) and their NICs, steps,
                                     # scaling aspects and levels, operations
  fluidvim ns scale refl1 sessions --out   # one step of a VNFD scaling aspect (--in: back)
  fluidvim ns heal chain1 INSTANCE   # replace an instance, NICs on the same virtual links
  fluidvim ns rm chain1              # instances, networks and services go
  fluidvim ns convert nfv-nsd.xml > nfv-nsd.yaml   # SOL006 XML -> the YAML fluidvim reads
  fluidvim ns deploy fw_chain_ns.tar.gz --vnfd firewall_vnf.tar.gz --vnfd fwd.zip --name c2
                                     # OSM packages (osm package-build) and SOL004 CSARs
--vnfd takes VNFD files, packages (an OSM package .tar.gz, a SOL004 CSAR .zip) or directories
(every YAML/JSON with a top-level 'vnfd:' or 'etsi-nfv-vnfd:vnfd' below them and every package
in them, e.g. an OSM package tree). The NSD may be a package too. Descriptors are checked against
ETSI's SOL006 YANG modules first. The descriptor convention is in etc/mano/README.md.
"""


def _ns(api):
    """The NS client: fluidvim-api's (``--api-url``) or the RPC one; the orchestrator's
    database when the command answers from it (clicommon.reads)."""
    if getattr(api, "store", None) is not None:
        from .service import StoreNS
        return StoreNS(api.store)
    ns_api = getattr(api, "ns_api", None)
    if ns_api is not None:
        return ns_api()
    from .rpcapi import NSAPI
    return NSAPI(api=api)


def _plan(args):
    """(plan, nsd, vnfds) from the files, or None after printing every problem."""
    from fluidvim.orchestrator.mano import descriptors

    try:
        return descriptors.plan_files(args.nsd, args.vnfd or [], args.name)
    except descriptors.DescriptorError as e:
        for p in e.problems:
            print(f"fluidvim: error: {p}", file=sys.stderr)
        return None


def print_plan(plan, out=None):
    w = lambda *a: print(*a, file=out or sys.stdout)  # noqa: E731
    w(f"network service {plan['name']} (NSD {plan['nsd']}, flavour {plan['df']}): "
      f"{len(plan['units'])} VNF(s), {len(plan['networks'])} virtual link(s)")
    for key, net in plan["networks"].items():
        w(f"  virtual link {key:<16} -> network {net}")
    for u in plan["units"]:
        props = ", ".join(f"{k} {v:g}" for k, v in sorted(u["properties"].items()))
        w(f"  VNF profile {u['profile']} (VNFD {u['vnfd']}, VDU {u['vdu']}) -> service "
          f"{u['service']} x{u['instances']}"
          + (f" (scales {u['min_instances']}..{u['max_instances']})"
             if u.get("max_instances", 1) != u.get("min_instances", 1) else ""))
        w(f"    kernel {u['kernel']}{'' if u['kernel_is_file'] else ' (image name)'}, "
          f"memory {u['memory_mb'] or 'default'} MiB, {u['vcpus']} vCPU"
          + (f", {props}" if props else ""))
        w(f"    day-0 Click configuration: {len(u['click_config'].splitlines())} line(s)")
        for i, n in enumerate(u["nics"]):
            w(f"    nic{i}: {n['cpd']:<16} on {n['network'] or '(unplugged)'}")
    for a in plan.get("aspects", []):
        steps = "; ".join(", ".join(f"+{n} {svc}" for svc, n in st["services"].items())
                          for st in a["steps"])
        w(f"  scaling aspect {a['profile']}/{a['name']}: steps {steps}, max level "
          f"{a['max_scale_level'] if a['max_scale_level'] is not None else '-'}, "
          + ("automatic from slots" if a["auto"] else "on request"))
    for warning in plan["warnings"]:
        w(f"  warning: {warning}")


def cmd_ns_validate(args):
    res = _plan(args)
    if res is None:
        return 2
    plan = res[0].to_dict()
    _out(args, plan, print_plan)
    return 0


def cmd_ns_convert(args):
    import json

    import yaml

    from fluidvim.orchestrator.mano import sol006

    try:
        key, raw = sol006.xml_to_raw(args.file)
    except (OSError, ValueError, KeyError) as e:
        print(f"fluidvim: error: {args.file}: {e}", file=sys.stderr)
        return 2
    doc = {key: raw}
    text = (json.dumps(doc, indent=2) + "\n" if args.json
            else yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


@_command
def cmd_ns_deploy(args, api):
    res = _plan(args)
    if res is None:
        return 2
    plan, nsd, vnfds = res
    if not args.json:
        print(f"validated {args.nsd}: {len(plan.units)} VNF(s), {len(plan.networks)} virtual "
              f"link(s)" + "".join(f"\n  warning: {w}" for w in plan.warnings))
        print(f"deploying {plan.name} through the orchestrator ...", flush=True)
    ns = _ns(api)
    kw = {}
    if hasattr(ns, "wait") and not args.json:       # fluidvim-api: 202, polled here
        def progress(op, elapsed):
            print(f"  {op['operation'].lower()} {op['operationState'].lower()} "
                  f"[{elapsed:.0f} s]", flush=True)
        kw["progress"] = progress
    r = ns.deploy(nsd, vnfds, name=args.name, zone=args.zone, **kw)

    def text(r):
        for s in r["steps"]:
            print(f"  {s['step']}  [{s['ms']:.0f} ms]")
        print(f"network service {r['name']} {r['status']} in zone {r['zone']}: "
              f"{len(r['instances'])} instance(s), {len(r['networks'])} network(s); "
              f"`fluidvim ns show {r['name']}`")
    _out(args, r, text)


@_command
@_reads
def cmd_ns_list(args, api):
    def text(rows):
        print(f"{'NAME':<20} {'STATUS':<10} {'ZONE':<10} {'NSD':<20} INSTANCES NETWORKS")
        for r in rows:
            print(f"{r['name']:<20} {r['status']:<10} {r['zone']:<10} {r['nsd']:<20} "
                  f"{r['instances']:>9} {r['networks']:>8}"
                  + (f"  ({r['error']})" if r["error"] else ""))
    _out(args, _ns(api).list(deleted=args.all), text)


def print_ns(r, out=None):
    w = lambda *a: print(*a, file=out or sys.stdout)  # noqa: E731
    w(f"network service {r['name']} ({r['id']}): {r['status']} in zone {r['zone']}, NSD "
      f"{r['nsd']}, VNFDs {', '.join(r['vnfds'])}")
    if r["error"]:
        w(f"  error: {r['error']}")
    for n in r["networks"]:
        if n["exists"] is None:             # from the database: the zone was not asked
            w(f"  network {n['link']:<12} {n['name']} ({n['id']}): not checked in the zone")
            continue
        w(f"  network {n['link']:<12} {n['name']} ({n['id']}"
          + ("" if n["exists"] else ", GONE") + f"): ports {', '.join(n['ports']) or '-'}")
    for i in r["instances"]:
        nics = ", ".join(f"nic{k} {x['cpd']}->{x['network'] or '-'}" for k, x in
                         enumerate(i["nics"]))
        w(f"  instance {i['name']} ({i['id']}) {i['status']}: VNF profile {i['profile']}, "
          f"service {i['service']}; {nics}; "
          + (f"placement {i['decision_id'][:8]}" if i.get("decision_id") else
             "launched by a scale or heal operation"))
    for s in r["services"]:
        w(f"  service {s}")
    for a in r.get("scaling", []):
        top = a["max_scale_level"]
        w(f"  aspect {a['aspect']}: level {a['level']}" + (f" of {top}" if top is not None else "")
          + (f", automatic from slots (cool-down {a['cooldown_s']:g} s, scale in after "
             f"{a['idle_s']:g} s idle)" if a["auto"] else ", on request only"))
    for o in r.get("operations", []):
        d = o["detail"]
        took = f"{(o['ended_at'] - o['started_at']) * 1000:.0f} ms" if o["ended_at"] else "..."
        what = ""
        if o["type"] == "scale":
            what = (f" {d.get('direction')} {d.get('aspect')} {d.get('from_level')}->"
                    f"{d.get('to_level', '?')} ({d.get('trigger')})")
        elif o["type"] == "heal":
            what = f" {d.get('instance')} -> {d.get('replaced_by', '?')} ({d.get('trigger')})"
        w(f"  operation {o['id'][:8]} {o['type']}{what}: {o['state']} [{took}]"
          + (f": {o['error']}" if o["error"] else ""))


@_command
@_reads
def cmd_ns_show(args, api):
    _out(args, _ns(api).show(args.name), print_ns)


@_command
def cmd_ns_rm(args, api):
    ns = _ns(api)
    for name in args.name:
        _out(args, ns.delete(name), lambda r: print(f"deleted network service {r['deleted']}"))


@_command
def cmd_ns_scale(args, api):
    r = _ns(api).scale(args.name, args.aspect, "out" if args.out else "in")
    _out(args, r, lambda r: print(
        f"network service {r['ns']}: scaled {r['direction']} {r['aspect']} to level "
        f"{r['level']} ({', '.join(r.get('added') or r.get('removed') or [])}) in "
        f"{r['ms']:.0f} ms"))


@_command
def cmd_ns_heal(args, api):
    r = _ns(api).heal(args.name, args.instance)
    _out(args, r, lambda r: print(f"network service {r['ns']}: {r['healed']} replaced by "
                                  f"{r['replaced_by']} in {r['ms']:.0f} ms"))


def ns_parser(ns) -> None:
    """Fill in the parser of ``fluidvim ns`` (made by fluidvim.cmd.cli when that command is given)."""
    fmt = ns.formatter_class = argparse.RawDescriptionHelpFormatter
    ns.epilog = EXAMPLES
    nsub = ns.add_subparsers(dest="ns_command", required=True)

    def descriptor_args(p):
        p.add_argument("nsd", help="the NSD file (nsd: {nsd: [...]}, etsi-nfv-nsd:nsd or an "
                       "nfv: container, which may hold the VNFDs too) or NS package (OSM "
                       ".tar.gz, SOL004 CSAR .zip)")
        p.add_argument("--vnfd", action="append", metavar="FILE|PACKAGE|DIR",
                       help="a VNFD file, a VNF package (OSM .tar.gz, SOL004 CSAR .zip), or a "
                       "directory of them (repeat)")
        p.add_argument("--name", help="name of the network service (default: the NSD id)")
        return p

    v = descriptor_args(nsub.add_parser("validate", help="check descriptors and print the "
                                        "mapping (offline: no orchestrator needed)",
                                        formatter_class=fmt, epilog=EXAMPLES))
    v.add_argument("--json", action="store_true", help="print JSON")
    v.set_defaults(func=cmd_ns_validate)
    cv = nsub.add_parser("convert", help="a SOL006 XML document (e.g. ETSI's example data) as "
                         "the YAML (or JSON, RFC 7951) that fluidvim reads", formatter_class=fmt,
                         epilog=EXAMPLES)
    cv.add_argument("file", help="XML of etsi-nfv-vnfd / etsi-nfv-nsd / etsi-nfv-descriptors")
    cv.add_argument("--json", action="store_true", help="write JSON instead of YAML")
    cv.add_argument("-o", "--output", help="write to this file instead of stdout")
    cv.set_defaults(func=cmd_ns_convert)
    d = common(descriptor_args(nsub.add_parser("deploy", help="deploy a network service",
                                               formatter_class=fmt, epilog=EXAMPLES)))
    d.add_argument("--zone", help="zone to deploy in (default: the local zone)")
    d.set_defaults(func=cmd_ns_deploy)
    ls = common(nsub.add_parser("list", help="list network services"))
    ls.add_argument("--all", action="store_true", help="include deleted ones")
    ls.set_defaults(func=cmd_ns_list)
    sh = common(nsub.add_parser("show", help="a network service and its parts"))
    sh.add_argument("name", help="name or id")
    sh.set_defaults(func=cmd_ns_show)
    sc = common(nsub.add_parser("scale", help="scale a network service out or in by one step "
                                "of a VNFD scaling aspect", formatter_class=fmt, epilog=EXAMPLES))
    sc.add_argument("name", help="name or id")
    sc.add_argument("aspect", help="scaling aspect id (PROFILE/ASPECT when several VNF "
                    "profiles have it)")
    way = sc.add_mutually_exclusive_group(required=True)
    way.add_argument("--out", action="store_true", help="add the aspect's next delta")
    way.add_argument("--in", dest="in_", action="store_true", help="remove the last delta")
    sc.set_defaults(func=cmd_ns_scale)
    he = common(nsub.add_parser("heal", help="replace an instance of a network service"))
    he.add_argument("name", help="name or id")
    he.add_argument("instance", help="instance id or name (see `fluidvim ns show`)")
    he.set_defaults(func=cmd_ns_heal)
    rm = common(nsub.add_parser("rm", help="delete network services"))
    rm.add_argument("name", nargs="+", help="name or id")
    rm.set_defaults(func=cmd_ns_rm)
