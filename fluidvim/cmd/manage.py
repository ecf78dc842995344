# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim-manage``: operator commands (database schema migrations), like ``nova-manage``."""

from __future__ import annotations

import argparse
import os
import sys

EXAMPLES = """stores (databases) and the options that name them:
  vnf           the launch core's state on a VNF host ([vnf] state_connection, default
                sqlite:///<[vnf] state_dir>/vnf.sqlite): the local zone, nova-compute's driver
  orchestrator  the orchestrator's database ([orchestrator] connection), with the evaluator's
                probe cache in it (schemas orchestrator and evaluator)
  evaluator     a probe cache alone (--connection URL; default [orchestrator] connection)

examples:
  # after installing a new release, before starting its services (orchestrator node):
  fluidvim-manage --config-file /etc/fluidvim/fluidvim-orchestrator.conf db sync
  # a compute node (the Nova driver reads [vnf] from nova.conf):
  fluidvim-manage --config-file /etc/nova/nova.conf db sync --store vnf
  # where each database stands:
  fluidvim-manage --config-file /etc/fluidvim/fluidvim-orchestrator.conf db version
  # a database not named in a config file:
  fluidvim-manage db sync --store orchestrator --connection postgresql+psycopg2://fluidvim:PW@db/fluidvim

db sync upgrades each store to this release's schema (alembic); a database of the release
before schema migrations (tables, no version) is adopted as the baseline first. Without
--store it syncs every store whose database exists (a missing SQLite file is skipped: a service
creates an empty database at head itself). Services refuse a database at an older revision.
"""

STORES = {             # store -> (schemas, option that names its database)
    "vnf": (("vnf",), "[vnf] state_connection"),
    "orchestrator": (("orchestrator", "evaluator"), "[orchestrator] connection"),
    "evaluator": (("evaluator",), "[orchestrator] connection"),
}


def make_conf(config_files, config_dirs=()):
    from oslo_config import cfg

    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.vnf import conf as vnfconf

    conf = cfg.ConfigOpts()
    orchconf.register_opts(conf)
    vnfconf.register_opts(conf)
    args = [a for f in config_files for a in ("--config-file", f)]
    args += [a for d in config_dirs for a in ("--config-dir", d)]
    # no files given: oslo.config's defaults for project fluidvim (/etc/fluidvim/fluidvim.conf ...)
    conf(args, project="fluidvim", prog="fluidvim-manage",
         **({"default_config_files": []} if args else {}))
    return conf


def store_url(conf, store: str) -> str:
    if store == "vnf":
        return (conf.vnf.state_connection
                or "sqlite:///" + os.path.join(conf.vnf.state_dir, "vnf.sqlite"))
    return conf.orchestrator.connection


def _sqlite_missing(url: str) -> str | None:
    """The path of an SQLite URL's file when it does not exist (else None)."""
    import sqlalchemy as sa

    u = sa.make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return None if os.path.exists(u.database) else u.database


def _targets(args, conf):
    stores = list(STORES) if args.store == "all" else [args.store]
    if args.store == "all":
        stores.remove("evaluator")               # in the orchestrator's database
    return [(s, args.connection or store_url(conf, s)) for s in stores]


def cmd_db_sync(args, conf) -> int:
    from fluidvim.common import migration
    from fluidvim.common.sql import make_engine

    rc = 0
    for store, url in _targets(args, conf):
        shown = migration.redact(url)
        missing = _sqlite_missing(url)
        if args.store == "all" and missing:
            print(f"{store}: {shown}: no database (skipped; the service creates it at head, or "
                  f"`db sync --store {store}` does)")
            continue
        engine = make_engine(url)
        try:
            for schema in STORES[store][0]:
                before, after = migration.sync(engine, schema, args.revision)
                what = ("created" if before.empty else
                        "adopted (release before migrations) and now" if before.revision is None
                        else "already" if before.revision == after
                        else f"upgraded from {before.revision}")
                print(f"{store}: {shown}: schema {schema} {what} at revision {after}")
        except Exception as e:  # noqa: BLE001 - reported, next store
            print(f"{store}: {shown}: db sync failed: {e}", file=sys.stderr)
            rc = 1
        finally:
            engine.dispose()
    return rc


def cmd_db_version(args, conf) -> int:
    import sqlalchemy as sa

    from fluidvim.common import migration

    rc = 0
    for store, url in _targets(args, conf):
        shown = migration.redact(url)
        if _sqlite_missing(url):
            print(f"{store}: {shown}: no database")
            continue
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                for schema in STORES[store][0]:
                    st = migration.state(conn, schema)
                    print(f"{store}: {shown}: schema {schema} {st.describe()}")
                    if args.check and not st.at_head:
                        rc = 2
        except Exception as e:  # noqa: BLE001
            print(f"{store}: {shown}: {e}", file=sys.stderr)
            rc = 1
        finally:
            engine.dispose()
    return rc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fluidvim-manage", description=__doc__,
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config-file", action="append", default=[], metavar="FILE",
                   help="oslo.config file(s) naming the databases (repeatable); default: "
                        "oslo.config's search for fluidvim.conf")
    p.add_argument("--config-dir", action="append", default=[], metavar="DIR")
    sub = p.add_subparsers(dest="category", required=True)
    db = sub.add_parser("db", help="database schema: sync, version", epilog=EXAMPLES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    dbsub = db.add_subparsers(dest="action", required=True)
    for name, fn, hlp in (("sync", cmd_db_sync, "upgrade the schema to this release's"),
                          ("version", cmd_db_version, "show each store's schema revision")):
        a = dbsub.add_parser(name, help=hlp, epilog=EXAMPLES,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        a.add_argument("--store", choices=["all", *STORES], default="all",
                       help="which database (default: all that exist)")
        a.add_argument("--connection", metavar="URL",
                       help="SQLAlchemy URL instead of the one the config names (one --store)")
        if name == "sync":
            a.add_argument("--revision", default="head",
                           help="target revision (default head)")
        else:
            a.add_argument("--check", action="store_true",
                           help="exit 2 if a store is not at this release's head")
        a.set_defaults(func=fn)
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.connection and args.store == "all":
        p.error("--connection needs --store (vnf, orchestrator or evaluator)")
    conf = make_conf(args.config_file, args.config_dir)
    return args.func(args, conf)


if __name__ == "__main__":
    sys.exit(main())
