# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The probe cache: validity, newest first, per zone, restarts, its own table on a shared engine."""

import time

import pytest
import sqlalchemy as sa

from fluidvim.evaluator.cache import ProbeCache
from fluidvim.evaluator.model import ProbeResult


def res(uid="u1", kind="load", zone="z1", at=None, valid=3600.0, ok=True, **metrics):
    return ProbeResult(env_uid=uid, kind=kind, ok=ok, metrics=metrics or {"x": 1},
                       measured_at=time.time() if at is None else at, valid_for_s=valid, zone=zone)


def test_put_get_valid_newest_first(tmp_path):
    c = ProbeCache(f"sqlite:///{tmp_path}/p.sqlite")
    now = time.time()
    c.put(res(at=now - 100, v=1))
    c.put(res(at=now - 10, v=2))
    c.put(res(kind="boot", at=now - 5, v=3))
    got = c.get_valid("u1", "load")
    assert got.metrics == {"v": 2} and got.zone == "z1" and got.ok
    assert c.get_valid("u1", "boot").metrics == {"v": 3}
    assert c.get_valid("u2", "load") is None


def test_expiry_and_zone_filter(tmp_path):
    c = ProbeCache(f"sqlite:///{tmp_path}/p.sqlite")
    now = time.time()
    c.put(res(zone="z1", at=now - 100, valid=50))            # expired
    assert c.get_valid("u1", "load") is None
    c.put(res(kind="boot", zone="z1", at=now))
    c.put(res(kind="boot", zone="z2", at=now - 1, v=9))
    assert c.get_valid("u1", "boot", zone="z2").metrics == {"v": 9}
    assert c.get_valid("u1", "boot", zone="z3") is None
    assert c.get_valid("u1", "boot", now=now + 7200) is None
    assert c.zones_probed() == {"z1", "z2"}
    assert c.invalidate("u1", "boot") == 2 and c.get_valid("u1", "boot") is None
    assert len(c.history("u1")) == 3
    assert c.purge(older_than_s=0, now=now + 1) == 3


def test_survives_a_restart(tmp_path):
    url = f"sqlite:///{tmp_path}/p.sqlite"
    ProbeCache(url).put(res(steps=[{"offered_pps": 100}]))
    again = ProbeCache(url)
    assert again.get_valid("u1", "load").metrics == {"steps": [{"offered_pps": 100}]}


def test_own_table_on_the_orchestrators_engine(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path}/orch.sqlite")
    meta = sa.MetaData()
    sa.Table("zones", meta, sa.Column("name", sa.String, primary_key=True))
    meta.create_all(engine)
    c = ProbeCache(engine)
    c.put(res())
    names = set(sa.inspect(engine).get_table_names())
    assert names == {"zones", "evaluator_probe_results", "fluidvim_evaluator_version"}


def test_bad_results_refused(tmp_path):
    c = ProbeCache(f"sqlite:///{tmp_path}/p.sqlite")
    with pytest.raises(ValueError, match="env_uid and kind"):
        c.put(res(uid=""))
    with pytest.raises(ValueError, match="JSON"):
        c.put(res(v=float("nan")))
    with pytest.raises(ValueError, match="JSON"):
        c.put(res(v=object()))
    assert c.history() == []


def test_valid_index_answers_like_get_valid(tmp_path):
    c = ProbeCache(f"sqlite:///{tmp_path}/p.sqlite")
    now = time.time()
    c.put(res(uid="a", kind="boot", zone="z1", at=now - 10, v=1))
    c.put(res(uid="a", kind="boot", zone="z2", at=now - 5, v=2))
    c.put(res(uid="a", kind="load", zone="z1", at=now - 100, valid=50, v=3))   # expired
    c.put(res(uid="b", kind="load", zone="z1", at=now - 1, v=4))
    idx = c.valid_index(["a", "b", "c"])
    for args in [("a", "boot"), ("a", "boot", "z1"), ("a", "boot", "z2"), ("a", "load"),
                 ("b", "load"), ("b", "load", "z2"), ("c", "boot")]:
        want = c.get_valid(*args)
        got = idx.get(*args)
        assert (want and want.metrics) == (got and got.metrics), args
    assert idx.get("a", "boot").metrics == {"v": 2}
    assert c.valid_index(["a"], kinds=["load"]).get("a", "boot") is None
