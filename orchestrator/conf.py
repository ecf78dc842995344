# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""oslo.config options of the orchestrator (group ``[orchestrator]``)."""

from __future__ import annotations

import sys

from oslo_config import cfg

from fluidvim.common.optgroups import register_group

orch_group = cfg.OptGroup("orchestrator", title="fluidvim orchestrator",
                          help="Placement, session-slot registry and resolver service.")

orch_opts = [
    cfg.StrOpt("connection", default="sqlite:////var/lib/fluidvim/orchestrator.sqlite",
               secret=True,
               help="SQLAlchemy URL of the orchestrator's database (zones, environment types, "
                    "hosts, services, instances, slot reports, probe results, decisions). "
                    "SQLite uses WAL mode; PostgreSQL: postgresql+psycopg2://USER:PW@HOST/DB "
                    "(extra fluidvim[postgresql]). An empty database is created at the schema's "
                    "head; after an upgrade run `fluidvim-manage db sync` before starting."),
    cfg.StrOpt("transport_url", default="rabbit://guest:guest@127.0.0.1:5672/", secret=True,
               help="oslo.messaging transport for RPC and slot-update notifications."),
    cfg.StrOpt("topic", default="fluidvim-orchestrator",
               help="RPC topic the orchestrator serves (clients use the same)."),
    cfg.StrOpt("notification_topic", default="fluidvim_slots",
               help="Notification topic VNF hosts and drivers publish slot updates on."),
    cfg.FloatOpt("rpc_timeout", default=120.0, min=1.0,
                 help="Seconds a client waits for an RPC reply (a resolve may launch a VNF)."),
    cfg.FloatOpt("slot_update_min_interval", default=1.0, min=0.0,
                 help="Rate limit: at most one slot update per instance and service per this "
                      "many seconds (a change in order of magnitude is sent at once)."),
    cfg.FloatOpt("slot_heartbeat_interval", default=30.0, min=0.5,
                 help="Send an unchanged slot update at least this often (liveness)."),
    cfg.FloatOpt("slot_report_ttl", default=120.0, min=1.0,
                 help="Slot reports older than this are ignored by the registry."),
    cfg.FloatOpt("agent_interval", default=1.0, min=0.05,
                 help="How often the slot agent polls the local launch core's VNFs."),
    cfg.FloatOpt("confirm_timeout", default=0.5, min=0.01,
                 help="Seconds a resolve that found every instance full waits for the zones' "
                      "own reading of their free slots before it refuses or launches (the zones "
                      "are read at once; one that has not answered is skipped, and not asked "
                      "again while that reading is in flight)."),
    cfg.StrOpt("session_route", default="efficient", choices=["efficient", "watts", "free"],
               help="Which instance with a free slot a resolve hands a session to (nearest "
                    "location first either way): 'efficient' - on the host with the fewest "
                    "dynamic watts per hardware thread on its power model (what one more busy "
                    "thread costs there; the hosts placement has ranked) first, the fullest "
                    "instance there first, so sessions load the most efficient servers and "
                    "the other instances can scale in; 'watts' - the same by the least watts "
                    "per slot the host's instances report (the slot updates' watts_per_slot: "
                    "attributed watts, which include a share of idle watts and grow with the "
                    "VNF's load); instances of hosts without a figure after those, most free "
                    "slots first; 'free' - the most free slots first (the order before this "
                    "option)."),
    cfg.FloatOpt("probe_validity", default=3600.0, min=1.0,
                 help="Seconds a stage-1 probe result stays valid (shared by all services)."),
    cfg.FloatOpt("reservation_ttl", default=5.0, min=0.0,
                 help="Seconds a slot handed out by the resolver counts as used before the "
                      "instance's own slot update reflects it."),
    cfg.BoolOpt("active_active", default=False,
                help="Several orchestrator processes share this database and message bus (on "
                     "PostgreSQL, or SQLite on one host): slot reports and handed-out slots "
                     "live in the database, resolve decisions are serialised across processes, "
                     "and a survivor takes over what a dead orchestrator left in flight. Set it "
                     "on every one of them."),
    cfg.FloatOpt("worker_heartbeat_interval", default=2.0, min=0.1,
                 help="active_active: seconds between an orchestrator's heartbeats (and its "
                      "checks for dead peers)."),
    cfg.FloatOpt("worker_dead_after", default=10.0, min=0.5,
                 help="active_active: an orchestrator whose last heartbeat is older than this "
                      "(s) is dead; a peer fails its launches in flight and removes the "
                      "instances they made. Keep it several heartbeat intervals."),
    cfg.FloatOpt("default_launch_time", default=1.0, min=0.0,
                 help="Assumed on-demand launch time (s) of a zone without any measured launch."),
    cfg.IntOpt("launch_parallelism", default=2, min=1,
               help="Launches a zone runs at once; launches in flight beyond it queue."),
    cfg.IntOpt("launch_history", default=20, min=1,
               help="Recent launch times used to estimate the queuing delay."),
    cfg.FloatOpt("decision_tolerance", default=0.05, min=0.0, max=1.0,
                 help="Step 3: candidates whose score is within this fraction of the best are "
                      "equally good; among them the least marginal power wins."),
    cfg.FloatOpt("weight_slots", default=1.0, min=0.0,
                 help="Decision weight of estimated session slots (cost-benefit analyzer)."),
    cfg.FloatOpt("weight_price", default=1.0, min=0.0,
                 help="Decision weight of the price per hour (cost-benefit analyzer)."),
    cfg.FloatOpt("weight_power", default=0.5, min=0.0,
                 help="Decision weight of the marginal power (cost-benefit analyzer)."),
    cfg.FloatOpt("weight_delay", default=0.5, min=0.0,
                 help="Decision weight of the queuing delay (cost-benefit analyzer)."),
    cfg.FloatOpt("weight_boot", default=0.25, min=0.0,
                 help="Decision weight of the boot (on-demand launch) time (cost-benefit "
                      "analyzer)."),
    cfg.MultiStrOpt("zones", default=[],
                    help="Zones besides the local one, one per line: KIND:NAME[:KEY=VALUE,...]. "
                         "nomad:NAME:address=http://127.0.0.1:4646,datacenter=dc1[,node_pool=P,"
                         "token=T,slot_interval=SECONDS (slot poller; default 2, 0 = off),"
                         "stats_max_age=SECONDS (older vnf-stats.json: use the node total)] "
                         "(python-nomad); nova:NAME:cloud=CLOUD[,availability_zone=AZ,"
                         "aggregate=AGG,default_flavor=F,default_image=I] (openstacksdk, "
                         "clouds.yaml)."),
    cfg.BoolOpt("local_zone", default=True,
                help="Run the embedded local zone (VNFs on this machine via the launch core)."),
    cfg.StrOpt("local_zone_name", default="local", help="Name of the embedded local zone."),
    cfg.StrOpt("region", default="default", help="Region of the zones this orchestrator runs."),
    cfg.IntOpt("local_pool_size", default=0, min=0, max=64,
               help="Warm shells the local zone keeps booted (0 = launches are cold)."),
    cfg.ListOpt("local_bridges", default=[],
                help="Bridges the NICs of VNFs launched in the local zone are plugged into "
                     "(one NIC per entry; empty = two unplugged NICs)."),
    cfg.FloatOpt("ns_scaler_interval", default=0.5, min=0.0,
                 help="Seconds between two rounds of the network-service scaler and healer: it "
                      "scales NS scaling aspects out and in from session slots and replaces "
                      "instances their zone no longer runs (0 = off: `fluidvim ns scale` and "
                      "`ns heal` only)."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [orchestrator] on ``conf`` (idempotent)."""
    register_group(conf, orch_group, orch_opts)


def service_opt_modules() -> tuple:
    """The modules whose option groups the orchestrator service has, each owning
    ``register_opts(conf)`` (idempotent) and ``list_opts()``: the one list of them.
    fluidvim-orchestrator and :func:`make_conf` (tests, CLIs, demo, benchmarks) register these
    (:func:`register_service_opts`); etc/oslo-config-generator/fluidvim-orchestrator.conf names
    their namespaces (and ``fluidvim.osm``: the VIM API registers [osm_vim] when it starts)."""
    from fluidvim.evaluator import conf as evalconf
    from fluidvim.orchestrator import hierarchy, hostpower, power
    from fluidvim.vnf import conf as vnfconf

    return (sys.modules[__name__], power, hostpower, hierarchy, evalconf, vnfconf)


def register_service_opts(conf: cfg.ConfigOpts) -> None:
    """Every option group of the orchestrator service (:func:`service_opt_modules`) and the
    oslo.messaging options a private ConfigOpts needs; not oslo.log's (its caller's choice)."""
    for mod in service_opt_modules():
        mod.register_opts(conf)
    register_messaging_opts(conf)


def register_messaging_opts(conf: cfg.ConfigOpts) -> None:
    """oslo.messaging registers its tracing and metrics options on the global CONF only; a
    private ConfigOpts used for RPC needs them too."""
    import importlib

    for mod, attr, group in (("oslo_messaging._tracing.client", "oslo_messaging_tracing",
                              "oslo_messaging_tracing"),
                             ("oslo_messaging._metrics.client", "oslo_messaging_metrics",
                              "oslo_messaging_metrics")):
        try:
            opts = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):      # another oslo.messaging release
            continue
        if group not in conf:
            conf.register_opts(opts, group=group)


def disable_rabbit_heartbeat(conf: cfg.ConfigOpts) -> None:
    """For short-lived processes (the CLI, tests): no AMQP heartbeat thread. With one, closing a
    transport waits seconds for the thread to get the connection lock from a poller."""
    try:
        from oslo_messaging._drivers import impl_rabbit
    except ImportError:
        return
    if "oslo_messaging_rabbit" not in conf:
        conf.register_opts(impl_rabbit.rabbit_opts, group="oslo_messaging_rabbit")
    conf.set_override("heartbeat_timeout_threshold", 0, group="oslo_messaging_rabbit")


def list_opts():
    """Entry point for oslo-config-generator (namespace ``fluidvim.orchestrator``)."""
    return [(orch_group, orch_opts)]


def make_conf(args=None, **overrides) -> cfg.ConfigOpts:
    """A private ConfigOpts with [orchestrator], [power], [hierarchy], [evaluator], [vnf] and
    logging options (tests, CLI, bench); ``hierarchy_X=v`` overrides [hierarchy] X."""
    from oslo_log import log as logging

    conf = cfg.ConfigOpts()
    register_service_opts(conf)
    logging.register_options(conf)
    conf(args or [], project="fluidvim", default_config_files=[])
    for key, value in overrides.items():
        if key.startswith("hierarchy_"):
            conf.set_override(key[len("hierarchy_"):], value, group="hierarchy")
            continue
        group = "vnf" if key.startswith("vnf_") else "orchestrator"
        conf.set_override(key[4:] if group == "vnf" else key, value, group=group)
    return conf
