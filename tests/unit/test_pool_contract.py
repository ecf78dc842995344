# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The warm-pool contract (contract/PROTOCOL.md §6): the conformance vectors contract/vectors/pool.json,
which the Go driver's tests run too (nomad_driver/unikernel/contract_test.go), against the
launch core: fluidvim.vnf.pool and, for the queuing delay, VNFManager over a real state store."""

import json
import os
import subprocess
import sys
import uuid

import pytest

from fluidvim.common.zonetypes import NicRequest
from fluidvim.vnf import control, pool, spec as specmod
from fluidvim.vnf.manager import VNFManager, make_conf
from fluidvim.vnf.store import VNFRecord

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
with open(os.path.join(ROOT, "contract", "vectors", "pool.json")) as _f:
    V = json.load(_f)


def test_vectors_are_current():
    tool = os.path.join(ROOT, "tools", "gen_pool_vectors.py")
    assert subprocess.run([sys.executable, tool, "--check"]).returncode == 0, \
        "contract/vectors/pool.json is stale: run tools/gen_pool_vectors.py and review the diff"


@pytest.mark.parametrize("case", V["kernel_identity"], ids=lambda c: repr(c["content"][:12]))
def test_kernel_identity(case, tmp_path):
    path = tmp_path / "vnf.elf"
    path.write_bytes(case["content"].encode())
    assert pool.kernel_id(str(path)) == case["id"]
    assert len(case["id"]) == V["kernel_id_len"]


def test_kernel_identity_follows_a_rewritten_file(tmp_path):
    path = tmp_path / "vnf.elf"
    path.write_bytes(b"build 1")
    first = pool.kernel_id(str(path))
    path.write_bytes(b"build 22")                 # another size (and mtime): hashed again
    assert pool.kernel_id(str(path)) != first
    with pytest.raises(OSError):
        pool.kernel_id(str(tmp_path / "gone.elf"))


@pytest.mark.parametrize("case", V["pool_key"], ids=lambda c: c["key"])
def test_pool_key(case):
    assert pool.pool_key(case["backend"], case["kernel_id"], case["memory_mb"], case["vcpus"],
                         case["nics"], case["flow_timeout_ms"]) == case["key"]
    assert pool.key_is_current(case["key"])


def test_old_pool_keys_are_not_current():
    assert not pool.key_is_current("qemu/6bc959aca43b/m32/c1/n2")       # before the contract
    assert not pool.key_is_current(None)


@pytest.mark.parametrize("case", V["stale"], ids=lambda c: c["other"])
def test_stale_shells(case):
    assert pool.same_shape_other_kernel(case["key"], case["other"]) is case["stale"]


def test_transitions():
    seen = set()
    for t in V["transitions"]:
        seen.add((t["from"], t["event"]))
        if t["to"] is None:
            with pytest.raises(pool.TransitionError):
                pool.transition(t["from"], t["event"])
        else:
            assert pool.transition(t["from"], t["event"]) == t["to"], t
    assert set(pool.TRANSITIONS) <= seen


@pytest.mark.parametrize("case", V["claim"], ids=lambda c: c["name"])
def test_claim(case):
    shell = [specmod.NicSpec(tap=n["tap"], mac=n["mac"]) for n in case["shell_nics"]]
    n = len(shell)        # the vectors keep per-field lists (None = none asked for)
    requests = [NicRequest(mac=m, tap=t)
                for m, t in zip(case["macs"] or [None] * n, case["taps"] or [None] * n)]
    configure_macs, nics = pool.claim_nics(shell, requests)
    assert configure_macs == case["configure_macs"]
    assert nics == case["nics"]
    line = control.encode_request(7, "configure", config=control_config(case), slots=64,
                                  macs=configure_macs)
    assert line.decode() == case["configure_line"]


def control_config(case):
    return json.loads(case["configure_line"])["config"]


@pytest.mark.parametrize("case", V["queuing_delay"], ids=lambda c: c["name"])
def test_queuing_delay_of_the_launch_core(case, tmp_path):
    """VNFManager.queuing_delay over a real state store holding the case's history and shells."""
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"fluidvim")
    mgr = VNFManager(make_conf(run_dir=str(tmp_path / "run"), state_dir=str(tmp_path / "state"),
                               kernel=str(kernel), launch_history=case["window"]))
    try:
        key = mgr.pool_key("qemu", 32, 1, 2)
        for _ in range(case["ready_shells"]):
            vid = str(uuid.uuid4())
            mgr.store.add(VNFRecord(id=vid, name="pool-" + vid[:8], backend="qemu", status="pool",
                                    spec_json="{}", pool_key=key))
        for r in reversed(case["history"]):                 # oldest first, as they happened
            mgr.store.record_launch(str(uuid.uuid4()), "qemu", r["kind"], r["ok"], r["total_ms"], {})
        qd = mgr.queuing_delay("qemu")
    finally:
        mgr.close()
    assert (qd["basis"], qd["samples"], qd["warm_shells"]) == (
        case["basis"], case["samples"], case["ready_shells"])
    if case["ms"] is None:
        assert qd["seconds"] is None
    else:
        assert qd["seconds"] * 1000.0 == pytest.approx(case["ms"])


def test_manager_pool_key_is_the_contracts(tmp_path):
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"fluidvim")
    mgr = VNFManager(make_conf(run_dir=str(tmp_path / "run"), state_dir=str(tmp_path / "state"),
                               kernel=str(kernel)))
    try:
        case = V["pool_key"][0]
        assert mgr.pool_key(case["backend"], case["memory_mb"], case["vcpus"], case["nics"]) == \
            case["key"]
    finally:
        mgr.close()
