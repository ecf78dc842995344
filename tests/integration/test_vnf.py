# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The unikernel VNF and the launch core against real QEMU/KVM (or TCG), libvirtd and real taps."""

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from fluidvim.vnf import netdev, testnet
from fluidvim.vnf.backends import host_tsc_khz
from fluidvim.vnf.control import ControlChannel, ControlError
from fluidvim.vnf.manager import COLD_PHASES, WARM_PHASES
from fluidvim.vnf.spec import LaunchArgs

from .conftest import leaked_taps, vnf_ids

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
FIREWALL = """fw :: IPFilter(allow arp, allow icmp, allow tcp dst port 80, deny all);
FromDevice(0) -> fw -> passed :: Counter -> ToDevice(1);
fw[1] -> blocked :: Counter -> Discard;
FromDevice(1) -> back :: Counter -> ToDevice(0);
"""
VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "contract", "vectors", "protocol.json")


def element(stats, name):
    return next(e for e in stats["elements"] if e["name"] == name)


def test_protocol_vectors_against_the_real_vnf(make_manager):
    """Every exchange of contract/vectors/protocol.json, sent byte for byte to a booted VNF."""
    mgr = make_manager(backend="qemu")
    mgr.fill_pool(1, nics=2)
    shell = mgr.store.list(statuses=("pool",))[0]
    with open(VECTORS) as f:
        vectors = json.load(f)
    ready_keys = set(json.loads(vectors["guest_lines"][0]["line"]))
    s = socket.socket(socket.AF_UNIX)
    s.connect(shell.spec.control_socket)
    s.settimeout(10)
    f = s.makefile("rwb")
    for ex in vectors["exchanges"]:
        f.write(ex["send"].encode())
        f.flush()
        reply = json.loads(f.readline())
        assert reply["ok"] is ex["ok"], (ex["send"][:80], reply)
        assert reply.get("id") == ex["id"], (ex["send"][:80], reply)
        if ex["ok"]:
            assert set(ex["result_keys"]) <= set(reply["result"]), reply
            if "nic_macs" in ex:
                assert [n["mac"] for n in reply["result"]["nics"]] == [
                    m or nic.mac for m, nic in zip(ex["nic_macs"], shell.spec.nics)], reply
            if "free" in ex:
                assert reply["result"]["free"] == ex["free"], reply
            if "slots_free" in ex:
                assert reply["result"]["slots"]["free"] == ex["slots_free"], reply
            if "slots_keys" in ex:
                assert set(ex["slots_keys"]) <= set(reply["result"]["slots"]), reply
            if "cpu_keys" in ex:
                assert set(ex["cpu_keys"]) <= set(reply["result"]["cpu"]), reply
            if ex.get("cpu_wall"):
                cpu = reply["result"]["cpu"]
                assert sum(cpu[k] for k in ("busy_us", "poll_us", "halt_us", "stolen_us")) \
                    <= reply["result"]["uptime_us"], reply
            assert all(reply["result"][k] == ex[k] for k in ("window_us", "coalesce_us")
                       if k in ex), reply
        else:
            assert reply["error"].get("field") == ex.get("field"), reply
            assert reply["error"]["code"] == ex["code"], reply
            if "err_line" in ex:
                assert reply["error"]["line"] == ex["err_line"], reply
                assert reply["error"]["col"] >= 1
            if "message_contains" in ex:
                assert ex["message_contains"] in reply["error"]["message"], reply
    f.close()
    s.close()
    ch = mgr.channel(shell.id)          # a new client after the raw one hung up
    pong = ch.ping()
    ch.close()
    assert pong["pong"] is True and pong["configured"] is True
    # the ready event of a fresh boot has every key of the vector, on the virtio console
    be = mgr.backend()
    spec = mgr._new_spec(be, LaunchArgs("", nics=(None, None), name="ready-check", memory_mb=32,
                                         slots=16))
    be.prepare(spec)
    ch, pid = be.spawn(spec)
    try:
        ready = ch.wait_ready(30)
    finally:
        ch.close()
        be.kill(spec, pid)
        be.cleanup(spec)
    assert set(ready) >= ready_keys
    assert ready["ctl"] == "virtio" and ready["nics"] == 2 and ready["slots"] == 16
    assert ready["macs"] == [n.mac for n in spec.nics]
    assert ready["clock"] in ("kvmclock", "cpuid") and ready["boot_us"] > 0


def test_forward_filter_and_count_between_namespaces(mgr, net):
    res = mgr.launch(FIREWALL, name="fw", nics=net.bridges, slots=64)
    assert res.kind == "cold" and list(res.phases_ms) == list(COLD_PHASES)
    assert res.boot_us and res.boot_us > 0
    server = net.serve_tcp(80, 22)
    try:
        assert net.ping(3) == 3
        assert net.tcp_connect(80) is True
        assert net.tcp_connect(22, timeout_s=1.0) is False
    finally:
        server.terminate()
        server.wait()
    st = mgr.stats(res.vnf_id)
    assert st["configured"] is True
    nic0, nic1 = st["nics"]
    assert nic0["rx"] >= 6 and nic1["tx"] >= 6      # ARP + 3 ICMP + SYN/ACKs from a
    assert nic1["rx"] >= 4 and nic0["tx"] >= 4      # replies from b
    assert element(st, "blocked")["count"] >= 1     # the port-22 SYN (and retries)
    assert element(st, "passed")["count"] >= 6
    assert st["latency_ns"]["count"] >= 10
    assert sum(st["latency_ns"]["buckets_log2"]) == st["latency_ns"]["count"]


def test_session_slots_exhaust_and_free_again(make_manager, net):
    mgr = make_manager(backend="qemu")
    res = mgr.launch(FORWARD, nics=net.bridges, slots=3)
    server = net.serve_tcp(80)
    try:
        established, holder = net.hold_connections(80, 5, timeout_s=1.0)
        st = mgr.stats(res.vnf_id)["slots"]
        assert established == 3
        assert (st["total"], st["used"], st["free"]) == (3, 3, 0)
        assert st["rejected"] >= 2
        assert st["opened"] == 3          # the refused ones never opened (contract §4 stats)
        holder.terminate()
        holder.wait()
    finally:
        server.terminate()       # both ends close: FIN both ways frees the slots
        server.wait()
    deadline = time.monotonic() + 10
    while mgr.stats(res.vnf_id)["slots"]["used"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mgr.stats(res.vnf_id)["slots"]["used"] == 0
    server = net.serve_tcp(80)
    try:
        assert net.tcp_connect(80) is True
    finally:
        server.terminate()
        server.wait()
    assert mgr.stats(res.vnf_id)["slots"]["opened"] == 4     # monotonic: ended ones still count


def test_config_error_cold_leaves_nothing(mgr):
    with pytest.raises(ControlError) as e:
        mgr.launch("FromDevice(0) -> Countr -> ToDevice(1);", nics=[None, None], warm=False)
    assert e.value.code == "config" and e.value.line == 1 and "Countr" in e.value.message
    ids = vnf_ids(mgr.store)
    assert mgr.store.list() == []
    assert len(ids) == 1 and leaked_taps(ids) == []
    assert os.listdir(mgr.run_dir) == []


def test_config_error_warm_returns_the_shell_to_the_pool(make_manager):
    mgr = make_manager(backend="qemu")
    mgr.fill_pool(1, nics=2)
    key = mgr.pool_key("qemu", 32, 1, 2)
    with pytest.raises(ControlError) as e:
        mgr.launch("FromDevice(0) -> Queue(0) -> ToDevice(1);", nics=[None, None])
    assert e.value.code == "config" and "Queue" in e.value.message
    assert mgr.store.count_pool(key, ("pool",)) == 1
    res = mgr.launch(FORWARD, nics=[None, None])
    assert res.kind == "warm" and list(res.phases_ms) == list(WARM_PHASES)
    assert mgr.stats(res.vnf_id)["configured"] is True


def test_warm_pool_refills_in_background(make_manager, net):
    mgr = make_manager(backend="qemu")
    key = mgr.start_pool(2, nics=2)
    assert mgr.wait_pool(key, 2, timeout=60)
    res = mgr.launch(FORWARD, name="w1", nics=net.bridges)
    assert res.kind == "warm"
    assert [netdev.master_of(n.tap) for n in mgr.get("w1").spec.nics] == net.bridges
    assert net.ping(2) == 2
    assert mgr.wait_pool(key, 2, timeout=60)      # the claimed shell was replaced
    qd = mgr.queuing_delay()
    assert qd["basis"] == "warm" and qd["samples"] == 1
    # from the launch history; its row's total is taken just before its own commit, the
    # result's includes that commit
    (row,) = mgr.store.recent_launches(5)
    assert row.vnf_id == res.vnf_id and row.total_ms <= res.total_ms
    assert qd["seconds"] == pytest.approx(row.total_ms / 1000.0)


def test_kill_9_of_qemu_is_detected(mgr):
    died = threading.Event()
    seen = []
    mgr.death_listeners.append(lambda vid, reason: (seen.append((vid, reason)), died.set()))
    res = mgr.launch(FORWARD, nics=[None, None])
    rec = mgr.get(res.vnf_id)
    pid = rec.pid or _libvirt_qemu_pid(res.vnf_id)
    os.kill(pid, signal.SIGKILL)
    assert died.wait(15), "the death of QEMU was not reported"
    assert seen[0][0] == res.vnf_id
    rec = mgr.get(res.vnf_id)
    assert rec.status == "crashed" and rec.reason
    assert not any(netdev.exists(n.tap) for n in rec.spec.nics)


def test_pause_stops_forwarding_and_unpause_resumes_the_same_vnf(mgr, net):
    res = mgr.launch(FORWARD, name="napper", nics=net.bridges, slots=16)
    assert net.ping(2) == 2
    before = mgr.stats(res.vnf_id)
    assert mgr.pause("napper").status == "paused"
    assert net.ping(2, timeout_s=1) == 0               # nothing crosses a paused VNF
    with pytest.raises(ControlError, match="napper is paused"):
        mgr.stats("napper")
    assert [r.status for r in mgr.list()] == ["paused"]
    assert mgr.slots()["total"] == 0                    # no slot is offered meanwhile
    with pytest.raises(ControlError, match="napper is paused"):
        mgr.configure("napper", FORWARD)
    assert mgr.pause("napper").status == "paused"      # paused stays paused
    assert mgr.unpause("napper").status == "running"
    assert net.ping(3) == 3
    after = mgr.stats(res.vnf_id)                       # the same guest: counters went on
    assert after["uptime_us"] > before["uptime_us"]
    assert after["nics"][0]["rx"] > before["nics"][0]["rx"]
    rec = mgr.get("napper")
    mgr.destroy("napper")
    assert not any(netdev.exists(n.tap) for n in rec.spec.nics)


def _running(pid):
    """Alive and not a zombie (the killed QEMU may be our child, unreaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _libvirt_qemu_pid(vnf_id):
    with open(f"/run/libvirt/qemu/fluidvim-{vnf_id}.pid") as f:
        return int(f.read())


def test_restarted_caller_finds_running_vnfs(make_manager, backend):
    first = make_manager(backend=backend)
    res = first.launch(FORWARD, name="keeper", nics=[None, None], slots=32)
    first.close()
    second = make_manager(backend=backend)
    summary = second.recover()
    assert summary["reattached"] == 1
    assert second.recover()["reattached"] == 1      # recovering twice watches each VNF once
    assert second.get("keeper").status == "running"
    assert second.stats("keeper")["slots"]["total"] == 32
    # a VNF that died while nobody watched is marked crashed on the next recovery
    second.close()
    rec = second.get("keeper")
    if backend == "qemu":
        os.kill(rec.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _running(rec.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
    else:
        import libvirt

        conn = libvirt.open("qemu:///system")       # behind fluidvim's back
        conn.lookupByUUIDString(res.vnf_id).destroy()
        conn.close()
    third = make_manager(backend=backend)
    assert third.recover()["crashed"] == 1
    assert third.get("keeper").status == "crashed"


def test_recovery_adopts_only_its_own_orphans(make_manager, backend, tmp_path):
    """Two launch cores on one host (e.g. nova-compute and an orchestrator's local zone): one's
    recovery must not adopt the other's VNFs, even when its store has lost its own."""
    other = make_manager(backend=backend, state_dir=str(tmp_path / "other"),
                         run_dir=f"/run/fluidvim-test-o{uuid.uuid4().hex[:8]}")
    theirs = other.launch(FORWARD, name="theirs", nics=[None, None])
    try:
        mine = make_manager(backend=backend, state_dir=str(tmp_path / "mine"))
        ours = mine.launch(FORWARD, name="ours", nics=[None, None])
        mine.store.delete(ours.vnf_id)           # the store lost it: adopt it from the backend
        assert mine.recover()["adopted"] == 1
        assert [r.id for r in mine.list()] == [ours.vnf_id]
        assert other.get("theirs").status == "running"
        assert other.stats("theirs")["configured"] is True
    finally:
        other.destroy(theirs.vnf_id)
        os.rmdir(other.run_dir)


def test_tcg_boots_and_forwards(make_manager, net):
    mgr = make_manager(backend="qemu", accel="tcg")
    assert mgr.accel == "tcg"
    res = mgr.launch(FORWARD, nics=net.bridges)
    spec = mgr.get(res.vnf_id).spec
    assert spec.tsc_khz and spec.tsc_khz == host_tsc_khz()
    # the boot summary goes to COM1 after `ready`, while idle (kprintf_later): wait for it
    deadline = time.monotonic() + 10
    while "clock cmdline" not in mgr.backend().console_output(spec) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "clock cmdline" in mgr.backend().console_output(spec)
    assert net.ping(2) == 2
    assert mgr.stats(res.vnf_id)["nics"][0]["rx"] >= 2


# CI runs 50 create/delete cycles per backend; `make soak` runs the long soak (1,000 per backend,
# FLUIDVIM_CYCLES=1000) and bench/RESULTS.md records it. The assertions are the same.
CYCLES = int(os.environ.get("FLUIDVIM_CYCLES", "50"))


@pytest.mark.slow
@pytest.mark.timeout(60 + 5 * CYCLES)  # libvirt: ~0.45 s create + ~0.2 s destroy per cycle here
def test_create_delete_cycles_leak_nothing(mgr, net):
    be = mgr.backend()
    t0 = time.monotonic()
    for i in range(CYCLES):
        res = mgr.launch(FORWARD, nics=net.bridges, warm=False)
        if i % 50 == 0:
            assert mgr.stats(res.vnf_id)["configured"] is True
        mgr.destroy(res.vnf_id)
    took = time.monotonic() - t0
    print(f"\n{CYCLES} create/delete cycles on {be.name}: {took:.1f} s "
          f"({took / CYCLES * 1000:.0f} ms per cycle), nothing leaked")
    assert mgr.store.list() == []
    ids = vnf_ids(mgr.store)
    assert len(ids) == CYCLES and leaked_taps(ids) == []
    ports = os.listdir(f"/sys/class/net/{net.br0}/brif") + \
        os.listdir(f"/sys/class/net/{net.br1}/brif")
    assert sorted(ports) == sorted([net.host_a, net.host_b])
    assert os.listdir(mgr.run_dir) == []
    assert not {vid for vid, _ in be.discover()} & ids      # no QEMU process / domain left
    if be.name == "qemu":
        assert not [p for p in os.listdir("/proc") if p.isdigit() and _is_our_qemu(p, mgr)]


def _is_our_qemu(pid, mgr):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return mgr.run_dir.encode() in f.read()
    except OSError:
        return False


def test_warm_launch_failing_midway_leaves_nothing(make_manager, monkeypatch):
    """A bridge that vanishes between the check and the plug: the claimed shell is destroyed."""
    mgr = make_manager(backend="qemu")
    mgr.fill_pool(1, nics=1)
    gone = testnet.unique_name("fvgone")
    netdev.ensure_bridge(gone)
    real_plug = netdev.plug

    def plug_after_bridge_vanished(tap, bridge):
        netdev.delete_link(gone)
        return real_plug(tap, bridge)

    monkeypatch.setattr(netdev, "plug", plug_after_bridge_vanished)
    try:
        with pytest.raises(netdev.NetdevError, match=gone):
            mgr.launch(FORWARD, nics=[gone])
    finally:
        netdev.delete_link(gone)
    assert mgr.store.list() == []
    ids = vnf_ids(mgr.store)
    assert len(ids) == 1 and leaked_taps(ids) == []


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_on_record_rows_commit_with_the_launch_or_not_at_all(make_manager, warm):
    """A caller's rows (the Nova driver's instance name) are written in the launch's own
    commit; a hook that fails fails the launch and leaves no VNF, shell, tap or row."""
    import sqlalchemy as sa

    mgr = make_manager(backend="qemu")
    table = sa.Table("caller_rows", sa.MetaData(), sa.Column("vnf", sa.String(64)))
    table.metadata.create_all(mgr.store.engine)
    if warm:
        mgr.fill_pool(2, nics=2)
    res = mgr.launch(FORWARD, name="kept", nics=[None, None],
                     on_record=lambda conn: conn.execute(table.insert(), {"vnf": "kept"}))
    assert res.kind == ("warm" if warm else "cold")
    with mgr.store.engine.connect() as conn:
        assert conn.execute(sa.select(table.c.vnf)).scalars().all() == ["kept"]

    def broken(conn):
        conn.execute(table.insert(), {"vnf": "lost"})
        raise RuntimeError("caller's row refused")

    with pytest.raises(RuntimeError, match="refused"):
        mgr.launch(FORWARD, name="lost", nics=[None, None], on_record=broken)
    with mgr.store.engine.connect() as conn:
        assert conn.execute(sa.select(table.c.vnf)).scalars().all() == ["kept"]
    assert [r.name for r in mgr.list()] == ["kept"]
    ids = vnf_ids(mgr.store)
    assert leaked_taps([i for i in ids if i != res.vnf_id]) == []
    failed = [r for r in mgr.store.recent_launches(10)]
    assert len(failed) == 1 and failed[0].vnf_id == res.vnf_id     # only ok launches count


def test_death_after_repeated_recovery_is_reported_once(make_manager):
    """recover() twice on one manager must not leave a second pidfd behind (it spun the watcher)."""
    first = make_manager(backend="qemu")
    res = first.launch(FORWARD, name="twice", nics=[None, None])
    first.close()
    second = make_manager(backend="qemu")
    second.recover()
    second.recover()
    seen = []
    died = threading.Event()
    second.death_listeners.append(lambda vid, reason: (seen.append(vid), died.set()))
    os.kill(second.get("twice").pid, signal.SIGKILL)
    assert died.wait(15), "the death of QEMU was not reported"
    time.sleep(0.5)                                 # a stale pidfd would report it again and again
    assert seen == [res.vnf_id]
    assert second.get("twice").status == "crashed"
    assert not second.backend("qemu")._watched


@pytest.mark.libvirt
def test_guest_reset_boots_a_clean_shell(make_manager, net):
    """.bss is not loaded by QEMU (unikernel/linker.ld: untouched tables cost no host memory), so
    a guest reset (libvirt on_reboot=restart, `virsh reset`) must not find the previous boot's
    state: the kernel clears .bss when it sees its own boot marker there."""
    import libvirt

    mgr = make_manager(backend="libvirt")
    res = mgr.launch(FORWARD, nics=net.bridges, warm=False)
    assert net.ping(2) == 2
    assert mgr.stats(res.vnf_id)["slots"]["used"] == 1          # the ICMP session
    conn = libvirt.open("qemu:///system")
    try:
        conn.lookupByUUIDString(res.vnf_id).reset()
    finally:
        conn.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            st = mgr.stats(res.vnf_id)
            if st["uptime_us"] < 5_000_000:
                break
        except (ControlError, OSError):
            pass
        assert time.monotonic() < deadline, "the VNF did not come back after the reset"
        time.sleep(0.1)
    assert st["configured"] is False
    assert st["slots"] == {"total": 1024, "used": 0, "free": 1024, "rejected": 0, "opened": 0}


@pytest.mark.parametrize("backend", ["qemu"])
def test_idle_vnf_wakes_on_a_packet_and_on_a_control_request(mgr, net):
    """Tickless: a VNF without sessions arms no timer and sleeps in `hlt` until something arrives.
    It must still wake for a control request and for a packet, each after a quiet period; its
    `stats` "cpu" accounts for both (halted while quiet, busy and kicking for the ping), and says
    what woke it: the packet by the NIC's interrupt, never a timer (a lost wake-up, e.g. RX
    interrupts left off before `hlt` with a timer fallback, still forwards every ping, late)."""
    res = mgr.launch(FORWARD, nics=net.bridges, warm=False)
    time.sleep(1.5)                          # long past the 80 us spin: halted, no timer armed
    st = mgr.stats(res.vnf_id)               # wakes on the console's interrupt
    assert st["configured"] is True and st["slots"]["used"] == 0
    time.sleep(1.5)
    assert net.ping(1) == 1                  # wakes on the NIC's interrupt, forwards both ways
    st2 = mgr.stats(res.vnf_id)
    assert st2["nics"][0]["rx"] >= 1 and st2["nics"][1]["tx"] >= 1
    assert st2["uptime_us"] - st["uptime_us"] >= 1_000_000   # its clock ran while it slept
    cpu, cpu2 = st["cpu"], st2["cpu"]
    assert cpu2["halts"] > cpu["halts"] and cpu2["halt_us"] > cpu["halt_us"]
    assert cpu2["busy_us"] > cpu["busy_us"] and cpu2["kicks"] > cpu["kicks"]
    assert cpu2["busy_us"] + cpu2["poll_us"] + cpu2["halt_us"] + cpu2["stolen_us"] \
        <= st2["uptime_us"]
    _woken_by_interrupts_only(cpu, cpu2)


def _nr_throttled(uuid) -> int:
    from fluidvim.vnf import cgroups
    for d in cgroups.dirs(uuid):
        try:
            with open(os.path.join(d, "cpu.stat")) as f:
                return int(dict(line.split() for line in f)["nr_throttled"])
        except (OSError, KeyError):
            continue
    raise AssertionError(f"no cpu.stat with nr_throttled under {cgroups.dirs(uuid)}")


@pytest.mark.parametrize("backend", ["qemu"])
def test_a_throttled_vnf_sees_the_wait_and_pauses_busy_polling(mgr, net):
    """The VNF's CPU quota (its cgroup) covers QEMU's main thread, which moves the frames, as
    well as the vCPU: a guest that busy-polls between frames spends the quota, CFS throttles the
    whole QEMU for the rest of the period and frames wait in the tap (bench/results/slots.md:
    p99 in ~10 ms steps on a quiet host). The guest sees such a wait as KVM steal time and stops
    polling (`backoffs`), so it halts between frames and leaves the quota to the frames."""
    from fluidvim.vnf import cgroups
    res = mgr.launch(FORWARD, nics=net.bridges, warm=False)
    uuid = mgr.get(res.vnf_id).spec.uuid
    quota = cgroups.cpu_quota(uuid)
    if quota is None:
        pytest.skip("no CPU quota enforced for VNFs on this host (vnf/cgroups.py)")
    cpu0 = mgr.stats(res.vnf_id)["cpu"]
    if "steal_us" not in cpu0:
        pytest.skip("the hypervisor offers the guest no KVM steal time")
    throttled0 = _nr_throttled(uuid)
    cgroups.set_cpu_quota(uuid, 1000)            # 1 ms per period: a few frames exhaust it
    try:
        deadline = time.monotonic() + 60
        cpu = cpu0
        # traffic until the kernel throttled the group and the guest saw a wait of >= 1 ms
        while _nr_throttled(uuid) == throttled0 or cpu["stalls"] == cpu0["stalls"]:
            assert time.monotonic() < deadline, ("never throttled, or the guest never saw it",
                                                 _nr_throttled(uuid) - throttled0, cpu)
            net.ping(5)
            cpu = mgr.stats(res.vnf_id)["cpu"]
    finally:
        cgroups.set_cpu_quota(uuid, quota)
    # the reply that showed the wait says polling is paused (for 5 s after each such wait)
    assert cpu["steal_max_us"] >= 1000 and cpu["backoffs"] >= 1 and cpu["poll_paused"], cpu
    # the wait is charged to stolen_us, not to the busy/poll/halt of the rounds it spanned
    assert cpu["stolen_us"] > cpu0["stolen_us"], (cpu0, cpu)
    assert net.ping(2) == 2                      # halts between frames, woken by each


def _woken_by_interrupts_only(cpu, cpu2):
    """Between two `stats` around traffic sent to a halted VNF (no sessions before it, so no
    timer was armed): the first frame ended a halt by the NIC's interrupt (wake_rx), and no halt
    ended on the timer. (`rx_no_irq` is not asserted: a frame the device is still announcing
    when a request wakes the VNF counts there too.)"""
    assert cpu2["wake_rx"] > cpu["wake_rx"], (cpu, cpu2)
    assert cpu2["wake_timer"] == 0, cpu2
    assert cpu2["wake_other"] >= 1, cpu2          # the first `stats` woke it (the console)
    if "steal_us" in cpu2:                        # KVM steal time: monotonic, max <= total
        assert cpu2["steal_us"] >= cpu["steal_us"] and cpu2["steal_max_us"] <= cpu2["steal_us"]


def test_a_ready_lost_to_a_late_connection_is_recovered(make_manager, monkeypatch):
    """The launcher's connection reaches QEMU late (here: on purpose, 0.5 s after QEMU started;
    in the wild: QEMU's main loop accepted it after the guest sent `ready`), so `ready` is lost;
    the launch still succeeds through the ping fallback of ControlChannel.wait_ready."""
    from fluidvim.vnf import backends

    real_connect = backends.QemuBackend.connect

    def late_connect(self, spec):
        time.sleep(0.5)                      # the guest is long ready and its event discarded
        return real_connect(self, spec)

    monkeypatch.setattr(backends.QemuBackend, "connect", late_connect)
    monkeypatch.setattr(ControlChannel, "READY_PING_AFTER_S", 0.2)
    mgr = make_manager(backend="qemu", boot_timeout=3.0)
    res = mgr.launch(FORWARD, nics=[None, None], warm=False)
    assert res.boot_us and res.boot_us > 0           # from the ping reply
    assert mgr.stats(res.vnf_id)["configured"] is True


# Offloads on (veth TSO/checksum offload, the default): the VNF gets partial-checksum TCP superframes
# of up to 64 KiB and passes them on unsegmented; a Queue holds them as buffer chains.
OFFLOAD_FW = """c :: Classifier(ip proto tcp, -);
fw :: IPFilter(allow tcp dst port 80, allow tcp src port 80, deny all);
FromDevice(0) -> c;
c[0] -> fw -> tcp :: Counter -> Queue(200) -> ToDevice(1);
c[1] -> other :: Counter -> ToDevice(1);
fw[1] -> blocked :: Counter -> Discard;
FromDevice(1) -> back :: Counter -> ToDevice(0);
"""
TRANSFER = 24 << 20


def _tcp_out_segs(net, side) -> int:
    """TCP segments *side* put on the wire: TcpOutSegs leaves out retransmissions, which the VNF
    counts as well (RetransSegs counts them in wire segments, as OutSegs does)."""
    r = net.run(side, "nstat", "-az", "TcpOutSegs", "TcpRetransSegs")
    return sum(int(ln.split()[1]) for ln in r.stdout.splitlines()
               if ln.startswith(("TcpOutSegs", "TcpRetransSegs")))


def _tap_stat(tap, key) -> int:
    with open(f"/sys/class/net/{tap}/statistics/{key}") as f:
        return int(f.read())


@pytest.mark.parametrize("config", [FORWARD, OFFLOAD_FW], ids=["forward", "filter"])
def test_tcp_transfer_with_offloads_passes_intact_and_counts_segments(mgr, net, config):
    res = mgr.launch(config, nics=net.bridges)
    _tcp_transfer_passes_intact(mgr, net, res, config)


def _tcp_transfer_passes_intact(mgr, net, res, config):
    spec = mgr.get(res.vnf_id).spec
    server = net.popen("b", "python3", "-c",
                       "import socket,hashlib\n"
                       "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                       f"s.bind(('{net.ip_b}',80)); s.listen(1); print('listening',flush=True)\n"
                       "c,_=s.accept(); h=hashlib.sha256(); n=0\n"
                       "while True:\n"
                       "    b=c.recv(1<<20)\n"
                       "    if not b: break\n"
                       "    h.update(b); n+=len(b)\n"
                       "print(n, h.hexdigest(), flush=True)\n",
                       stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        # (frames that arrived before `configure`, e.g. IPv6 ND of ns a, are drops: start after them)
        st0 = mgr.stats(res.vnf_id)
        nics0 = st0["nics"]
        segs0 = _tcp_out_segs(net, "a")
        tap_rx0 = _tap_stat(spec.nics[0].tap, "tx_packets")     # host -> VNF nic0, in skbs
        client = net.run("a", "python3", "-c",
                         "import socket,hashlib,random\n"
                         f"d=random.Random(7).randbytes({TRANSFER})\n"
                         f"c=socket.create_connection(('{net.ip_b}',80),timeout=30)\n"
                         "c.sendall(d); c.shutdown(socket.SHUT_WR); c.recv(1)\n"
                         "print(len(d), hashlib.sha256(d).hexdigest())\n", timeout=90)
        assert client.returncode == 0, client.stderr
        got = server.stdout.readline().split()
    finally:
        server.terminate()
        server.wait()
    assert got == client.stdout.split()                     # every byte, in order
    segs = _tcp_out_segs(net, "a") - segs0
    tap_frames = _tap_stat(spec.nics[0].tap, "tx_packets") - tap_rx0
    st = mgr.stats(res.vnf_id)
    nic0, nic1 = ({k: n[k] - n0[k] if k != "mac" else n[k] for k in n} for n, n0 in zip(st["nics"], nics0))
    # superframes crossed: far fewer frames on the tap than TCP segments sent
    assert tap_frames * 4 < segs, (tap_frames, segs)
    # the VNF counts wire packets: every TCP segment a sent (nothing else from a but ARP)
    # (1 %: tap queue drops; + ARP and IPv6 ND/MLD frames of ns a)
    assert segs - segs // 100 <= nic0["rx"] <= segs + 40, (segs, nic0)
    assert nic0["drop"] == 0 and nic1["tx"] == nic0["rx"]
    assert nic0["rx_bytes"] > TRANSFER
    if config == OFFLOAD_FW:
        assert segs - segs // 100 <= element(st, "tcp")["count"] <= segs + 2, (segs, st["elements"])
        assert element(st, "blocked")["count"] == 0
        assert (element(st, "tcp")["count"] + element(st, "other")["count"]
                - element(st0, "tcp")["count"] - element(st0, "other")["count"]) == nic0["rx"]
    # The forwarder sends superframes from their RX buffers (zero copy), which go back to the
    # device when the TX completes: none may stay out. Quiet, the guest halts only once every
    # buffer is back; a frame must then wake it and pass both ways, repeatedly.
    time.sleep(1.5)
    assert net.ping(3) == 3


@pytest.mark.parametrize("config", [FORWARD, OFFLOAD_FW], ids=["forward", "filter"])
def test_vhost_user_nics_forward_intact_wake_from_idle_and_leave_nothing(make_manager, net,
                                                                          config):
    """[vnf] net_backend = vhost-user: fluidvim-vhost-net owns the taps and moves frames between
    them and guest memory; offloads, counters and the idle wake-up work as with QEMU's taps, and
    a destroy leaves neither the backend process nor a tap."""
    mgr = make_manager(net_backend="vhost-user")
    res = mgr.launch(config, nics=net.bridges, warm=False)
    rec = mgr.get(res.vnf_id)
    assert rec.spec.net_backend == "vhost-user"
    be = mgr.backend()
    helper = be._vhost[res.vnf_id]
    assert helper.poll() is None
    with open(f"/proc/{rec.pid}/cmdline", "rb") as f:
        qemu_args = f.read().split(b"\0")
    assert b"vhost-user,id=net0,chardev=vu0" in qemu_args and b"tap" not in b" ".join(
        a for a in qemu_args if a.startswith(b"tap,"))
    time.sleep(1.5)                          # idle: halted; the first frame must wake it
    cpu = mgr.stats(res.vnf_id)["cpu"]
    time.sleep(1.5)                          # halted again after the request
    assert net.ping(2) == 2                  # the backend interrupts the guest it wakes
    _woken_by_interrupts_only(cpu, mgr.stats(res.vnf_id)["cpu"])
    _tcp_transfer_passes_intact(mgr, net, res, config)
    mgr.destroy(res.vnf_id)
    assert helper.poll() is not None         # exited with QEMU's sockets, and was reaped
    assert leaked_taps({res.vnf_id}) == []
    assert not os.path.exists(be.vnf_dir(res.vnf_id))


def test_vhost_user_without_its_backend_binary_fails_clearly_and_leaves_nothing(make_manager):
    mgr = make_manager(net_backend="vhost-user", vhost_net_binary="/nonexistent/fluidvim-vhost-net")
    with pytest.raises(Exception) as e:
        mgr.launch(FORWARD, nics=[None, None], warm=False)
    assert "vhost_net_binary" in str(e.value) and "make -C vhost" in str(e.value)
    ids = vnf_ids(mgr.store)
    assert leaked_taps(ids) == [] and mgr.list() == []
    assert not [d for d in os.listdir(mgr.run_dir) if d in ids]


def _thread_nices(pid) -> dict:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            out[int(tid)] = int(f.read().rsplit(")", 1)[1].split()[16])   # field 19: nice
    return out


@pytest.mark.parametrize("nice", [10, 0])
def test_vcpu_threads_run_below_the_thread_that_moves_frames(make_manager, nice):
    """[vnf] vcpu_nice: the busy-polling vCPU yields to QEMU's main thread (the tap I/O)."""
    mgr = make_manager(vcpu_nice=nice)
    res = mgr.launch(FORWARD, nics=[None, None], warm=False)
    pid = mgr.get(res.vnf_id).pid
    nices = _thread_nices(pid)
    assert nices.pop(pid) == 0 and nices                    # the main thread; vCPU(s) and others
    assert set(nices.values()) == {nice}, nices
    assert mgr.stats(res.vnf_id)["configured"] is True


def test_qemu_runs_in_a_cgroup_limited_to_the_flavor(make_manager):
    """The launch core (so the Nova driver, which launches with the flavor's memory_mb and
    vcpus) puts QEMU in fluidvim.slice/<vnf uuid> with memory = guest + QEMU_OVERHEAD_MB and
    one CPU period per vCPU (vnf/cgroups.py); the group goes with the VNF."""
    from fluidvim.vnf import cgroups, limits
    version, why = cgroups.mode()
    if not version:
        pytest.skip(f"limits cannot be enforced here: {why}")
    mgr = make_manager()
    res = mgr.launch(FORWARD, nics=[None, None], memory_mb=48, vcpus=2, warm=False)
    rec = mgr.get(res.vnf_id)
    uid = json.loads(rec.spec_json)["uuid"]
    group = cgroups.dirs(uid)
    assert group, f"no cgroup for VNF {uid}"

    def read(d, f):
        with open(os.path.join(d, f)) as fh:
            return fh.read().strip()
    want_mem = (48 + limits.QEMU_OVERHEAD_MB) << 20
    if version == 2:
        (d,) = group
        assert read(d, "memory.max") == str(want_mem)
        want_cpu = 2 * limits.CPU_PERIOD_US + limits.QEMU_OVERHEAD_CPU_US
        assert read(d, "cpu.max") == f"{want_cpu} {limits.CPU_PERIOD_US}"
        usage = int(read(d, "memory.current"))
    else:
        mem, cpu = group
        assert read(mem, "memory.limit_in_bytes") == str(want_mem)
        assert read(cpu, "cpu.cfs_quota_us") == str(2 * limits.CPU_PERIOD_US + limits.QEMU_OVERHEAD_CPU_US)
        assert read(cpu, "cpu.cfs_period_us") == str(limits.CPU_PERIOD_US)
        usage = int(read(mem, "memory.usage_in_bytes"))
    for d in group:
        assert str(rec.pid) in read(d, "cgroup.procs").split(), d
    assert 0 < usage <= want_mem                  # QEMU's pages are charged to the group
    assert mgr.stats(res.vnf_id)["configured"] is True
    mgr.destroy(res.vnf_id)
    assert cgroups.dirs(uid) == []
