# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The state store: pool claims are atomic across threads/processes; launch history."""

import json
import threading

import pytest

from fluidvim.vnf.store import StateStore, VNFRecord


def store(tmp_path):
    return StateStore(f"sqlite:///{tmp_path}/s.sqlite")


def add_shell(st, i, key="k"):
    st.add(VNFRecord(id=f"00000000-0000-0000-0000-00000000000{i}", name=f"pool-{i}",
                     backend="qemu", status="pool", spec_json="{}", pool_key=key))


def test_each_shell_is_claimed_once(tmp_path):
    st = store(tmp_path)
    for i in range(3):
        add_shell(st, i)
    got, lock = [], threading.Lock()

    def claimer(n):
        # each thread uses its own store object, as separate processes would
        mine = StateStore(f"sqlite:///{tmp_path}/s.sqlite")
        rec = mine.claim_pool_shell("k", f"vnf{n}")
        with lock:
            got.append(rec.id if rec else None)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [g for g in got if g]
    assert len(claimed) == 3 and len(set(claimed)) == 3
    assert got.count(None) == 3
    assert st.count_pool("k") == 0
    assert {r.status for r in st.list()} == {"running"}


@pytest.mark.parametrize("through", ["sqlite3", "sqlalchemy"])
def test_find_by_name_prefix_and_history(tmp_path, through):
    # a SQLite file runs on sqlite3; other URLs (here an in-memory database) on SQLAlchemy
    st = store(tmp_path) if through == "sqlite3" else StateStore("sqlite://")
    st.add(VNFRecord(id="6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f", name="fw", backend="qemu",
                     status="running", spec_json="{}"))
    assert st.find("fw").id.startswith("6f1c")
    assert st.find("6f1c2b").name == "fw"
    assert st.find("nope") is None
    for ms, kind in ((80.0, "cold"), (2.0, "warm"), (90.0, "cold")):
        st.record_launch("x", "qemu", kind, True, ms, {"boot": ms})
    st.record_launch("x", "qemu", "cold", False, 5.0, {})
    cold = st.recent_launches(10, "qemu", "cold")
    assert [r.total_ms for r in cold] == [90.0, 80.0]          # newest first, failures excluded
    assert json.loads(cold[0].phases_json) == {"boot": 90.0}
    assert st.find("6f1c_%") is None                 # LIKE wildcards are matched as themselves
    st.update("6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f", status="crashed", reason="gone", pid=None)
    assert [(r.status, r.reason) for r in st.list(statuses=("crashed",))] == [("crashed", "gone")]
    assert st.ids_named("fw") == ["6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f"]


def test_on_record_commits_with_the_launch_or_nothing_does(tmp_path):
    """A caller's rows, written on a SQLAlchemy connection, share the launch's one commit."""
    import sqlalchemy as sa

    st = store(tmp_path)
    table = sa.Table("caller_rows", sa.MetaData(), sa.Column("vnf", sa.String(64)))
    table.metadata.create_all(st.engine)
    for i, name in enumerate(("kept", "lost")):
        add_shell(st, i)
        st.update(f"00000000-0000-0000-0000-00000000000{i}", status="booting", name=name)

    st.finish_launch("00000000-0000-0000-0000-000000000000", {"status": "running"},
                     backend="qemu", kind="cold", total_ms=1.0, phases={},
                     on_record=lambda conn: conn.execute(table.insert(), {"vnf": "kept"}))

    def broken(conn):
        conn.execute(table.insert(), {"vnf": "lost"})
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        st.finish_launch("00000000-0000-0000-0000-000000000001", {"status": "running"},
                         backend="qemu", kind="cold", total_ms=1.0, phases={}, on_record=broken)
    with st.engine.connect() as conn:
        assert conn.execute(sa.select(table.c.vnf)).scalars().all() == ["kept"]
    assert {r.name: r.status for r in st.list()} == {"kept": "running", "lost": "booting"}
    assert [r.vnf_id for r in st.recent_launches(10)] == ["00000000-0000-0000-0000-000000000000"]
    st.close()


def test_a_file_store_does_not_need_sqlalchemy(tmp_path):
    """Once the schema exists (the first store on a host creates it through alembic), opening
    and using the store imports neither SQLAlchemy nor alembic."""
    import subprocess
    import sys

    StateStore(f"sqlite:///{tmp_path}/s.sqlite").close()
    code = ("import sys\n"
            "from fluidvim.vnf.store import StateStore, VNFRecord\n"
            f"st = StateStore('sqlite:///{tmp_path}/s.sqlite')\n"
            "st.add(VNFRecord(id='a', name='a', backend='qemu', status='pool', spec_json='{}',"
            " pool_key='k'))\n"
            "assert st.claim_pool_shell('k', 'b').name == 'b' and st.list()[0].status == 'running'\n"
            "assert 'sqlalchemy' not in sys.modules, 'SQLAlchemy imported'\n"
            "assert 'alembic' not in sys.modules, 'alembic imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_private_configs_do_not_share_overrides():
    from fluidvim.vnf.manager import make_conf

    a = make_conf(accel="tcg", state_dir="/tmp/a")
    b = make_conf(state_dir="/tmp/b")
    assert (a.vnf.accel, a.vnf.state_dir) == ("tcg", "/tmp/a")
    assert (b.vnf.accel, b.vnf.state_dir) == ("auto", "/tmp/b")
