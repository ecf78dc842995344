# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim`` commands that talk to the orchestrator: through ``fluidvim-api`` when
``--api-url`` / ``FLUIDVIM_API_URL`` is given (keystoneauth1; Keystone credentials from
``--os-*`` / ``OS_*``), else over RPC (the embedded demo: fluidvim-orchestrator must run, found
through ``[orchestrator] transport_url`` and ``topic`` of ``--config-file``, or
--transport-url/--topic).

Hooked into :mod:`fluidvim.cmd.cli` by its ``COMMANDS`` table (the ``*_parser`` functions below).
"""

from __future__ import annotations

import argparse
import functools
import sys

from fluidvim.common.clicommon import time_ago

from .clicommon import (  # the helpers moved to the leaf .clicommon (mano/cli.py uses them)
    command as _command,
    common,
    kv as _kv,
    out as _out,
    reads as _reads,
)

EXAMPLES = """examples:
  fluidvim-orchestrator --config-file /etc/fluidvim/fluidvim-orchestrator.conf &
  fluidvim service register fw --config-file-click etc/click/firewall.click --slots 64 \\
      --deadline-ms 5 --max-delay 0.5 --alias premium=4 --require accel=kvm
  fluidvim service list
  fluidvim zone list
  fluidvim place fw --deploy            # steps 0-3, then launch where it decided
  fluidvim placement explain 3f2a9c1e   # why that zone/host: filtered, probed/cached, scores, rule
  fluidvim resolve fw                   # an instance with a free slot, else a fast-track launch
  fluidvim slots fw --level host
  fluidvim power plan                   # hosts to power off and the saving
"""


@_command
def cmd_service_register(args, api):
    if bool(args.config) == bool(args.config_file_click):
        raise SystemExit("fluidvim: error: give exactly one of --config TEXT or "
                         "--config-file-click FILE")
    config = args.config
    if args.config_file_click:
        with open(args.config_file_click, encoding="utf-8") as f:
            config = f.read()
    fields = {"deadline_ms": args.deadline_ms, "qos_quantile": args.qos_quantile,
              "session_pps": args.session_pps, "max_queuing_delay_s": args.max_delay,
              "requirements": _kv(args.require, "--require"),
              "aliases": _kv(args.alias, "--alias", number=True),
              "slots": args.slots, "memory_mb": args.memory, "min_instances": args.min_instances,
              "max_price_per_hour": args.max_price, "formula": args.formula,
              "max_latency_ms": args.max_latency_ms}
    res = api.register_service(args.name, config, **{k: v for k, v in fields.items()
                                                      if v is not None})
    _out(args, res, lambda r: print(f"service {r['name']} registered: slots/instance "
                                    f"{r.get('slots') or 'default'}, max queuing delay "
                                    f"{r['max_queuing_delay_s']} s, aliases {r['aliases']}"))


@_command
@_reads
def cmd_service_list(args, api):
    def text(rows):
        print(f"{'NAME':<20} {'DEADLINE':>9} {'MAX DELAY':>10} {'SLOTS':>6} ALIASES / REQUIREMENTS")
        for r in rows:
            md = "any" if r["max_queuing_delay_s"] is None else f"{r['max_queuing_delay_s']} s"
            print(f"{r['name']:<20} {r['deadline_ms']:>7} ms {md:>10} {r.get('slots') or '-':>6} "
                  f"{r['aliases'] or ''} {r['requirements'] or ''}")
    _out(args, api.list_services(), text)


@_command
def cmd_service_rm(args, api):
    _out(args, api.remove_service(args.name), lambda r: print(f"removed {r['removed']}"))


@_command
def cmd_place(args, api):
    def text(r):
        where = f"{r['zone']}/{r['host']}" if r["zone"] else "nowhere"
        print(f"placement {r['decision_id']}: {r['service']} -> {where} ({r['status']}, "
              f"{r['total_ms']:.1f} ms: " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                      r["step_ms"].items()) + ")")
        print(f"  rule: {r['rule']}")
        if r.get("instance"):
            i = r["instance"]
            print(f"  instance {i['name']} ({i['id']}) on {i['host']}, {i['slots_total']} slots, "
                  f"launched in {i['launch_ms']} ms")
        print(f"  why: fluidvim placement explain {r['decision_id'][:8]}")
    _out(args, api.place(args.service, location=args.location, deploy=args.deploy), text)


def _watts(w) -> str:
    return "marginal -" if w is None else f"marginal {w:.1f} W"


def print_explanation(d, out=sys.stdout):
    w = functools.partial(print, file=out)
    marginal = {}                       # candidate -> marginal watts (the filter step's record)
    for step in d["steps"]:
        if step["name"] == "filter":
            marginal = step["record"].get("power_w_marginal") or {}
    w(f"placement {d['id']} of {d['service']}: {d['status']} -> "
      f"{d['zone'] or '-'}/{d['host'] or '-'} in {d['total_ms']:.1f} ms")
    for step in d["steps"]:
        r = step["record"]
        w(f"step {step['name']} ({step['ms']:.2f} ms)")
        if step["name"] == "filter":
            w(f"  kept {len(r['kept'])}: {', '.join(r['kept'][:10])}"
              + (" ..." if len(r['kept']) > 10 else ""))
            for key in r["kept"][:20]:
                if key in marginal:
                    w(f"  {key}: {_watts(marginal[key])} for one more VNF")
            for f in r["filtered"][:20]:
                w(f"  filtered {f['candidate']}: {f['reason']}")
            if len(r["filtered"]) > 20:
                w(f"  ... {len(r['filtered']) - 20} more filtered")
        elif step["name"] == "probe":
            for uid, e in r["env_types"].items():
                w(f"  env {uid} ({e['zone']}): {e['status']} {e['kinds']}")
            for line in r.get("actions", []):
                w(f"  {line}")
        elif step["name"] == "analyze":
            w(f"  analyzer {r['analyzer']}: {r['count']} score(s)")
            for s in r["scores"][:10]:
                w(f"  {s['score']:10.4f}  {s['candidate']}  slots~{s['slots_estimate']}  "
                  f"{_watts(marginal.get(s['candidate']))}  "
                  + "; ".join(map(str, s["reasons"]))[:160])
        elif step["name"] == "decide":
            w(f"  rule: {r['rule']}")
            for b in r.get("band", [])[:10]:
                w(f"  in the band: {b['candidate']}  score {b['score']:.4g}  "
                  f"{_watts(b.get('power_w_marginal'))}  cpu_util {b.get('cpu_util')}")
        elif step["name"] == "parent":            # hierarchical placement ([hierarchy])
            w(f"  topology {r.get('topology')}, ingress {r.get('ingress')}, bound "
              f"{r.get('max_latency_ms')} ms, tolerable delay {r.get('max_queuing_delay_s')} s: "
              f"{r.get('eligible', 0)} zone(s) eligible"
              + (f", round {r['round']} chose {', '.join(r['chosen'])}" if r.get("chosen") else ""))
            for c in r.get("ranked", [])[:10]:
                w(f"  {c['cost']:8.4f}  {c['zone']} at {c['site']}: {c['latency_ms']} ms, "
                  f"wait {c['wait_s']} s, {c['free_slots']} free, {c['power_w']} W")
            for x in r.get("rejected", [])[:20]:
                w(f"  rejected {x['zone']}: {x['reason']}")


@_command
@_reads
def cmd_placement_explain(args, api):
    _out(args, api.explain(args.decision), print_explanation)


@_command
@_reads
def cmd_placement_list(args, api):
    def text(rows):
        for d in rows:
            print(f"{d['id']}  {d['service']:<16} {d['status']:<9} {d['zone'] or '-'}/"
                  f"{d['host'] or '-'}  {d['total_ms']:.1f} ms")
    _out(args, api.list_decisions(args.limit), text)


@_command
def cmd_resolve(args, api):
    def text(r):
        how = ("existing instance" if r["kind"] == "slot" else
               f"fast-track launch (predicted {r['predicted_delay_s']} s, waited "
               f"{r['waited_s']} s)")
        print(f"{r['service']} -> {r['zone']}/{r['host']} instance {r['instance']} via {how}; "
              f"{r['free_slots']} slot(s) left there")
    _out(args, api.resolve(args.service, client_location=args.location), text)


def _print_host(h):
    e = h["env"] or {}
    env = f"env {h['env_uid']} ({e.get('launcher')}/{e.get('accel')}/{e.get('machine')})"
    if "synced_at" not in h:                    # the zone's answer, now
        print(f"  host {h['name']}: {env}, slots {h['slots_free']}/{h['slots_total']} free, "
              f"cpu {h['cpu_util']:.2f}")
        return
    free = ("no slot report stored" if h["reported_free"] is None else
            f"{h['reported_free']} free as last reported ({time_ago(h['reported_at'])})")
    print(f"  host {h['name']}: {env}, synced {time_ago(h['synced_at'])}: {h['instances']} "
          f"instance(s) with {h['instance_slots']} slots, {free}; cpu not known")


def print_zones(zones):
    for z in zones:
        print(f"zone {z['name']} ({z['kind']}, region {z['region']})"
              + (f" ERROR: {z['error']}" if z["error"] else ""))
        for h in z["hosts"]:
            _print_host(h)
        if z["queuing_delay"] is None:
            print("  queuing delay: not known (only the orchestrator estimates it)")
        for svc, q in (z["queuing_delay"] or {}).items():
            s = "infinite" if q["seconds"] is None else f"{q['seconds']:.3f} s"
            print(f"  queuing delay {svc}: {s} ({q['basis']}, {q['samples']} samples, "
                  f"{q['in_flight']} in flight)")


@_command
@_reads
def cmd_zone_list(args, api):
    _out(args, api.list_zones(), print_zones)


def _slot_figure(v) -> str:
    """A level's free slots, with its watts per slot when asked (``--watts``: slot
    notifications carry each VNF's; '-' where none was reported)."""
    if not isinstance(v, dict) or "watts_per_slot" not in v:
        return f"{v}"
    w = v["watts_per_slot"]
    return f"{v['free']} ({'-' if w is None else f'{w:.4f}'} W/slot)"


def print_slots(d):
    def one(k, v):
        figure = _slot_figure(v) if not isinstance(v, dict) or "watts_per_slot" in v \
            else f"{v['free']}"
        if isinstance(v, dict) and "reported_at" in v:  # from the database: the last report's
            figure += f" (as last reported, {time_ago(v['reported_at'])})"
        return f"{k} {figure}"
    for svc, per in d.items():
        print(f"{svc}: " + (", ".join(one(k, v) for k, v in sorted(per.items()))
                            or "no free slots reported"))


@_command
@_reads
def cmd_slots(args, api):
    if args.watts:
        _out(args, api.slots(args.service, args.level, watts=True), print_slots)
    else:
        _out(args, api.slots(args.service, args.level), print_slots)


@_command
@_reads
def cmd_instance_list(args, api):
    def text(rows):
        for i in rows:
            print(f"{i['name']:<24} {i['id']:<36} {i['zone']}/{i['host']} {i['service']} "
                  f"{i['status']} {i['slots_total']} slots")
    _out(args, api.list_instances(args.service), text)


@_command
def cmd_instance_rm(args, api):
    for inst in args.instance:
        _out(args, api.terminate(inst), lambda r: print(f"terminated {r['terminated']}"))


@_command
def cmd_network_list(args, api):
    def text(rows):
        print(f"{'ZONE':<12} {'NAME':<24} {'ID':<16} PORTS")
        for r in rows:
            print(f"{r['zone']:<12} {r['name']:<24} {r['id']:<16} {', '.join(r['ports']) or '-'}")
    _out(args, api.list_networks(args.zone), text)


@_command
def cmd_network_create(args, api):
    _out(args, api.create_network(args.zone, args.name),
         lambda r: print(f"network {r['name']} in zone {r['zone']}: {r['id']}"))


@_command
def cmd_network_rm(args, api):
    for net in args.network:
        _out(args, api.delete_network(args.zone, net), lambda r: print(f"deleted {r['deleted']}"))


POWER_EXAMPLES = """examples:
  fluidvim power plan              # hosts in service, the ones to power off, the saving
  fluidvim power plan --json       # the same as JSON (moves, watts before/after, kWh/day)
  fluidvim power hosts             # every host with a BMC: on, draining, off, waking, failed
(the plan is [host_power]'s: hosts at or below consolidate_u_low can be emptied; powering off
needs a BMC in [host_power] bmcs; the orchestrator's power loop acts on it when enabled)
"""


@_command
def cmd_power_plan(args, api):
    def text(p):
        print(f"{'HOST':<36} {'U':>6} {'WATTS':>8} {'VNFS':>5}  PLAN")
        off = {c["host"]: c for c in p["power_off"]}
        for name, h in sorted(p["hosts"].items()):
            c = off.get(name)
            plan = ("power off (empty)" if c and c["empty"] else
                    "empty it, power off" if c else "keep on")
            if c and not c["bmc"]:
                plan += " - no BMC: stays on"
            print(f"{name:<36} {h['u']:>6.2f} {h['watts']:>8.1f} {len(h['instances']):>5}  {plan}")
        for name in p["off"]:
            print(f"{name:<36} {'-':>6} {'0.0':>8} {'-':>5}  out of service (powered off, "
                  "draining, waking or failed)")
        for m in p["moves"]:
            print(f"  move {m['vnf']}: {m['src']} -> {m['dst']} ({m['demand']:g} CPU)")
        for m in p.get("rebalance", ()):
            print(f"  rebalance {m['vnf']}: {m['src']} -> {m['dst']} (cheaper there; the power "
                  "loop moves it sessions first)")
        for m in p.get("rebalancing", ()):
            print(f"  moving {m['instance']}: {m['src']} -> {m['dst']}, replacement "
                  f"{m['replacement']}; no new session, waiting for its sessions to end")
        for m in p.get("rebalanced", ()):
            print(f"  moved {m['instance']}: {m['src']} -> {m['dst']} ({m['replacement']}) in "
                  f"{m['ended'] - m['started']:.1f} s, "
                  f"{'session bound passed' if m['cut'] else 'no session cut'}")
        for k, why in sorted(p["skipped"].items()):
            print(f"  not in the plan: {k}: {why}")
        print(f"power off: {', '.join(c['host'] for c in p['power_off']) or 'nothing'}; "
              f"{p['watts_before']:.1f} W -> {p['watts_after']:.1f} W: saves "
              f"{p['saved_watts']:.1f} W = {p['saved_kwh_per_day']:.2f} kWh/day "
              f"(u_low {p['u_low']})")
    _out(args, api.power_plan(), text)


@_command
@_reads
def cmd_power_hosts(args, api):
    def text(rows):
        print(f"{'HOST':<36} {'STATE':<16} {'SERVICE':<8} {'BMC SAYS':<9} ERROR")
        for r in rows:
            print(f"{r['zone'] + '/' + r['host']:<36} {r['state']:<16} "
                  f"{'yes' if r['in_service'] else 'no':<8} {r['power'] or '-':<9} "
                  f"{r['error'] or ''}")
    _out(args, api.power_hosts(), text)


# One function per top-level command, filling in the parser fluidvim.cmd.cli made for it (when that
# command is given: see fluidvim.cmd.cli.COMMANDS, which holds their one-line help).
FMT = argparse.RawDescriptionHelpFormatter


def service_parser(svc):
    svc.formatter_class, svc.epilog = FMT, EXAMPLES
    ssub = svc.add_subparsers(dest="service_command", required=True)
    r = common(ssub.add_parser("register", help="register or update a service",
                               formatter_class=FMT, epilog=EXAMPLES))
    r.add_argument("name")
    r.add_argument("--config", help="the VNF's Click-like configuration text")
    r.add_argument("--config-file-click", metavar="FILE", help="read the configuration from FILE")
    r.add_argument("--slots", type=int, help="session slots per instance")
    r.add_argument("--memory", type=int, help="MiB per instance")
    r.add_argument("--deadline-ms", type=float, help="per-packet latency bound (default 10)")
    r.add_argument("--qos-quantile", type=float, help="quantile that must meet it (0.99)")
    r.add_argument("--session-pps", type=float, help="packets/s one session sends (100)")
    r.add_argument("--max-delay", type=float, metavar="SECONDS",
                   help="maximum tolerable queuing delay (default: any finite)")
    r.add_argument("--alias", action="append", metavar="NAME=RATIO",
                   help="instances also serve NAME; one NAME session takes RATIO slots")
    r.add_argument("--require", action="append", metavar="KEY=V1[,V2]",
                   help="static requirement on the environment/labels (accel=kvm, location=eu)")
    r.add_argument("--min-instances", type=int)
    r.add_argument("--max-price", type=float, help="maximum price per instance-hour")
    r.add_argument("--formula", help="operator analyzer formula (safe expression)")
    r.add_argument("--max-latency-ms", type=float, metavar="MS",
                   help="one-way latency bound from the user's ingress site to the zone "
                        "(hierarchical placement, [hierarchy] enabled)")
    r.set_defaults(func=cmd_service_register)
    common(ssub.add_parser("list", help="list services")).set_defaults(func=cmd_service_list)
    rm = common(ssub.add_parser("rm", help="remove a service"))
    rm.add_argument("name")
    rm.set_defaults(func=cmd_service_rm)


def place_parser(p):
    p.formatter_class, p.epilog = FMT, EXAMPLES
    common(p)
    p.add_argument("service")
    p.add_argument("--location", help="only zones/hosts at this location; with [hierarchy] "
                                      "enabled: the user's ingress site on the topology")
    p.add_argument("--deploy", action="store_true", help="launch an instance where decided")
    p.set_defaults(func=cmd_place)


def placement_parser(pl):
    pl.formatter_class = FMT
    pl.epilog = "examples:\n  fluidvim placement list\n  fluidvim placement explain 3f2a9c1e\n"
    plsub = pl.add_subparsers(dest="placement_command", required=True)
    ex = common(plsub.add_parser("explain", help="why a zone/host was chosen"))
    ex.add_argument("decision", help="decision id (or a unique prefix of 6+ characters)")
    ex.set_defaults(func=cmd_placement_explain)
    ls = common(plsub.add_parser("list", help="recent decisions"))
    ls.add_argument("--limit", type=int, default=20)
    ls.set_defaults(func=cmd_placement_list)


def resolve_parser(rs):
    rs.formatter_class, rs.epilog = FMT, EXAMPLES
    common(rs)
    rs.add_argument("service")
    rs.add_argument("--location", help="the client's location (nearer zones first)")
    rs.set_defaults(func=cmd_resolve)


def zone_parser(z):
    z.formatter_class, z.epilog = FMT, "examples:\n  fluidvim zone list\n"
    zsub = z.add_subparsers(dest="zone_command", required=True)
    common(zsub.add_parser("list", help="list zones")).set_defaults(func=cmd_zone_list)


def power_parser(pw):
    pw.formatter_class, pw.epilog = FMT, POWER_EXAMPLES
    psub = pw.add_subparsers(dest="power_command", required=True)
    common(psub.add_parser("plan", help="the consolidation plan: hosts to power off, saving",
                           formatter_class=FMT, epilog=POWER_EXAMPLES)
           ).set_defaults(func=cmd_power_plan)
    common(psub.add_parser("hosts", help="power states of the hosts with a BMC",
                           formatter_class=FMT, epilog=POWER_EXAMPLES)
           ).set_defaults(func=cmd_power_hosts)


def slots_parser(sl):
    sl.formatter_class = FMT
    sl.epilog = ("examples:\n  fluidvim slots\n  fluidvim slots fw --level host\n"
                 "  fluidvim slots fw --level instance --watts\n")
    common(sl)
    sl.add_argument("service", nargs="?")
    sl.add_argument("--level", default="zone", choices=["instance", "host", "zone", "region"])
    sl.add_argument("--watts", action="store_true",
                    help="each level's free slots with its watts per slot (the VNFs' attributed "
                         "watts over their slots, from slot notifications)")
    sl.set_defaults(func=cmd_slots)


def instance_parser(ins):
    ins.formatter_class = FMT
    ins.epilog = "examples:\n  fluidvim instance list\n  fluidvim instance rm fw.1a2b3c4d\n"
    isub = ins.add_subparsers(dest="instance_command", required=True)
    il = common(isub.add_parser("list", help="list instances"))
    il.add_argument("--service")
    il.set_defaults(func=cmd_instance_list)
    ir = common(isub.add_parser("rm", help="terminate instances"))
    ir.add_argument("instance", nargs="+")
    ir.set_defaults(func=cmd_instance_rm)


def network_parser(net):
    net.formatter_class = FMT
    net.epilog = ("examples:\n  fluidvim network create --zone local lan\n"
                  "  fluidvim network list\n"
                  "  fluidvim network rm --zone local lan\n"
                  "(the local zone makes a Linux bridge per network; its id is what a NIC names)\n")
    nsub = net.add_subparsers(dest="network_command", required=True)
    nl = common(nsub.add_parser("list", help="list networks"))
    nl.add_argument("--zone", help="only this zone")
    nl.set_defaults(func=cmd_network_list)
    nc = common(nsub.add_parser("create", help="create a network (idempotent)"))
    nc.add_argument("--zone", required=True)
    nc.add_argument("name")
    nc.set_defaults(func=cmd_network_create)
    nr = common(nsub.add_parser("rm", help="delete networks (refused while NICs are attached)"))
    nr.add_argument("--zone", required=True)
    nr.add_argument("network", nargs="+", help="name or id")
    nr.set_defaults(func=cmd_network_rm)
