# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The warm-pool contract's state rules (contract/PROTOCOL.md §6.1, §6.3) in the launch core, with
real shells: a replaced kernel file retires its shells (they are never claimed), a shell
recorded under an older pool-key form is removed at recovery, a rejected configure gives the
shell back as the oldest of its key. (The Go driver's: nomad_driver/unikernel/pool_test.go.)"""

import shutil

import pytest

from fluidvim.common.zonetypes import NicRequest
from fluidvim.vnf import conf as vnfconf, pool
from fluidvim.vnf.control import ControlError

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"


def test_a_replaced_kernel_retires_its_shells(make_manager, tmp_path):
    kernel = tmp_path / "vnf.elf"
    shutil.copyfile(vnfconf.default_kernel(), kernel)
    mgr = make_manager(backend="qemu", kernel=str(kernel))
    key = mgr.start_pool(1, nics=2)
    assert mgr.wait_pool(key, 1, timeout=60)
    (old,) = mgr.store.list(statuses=("pool",))
    # a rebuilt kernel: other content (trailing bytes an ELF loader ignores), other identity
    with open(kernel, "ab") as f:
        f.write(b"\0rebuilt")
    new_key = mgr.pool_key("qemu", 32, 1, 2)
    assert new_key != key and pool.same_shape_other_kernel(new_key, key)
    mgr._pool_wakeup.set()                  # what a claim or a death would do
    assert mgr.wait_pool(new_key, 1, timeout=60)
    assert mgr.store.get(old.id) is None, "the shell of the replaced kernel is still there"
    res = mgr.launch(FORWARD, nics=[None, None])
    assert res.kind == "warm" and res.vnf_id != old.id


def test_a_shell_under_an_old_key_form_is_removed_at_recovery(make_manager):
    mgr = make_manager(backend="qemu")
    mgr.fill_pool(1, nics=2)
    (shell,) = mgr.store.list(statuses=("pool",))
    old_form = shell.pool_key.rsplit("/", 1)[0]           # before the contract: no /t<ms>
    assert not pool.key_is_current(old_form)
    mgr.store.update(shell.id, pool_key=old_form)
    mgr.close()
    again = make_manager(backend="qemu")
    summary = again.recover()
    assert summary["removed"] == 1 and again.store.get(shell.id) is None


def test_a_rejected_configure_gives_the_shell_back_as_the_oldest(make_manager):
    mgr = make_manager(backend="qemu")
    mgr.fill_pool(2, nics=2)
    first, second = sorted(mgr.store.list(statuses=("pool",)), key=lambda r: r.created_at)
    with pytest.raises(ControlError) as e:
        mgr.launch("FromDevice(0) -> Countr;", nics=[NicRequest(mac="fa:16:3e:00:00:01"), None])
    assert e.value.code == "config"
    back = mgr.store.get(first.id)
    assert back.status == "pool" and back.pool_key == first.pool_key
    # the MACs the rejected configure carried were not applied; the next claim takes it again
    with mgr.channel(first.id) as ch:
        assert [n["mac"] for n in ch.stats()["nics"]] == [n.mac for n in first.spec.nics]
    res = mgr.launch(FORWARD, nics=[None, None])
    assert res.kind == "warm" and res.vnf_id == first.id
    assert mgr.store.get(second.id).status == "pool"
