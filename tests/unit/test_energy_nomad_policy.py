# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/energy's nomad-binpack / nomad-spread policies: Nomad's own service scheduler in
process (nomad_driver/cmd/schedsim through bench/energy/nomad_policy.py).

The binary is built with the Go toolchain on first use (cached, see nomad_policy.build); after
`go test ./...` in nomad_driver (tools/test.sh's go stage) that is a link of cached packages.
"""

import shutil

import pytest

from bench.energy import nomad_policy
from bench.energy.policy import Host, Shape

pytestmark = [
    pytest.mark.skipif(shutil.which("go") is None, reason="Go is needed to build nomad_driver/cmd/schedsim"),
    pytest.mark.timeout(900),   # a cold `go build` compiles Nomad's scheduler and state store: minutes
]

CORES, MHZ = 8, 2000            # 16,000 MHz of Nomad cpu shares per host


def _hosts(n=4):
    return [Host(f"h{i}", "test-model", CORES, MHZ, 16 * 1024) for i in range(n)]


def _shape(service, cpu_mhz=2000):
    return Shape(service=service, vcpus=1, cpu_mhz=cpu_mhz, memory_mb=512, slots=64)


@pytest.fixture(scope="module")
def binary():
    return nomad_policy.build()


@pytest.fixture
def policy(binary):
    made = []

    def make(algorithm="binpack", hosts=None):
        p = nomad_policy.NomadPolicy(algorithm, binary=binary)
        made.append(p)
        p.start(hosts or _hosts())
        return p
    yield make
    for p in made:
        p.close()


def _place_one(p, shape, inst):
    (pl,) = p.place(shape, [inst])
    assert pl.instance == inst
    return pl.host


def _hosts_used(p, n=12):
    """n one-instance services of 2,000 MHz (one at a time, as scale-outs arrive) on 4 hosts
    that hold 8 each: the set of hosts Nomad used."""
    return {_place_one(p, _shape(f"s{k}"), f"i{k}") for k in range(n)}


def test_binpack_uses_fewer_hosts_than_spread(policy):
    packed = _hosts_used(policy("binpack"))
    spread = _hosts_used(policy("spread"))
    assert None not in packed | spread
    assert spread == {"h0", "h1", "h2", "h3"}
    assert len(packed) < len(spread)


def test_names():
    assert nomad_policy.NomadPolicy("binpack").name == "nomad-binpack"
    assert nomad_policy.NomadPolicy("spread").name == "nomad-spread"
    with pytest.raises(ValueError, match="algorithm 'firstfit'"):
        nomad_policy.NomadPolicy("firstfit")


@pytest.mark.parametrize("algorithm", nomad_policy.ALGORITHMS)
def test_ineligible_hosts_take_nothing(policy, algorithm):
    p = policy(algorithm)
    p.set_eligible("h0", False)
    p.set_eligible("h1", False)
    placed = p.place(_shape("fw"), [f"a{i}" for i in range(20)])
    assert [pl.instance for pl in placed] == [f"a{i}" for i in range(20)]
    hosts = [pl.host for pl in placed]
    assert set(hosts) - {None} <= {"h2", "h3"}
    assert hosts.count(None) == 20 - 2 * (CORES * MHZ // 2000)      # h2 and h3 hold 8 each
    p.set_eligible("h1", True)
    assert _place_one(p, _shape("fw"), "b0") == "h1"


def test_refused_when_nothing_fits(policy):
    p = policy()
    assert _place_one(p, _shape("huge", cpu_mhz=CORES * MHZ + 1), "x") is None
    assert _place_one(p, _shape("fits", cpu_mhz=CORES * MHZ), "y") is not None


def test_scale_in_and_stop(policy):
    p = policy("spread")
    ids = [f"a{i}" for i in range(6)]
    where = {pl.instance: pl.host for pl in p.place(_shape("fw"), ids)}
    assert None not in where.values()
    gone = p.scale_in("fw", 2)
    assert len(set(gone)) == 2 and set(gone) <= set(ids)
    assert p.scale_in("fw", 0) == []
    left = [i for i in ids if i not in gone]
    p.stop(left[:1])
    with pytest.raises(nomad_policy.SchedsimError, match="not a placed instance"):
        p.stop(gone[:1])
    with pytest.raises(nomad_policy.SchedsimError, match="scale_in: n: 4"):
        p.scale_in("fw", 4)                                 # 3 left
    assert len(p.scale_in("fw", 3)) == 3
    assert len(p.decision_ms) == len(p.decision_cpu_ms) == 6


def test_describe_counts_every_evaluation(policy, monkeypatch):
    monkeypatch.setenv("GOGC", "off")
    monkeypatch.delenv("GOMEMLIMIT", raising=False)
    p = policy()
    p.place(_shape("fw"), ["a", "b", "c"])          # one evaluation for three instances
    p.place(_shape("lb"), ["d"])
    p.scale_in("fw", 1)
    p.stop(["d"])                                   # a stop is no evaluation
    d = p.describe()
    assert d["nomad_evaluations"] == 3
    assert d["nomad_process_s"] * 1000 >= sum(p.decision_ms) - 0.5      # rounded to 1 ms
    assert d["nomad_process_ms_mean"] > 0
    assert d["schedsim_gc"] == {"GOGC": "off", "GOMEMLIMIT": "unset (Go's default)"}


def test_errors_name_the_field(policy, binary):
    p = nomad_policy.NomadPolicy("binpack", binary=binary)
    with pytest.raises(nomad_policy.SchedsimError, match="place before start"):
        p.place(_shape("fw"), ["a"])
    p = policy()
    with pytest.raises(nomad_policy.SchedsimError, match="place: cpu_mhz: 0"):
        p.place(_shape("fw", cpu_mhz=0), ["a"])
    with pytest.raises(nomad_policy.SchedsimError, match="eligible: host: \"h9\""):
        p.set_eligible("h9", False)
    with pytest.raises(nomad_policy.SchedsimError, match=r"start: hosts\[1\].id: \"h0\" appears twice"):
        p.start([_hosts()[0], _hosts()[0]])


def test_build_is_cached(binary):
    mtime = binary.stat().st_mtime_ns
    assert nomad_policy.build() == binary
    assert binary.stat().st_mtime_ns == mtime


def test_report_marks_rows_run_without_gc():
    from bench.energy.__main__ import _run
    row = {"run_at": "2026-11-28T04:00Z", "commit": "abc1234"}
    assert _run(row) == "11-28 04:00 abc1234"
    assert _run({**row, "schedsim_gc": {"GOGC": "unset (Go's default)"}}) == "11-28 04:00 abc1234"
    assert _run({**row, "schedsim_gc": {"GOGC": "off"}}) == "11-28 04:00 abc1234 GOGC=off"
    assert _run({**row, "nomad_recheck": False}) == "11-28 04:00 abc1234 no-recheck"
    assert _run({**row, "nomad_recheck": True}) == "11-28 04:00 abc1234"


def test_recheck_off_decides_the_same(binary, monkeypatch):
    """FLUIDVIM_NOMAD_RECHECK=0: Nomad no longer re-checks every running allocation on a count
    change, and every placement, refusal and scale-in stays the same (schedsim's
    TestRecheckOffDecidesTheSame drives many more)."""
    def run(recheck):
        p = nomad_policy.NomadPolicy("binpack", binary=binary, recheck=recheck)
        try:
            p.start(_hosts(3))
            out = []
            for k in range(8):                  # 3 hosts hold 24: the last ones are refused
                out += [(pl.instance, pl.host) for pl in
                        p.place(_shape(f"s{k % 2}"), [f"i{k}.{j}" for j in range(4)])]
                if k % 3 == 2:
                    out.append(sorted(p.scale_in(f"s{k % 2}", 2)))
            return out, p.describe()["nomad_recheck"]
        finally:
            p.close()
    with_, flag_on = run(True)
    assert ("i7.3", None) in with_                          # the fleet filled up
    monkeypatch.setenv(nomad_policy.RECHECK_ENV, "0")
    without, flag_off = run(None)                           # from the environment
    assert (flag_on, flag_off) == (True, False)
    assert without == with_
    monkeypatch.setenv(nomad_policy.RECHECK_ENV, "maybe")
    with pytest.raises(ValueError, match="FLUIDVIM_NOMAD_RECHECK='maybe'"):
        nomad_policy.NomadPolicy("binpack")
