# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``fluidvim`` command line.

Commands are loaded lazily: the top-level parser knows each command's name and one-line help
(:data:`COMMANDS`); the module implementing a command is imported, and the command's parser
filled in, only when that command is given. So ``fluidvim vnf list`` imports neither the
orchestrator's client (oslo.messaging) nor SQLAlchemy, matplotlib or openstacksdk: Python's own
start is most of what is left (``bench/cli.py`` times it; ``tests/unit/test_cli.py`` checks what
the launch-core commands import).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import sys

from fluidvim.common.clicommon import opt_help, setup_logging as _setup_logging, time_ago
from fluidvim.vnf import states as vstates

EXAMPLES_VNF_RUN = """examples:
  # a transparent firewall between bridges br0 and br1: web and ARP pass, the rest is dropped
  fluidvim vnf run --name fw --nic br0 --nic br1 --slots 128 \\
      --config 'FromDevice(0) -> IPFilter(allow tcp dst port 80, allow arp, deny all) -> ToDevice(1);
                FromDevice(1) -> ToDevice(0);'
  fluidvim vnf run --name fw2 --nic br0 --nic br1 --config-file etc/click/firewall.click --cold
"""

EXAMPLES_TOP = """examples:
  fluidvim demo                       # launch VNFs cold and warm, send traffic, plot (needs root)
  fluidvim vnf run --nic br0 --nic br1 --config 'FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);'
  fluidvim vnf list
  fluidvim vnf stats fw
  fluidvim vnf pause fw               # stop its vCPUs (nothing crosses); fluidvim vnf unpause fw
  fluidvim vnf console fw             # its console log (boot, errors)
  fluidvim vnf rm fw
  fluidvim pool fill 2                # keep two booted shells for warm launches
  fluidvim status                     # accelerator, session slots, queuing delay
  fluidvim place fw --deploy          # orchestrator (fluidvim-orchestrator must run): place, then
  fluidvim resolve fw                 #   a slot for a new session; see `fluidvim service --help`
  fluidvim ns deploy etc/mano/fw_chain_ns/fw_chain_nsd.yaml --vnfd etc/mano   # an NSD (SOL006)
"""


def _manager(args, read_only: bool = False):
    """The launch core, recovered. ``read_only``: a command that only reads the store (list,
    stats, console, status) still answers when the store cannot be written (its disk is
    full): recovery's writes are skipped with one warning line, the VNFs shown as stored."""
    from fluidvim.common.errors import StoreFull
    from fluidvim.vnf.manager import VNFManager, make_conf

    overrides = {}
    for opt in ("backend", "state_dir", "run_dir", "kernel", "accel", "net_backend"):
        value = getattr(args, opt, None)
        if value:
            overrides[opt] = value
    cli = ["--config-file", args.config_file] if args.config_file else []
    conf = make_conf(cli, **overrides)
    _setup_logging(conf, args.verbose)
    mgr = VNFManager(conf)
    # a backend whose daemon is down (libvirtd) is skipped: its VNFs stay as stored, listed as
    # unchecked; a command that needs it gets main()'s one line from DependencyDown
    try:
        mgr.recover(skip_unavailable=True)
    except StoreFull as e:
        if not read_only:
            raise
        print(f"fluidvim: warning: {e}; VNFs are shown as last stored, not checked",
              file=sys.stderr)
    return mgr


def cmd_vnf_run(args):
    if bool(args.config) == bool(args.config_file_click):
        raise SystemExit("give exactly one of --config TEXT or --config-file FILE")
    config = args.config
    if args.config_file_click:
        with open(args.config_file_click, encoding="utf-8") as f:
            config = f.read()
    mgr = _manager(args)
    res = mgr.launch(config, name=args.name, nics=args.nic, slots=args.slots,
                     memory_mb=args.memory, warm=False if args.cold else None)
    if args.json:
        print(json.dumps(res.__dict__, indent=2))
        return
    phases = ", ".join(f"{k} {v:.1f} ms" for k, v in res.phases_ms.items())
    print(f"{res.name} ({res.vnf_id}) forwarding: {res.kind} launch on {res.backend}/"
          f"{res.accel} in {res.total_ms:.1f} ms [{phases}]")


def _listed(mgr, r) -> tuple[str, str | None]:
    """(status, reason) of a listed VNF: as recovered, or - its backend's daemon being down -
    ``unknown`` with the status the store last had."""
    down = mgr.unavailable.get(r.backend)
    if down is None:
        return r.status, r.reason
    return vstates.UNKNOWN, f"{down.what} down; last stored status {r.status}"


def cmd_vnf_list(args):
    mgr = _manager(args, read_only=True)
    rows = mgr.list(include_pool=args.all)
    for backend, down in sorted(mgr.unavailable.items()):
        print(f"fluidvim: warning: {down}; {backend} VNFs are listed as last stored, not "
              "checked", file=sys.stderr)
    if args.json:
        print(json.dumps([{"id": r.id, "name": r.name, "backend": r.backend,
                           "status": _listed(mgr, r)[0], "stored_status": r.status,
                           "pid": r.pid, "reason": _listed(mgr, r)[1],
                           "nics": [n.__dict__ for n in r.spec.nics]} for r in rows], indent=2))
        return
    print(f"{'NAME':<20} {'ID':<36} {'BACKEND':<8} {'STATUS':<8} NICS")
    for r in rows:
        nics = ",".join(f"{n.tap}>{n.bridge or '-'}" for n in r.spec.nics) or "-"
        status, reason = _listed(mgr, r)
        extra = f"  ({reason})" if reason else ""
        print(f"{r.name:<20} {r.id:<36} {r.backend:<8} {status:<8} {nics}{extra}")


def cmd_vnf_stats(args):
    mgr = _manager(args, read_only=True)
    st = mgr.stats(args.vnf)
    if args.json:
        got = _vnf_power(mgr, args)
        if got is not None:
            st = dict(st, power=dict(got[0], host_watts=got[1]["host_watts"], how=got[2]))
        print(json.dumps(st, indent=2))
        return
    s = st["slots"]
    print(f"uptime {st['uptime_us'] / 1e6:.1f} s, configured: {st['configured']}")
    cpu = st.get("cpu")
    if cpu:
        stolen = cpu.get("stolen_us", 0)         # older VNFs: counted in the other three
        loop = max(1, cpu["busy_us"] + cpu["poll_us"] + cpu["halt_us"] + stolen)
        print(f"vCPU: busy {100 * cpu['busy_us'] / loop:.1f} %, polling "
              f"{100 * cpu['poll_us'] / loop:.1f} %, halted {100 * cpu['halt_us'] / loop:.1f} %, "
              f"held back by the host {100 * stolen / loop:.1f} % "
              f"({cpu['halts']} halts, {cpu['kicks']} NIC kicks)")
    print(f"session slots: {s['used']}/{s['total']} used, {s['free']} free, "
          f"{s['rejected']} rejected")
    for i, n in enumerate(st["nics"]):
        print(f"nic{i}: rx {n['rx']} tx {n['tx']} drop {n['drop']}")
    for e in st.get("elements", []):
        rest = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("name", "class"))
        print(f"  {e['name']:<18} {e['class']:<12} {rest}")
    lat = st.get("latency_ns", {})
    if lat.get("count"):
        print(f"per-packet latency: p50 >= {lat['p50']} ns, p99 >= {lat['p99']} ns "
              f"({lat['count']} packets)")
    _print_vnf_power(mgr, args)


def _vnf_power(mgr, args):
    """(this VNF's attribution, the interval's, where from): sampled now over ``--power S``
    seconds, else the last interval of `fluidvim metrics serve` on this host, else None."""
    from fluidvim.orchestrator.power import exporter

    rec = mgr.get(args.vnf)
    if args.power:
        import time

        conf = mgr.conf
        exporter.register_opts(conf)
        try:
            ex = exporter.Exporter(conf, mgr)
        except exporter.PowerError as e:
            raise SystemExit(f"fluidvim: error: no host power ({e}); configure [power] (see "
                             "etc/fluidvim.conf.sample)")
        ex.sampler.state_path = None          # a one-off sample: the exporter's file stays
        ex.sampler.controller = None          # and the latency controller does not act
        ex.sampler.step()
        time.sleep(args.power)
        iv = ex.sampler.step().to_dict()
        how = f"sampled over {args.power:g} s"
    else:
        iv = mgr.power_state(max_age_s=300)
        if iv is None:
            return None
        how = f"`fluidvim metrics serve`, {time_ago(iv['at'])}; joules since it started"
    v = iv["vnfs"].get(rec.id)
    return (v, iv, how) if v is not None else None


def _print_vnf_power(mgr, args):
    got = _vnf_power(mgr, args)
    if got is None:
        if args.power is None:
            print("power: no attribution on this host (run `fluidvim metrics serve`, or "
                  "`fluidvim vnf stats --power 2` to sample now)")
        return
    v, iv, how = got
    c = v["components"]
    print(f"power: {v['watts']:.2f} W, {v['joules']:.1f} J (source {v['source']}; {how})")
    print(f"  busy {c['busy']:.2f} W, host-side {v['host_side_watts']:.2f} W (poll "
          f"{c['poll']:.2f}, qemu {c['qemu']:.2f}, vhost {c['vhost']:.2f}, softirq "
          f"{c['softirq']:.2f}), idle {c['idle']:.2f} W ({iv['idle_rule']} rule)")
    print(f"  host {iv['host_watts']:.1f} W, unattributed {iv['unattributed_watts']:.1f} W")
    d = (iv.get("control") or {}).get(mgr.get(args.vnf).id)
    if d:
        need = "" if d.get("need_cpus") is None else f", need {d['need_cpus']:.3f} CPUs"
        print(f"latency controller: {d.get('state', '?')}, {d['action']} on "
              f"{d.get('event', '?')} ({d['why']}), CPU quota {d['quota_us']} us of "
              f"{d['reserved_us']} per 100 ms{need}, poll window "
              f"{d.get('poll_window_us', '?')} us, p99 target {d['target_us']:g} us")
        cap = ("none" if d.get("capacity_pps") is None else
               f"{d['capacity_pps']:.0f} pps from {d.get('capacity_source') or '?'}")
        print(f"  capacity {cap} ({d.get('capacity_basis') or 'not recorded'})")


def cmd_vnf_rm(args):
    mgr = _manager(args)
    targets = [r.id for r in mgr.list()] if args.all else args.vnf
    for t in targets:
        mgr.destroy(t)
        print(f"removed {t}")


def cmd_vnf_pause(args):
    mgr = _manager(args)
    op = mgr.pause if args.vnf_command == "pause" else mgr.unpause
    rec = op(args.vnf)
    print(f"{rec.name} ({rec.id}) {rec.status}")


def cmd_vnf_console(args):
    mgr = _manager(args, read_only=True)
    rec = mgr.get(args.vnf)
    sys.stdout.write(mgr.backend(rec.backend).console_output(rec.spec))


class _Progress:
    """A one-line progress count for installs without tqdm (the core has no such dependency)."""

    def __init__(self, total, desc, unit):
        self.n, self.total, self.desc, self.unit = 0, total, desc, unit

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        sys.stderr.write("\n")

    def update(self, n=1):
        self.n += n
        sys.stderr.write(f"\r{self.desc}: {self.n}/{self.total} {self.unit}(s)")
        sys.stderr.flush()


def cmd_pool(args):
    try:
        from tqdm import tqdm as progress
    except ImportError:                 # the core install: `pip install fluidvim` has no tqdm
        progress = _Progress

    mgr = _manager(args, read_only=args.action == "status")
    if args.action == "fill":
        with progress(total=args.count, desc="booting shells", unit="shell") as bar:
            bar.update(mgr.store.count_pool(mgr.pool_key(
                mgr.backend().name, mgr.conf.vnf.memory_mb, 1, args.nics)))
            mgr.fill_pool(args.count, nics=args.nics, progress=bar.update)
    elif args.action == "drain":
        print(f"removed {mgr.drain_pool()} shells")
    shells = mgr.store.list(statuses=(vstates.POOL,))
    keys = {}
    for r in shells:
        keys[r.pool_key] = keys.get(r.pool_key, 0) + 1
    for k, n in sorted(keys.items()):
        print(f"{k}: {n} shell(s) ready")
    if not keys:
        print("pool is empty")


def cmd_status(args):
    mgr = _manager(args, read_only=True)
    be = mgr.backend()
    qd = mgr.queuing_delay()
    slots = mgr.slots()
    info = {"backend": be.name, "machine": be.machine, "accel": mgr.accel,
            "accel_reason": mgr.accel_reason, "kernel": mgr.kernel,
            "running": len(mgr.store.list(statuses=(vstates.RUNNING,))),
            "session_slots": {k: slots[k] for k in ("total", "used", "free")},
            "queuing_delay": qd}
    print(json.dumps(info, indent=2))


def cmd_demo(args):
    try:
        from fluidvim.cmd import demo
    except ImportError as e:
        raise SystemExit(f"fluidvim demo needs the demo extra (pip install 'fluidvim[demo]'): "
                         f"{e}") from None

    return demo.run(args)


FMT = argparse.RawDescriptionHelpFormatter


def vnf_parser(vnf):
    from fluidvim.vnf.conf import vnf_opts

    vnf.formatter_class, vnf.epilog = FMT, EXAMPLES_TOP
    vsub = vnf.add_subparsers(dest="vnf_command", required=True)
    r = vsub.add_parser("run", help="launch a VNF (warm when a shell is ready)",
                        formatter_class=FMT, epilog=EXAMPLES_VNF_RUN)
    r.add_argument("--name", help="VNF name (default vnf-<id>)")
    r.add_argument("--config", help="Click-like configuration text (contract/PROTOCOL.md §5)")
    r.add_argument("--config-file", dest="config_file_click", metavar="FILE",
                   help="read the configuration from FILE")
    r.add_argument("--nic", action="append", default=[], metavar="BRIDGE",
                   help="add a NIC plugged into BRIDGE (repeat, at most 4); NIC order = order")
    r.add_argument("--slots", type=int, help=opt_help(vnf_opts, "session_slots", "vnf"))
    r.add_argument("--memory", type=int, help=opt_help(vnf_opts, "memory_mb", "vnf"))
    r.add_argument("--cold", action="store_true", help="never use a warm shell")
    r.add_argument("--json", action="store_true", help="print the launch result as JSON")
    r.set_defaults(func=cmd_vnf_run)
    ls = vsub.add_parser("list", help="list VNFs")
    ls.add_argument("--all", action="store_true", help="include warm-pool shells")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_vnf_list)
    st = vsub.add_parser("stats", help="counters, session slots and latency of a VNF")
    st.add_argument("vnf", help="name or id")
    st.add_argument("--json", action="store_true")
    st.add_argument("--power", type=float, metavar="SECONDS",
                    help="attribute the host's power to this VNF over SECONDS now (default: the "
                         "last interval of `fluidvim metrics serve`, if it runs)")
    st.set_defaults(func=cmd_vnf_stats)
    rm = vsub.add_parser("rm", help="destroy VNFs (and their taps)")
    rm.add_argument("vnf", nargs="*", help="names or ids")
    rm.add_argument("--all", action="store_true", help="every VNF (not pool shells)")
    rm.set_defaults(func=cmd_vnf_rm)
    for verb, what in (("pause", "stop a VNF's vCPUs: it keeps memory, flows and taps, "
                                 "forwards nothing, answers nothing"),
                       ("unpause", "let a paused VNF run again")):
        pa = vsub.add_parser(verb, help=what)
        pa.add_argument("vnf", help="name or id")
        pa.set_defaults(func=cmd_vnf_pause)
    co = vsub.add_parser("console", help="print a VNF's console log")
    co.add_argument("vnf")
    co.set_defaults(func=cmd_vnf_console)


def pool_parser(pool):
    pool.formatter_class = FMT
    pool.epilog = ("examples:\n  fluidvim pool fill 3 --nics 2\n  fluidvim pool status\n"
                   "  fluidvim pool drain\n")
    pool.add_argument("action", choices=["fill", "status", "drain"])
    pool.add_argument("count", type=int, nargs="?", default=1, help="shells to keep (fill)")
    pool.add_argument("--nics", type=int, default=2, help="NICs per shell")
    pool.set_defaults(func=cmd_pool)


EXAMPLES_METRICS = """examples:
  # /metrics on port 9417 of every interface, an attribution interval of 5 s
  fluidvim metrics serve --bind 0.0.0.0
  # another port, zone label edge1, every 2 s; the [power] chain picks the host's power source
  fluidvim --config-file /etc/fluidvim/fluidvim.conf metrics serve --port 9500 --zone edge1 \\
      --interval 2
  curl -s localhost:9417/metrics | grep fluidvim_vnf_watts
  # Prometheus: scrape_configs: [{job_name: fluidvim, static_configs: [{targets: [host:9417]}]}]
"""


def cmd_metrics_serve(args):
    import signal
    import threading

    from fluidvim.orchestrator.power import PowerError, exporter

    mgr = _manager(args)
    conf = mgr.conf
    exporter.register_opts(conf)
    for opt, value in (("port", args.port), ("bind_host", args.bind), ("zone", args.zone),
                       ("interval_s", args.interval)):
        if value is not None:
            conf.set_override(opt, value, group="metrics")
    try:
        ex = exporter.Exporter(conf, mgr).start()
    except PowerError as e:
        raise SystemExit(f"fluidvim: error: no host power: {e}")
    except OSError as e:
        raise SystemExit(f"fluidvim: error: cannot listen on {conf.metrics.bind_host}:"
                         f"{conf.metrics.port} ({e}): set --port or [metrics] port")
    print(f"serving http://{conf.metrics.bind_host}:{ex.port}/metrics (power source "
          f"{ex.sampler.att.source}, every {conf.metrics.interval_s:g} s)", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    ex.stop()


def metrics_parser(mp):
    mp.formatter_class, mp.epilog = FMT, EXAMPLES_METRICS
    sub = mp.add_subparsers(dest="metrics_command", required=True)
    sv = sub.add_parser("serve", formatter_class=FMT, epilog=EXAMPLES_METRICS,
                        help="serve /metrics for Prometheus: per-VNF watts and joules by useful "
                             "work, host watts, free slots, queuing delay")
    from fluidvim.orchestrator.power.exporter import metrics_opts

    for flag, opt, kind in (("--port", "port", int), ("--bind", "bind_host", str),
                            ("--zone", "zone", str), ("--interval", "interval_s", float)):
        sv.add_argument(flag, type=kind, help=opt_help(metrics_opts, opt, "metrics"))
    sv.set_defaults(func=cmd_metrics_serve)


def status_parser(stp):
    stp.formatter_class = FMT
    stp.epilog = ("examples:\n  fluidvim status\n"
                  "  fluidvim --backend libvirt status   # the libvirt backend's VNFs\n")
    stp.set_defaults(func=cmd_status)


def demo_parser(demo):
    demo.formatter_class = FMT
    demo.epilog = "examples:\n  fluidvim demo\n  fluidvim demo --launches 20 --out /tmp/demo\n"
    demo.add_argument("--launches", type=int, default=10, help="cold and warm launches each")
    demo.add_argument("--out", default="out/demo", help="directory for the PNG and JSON")
    demo.set_defaults(func=cmd_demo)


_ORCH = "fluidvim.orchestrator.cli"
# command -> (its one-line help, "module:function" filling its parser in when it is given)
COMMANDS = {
    "vnf": ("run, list, inspect and remove VNFs", "fluidvim.cmd.cli:vnf_parser"),
    "pool": ("the warm pool of pre-booted shells", "fluidvim.cmd.cli:pool_parser"),
    "status": ("accelerator, slots, queuing delay of this host", "fluidvim.cmd.cli:status_parser"),
    "metrics": ("Prometheus /metrics of this host: per-VNF power, slots",
                "fluidvim.cmd.cli:metrics_parser"),
    "demo": ("the end-to-end demo (needs root, QEMU; libvirtd for --backend libvirt)",
             "fluidvim.cmd.cli:demo_parser"),
    # the orchestrator's commands (RPC: fluidvim-orchestrator must run)
    "service": ("services the orchestrator places and resolves", f"{_ORCH}:service_parser"),
    "place": ("placement steps 0-3 for a service", f"{_ORCH}:place_parser"),
    "placement": ("placement decisions", f"{_ORCH}:placement_parser"),
    "resolve": ("a slot for one new session of a service", f"{_ORCH}:resolve_parser"),
    "zone": ("zones, hosts, environment types, queuing delay", f"{_ORCH}:zone_parser"),
    "slots": ("free session slots the orchestrator knows of", f"{_ORCH}:slots_parser"),
    "power": ("host power: consolidation plan, hosts off/on", f"{_ORCH}:power_parser"),
    "instance": ("instances the orchestrator started", f"{_ORCH}:instance_parser"),
    "network": ("networks (virtual links) of the zones", f"{_ORCH}:network_parser"),
    "ns": ("network services from NFV descriptors (SOL006 / OSM IM)",
           "fluidvim.orchestrator.mano.cli:ns_parser"),
}


def _inherit_examples(parser: argparse.ArgumentParser) -> None:
    """Every sub-command without examples of its own shows its command's: one list of examples
    per command (its epilog), and ``fluidvim vnf rm --help`` has examples too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if not sub.epilog:
                    sub.formatter_class, sub.epilog = FMT, parser.epilog
                _inherit_examples(sub)


class _LazyCommands(argparse._SubParsersAction):
    """argparse's sub-commands action, with parsers filled in when their command is given."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._loaders = {}

    def add_command(self, name: str, help: str, load: str) -> None:
        """Command ``name``; ``load`` ("module:function") fills its parser in when it is given."""
        self.add_parser(name, help=help)
        self._loaders[name] = load

    def __call__(self, parser, namespace, values, option_string=None):
        load = self._loaders.pop(values[0], None)
        if load:                     # an unknown name is argparse's to report
            module, func = load.split(":")
            getattr(importlib.import_module(module), func)(self._name_parser_map[values[0]])
            _inherit_examples(self._name_parser_map[values[0]])
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fluidvim", formatter_class=FMT, epilog=EXAMPLES_TOP,
                                description="Unikernel VNFs that launch in milliseconds.")
    p.add_argument("--config-file", help="oslo.config file (see etc/fluidvim.conf.sample)")
    p.add_argument("--backend", choices=list(vstates.BACKENDS), help="override [vnf] backend")
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], help="override [vnf] accel")
    p.add_argument("--state-dir", help="override [vnf] state_dir")
    p.add_argument("--run-dir", help="override [vnf] run_dir")
    p.add_argument("--kernel", help="override [vnf] kernel (VNF image path)")
    p.add_argument("--net-backend", choices=["tap", "vhost-user"],
                   help="override [vnf] net_backend (vhost-user: NICs on fluidvim-vhost-net)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, action=_LazyCommands)
    for name, (help_, load) in COMMANDS.items():
        sub.add_command(name, help_, load)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from fluidvim.common.errors import DependencyDown, SchemaError, StoreFull
    from fluidvim.vnf.backends import LaunchError
    from fluidvim.vnf.control import ControlError
    from fluidvim.vnf.spec import SpecError

    try:
        return args.func(args) or 0
    except (SpecError, ControlError, LaunchError, KeyError, PermissionError, SchemaError,
            DependencyDown, StoreFull) as e:
        msg = e.args[0] if isinstance(e, KeyError) else str(e)
        print(f"fluidvim: error: {msg}", file=sys.stderr)
        return 2


def console_main():
    """The ``fluidvim`` program: :func:`main`, then exit. Before the exit, every object is
    frozen out of the cyclic garbage collector's reach: the interpreter's last collection would
    otherwise walk everything the command imported (~15 ms of a 150 ms ``vnf list`` here) to
    free memory the exit frees anyway. Files and connections are flushed and closed as usual."""
    rc = main()
    gc.freeze()
    sys.exit(rc)


if __name__ == "__main__":
    console_main()
