# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The state store: pool claims are atomic across threads/processes; launch history."""

import json
import threading

from fluidvim.vnf.state import StateStore, VNFRecord


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


def test_find_by_name_prefix_and_history(tmp_path):
    st = store(tmp_path)
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


def test_private_configs_do_not_share_overrides():
    from fluidvim.vnf.manager import make_conf

    a = make_conf(accel="tcg", state_dir="/tmp/a")
    b = make_conf(state_dir="/tmp/b")
    assert (a.vnf.accel, a.vnf.state_dir) == ("tcg", "/tmp/a")
    assert (b.vnf.accel, b.vnf.state_dir) == ("auto", "/tmp/b")
