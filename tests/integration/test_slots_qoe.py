# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Session slots at the service's QoE on a real VNF with real traffic (issue 23 item 1).

A VNF told a QoE capacity (``qoe``) announces min(flow-table free, capacity - used) in ``stats``;
it shrinks the capacity when its own latency tail passes the budget under load and grows it back
after good (or idle) windows. UDP sessions of the load generator between the test namespaces are
the traffic; each window is closed by a ``stats`` read >= 1 s after the previous one. The budgets
are chosen so that no timing decides the outcome: 1 ns (no packet meets it) and 60 s (every
packet does). The capacity figures of a real probe are bench/slots.py's (bench/results/slots.json).
"""

import json
import subprocess
import sys
import time

from fluidvim.evaluator.loadgen import QUANTILES

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
P99 = 990000


def sessions(net, n, seconds=2.0):
    r = net.run("a", sys.executable, "-m", "fluidvim.evaluator.loadgen", "client", "--src",
                net.ip_a, "--dst", net.ip_b, "--sessions", str(n), "--pps", "100", "--duration",
                str(seconds), "--per-session-quantile", "0.99", timeout=seconds + 60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def window(mgr, vid):
    """Close the VNF's current correction window (a stats read >= 1 s after it opened)."""
    time.sleep(1.05)
    return mgr.stats(vid)["slots"]


def test_qoe_free_slots_shrink_under_load_and_grow_back(make_manager, net):
    mgr = make_manager(backend="qemu")
    vid = mgr.launch(FORWARD, nics=net.bridges, slots=64).vnf_id
    echo = net.popen("b", sys.executable, "-m", "fluidvim.evaluator.loadgen", "echo", "--bind",
                     net.ip_b, stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout.readline().strip() == "ready"
        assert mgr.stats(vid)["slots"]["free"] == 64                  # no QoE: the flow table
        r = mgr.set_qoe(vid, 10, budget_ns=60_000_000_000, quantile_ppm=P99)
        assert (r["total"], r["free"], r["qoe"]["capacity"]) == (64, 10, 10)

        out = sessions(net, 6)
        assert out["received"] > 0 and set(out["latency_ms"]) == {str(q) for q in QUANTILES}
        per = out["per_session"]
        assert len(per["latency_ms"]) == 6 and all(v is not None for v in per["latency_ms"])
        st = mgr.stats(vid)["slots"]                                  # flows live 30 s idle
        assert st["used"] == 6 and st["free"] == 4                    # capacity 10 - 6, not 58

        # a budget no packet meets, with >= half the capacity carried: the window is over and
        # the capacity drops to 7/8 of the load (the first 6 flows still count: 30 s idle time)
        mgr.set_qoe(vid, 20, budget_ns=1, quantile_ppm=P99)
        sessions(net, 6, seconds=1.5)
        st = window(mgr, vid)
        used = st["used"]
        assert used >= 10 and st["qoe"]["window"] == "over", st
        assert (st["qoe"]["capacity"], st["qoe"]["shrinks"]) == (used * 7 // 8, 1)
        assert st["free"] == max(0, used * 7 // 8 - used) == 0
        assert st["qoe"]["tail_ns"] >= 1

        # no traffic: windows without evidence; after 3 the capacity grows by max(1, 20/8)
        shrunk = st["qoe"]["capacity"]
        for _ in range(3):
            st = window(mgr, vid)
            assert st["qoe"]["window"] == "idle", st
        assert (st["qoe"]["capacity"], st["qoe"]["grows"]) == (shrunk + 2, 1)

        # every packet within a 60 s budget: a good window; never above the probe's capacity
        mgr.set_qoe(vid, 20, budget_ns=60_000_000_000, quantile_ppm=P99)
        sessions(net, 6, seconds=1.5)
        st = window(mgr, vid)
        assert st["qoe"]["window"] == "good" and st["qoe"]["capacity"] == 20, st
        assert st["free"] == max(0, 20 - st["used"])
        assert mgr.slots()["free"] == st["free"]                      # what the launch core sums
        assert "wait_ppm" not in st["qoe"]                            # no host-wait rule asked
        # the host-wait rule: the budget shown, each window's steal share next to it; a budget of
        # a whole window is never reached (a VNF without traffic halts: no steal accrues)
        r = mgr.set_qoe(vid, 20, budget_ns=60_000_000_000, quantile_ppm=P99, wait_ppm=1_000_000)
        assert r["qoe"]["wait_budget_ppm"] == 1_000_000 and r["qoe"]["wait_ppm"] == 0, r
        st = window(mgr, vid)
        assert 0 <= st["qoe"]["wait_ppm"] <= 1_000_000 and st["qoe"]["window"] != "over", st
        mgr.set_qoe(vid, 0)
        st = mgr.stats(vid)["slots"]
        assert st["free"] == 64 - st["used"] and "qoe" not in st
    finally:
        echo.terminate()
        echo.wait(5)


def test_a_window_over_so_far_announces_no_room_until_it_closes(make_manager, net):
    """Sessions arriving while the current window is already over get no slot: a read >= 250 ms
    into the window judges it so far (``pending``) without moving the capacity; the window's own
    verdict applies when it closes. A 1 ns budget makes every window over; a read that came
    after the window closed (a slow host) is tried again."""
    mgr = make_manager(backend="qemu")
    vid = mgr.launch(FORWARD, nics=net.bridges, slots=64).vnf_id
    echo = net.popen("b", sys.executable, "-m", "fluidvim.evaluator.loadgen", "echo", "--bind",
                     net.ip_b, stdout=subprocess.PIPE, text=True)
    client = None
    try:
        assert echo.stdout.readline().strip() == "ready"
        client = net.popen("a", sys.executable, "-m", "fluidvim.evaluator.loadgen", "client",
                           "--src", net.ip_a, "--dst", net.ip_b, "--sessions", "12", "--pps",
                           "100", "--duration", "15", stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while mgr.stats(vid)["slots"]["used"] < 12 and time.monotonic() < deadline:
            time.sleep(0.1)
        for _ in range(3):
            mgr.set_qoe(vid, 20, budget_ns=1, quantile_ppm=P99)      # a new window opens
            time.sleep(0.5)
            st = mgr.stats(vid)["slots"]
            if st["qoe"]["window"] == "idle":                         # still the first window
                break
        assert st["qoe"]["window"] == "idle", st
        assert st["used"] >= 10 and st["qoe"]["capacity"] == 20, st   # >= half of it carried
        assert (st["free"], st["qoe"]["pending"], st["qoe"]["pending_stops"]) == (0, 1, 1), st
        st = window(mgr, vid)
        assert st["qoe"]["window"] == "over" and st["qoe"]["pending"] == 0, st
        assert st["qoe"]["capacity"] == st["used"] * 7 // 8 and st["free"] == 0
    finally:
        if client is not None:
            client.kill()
            client.wait(5)
        echo.terminate()
        echo.wait(5)


def test_a_launch_with_a_qoe_announces_its_capacity(make_manager):
    """The production path: a LaunchRequest's QoE goes through the local zone to the VNF with
    its launch, so its first ``slots`` reply already counts the capacity, not the flow table;
    a QoE the VNF refuses fails the launch and leaves no VNF behind."""
    from fluidvim.common.zonetypes import LaunchRequest, QoE, ZoneError
    from fluidvim.orchestrator.zones.local import LocalZone

    mgr = make_manager(backend="qemu")
    zone = LocalZone("qoe", mgr)
    qoe = QoE(capacity=10, deadline_ms=5.0, quantile=0.99, budget_ns=60_000_000_000,
              wait_ppm=1_000_000)
    inst = zone.launch(LaunchRequest(service="fw", click_config=FORWARD, slots=64, qoe=qoe,
                                     warm=False))
    assert inst.slots_total == 10                      # what the orchestrator registers
    st = mgr.stats(inst.id)["slots"]
    assert (st["total"], st["used"], st["free"]) == (64, 0, 10)
    assert st["qoe"]["capacity"] == st["qoe"]["probed"] == 10
    assert (st["qoe"]["budget_ns"], st["qoe"]["quantile_ppm"]) == (60_000_000_000, P99)
    assert st["qoe"]["wait_budget_ppm"] == 1_000_000          # the host-wait budget went along
    entry = zone.instance_slots()[inst.id]
    # free at the QoE capacity; opened (sessions ever opened) rides along to the slot agent
    assert (entry["free"], entry["opened"]) == (10, 0)
    zone.terminate(inst.id)

    # the VNF takes capacities up to 65536 (PROTOCOL.md §4): past it, it refuses the op
    before = {r.id for r in mgr.list()}
    bad = LaunchRequest(service="fw", click_config=FORWARD, slots=64, warm=False,
                        qoe=QoE(capacity=70000, deadline_ms=5.0, quantile=0.99))
    try:
        zone.launch(bad)
    except ZoneError as e:
        assert "refused its QoE" in str(e) and "capacity" in str(e), e
    else:
        raise AssertionError("a launch whose QoE the VNF refuses succeeded")
    assert {r.id for r in mgr.list()} == before        # nothing half-created


def test_a_warm_launch_with_a_qoe_announces_its_capacity(make_manager):
    """The warm path: a pool shell claimed for a launch with a QoE is told it after configure."""
    from fluidvim.common.zonetypes import QoE

    mgr = make_manager(backend="qemu")
    assert mgr.fill_pool(1, nics=2) == 1
    res = mgr.launch(FORWARD, nics=(None, None), slots=64,
                     qoe=QoE(capacity=7, deadline_ms=5.0, quantile=0.999))
    assert res.kind == "warm"
    st = mgr.stats(res.vnf_id)["slots"]
    assert (st["total"], st["free"]) == (64, 7)
    assert (st["qoe"]["capacity"], st["qoe"]["budget_ns"], st["qoe"]["quantile_ppm"]) == \
        (7, 5_000_000, 999000)


def test_a_rebuilt_or_restarted_vnf_keeps_its_qoe(make_manager):
    """The QoE is part of the VNF's spec: a rebuild tells the new boot again (its slots follow
    the capacity, not the flow table) and a restarted launch core, and the local zone on it,
    report the capacity from the recorded spec."""
    from fluidvim.common.zonetypes import REBUILD, LaunchRequest, QoE
    from fluidvim.orchestrator.zones.local import LocalZone

    first = make_manager(backend="qemu")
    qoe = QoE(capacity=9, deadline_ms=5.0, quantile=0.99, budget_ns=60_000_000_000)
    inst = LocalZone("qoe", first).launch(LaunchRequest(service="fw", click_config=FORWARD,
                                                        slots=64, qoe=qoe, warm=False))
    assert first.get(inst.id).spec.qoe == qoe
    pid = first.get(inst.id).pid
    first.rebuild(inst.id)
    assert first.get(inst.id).pid != pid                          # a new boot
    st = first.stats(inst.id)["slots"]
    assert (st["total"], st["free"], st["qoe"]["capacity"]) == (64, 9, 9)
    first.close()

    second = make_manager(backend="qemu")
    assert second.recover()["reattached"] == 1
    zone = LocalZone("qoe", second)
    assert [(i.id, i.slots_total) for i in zone.instances()] == [(inst.id, 9)]
    assert zone.instance_action(inst.id, REBUILD) == "running"    # the zone's rebuild too
    st = second.stats(inst.id)["slots"]
    assert (st["total"], st["free"], st["qoe"]["budget_ns"]) == (64, 9, 60_000_000_000)
    assert second.slots()["free"] == 9


def test_opened_ends_the_reservations_of_sessions_that_connected(make_manager, net):
    """The VNF's opened count through the real path: the local zone reads the VNF, its slot
    agent publishes on RabbitMQ to the orchestrator's listener and registry. Two TCP sessions
    held, three slots handed out, three real UDP sessions through the VNF, then the two TCP
    sessions end: the VNF's count (5 free) cannot tell the three from clients still to come -
    it shows at most 1 of them (5 - (6 - 3) = 2 could be pending), so they would count until
    reservation_ttl (an hour here: 3 free); its opened (+3) ends all three at once (5 free)."""
    import uuid

    import oslo_messaging as messaging

    from fluidvim.common.slotnotify import SlotAgent, SlotPublisher
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.notify import SlotListener
    from fluidvim.orchestrator.slots import SlotRegistry
    from fluidvim.orchestrator.zones.local import LocalZone, instance_name

    mgr = make_manager(backend="qemu")
    vid = mgr.launch(FORWARD, nics=net.bridges, slots=8, name=instance_name("opn")).vnf_id
    conf = orchconf.make_conf()
    orchconf.disable_rabbit_heartbeat(conf)
    transport = messaging.get_notification_transport(conf, url=conf.orchestrator.transport_url)
    topic = f"test_slots_opened_{uuid.uuid4().hex[:8]}"
    reg = SlotRegistry(ttl=3600, reservation_ttl=3600)
    listener = SlotListener(transport, topic, reg)
    listener.start()
    echo = net.popen("b", sys.executable, "-m", "fluidvim.evaluator.loadgen", "echo", "--bind",
                     net.ip_b, stdout=subprocess.PIPE, text=True)

    procs: list = []

    def wait_report(opened):
        end = time.monotonic() + 20
        while not [r for r in reg.reports() if r.opened == opened]:
            assert time.monotonic() < end, reg.reports()
            time.sleep(0.02)
        return reg.aggregate("opn", "instance")[vid]

    try:
        assert echo.stdout.readline().strip() == "ready"
        server = net.serve_tcp(80)
        procs.append(server)
        # kept alive: idle 30 s they would end before their FINs (the FIN would open again)
        established, holder = net.hold_connections(80, 2, timeout_s=2.0, keepalive_s=2)
        procs.append(holder)
        assert established == 2
        pub = SlotPublisher(transport, "fluidvim.test.opened", topic, min_interval=0.0)
        agent = SlotAgent(LocalZone("opn", mgr), pub)
        assert agent.tick() == 1
        assert wait_report(2) == 6
        for _ in range(3):
            reg.reserve(vid, "opn")
        assert reg.aggregate("opn", "instance")[vid] == 3
        sessions(net, 3, seconds=1.0)                       # UDP flows live 30 s idle
        holder.terminate()
        holder.wait()
        server.terminate()                                  # FIN both ways ends the TCP ones
        server.wait()
        end = time.monotonic() + 10
        while mgr.stats(vid)["slots"]["used"] != 3:
            assert time.monotonic() < end, mgr.stats(vid)["slots"]
            time.sleep(0.05)
        st = mgr.stats(vid)["slots"]
        assert (st["used"], st["free"], st["opened"]) == (3, 5, 5)
        assert agent.tick() == 1
        assert wait_report(5) == 5                          # not 3: the 3 are in the count
        assert reg.last_reserved(vid) is None
    finally:
        for p in (echo, *procs):
            if p.poll() is None:
                p.terminate()
                p.wait(5)
        listener.stop()
        transport.cleanup()
