# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Schema migrations (fluidvim.common.migration, fluidvim-manage db): on SQLite and on PostgreSQL.

* the migrations build exactly the models' schema (oslo.db's ModelsMigrationsSync: alembic's
  compare_metadata finds no difference);
* an upgrade from the release before migrations: its schema (tests/unit/data/db_baseline, the
  DDL its create_all emitted) with data in it - services refuse it, ``fluidvim-manage db sync``
  adopts it, the data is intact and read through the stores;
* an upgrade to a later release: a next release's revision (built here, adding a column) - a
  store at the older revision refuses with the command to run; db sync upgrades it, data kept.
"""

import json
import os
import textwrap
import threading
import time
import uuid

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from oslo_db.sqlalchemy import test_migrations

from fluidvim.cmd import manage
from fluidvim.common import migration
from fluidvim.evaluator.cache import ProbeCache
from fluidvim.orchestrator.db import Store
from fluidvim.vnf import migrations as this_release_migrations
from fluidvim.vnf.models import Base
from fluidvim.vnf.store import StateStore

BASELINE = os.path.join(os.path.dirname(__file__), "data", "db_baseline")
SCHEMA_NAMES = sorted(migration.SCHEMAS)


def engine_for(url):
    return sa.create_engine(url)


def schema_diff(engine, name, metadata=None):
    """alembic's compare_metadata between the database and the schema's models (only the
    schema's own tables: several schemas may share the database)."""
    metadata = metadata or migration.SCHEMAS[name].metadata()
    tables = set(metadata.tables)

    def include_object(obj, objname, type_, reflected, compare_to):
        return objname in tables if type_ == "table" else True

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_object": include_object,
                                                     "compare_type": True})
        return compare_metadata(ctx, metadata)


def revision(engine, name):
    with engine.connect() as conn:
        return migration.state(conn, name).revision


def test_head_constants_match_the_migration_scripts():
    for name in SCHEMA_NAMES:
        assert migration.SCHEMAS[name].head == migration.script_head(name), name
    # the launch core's store reads its version table from vnf.migrations (the leaf names it too)
    assert migration.SCHEMAS["vnf"].version_table == this_release_migrations.VERSION_TABLE


class _ModelsMigrationsSync(test_migrations.ModelsMigrationsSync):
    """oslo.db's models-vs-migrations check, driven from a pytest test."""

    def __init__(self, engine, name):
        self.engine, self.name, self.cleanups = engine, name, []
        self.tables = migration.SCHEMAS[name].tables()

    def get_engine(self):
        return self.engine

    def get_metadata(self):
        return migration.SCHEMAS[self.name].metadata()

    def db_sync(self, engine):
        migration.sync(engine, self.name)

    def include_object(self, object_, name, type_, reflected, compare_to):
        return name in self.tables if type_ == "table" else True

    def addCleanup(self, fn, *args, **kw):  # noqa: N802 - the unittest name the mixin calls
        self.cleanups.append((fn, args, kw))

    def fail(self, msg):
        pytest.fail(msg)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_sync_of_an_empty_database_builds_the_models_schema(db_url, name):
    engine = engine_for(db_url)
    check = _ModelsMigrationsSync(engine, name)
    try:
        check.test_models_sync()
    finally:
        for fn, args, kw in check.cleanups:
            fn(*args, **kw)
        engine.dispose()


def test_stores_create_an_empty_database_at_head_the_same_as_sync(db_url):
    st = StateStore(db_url)
    try:
        assert revision(st.engine, "vnf") == migration.SCHEMAS["vnf"].head
        assert schema_diff(st.engine, "vnf") == []
        # nothing else: the store created its schema only
        assert set(sa.inspect(st.engine).get_table_names()) == (
            migration.SCHEMAS["vnf"].tables() | {"fluidvim_vnf_version"})
    finally:
        st.engine.dispose()
    again = StateStore(db_url)          # at head: starts
    again.engine.dispose()


def test_stores_starting_together_on_an_empty_database_create_it_once(db_url):
    """Several processes (here threads, each with its own engine) start on one empty database."""
    errors, stores = [], []
    gate = threading.Barrier(6)

    def start():
        try:
            gate.wait()
            stores.append(StateStore(db_url))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 6
    with stores[0].engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM fluidvim_vnf_version")).all() == [
            (migration.SCHEMAS["vnf"].head,)]
    for st in stores:
        st.engine.dispose()


# -- the release before migrations, with data --
def load_baseline(engine, name):
    dialect = engine.dialect.name
    with open(os.path.join(BASELINE, f"{name}.{dialect}.sql")) as f:
        ddl = "\n".join(line for line in f if not line.startswith("--"))
    with engine.begin() as conn:
        for stmt in ddl.split(";"):
            if stmt.strip():
                conn.exec_driver_sql(stmt)


def insert(engine, table, *rows):
    """Rows into a table as the database has it (reflected: no model involved)."""
    with engine.begin() as conn:
        conn.execute(sa.Table(table, sa.MetaData(), autoload_with=conn).insert(), list(rows))


VNF_ID = "0b8f7c3e-5a3d-4f0e-9d7a-1c2b3a4d5e6f"


def fill_vnf(engine, with_nova: bool):
    now = time.time()
    insert(engine, "vnfs", dict(id=VNF_ID, name="fw", backend="qemu", status="running",
                                spec_json=json.dumps({"name": "fw"}), pool_key=None, pid=4242,
                                config="FromDevice(0) -> ToDevice(1);", boot_us=812,
                                reason=None, created_at=now - 10, updated_at=now - 5))
    insert(engine, "launches",
           dict(vnf_id=VNF_ID, backend="qemu", kind="cold", ok=True, total_ms=61.5,
                phases_json=json.dumps({"spawn": 40.0}), at=now - 9),
           dict(vnf_id=VNF_ID, backend="qemu", kind="warm", ok=True, total_ms=3.25,
                phases_json=json.dumps({"claim": 1.0}), at=now - 8))
    if with_nova:
        insert(engine, "nova_instance_names", dict(uuid=VNF_ID, name="instance-0000002a"))
        insert(engine, "nova_slot_services", dict(uuid=VNF_ID, service="fw", zone="az1"))


@pytest.mark.parametrize("with_nova", [True, False], ids=["nova-compute", "local-zone"])
def test_upgrade_of_a_launch_core_database_from_the_release_before_migrations(
        db_url, with_nova, capsys):
    old = engine_for(db_url)
    load_baseline(old, "vnf")
    if not with_nova:        # a local zone's database never had the Nova driver's tables
        with old.begin() as conn:
            conn.exec_driver_sql("DROP TABLE nova_instance_names")
            conn.exec_driver_sql("DROP TABLE nova_slot_services")
    fill_vnf(old, with_nova)
    old.dispose()

    with pytest.raises(migration.SchemaError) as e:
        StateStore(db_url)
    msg = str(e.value)
    assert "not versioned" in msg and "fluidvim-manage --config-file FILE db sync --store vnf" in msg

    assert manage.main(["db", "version", "--store", "vnf", "--connection", db_url, "--check"]) == 2
    assert manage.main(["db", "sync", "--store", "vnf", "--connection", db_url]) == 0
    out = capsys.readouterr().out
    assert "schema vnf adopted (release before migrations) and now at revision 0001" in out

    st = StateStore(db_url)
    try:
        assert revision(st.engine, "vnf") == migration.SCHEMAS["vnf"].head
        assert schema_diff(st.engine, "vnf") == []
        rec = st.get(VNF_ID)
        assert (rec.name, rec.status, rec.pid, rec.boot_us, rec.config) == (
            "fw", "running", 4242, 812, "FromDevice(0) -> ToDevice(1);")
        assert [(r.kind, r.total_ms, r.phases) for r in st.recent_launches(5)] == [
            ("warm", 3.25, {"claim": 1.0}), ("cold", 61.5, {"spawn": 40.0})]
        from fluidvim.nova_driver.names import InstanceNames
        from fluidvim.nova_driver.slots import ServiceRecords
        names = InstanceNames(st.engine)
        assert names.all() == ({VNF_ID: "instance-0000002a"} if with_nova else {})
        assert ServiceRecords(names).all() == ({VNF_ID: ("fw", "az1")} if with_nova else {})
    finally:
        st.engine.dispose()
    assert manage.main(["db", "version", "--store", "vnf", "--connection", db_url, "--check"]) == 0


def fill_orchestrator(engine):
    now = time.time()
    insert(engine, "zones", dict(name="z1", kind="local", region="r1", labels_json="{}",
                                 updated_at=now))
    insert(engine, "services", dict(name="fw", profile_json=json.dumps({"config": "x"}),
                                    aliases_json=json.dumps({"premium": 3}),
                                    max_queuing_delay_s=0.5, created_at=now))
    insert(engine, "decisions", dict(id="d0000000-0000-0000-0000-000000000001", service="fw",
                                     status="deployed", zone="z1", host="h1", rule="r",
                                     request_json="{}", total_ms=2.5, created_at=now))
    insert(engine, "decision_steps",
           *[dict(decision_id="d0000000-0000-0000-0000-000000000001", index=i, name=n, ms=0.5,
                  record_json="{}") for i, n in enumerate(("filter", "probe", "analyze", "decide"))])
    insert(engine, "launch_records", dict(zone="z1", service="fw", started_at=now - 1,
                                          finished_at=now, ok=True, ms=1000.0, predicted_s=0.8,
                                          instance_id="i1", kind="cold", error=None))
    insert(engine, "vim_flavors", dict(id="f1", name="vnf.small", ram=32, vcpus=1, disk=0,
                                       slots=64, created_at=now))


@pytest.mark.parametrize("with_vim", [True, False], ids=["with-vim-tables", "without"])
def test_upgrade_of_an_orchestrator_database_from_the_release_before_migrations(
        db_url, with_vim, capsys):
    old = engine_for(db_url)
    load_baseline(old, "orchestrator")
    load_baseline(old, "evaluator")
    fill_orchestrator(old)
    if not with_vim:         # the VIM API (OSM plugin) never ran against this database
        with old.begin() as conn:
            for t in ("vim_images", "vim_flavors", "vim_vms"):
                conn.exec_driver_sql(f"DROP TABLE {t}")
    insert(old, "evaluator_probe_results",
           dict(env_uid="e1", kind="boot", zone="z1", ok=True,
                metrics_json=json.dumps({"boot_ms": 60.0}), measured_at=time.time(),
                valid_for_s=3600.0, valid_until=time.time() + 3600.0, error=None))
    old.dispose()

    with pytest.raises(migration.SchemaError) as e:
        Store(db_url)
    assert "db sync --store orchestrator" in str(e.value)

    assert manage.main(["db", "sync", "--store", "orchestrator", "--connection", db_url]) == 0
    out = capsys.readouterr().out
    assert "schema orchestrator adopted" in out and "schema evaluator adopted" in out

    store = Store(db_url)
    try:
        for name in ("orchestrator", "evaluator"):
            assert revision(store.engine, name) == migration.SCHEMAS[name].head
            assert schema_diff(store.engine, name) == []
        svc = store.service("fw")
        assert (svc.aliases, svc.max_queuing_delay_s) == ({"premium": 3}, 0.5)
        d = store.decision("d0000000")
        assert [s.name for s in d.steps] == ["filter", "probe", "analyze", "decide"]
        assert [(r.zone, r.ms, r.kind) for r in store.launches()] == [("z1", 1000.0, "cold")]
        assert [r.metrics for r in ProbeCache(store.engine).history()] == [{"boot_ms": 60.0}]
        with store.engine.connect() as conn:
            flavors = conn.execute(sa.text("SELECT name, slots FROM vim_flavors")).all()
        assert flavors == ([("vnf.small", 64)] if with_vim else [])
    finally:
        store.close()


def test_adoption_refuses_tables_that_are_not_the_baseline(db_url):
    eng = engine_for(db_url)
    with eng.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE vnfs (id VARCHAR(36) PRIMARY KEY, name VARCHAR(64))")
    with pytest.raises(migration.SchemaError, match="table vnfs has columns"):
        migration.sync(eng, "vnf")
    assert revision(eng, "vnf") is None
    eng.dispose()


# -- a later release: a revision after the baseline --
NEXT_REVISION = '''
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("vnfs") as b:
        b.add_column(sa.Column("note", sa.Text(), nullable=True))
    op.execute("UPDATE vnfs SET note = 'from ' || backend")


def downgrade():
    with op.batch_alter_table("vnfs") as b:
        b.drop_column("note")
'''

NEXT_MODELS = '''
import sqlalchemy as sa

import fluidvim.nova_driver.models  # noqa: F401
from fluidvim.vnf.models import Base as _Base


class Base:
    metadata = sa.MetaData()


for _t in _Base.metadata.sorted_tables:
    _t.to_metadata(Base.metadata)
Base.metadata.tables["vnfs"].append_column(sa.Column("note", sa.Text(), nullable=True))
'''


@pytest.fixture
def next_release(tmp_path, monkeypatch):
    """The launch core's schema as a next release would ship it: this release's migrations plus
    revision 0002 (a column added to ``vnfs`` and filled), models with that column, HEAD 0002."""
    pkg = f"fluidvim_next_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "next" / pkg
    real = os.path.dirname(this_release_migrations.__file__)
    (root / "migrations" / "versions").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "models.py").write_text(textwrap.dedent(NEXT_MODELS))
    (root / "migrations" / "__init__.py").write_text('HEAD = "0002"\n')
    for f in ("env.py", "script.py.mako", os.path.join("versions", "0001_baseline.py")):
        with open(os.path.join(real, f)) as src:
            (root / "migrations" / f).write_text(src.read())
    (root / "migrations" / "versions" / "0002_note.py").write_text(NEXT_REVISION)
    monkeypatch.syspath_prepend(str(tmp_path / "next"))
    old = migration.SCHEMAS["vnf"]
    nxt = migration.Schema("vnf", pkg, old.version_table, (f"{pkg}.models",), f"{pkg}.models:Base")

    def install():
        monkeypatch.setitem(migration.SCHEMAS, "vnf", nxt)
        # the store's own fast check reads its package's constant (no alembic import)
        monkeypatch.setattr(this_release_migrations, "HEAD", "0002")

    return install


def test_a_store_at_an_older_revision_refuses_until_db_sync(db_url, next_release, capsys):
    st = StateStore(db_url)                      # this release: created at 0001
    fill_vnf(st.engine, with_nova=True)
    st.engine.dispose()

    next_release()                               # the next release is installed
    with pytest.raises(migration.SchemaError) as e:
        StateStore(db_url)
    msg = str(e.value)
    assert "is at revision 0001, this release needs 0002" in msg
    assert "fluidvim-manage --config-file FILE db sync --store vnf" in msg
    assert "docs/operators.md, Upgrades" in msg

    assert manage.main(["db", "sync", "--store", "vnf", "--connection", db_url]) == 0
    assert "schema vnf upgraded from 0001 at revision 0002" in capsys.readouterr().out
    st = StateStore(db_url)                      # starts now
    try:
        assert revision(st.engine, "vnf") == "0002"
        assert schema_diff(st.engine, "vnf", migration.SCHEMAS["vnf"].metadata()) == []
        # the comparison sees the change (against this release's models)
        assert [(d[0], d[2], d[3].name) for d in schema_diff(st.engine, "vnf", Base.metadata)] == [
            ("remove_column", "vnfs", "note")]
        with st.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT name, note FROM vnfs")).all() == [("fw", "from qemu")]
        assert st.get(VNF_ID).pid == 4242
        assert len(st.recent_launches(5)) == 2
    finally:
        st.engine.dispose()


def test_orchestrator_service_refuses_an_old_database_naming_the_command(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/orch.sqlite"
    old = engine_for(url)
    load_baseline(old, "orchestrator")
    old.dispose()
    conf = tmp_path / "orchestrator.conf"
    conf.write_text(f"[orchestrator]\nconnection = {url}\nlocal_zone = false\n"
                    f"[vnf]\nstate_dir = {tmp_path}/state\n")      # never the host's own
    from fluidvim.orchestrator import service
    assert service.main(["--config-file", str(conf)]) == 1
    err = capsys.readouterr().err
    assert "not versioned" in err and "db sync --store orchestrator" in err
    assert manage.main(["--config-file", str(conf), "db", "sync"]) == 0
    with engine_for(url).connect() as conn:
        assert migration.state(conn, "orchestrator").at_head


def test_manage_help_lists_stores_and_examples(capsys):
    for argv in (["--help"], ["db", "sync", "--help"]):
        with pytest.raises(SystemExit) as e:
            manage.main(argv)
        assert e.value.code == 0
        out = capsys.readouterr().out
        assert "fluidvim-manage --config-file /etc/fluidvim/fluidvim-orchestrator.conf db sync" in out
        assert "[vnf] state_connection" in out and "[orchestrator] connection" in out
    with pytest.raises(SystemExit):
        manage.main(["db", "sync", "--connection", "sqlite://"])      # which store?
    assert "--connection needs --store" in capsys.readouterr().err


def test_orchestrator_0001_to_head_keeps_network_services_and_adds_operations(db_url, capsys):
    """Up to revision 0004 (NS lifecycle): an NS deployed at 0001 is still there, with no scale levels
    yet ({}), and its operations can be recorded; the store refuses the 0001 database until
    ``db sync``."""
    eng = engine_for(db_url)
    migration.sync(eng, "orchestrator", "0001")
    migration.sync(eng, "evaluator")
    now = time.time()
    insert(eng, "network_services", dict(
        id="n0000000-0000-0000-0000-000000000001", name="chain1", nsd_id="fw-chain",
        zone="local", status="running", error=None, plan_json=json.dumps({"units": []}),
        descriptors_json="{}", networks_json="{}", services_json='["chain1-fw"]',
        instances_json="[]", steps_json="[]", created_at=now, updated_at=now))
    eng.dispose()
    with pytest.raises(migration.SchemaError) as e:
        Store(db_url)
    head = migration.SCHEMAS["orchestrator"].head        # 0004 or a later revision
    assert f"is at revision 0001, this release needs {head}" in str(e.value)
    assert manage.main(["db", "sync", "--store", "orchestrator", "--connection", db_url]) == 0
    assert f"upgraded from 0001 at revision {head}" in capsys.readouterr().out
    store = Store(db_url)
    try:
        assert schema_diff(store.engine, "orchestrator") == []
        row = store.network_service("chain1")
        assert (row.status, row.get("services"), row.get("scale")) == ("running", ["chain1-fw"],
                                                                        {})
        op = store.op_started(row.id, "scale", aspect="fw/pool", direction="out")
        store.op_finished(op, "completed", to_level=1)
        (rec,) = store.ns_operations(row.id)
        assert (rec.type, rec.state, rec.detail) == ("scale", "completed", {
            "aspect": "fw/pool", "direction": "out", "to_level": 1})
        store.update_ns(row.id, scale={"fw/pool": 1})
        assert store.network_service(row.id).get("scale") == {"fw/pool": 1}
    finally:
        store.close()
