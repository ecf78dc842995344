# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots ``qoe`` part (issue 23 item 1): free slots from QoE on a real VNF, real traffic.

One run, on this machine's environment type (the local zone, QEMU direct), in this order:

1. **path floor**: the same traffic client and far end with the VNF taken out (a veth joins the
   test network's two bridges): the round trip of the measuring path alone at a few rates. It is
   the client's own contribution to every latency below (its pacing, its wake-ups, the far end);
   when it is far under the deadline, a tail the probe reports belongs to the VNF's path;
2. the **stage-1 load probe** (:class:`~fluidvim.evaluator.probes.LoadProbe`, its defaults) and
   the VNF's ``qoe`` parameters from it (:func:`~fluidvim.evaluator.qoeslots.qoe_params`: for
   sessions of ``--run-s`` x ``--session-pps`` packets, the late-share reading
   :func:`~fluidvim.evaluator.qoeslots.late_capacity`; the whole-step reading before it is
   recorded next to it as ``capacity_whole_step``, the A/B on the same probe), then its
   **confirm phase** (``--confirm-runs``): runs of ``--run-s`` s sessions on the probe VNF,
   judged per session, from that estimate, bracketed and bisected
   (:func:`~fluidvim.evaluator.confirm.next_confirm`); the capacity announced is read off
   them by the reference's own rule (``capacity_fast``: the fast steps' reading, the A/B);
3. the **per-session reference** in the same run, by the target's own definition: runs like the
   admission (``--run-s`` s, sessions judged one by one) at ``--session-points`` counts, each
   ``--session-repeats`` times (passes interleaved) and pooled, then bisections of the bracket
   where the pooled share of sessions over the deadline first passes 1 %: the largest count
   such that every count tried up to it met the limit (:func:`session_reference`,
   :func:`pool_repeats`). With ``--interleave on`` (the default) its runs alternate with the
   confirm phase's, one after each (:func:`probe_and_reference`), its counts from half to the
   whole fast estimate: the host's speed drifts ~10 % over minutes on the 2-core host of
   bench/results/slots.md, and a reference measured after the confirm measured another host;
   ``drift`` records the same count read minutes apart. ``--interleave off``: after the
   confirm, from half to 1.5 x the capacity announced. bench/evaluator's
   pooled-quantile sweep (``--reference-passes``) and the reference of
   bench/results/evaluator.json are reported next to it;
4. **admission**: a VNF is told ``qoe`` (capacity, tail budget and host-wait budget from the
   probe) and sessions of the probe's transport (``--proto``; ICMP: the far kernel answers, as in
   the probe) are admitted until the VNF says full. They arrive over ``--admit-over-s`` s
   (default ``--run-s``: the rate that keeps the VNF full of such sessions), each admitted
   while the VNF's free slots, read every 0.25 s, show room (:func:`paced_admission`,
   bench/slotsadmit.py); after the last arrival they run ``--run-s`` s more. ``--admit-over-s
   0``: all the free slots at once, as before (faster than any workload's sessions arrive: the
   VNF's correction could then only act after every session was in). The trace shows the VNF's
   windows (a read closes one after >= 1 s) and when it stopped announcing room.

5. **at the reference** (``--admit-at-reference 1.0,...``): the admission again, on a fresh VNF
   told that multiple of the per-session reference (:func:`admit_at_reference`): what the
   VNF's run-time correction keeps with no margin under the knee (the confirm's margin's
   evidence);

6. **unconfirmed** (``--unconfirmed on``, the default): the admission again, on a fresh VNF told
   what the default deployment announces before its background confirm lands: the fast steps
   read as a confirming probe reads a level it has not confirmed (x ``[evaluator]
   load_probe_unconfirmed_share``, :func:`admit_unconfirmed`), with its capacity against the
   same reference (``unconfirmed``); ``confirm_s``: how long the confirm phase took.

Every run prints and records its CPU accounting (:func:`accounting`): the traffic client's own
CPU, the VNF's QEMU threads on a CPU and waiting for one, its vCPU's KVM steal share, its
cgroup's throttled periods and the host's load. On a 2-core host the client, QEMU's main thread
and the vCPU compete: the client's CPU is part of the environment the capacity holds in.

A session is over the deadline when its own quantile exceeds the deadline or it lost more than
1 %. Next to that count: each session's late packets (lost ones included), the pooled late
fraction, and the share of sessions expected over the deadline if every packet were late
independently at the pooled fraction (binomial): at a load where the pooled quantile sits at the
deadline about half of the sessions are over by chance alone, so an admitted share near that
model is the capacity's definition (a pooled quantile), not a failure of the correction.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
import uuid

from fluidvim.evaluator.confirm import (  # noqa: F401 - one rule, re-exported for the bench
    judge_sessions,
    pool_repeats,
    session_reference,
)
from fluidvim.evaluator.probes import OthersMeter, contended_run, wait_quiet

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
FLOOR_SESSIONS = (10, 50, 200)


def reference_slots(path: str, deadline_ms: float, quantile: float) -> dict | None:
    """The swept reference of bench/evaluator at this deadline and quantile, if it has one."""
    try:
        with open(path) as f:
            ev = json.load(f)
    except FileNotFoundError:
        return None
    for name, c in ev.get("comparison", {}).items():
        lv = c["level"]
        if math.isclose(lv["deadline_ms"], deadline_ms) and math.isclose(lv["quantile"], quantile):
            return {"level": name, "slots": c["reference_slots"], "when": ev.get("when"),
                    "file": os.path.relpath(path, REPO),
                    "environment": (ev.get("environment") or {}).get("uid")}
    return None


def _floor_step(net, a, n: int) -> dict:
    r = net.run("a", sys.executable, "-m", "fluidvim.evaluator.loadgen", "client", "--src",
                net.ip_a, "--dst", net.ip_b, "--sessions", str(n), "--pps", str(a.session_pps),
                "--duration", "2", "--proto", a.proto, "--windows", "5", timeout=60)
    if r.returncode != 0:
        raise SystemExit(f"path floor: load generator failed: {r.stderr[-500:]}")
    s = json.loads(r.stdout.strip().splitlines()[-1])
    return {k: s[k] for k in ("sessions", "offered_pps", "achieved_pps", "loss", "latency_ms",
                              "max_ms")}


def path_floor(a) -> list[dict]:
    """The measuring path without the VNF: client -> bridge -> veth -> bridge -> far end."""
    from fluidvim.vnf.testnet import TestNet

    steps = []
    with TestNet("fvsf", 92) as net:
        x0, x1 = net.prefix + "x0", net.prefix + "x1"
        subprocess.run(["ip", "link", "add", x0, "type", "veth", "peer", "name", x1], check=True)
        try:
            for dev, br in ((x0, net.br0), (x1, net.br1)):
                subprocess.run(["ip", "link", "set", dev, "master", br, "up"], check=True)
            with net.udp_echo(a.proto == "udp"):
                for n in FLOOR_SESSIONS:
                    steps.append(_floor_step(net, a, n))
                    lat = steps[-1]["latency_ms"]
                    print(f"  floor: {n:4d} sessions p50 {lat['0.5']:.3f} p99 {lat['0.99']:.3f} "
                          f"ms (no VNF)", flush=True)
        finally:
            subprocess.run(["ip", "link", "del", x0], check=False)
    return steps


def swept_reference(a, env, zone, probe, estimates: list[int]) -> dict:
    """bench/evaluator's reference, in this run: ``--reference-passes`` sweeps of ``--points``
    session counts from 0.4 x the lowest of ``estimates`` to 1.6 x the highest (the announced
    capacity and the fast steps' reading: the sweep spans both knees), ``--sweep-step`` s
    each, the per-count median.
    With ``--session-step-sweep on`` also the same sweep with steps as long as a session
    (``--run-s``), its passes interleaved with the others (one pass of each, then the next) so
    that both see the same host: under ``session_step`` (the question of bench/results/slots.md
    2026-11-28 22:40, whether the short steps read the reference high)."""
    from bench.evaluator import sweep_points

    points = sweep_points([e for e in estimates if e and e > 0], a.points,
                          probe.metrics["steps"])
    print(f"reference sweep points (sessions): {points}", flush=True)
    steps = [a.sweep_step]
    if getattr(a, "session_step_sweep", "off") == "on" and a.run_s != a.sweep_step:
        steps.append(a.run_s)
    passes: dict[float, list] = {s: [] for s in steps}
    seconds = dict.fromkeys(steps, 0.0)
    for k in range(a.reference_passes):
        for step_s in steps:
            t0 = time.perf_counter()
            passes[step_s].append(_sweep_pass(a, env, zone, points, step_s, k))
            seconds[step_s] += time.perf_counter() - t0
    out = _swept(a, passes[a.sweep_step], points, env, a.sweep_step, seconds[a.sweep_step])
    if len(steps) > 1:
        out["session_step"] = _swept(a, passes[a.run_s], points, env, a.run_s, seconds[a.run_s])
    return out


def run_swept(a, env, zone, probe, estimates: list[int]) -> tuple[dict | None, dict | None]:
    """(the pooled sweep at ``--sweep-step`` s steps, the one at ``--run-s`` s steps), each
    None when not run (:func:`swept_reference`)."""
    if a.reference_passes <= 0:
        return None, None
    swept = swept_reference(a, env, zone, probe, estimates)
    swept_long = swept.pop("session_step", None)
    print(f"swept reference (pooled, bench/evaluator's, {a.sweep_step:g} s steps): "
          f"{swept['slots']} slots ({swept['basis']})", flush=True)
    if swept_long:
        print(f"swept reference with {a.run_s:g} s steps (a session's length): "
              f"{swept_long['slots']} slots ({swept_long['basis']})", flush=True)
    return swept, swept_long


def _sweep_pass(a, env, zone, points: list[int], step_s: float, k: int) -> list[dict]:
    from bench.evaluator import show
    from fluidvim.evaluator.probes import LoadProbe

    r = LoadProbe(sessions=points, session_pps=a.session_pps, step_s=step_s,
                  prefix="fvsq", subnet=94, stop_loss=1.01, refine=0, proto=a.proto,
                  client_nice=a.client_nice).run(env, zone,
                                                 progress=show(f"sweep {k + 1} ({step_s:g} s)"))
    if not r.ok:
        raise SystemExit(f"reference sweep failed: {r.error}")
    return r.metrics["steps"]


def _swept(a, passes: list, points: list[int], env, step_s: float, seconds: float) -> dict:
    """The pooled-quantile capacity of sweep ``passes`` (bench/evaluator's rule: the per-count
    median curve, the largest load whose pooled quantile meets the deadline, loss <= 1 %)."""
    from bench.evaluator import median_curve
    from fluidvim.evaluator.slots import estimate_capacity

    curve = median_curve(passes, a.session_pps)
    ref = estimate_capacity(curve, a.deadline_ms, a.quantile, a.session_pps, 0.01,
                            interp="linear")
    return {"slots": ref.slots, "pps": round(ref.pps, 1), "basis": ref.basis,
            "saturated": ref.saturated, "points": points, "passes": len(passes),
            "step_s": step_s, "seconds": round(seconds, 1), "environment": env.uid,
            "curve": [{k: s.get(k) for k in ("sessions", "offered_pps", "loss", "latency_ms",
                                              "vnf_steal_share")}
                      for s in curve.metrics["steps"]]}


def thread_times(pid: int) -> dict[str, list[int]]:
    """Per thread of process ``pid``: [ns on a CPU, ns waiting on a run queue] (schedstat)."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                run, wait = f.read().split()[:2]
        except OSError:
            continue
        out[t] = [int(run), int(wait)]
    return out


def vnf_waits(pid: int, before: dict, after: dict, seconds: float) -> dict:
    """What the VNF's QEMU threads did during the run: QEMU's main thread (it moves every frame
    between the taps and the guest) and the others (the vCPU; QEMU's helpers do ~nothing), each
    as a share of the run on a CPU and waiting for one. Time a frame's thread spends waiting for
    a CPU is latency the VNF's own histogram (receive to transmit inside the guest) cannot see."""
    main, rest = [0, 0], [0, 0]
    for t, (run, wait) in after.items():
        r0, w0 = before.get(t, (0, 0))
        acc = main if int(t) == pid else rest
        acc[0] += run - r0
        acc[1] += wait - w0
    sec = max(1e-9, seconds) * 1e9
    return {"main_thread": {"on_cpu": round(main[0] / sec, 3), "waiting": round(main[1] / sec, 3)},
            "vcpu_threads": {"on_cpu": round(rest[0] / sec, 3), "waiting": round(rest[1] / sec, 3)}}


def cgroup_cpu_stat(uuid: str) -> dict[str, int]:
    """The VNF's cgroup ``cpu.stat`` (nr_periods, nr_throttled, throttled_time/usec...; a cap's
    vCPU sub-group's throttling summed in: :func:`fluidvim.vnf.cgroups.cpu_stat`), {} when it
    has none: a group that ran out of its CPU quota was throttled until the next period."""
    from fluidvim.vnf import cgroups

    return cgroups.cpu_stat(uuid) or {}


def guest_waits(cpu0: dict, cpu1: dict, cg0: dict, cg1: dict) -> dict:
    """What the VNF's own stats (contract/PROTOCOL.md, stats ``cpu``) and its cgroup say about
    frames waiting outside its engine during the run: halts and what ended them, the host's run
    delay of its vCPU (KVM steal time) and the waits >= 1 ms, the CFS throttling of its group."""
    keys = ("halts", "wake_rx", "wake_timer", "wake_other", "rx_no_irq", "steal_us", "stalls",
            "backoffs", "busy_us", "poll_us", "halt_us")
    out = {k: cpu1[k] - cpu0.get(k, 0) for k in keys if k in cpu1}
    out["steal_max_us_since_boot"] = cpu1.get("steal_max_us")
    out["poll_paused_at_end"] = cpu1.get("poll_paused")
    for k in ("nr_periods", "nr_throttled", "throttled_time", "throttled_usec"):
        if k in cg1:
            out["cgroup_" + k] = cg1[k] - cg0.get(k, 0)
    return out


def accounting(run: dict, waits: dict, guest: dict, seconds: float) -> dict:
    """Where the CPU went during one run of sessions: the traffic client's own CPU (a share of
    one core), the VNF's QEMU threads on a CPU and waiting for one (host side), its vCPU's KVM
    steal as a share of the run (what its host-wait rule sees), its cgroup's throttling, the
    host's load. On this 2-core host the client is part of the environment: CPU it takes is
    CPU the VNF waits for."""
    sec = max(1e-9, seconds)
    return {"client_cpu_share": run.get("client_cpu_share"),
            "vnf_main_thread": waits["main_thread"], "vnf_vcpu_threads": waits["vcpu_threads"],
            "vcpu_steal_share": (round(guest["steal_us"] / 1e6 / sec, 3)
                                 if "steal_us" in guest else None),
            "stalls": guest.get("stalls"),
            "throttled_periods": [guest.get("cgroup_nr_throttled"), guest.get("cgroup_nr_periods")],
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def _pct(x) -> str:
    return "?" if x is None else f"{100 * x:.0f} %"


def show_accounting(acc: dict) -> str:
    pct = _pct
    thr, per = acc["throttled_periods"]
    return (f"client CPU {pct(acc['client_cpu_share'])} of a core, vCPU steal "
            f"{pct(acc['vcpu_steal_share'])} of the run (waiting {pct(acc['vnf_vcpu_threads']['waiting'])}"
            f" host side), QEMU main thread waiting {pct(acc['vnf_main_thread']['waiting'])}, "
            f"throttled {thr}/{per} periods, load {acc['loadavg_1m']}"
            + (f", others' CPU mean {oth['mean']:.2f} max {oth['max']:.2f} cores"
               f"{' (contended)' if acc.get('contended') else ''}"
               if (oth := acc.get("others_cpu")) else ""))


def _begin(mgr, vid: str, rec) -> dict:
    """What a run's accounting starts from (:func:`_finish`): the VNF's own CPU counters, its
    cgroup's cpu.stat, its QEMU threads' times, the clock."""
    return {"cpu": mgr.stats(vid)["cpu"], "cg": cgroup_cpu_stat(rec.spec.uuid),
            "times": thread_times(rec.pid), "start": time.monotonic()}


def _finish(a, mgr, vid: str, rec, client, marks: dict, what: str, stopped=None):
    """The end of a run begun at ``marks`` (:func:`_begin`): the client's result line, the
    VNF's stats, its sessions judged, its QEMU threads' waits and the guest's, the seconds.
    ``stopped`` is called once the client has exited, before the clock is read."""
    out, err = client.communicate()
    if stopped is not None:
        stopped()
    seconds = time.monotonic() - marks["start"]
    waits = vnf_waits(rec.pid, marks["times"], thread_times(rec.pid), seconds)
    if client.returncode != 0:
        raise SystemExit(f"{what} failed: {err[-500:]}")
    run = json.loads(out.strip().splitlines()[-1])
    end = mgr.stats(vid)
    guest = guest_waits(marks["cpu"], end["cpu"], marks["cg"], cgroup_cpu_stat(rec.spec.uuid))
    judged = judge_sessions(run["per_session"], a.deadline_ms, a.quantile)
    return run, end, judged, waits, guest, seconds


def run_sessions(a, mgr, vid: str, net, n: int, trace: list | None = None) -> dict:
    """``n`` sessions of the probe's transport for ``--run-s`` s through VNF ``vid``, judged one
    by one; the VNF's free slots read every ~1 s (each read closes one of its correction
    windows; into ``trace`` when given) and the run's CPU accounting."""
    nice = ["nice", "-n", str(a.client_nice)] if a.client_nice else []
    client = net.popen("a", *nice, sys.executable, "-m", "fluidvim.evaluator.loadgen",
                       "client", "--src", net.ip_a, "--dst", net.ip_b, "--sessions", str(n),
                       "--pps", str(a.session_pps), "--duration", str(a.run_s),
                       "--windows", str(max(1, round(a.run_s))), "--proto", a.proto,
                       "--per-session-quantile", str(a.quantile),
                       "--deadline-ms", str(a.deadline_ms),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rec = mgr.get(vid)
    marks = _begin(mgr, vid, rec)
    start = marks["start"]
    meter = OthersMeter(lambda: sum(x[0] for x in thread_times(rec.pid).values()) / 1e9)
    meter.__enter__()
    while client.poll() is None:
        time.sleep(1.05)
        st = mgr.stats(vid)["slots"]
        if trace is not None and "qoe" in st:
            q = st["qoe"]
            trace.append({"t": round(time.monotonic() - start, 2), "used": st["used"],
                          "free": st["free"], **{k: q.get(k) for k in
                                                 ("capacity", "window", "tail_ns", "wait_ppm")}})
            print(f"  t={trace[-1]['t']:5.1f} s used {st['used']:4d} free {st['free']:4d} "
                  f"capacity {q['capacity']:4d} window {q['window']} tail {q['tail_ns']} ns "
                  f"wait {q.get('wait_ppm', '-')}/{q.get('wait_budget_ppm', '-')} ppm", flush=True)
    run, end, judged, waits, guest, seconds = _finish(
        a, mgr, vid, rec, client, marks, "load generator",
        lambda: meter.__exit__(None, None, None))
    others = meter.result(run.get("client_cpu_share"))
    return {"sessions": n, "run": run, "judged": judged, "final": end["slots"],
            "over_pct": round(100.0 * judged["admitted_over_deadline"] / max(1, n), 2),
            "vnf_cpu": waits, "guest": guest,
            "accounting": dict(accounting(run, waits, guest, seconds), others_cpu=others,
                               contended=contended_run(others))}


def _with_vnf(a, mgr, name: str, prefix: str, subnet: int, body):
    """``body(vid, net)`` with a forwarding VNF between a fresh test network's namespaces."""
    from fluidvim.vnf import limits
    from fluidvim.vnf.testnet import TestNet

    with TestNet(prefix, subnet) as net:
        vid = mgr.launch(FORWARD, nics=net.bridges, name=name, slots=limits.SLOTS_MAX).vnf_id
        try:
            with net.udp_echo(a.proto == "udp"):
                return body(vid, net)
        finally:
            mgr.destroy(vid)


# the reference's runs set aside at most: a count's first failure while other processes took
# more than CONTENDED_OTHERS_CORES or at far more steal than its held runs, run again (the
# confirm phase's rule: confirm.set_aside)
REFERENCE_RERUNS = 2
ADMIT_TICK_S = 0.25      # how often the paced admission reads the VNF's free slots


def admit(a, mgr, params, tag: str) -> dict:
    """A VNF told ``qoe``; sessions admitted until it says full, run together. With
    ``--admit-over-s`` > 0 (default: ``--run-s``) they arrive over that long
    (:func:`paced_admission`); 0: as many as it says it has free, all at once (the admission
    before: faster than any workload's sessions arrive)."""
    over_s = float(getattr(a, "admit_over_s", 0.0) or 0.0)

    def body(vid, net):
        mgr.set_qoe(vid, **params.request())
        admitted = mgr.stats(vid)["slots"]["free"]         # what the VNF says it can take
        if over_s > 0:
            return paced_admission(a, mgr, vid, net, admitted, over_s)
        print(f"admitting {admitted} sessions (the VNF's free slots) at once", flush=True)
        trace: list = []
        r = run_sessions(a, mgr, vid, net, admitted, trace)
        print(f"  admission: {show_accounting(r['accounting'])}", flush=True)
        return {"admitted": admitted, "offered": admitted, "refused": 0, "admit_over_s": 0.0,
                "trace": trace, **r}
    return _with_vnf(a, mgr, f"qoe-{tag}", "fvsq", 94, body)


def _qoe_trace(st: dict, t: float, **extra) -> dict:
    q = st.get("qoe") or {}
    return {"t": round(t, 2), "used": st["used"], "free": st["free"], **extra,
            **{k: q.get(k) for k in ("capacity", "window", "tail_ns", "wait_ppm", "pending")}}


def paced_admission(a, mgr, vid: str, net, offered: int, over_s: float) -> dict:
    """``offered`` sessions (the VNF's free slots when told ``qoe``) arrive evenly over
    ``over_s`` s (:func:`bench.slotsadmit.arrival_times`); every ADMIT_TICK_S the VNF's free
    slots are read and the sessions that arrived since are admitted while it has room
    (:func:`bench.slotsadmit.admit_now`), the others refused. After the last arrival every
    admitted session runs ``--run-s`` s more; each is judged over its whole life."""
    from bisect import bisect_right

    from bench.slotsadmit import admit_now, arrival_times

    arrivals = arrival_times(offered, over_s)
    print(f"admission: {offered} sessions arrive over {over_s:g} s "
          f"({offered / over_s:.1f}/s), each admitted while the VNF has a free slot", flush=True)
    nice = ["nice", "-n", str(a.client_nice)] if a.client_nice else []
    client = net.popen("a", *nice, sys.executable, "-m", "bench.slotsadmit", "--src", net.ip_a,
                       "--dst", net.ip_b, "--sessions", str(max(1, offered)), "--pps",
                       str(a.session_pps), "--duration", str(a.run_s), "--proto", a.proto,
                       "--per-session-quantile", str(a.quantile), "--deadline-ms",
                       str(a.deadline_ms), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, cwd=REPO)
    if client.stdout.readline().strip() != "ready":
        client.kill()
        raise SystemExit(f"admission client did not start: {client.stderr.read()[-500:]}")
    rec = mgr.get(vid)
    marks = _begin(mgr, vid, rec)
    start = marks["start"]
    admitted = refused = seen = 0
    trace: list = []
    last_print = -1.0
    while seen < len(arrivals):
        now = time.monotonic() - start
        due = bisect_right(arrivals, now) - seen
        if due > 0:
            st = mgr.stats(vid)["slots"]
            k = admit_now(due, st["free"], st["used"], admitted)
            admitted, refused, seen = admitted + k, refused + due - k, seen + due
            if k:
                client.stdin.write(f"{admitted}\n")
                client.stdin.flush()
            trace.append(_qoe_trace(st, now, admitted=admitted, refused=refused))
            if now - last_print >= 1.0 or seen == len(arrivals):
                last_print = now
                t = trace[-1]
                print(f"  t={now:5.1f} s admitted {admitted:4d} refused {refused:4d} used "
                      f"{t['used']:4d} free {t['free']:4d} capacity {t['capacity']} window "
                      f"{t['window']}{' (over so far)' if t['pending'] else ''} wait "
                      f"{t['wait_ppm']} ppm", flush=True)
        nxt = arrivals[seen] if seen < len(arrivals) else now
        time.sleep(max(0.0, min(ADMIT_TICK_S, nxt - (time.monotonic() - start))))
    client.stdin.write("end\n")
    client.stdin.flush()
    while client.poll() is None:
        time.sleep(1.05)
        now = time.monotonic() - start
        st = mgr.stats(vid)["slots"]
        trace.append(_qoe_trace(st, now, admitted=admitted, refused=refused))
        t = trace[-1]
        print(f"  t={now:5.1f} s used {t['used']:4d} free {t['free']:4d} capacity "
              f"{t['capacity']} window {t['window']} wait {t['wait_ppm']} ppm", flush=True)
    run, end, judged, waits, guest, seconds = _finish(a, mgr, vid, rec, client, marks,
                                                      "admission client")
    acc = accounting(run, waits, guest, seconds)
    print(f"  admission: {admitted} of {offered} admitted, {refused} refused; "
          f"{show_accounting(acc)}", flush=True)
    return {"admitted": admitted, "offered": offered, "refused": refused,
            "admit_over_s": over_s, "arrivals_per_s": round(offered / over_s, 2),
            "started_s": run.get("started_s"), "trace": trace, "sessions": admitted,
            "run": run, "judged": judged, "final": end["slots"],
            "over_pct": round(100.0 * judged["admitted_over_deadline"] / max(1, admitted), 2),
            "vnf_cpu": waits, "guest": guest, "accounting": acc}


def sweep_counts(estimate: int, points: int, lo: float = 0.5, hi: float = 1.5) -> list[int]:
    """Evenly spaced session counts from ``lo`` to ``hi`` x the estimate (at least 2 apart)."""
    est = max(2, int(estimate))
    k = max(2, int(points))
    return sorted({max(1, round(est * (lo + (hi - lo) * i / (k - 1)))) for i in range(k)})


def set_aside(r: dict, dropped: list[dict], runs: dict | None = None) -> str | None:
    """Why the reference's run ``r`` (:func:`run_sessions`) is set aside and its count run
    again, None when it counts: the confirm phase's rule (:func:`fluidvim.evaluator.confirm.
    set_aside`), so the yardstick and the confirm leave the same runs out. It failed (> 1 % of
    its sessions over), it is the first such run of its count, fewer than REFERENCE_RERUNS
    were (``dropped``), and other processes took the host's CPU ("contended") or its VNF's
    steal share is far above that of every run so far (``runs``, per count) that held at its
    count or above ("steal": :func:`fluidvim.evaluator.confirm.spoiled_by_steal`), or a higher
    count held in every run of it so far ("non-monotonic": :func:`fluidvim.evaluator.confirm.
    held_above`; without it the 2026-11-29 03:29 quiet run's reference stopped at 220 after
    232 held once and then failed once while 278 had held and held again)."""
    from fluidvim.evaluator.confirm import held_above, spoiled_by_steal

    n = r["sessions"]
    if not (r["over_pct"] > 1.0 and len(dropped) < REFERENCE_RERUNS
            and all(d["sessions"] != n for d in dropped)):
        return None
    if r["accounting"].get("contended"):
        return "contended"
    this = _as_confirm_run(n, r)
    others = [_as_confirm_run(m, x) for m, xs in (runs or {}).items() for x in xs]
    if spoiled_by_steal(this, others):
        return "steal"
    return "non-monotonic" if held_above(this, others) else None


def _as_confirm_run(n: int, r: dict) -> dict:
    """A reference run as the confirm phase's rules read one (sessions, n, over, steal)."""
    return {"sessions": n, "n": n, "over": float(r["over_pct"]) * n / 100.0,
            "vnf_steal_share": r["accounting"].get("vcpu_steal_share")}


def reference_run(a, mgr, vid: str, net, n: int, runs: dict, dropped: list,
                  clock=None) -> None:
    """One run of the per-session reference (:func:`run_sessions`) into ``runs`` (per count);
    one the host's other work failed (:func:`set_aside`) into ``dropped``, and its count run
    again. ``clock``: seconds since the bench started (each run's ``t_end_s``, when it ended:
    the drift's time line)."""
    r = run_sessions(a, mgr, vid, net, n)
    t_s = None if clock is None else round(clock(), 1)
    run = {"over": r["judged"]["admitted_over_deadline"], "n": n,
           "over_pct": r["over_pct"], "pooled_ms": r["run"]["latency_pooled_ms"],
           "pooled_late_fraction": r["judged"].get("pooled_late_fraction"),
           "accounting": r["accounting"], "t_end_s": t_s}
    lat = r["run"]["latency_pooled_ms"].get(str(a.quantile))
    again = set_aside(r, dropped, runs)
    print(f"  reference: {n:4d} sessions (run {len(runs.get(n, [])) + 1}"
          f"{'' if t_s is None else f', ended t={t_s:g} s'}), "
          f"{r['over_pct']:5.1f} % over, pooled p{a.quantile * 100:g} "
          f"{lat if lat is None else round(lat, 2)} ms | {show_accounting(r['accounting'])}"
          f"{f' -> set aside ({again}), run again' if again else ''}", flush=True)
    if again:
        pid = mgr.get(vid).pid
        run["waited_s"] = wait_quiet(lambda: sum(x[0] for x in thread_times(pid).values()) / 1e9)
        dropped.append({**run, "sessions": n, "set_aside": again})
        reference_run(a, mgr, vid, net, n, runs, dropped, clock)
    else:
        runs.setdefault(n, []).append(run)


def reference_counts(counts: list[int], runs: dict[int, list[dict]], repeats: int,
                     refine: int):
    """The per-session reference's counts, in order, as a generator read one count at a time
    (``runs``, per count, is filled by the caller between two reads, so each choice sees every
    run before it): ``counts`` ``repeats`` times (the passes interleaved, so one burst of the
    host hits one run of one count, not every run of it); then, all over: half the lowest,
    none over: 1.5 x the highest (3 times at most); then ``refine`` bisections of the bracket
    where the pooled share over first passes 1 % (:func:`session_reference`), each count
    ``repeats`` times."""
    for _ in range(repeats):
        yield from counts
    for _ in range(3):
        bound = session_reference(pool_repeats(runs))["bound"]
        if bound == "below" and min(runs) > 1:
            n = max(1, min(runs) // 2)
        elif bound == "at least":
            n = max(runs) * 3 // 2
        else:
            break
        for _ in range(repeats):
            yield n
    for _ in range(refine):
        ref = session_reference(pool_repeats(runs))
        if ref["bound"] != "between" or ref["hi"] - ref["lo"] <= 1:
            break
        for _ in range(repeats):
            yield (ref["lo"] + ref["hi"]) // 2


class ReferenceSweep:
    """The per-session reference by the target's own definition, in this run, one run at a
    time (:meth:`step`) so that its runs can alternate with the confirm phase's
    (``--interleave``): each run like the admission (``--run-s`` s, judged per session) on a
    VNF of its own (launched at the first step), at the counts of :func:`reference_counts`
    (``counts()`` gives the sweep's points when the first step asks), pooled
    (:func:`pool_repeats`), read by :func:`session_reference`. ``clock``: seconds since the
    bench started, each run's ``t_end_s``."""

    def __init__(self, a, mgr, tag: str, counts, clock=None):
        self.a, self.mgr, self.tag, self._counts, self.clock = a, mgr, tag, counts, clock
        self.repeats = max(1, int(getattr(a, "session_repeats", 1)))
        self.runs: dict[int, list[dict]] = {}
        self.dropped: list[dict] = []
        self._gen = None
        self._stack = None
        self.vid = self.net = None

    def _open(self) -> None:
        import contextlib

        from fluidvim.vnf import limits
        from fluidvim.vnf.testnet import TestNet

        self._stack = contextlib.ExitStack()
        net = self._stack.enter_context(TestNet("fvsr", 95))
        vid = self.mgr.launch(FORWARD, nics=net.bridges, name=f"qoe-ref-{self.tag}",
                              slots=limits.SLOTS_MAX).vnf_id
        self._stack.callback(self.mgr.destroy, vid)
        self._stack.enter_context(net.udp_echo(self.a.proto == "udp"))
        self.vid, self.net = vid, net
        self.points = list(self._counts())
        self._gen = reference_counts(self.points, self.runs, self.repeats,
                                     int(self.a.session_refine))

    def step(self) -> bool:
        """Run the reference's next count; False when it is done."""
        if self._gen is None:
            self._open()
        n = next(self._gen, None)
        if n is None:
            return False
        reference_run(self.a, self.mgr, self.vid, self.net, n, self.runs, self.dropped,
                      self.clock)
        return True

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def result(self) -> dict:
        a = self.a
        pooled = pool_repeats(self.runs)
        ref = session_reference(pooled)
        typical = session_reference([dict(p, over_pct=p["over_pct_median"]) for p in pooled])
        return {**ref, "repeats": self.repeats, "definition": (
                    f"largest count of {a.run_s:g} s sessions of {a.session_pps:g} pps run "
                    f"together such that every count tried up to it had <= 1 % of its sessions, "
                    f"pooled over {self.repeats} run(s) of it, over {a.deadline_ms:g} ms at "
                    f"their own p{a.quantile * 100:g} (or > 1 % lost)"),
                "sweep_points": self.points,
                "slots_median_run": typical["slots"],
                # runs that failed while other processes took the host's CPU, set aside
                "dropped_runs": self.dropped,
                "points": [{**p, "runs": self.runs[p["sessions"]]} for p in pooled]}


def session_sweep(a, mgr, tag: str, estimate: int, clock=None) -> dict:
    """The reference after the confirm phase (``--interleave off``): ``--session-points``
    counts from half to 1.5 x ``estimate`` (the capacity announced), then as
    :class:`ReferenceSweep`."""
    with ReferenceSweep(a, mgr, tag, lambda: sweep_counts(estimate, a.session_points),
                        clock) as ref:
        while ref.step():
            pass
        return ref.result()


QUIET_CHECK_S = 3.0       # how long cmd_qoe reads the host's other work before it starts


def host_others(seconds: float) -> dict | None:
    """The CPU other processes take for ``seconds`` (nothing of this run is up yet:
    :func:`fluidvim.evaluator.probes.others_cpu` with no VNF and no client)."""
    with OthersMeter(lambda: 0.0, skip_s=0.0) as m:
        time.sleep(seconds)
    return m.result(0.0)


def contended_counts(probe, per_ref: dict | None) -> dict:
    """How many runs of the confirm phase and of the per-session reference measured a host busy
    with other work (``contended``), and how many of them were left out (run again)."""
    from fluidvim.evaluator.confirm import confirm_blocks, confirm_reading

    blocks = confirm_blocks(probe.metrics)
    runs = (blocks[0].get("runs") or []) if blocks else []
    tgt = (blocks[0].get("target") or {}) if blocks else {}
    ref_runs = [r for p in (per_ref or {}).get("points", []) for r in p.get("runs", [])]
    dropped = (per_ref or {}).get("dropped_runs") or []
    return {"confirm": sum(1 for r in runs if r.get("contended")),
            "confirm_left_out": (confirm_reading(runs, float(tgt.get("max_over_pct", 1.0)))
                                 ["dropped"] if runs else 0),
            "reference": (sum(1 for r in ref_runs if r["accounting"].get("contended"))
                          + len(dropped)),
            "reference_left_out": len(dropped)}


def step_lengths(a, swept: dict | None, swept_long: dict | None, per_ref: dict | None) -> dict:
    """The reference's dependence on its step length, read in one run: bench/evaluator's
    pooled sweep at ``--sweep-step`` s steps and at a session's length (``--run-s``), and the
    per-session reference (runs of ``--run-s`` s, each session judged at its own quantile: the
    yardstick of ``capacity_error_pct``); each short one against its session-length form."""
    out = {"pooled_short_step_s": a.sweep_step, "session_s": a.run_s,
           "pooled_short": (swept or {}).get("slots"),
           "pooled_session_length": (swept_long or {}).get("slots"),
           "per_session_session_length": (per_ref or {}).get("slots")}
    out["pooled_short_over_session_length_pct"] = _error_pct(out["pooled_short"], swept_long)
    out["pooled_short_over_per_session_pct"] = _error_pct(out["pooled_short"], per_ref)
    out["pooled_session_length_over_per_session_pct"] = _error_pct(
        out["pooled_session_length"], per_ref)
    return out


def _error_pct(announced: int | None, ref: dict | None) -> float | None:
    if announced is None:
        return None
    return (round(100.0 * (announced - ref["slots"]) / ref["slots"], 1)
            if ref and ref.get("slots") else None)


def confirm_pooled_rule(probe) -> int | None:
    """The confirm phase's runs read by the per-session reference's pooled, interpolated rule
    (:func:`session_reference` over :func:`pool_repeats`): what the confirm announced before
    its margin rule (:func:`fluidvim.evaluator.confirm.confirm_reading`), on the same runs."""
    from fluidvim.evaluator.confirm import confirm_blocks

    blocks = confirm_blocks(probe.metrics)
    runs = blocks[0].get("runs") if blocks else None
    if not runs:
        return None
    by: dict[int, list[dict]] = {}
    for r in runs:
        by.setdefault(int(r["sessions"]), []).append(r)
    return int(session_reference(pool_repeats(by))["slots"])


def whole_step_capacity(a, probe) -> int | None:
    """What the probe's whole-step quantiles at the pooled session quantile give (the reading
    before :func:`fluidvim.evaluator.qoeslots.late_capacity`), None with ``--pooled``."""
    from fluidvim.evaluator.qoeslots import session_quantile, whole_steps
    from fluidvim.evaluator.slots import SlotsError, estimate_capacity

    if a.pooled:
        return None
    try:
        q = session_quantile(a.quantile, max(1, round(a.run_s * a.session_pps)))
        return estimate_capacity(whole_steps(probe), a.deadline_ms, q, a.session_pps).slots
    except (SlotsError, ValueError):
        return None


def run_probe(a, env, zone, after_confirm=None):
    """The stage-1 load probe of this run: the fast steps, then (``--confirm-runs``, not with
    ``--pooled``) its confirm phase of ``--run-s`` s sessions at the deadline and quantile.
    ``after_confirm(run)`` is called after each confirm run (its progress record): the
    interleaved reference runs one of its own there (``--interleave``)."""
    from bench.evaluator import show
    from fluidvim.evaluator.confirm import CONFIRM_MARGIN, SessionTarget
    from fluidvim.evaluator.probes import LoadProbe

    confirm_runs = getattr(a, "confirm_runs", 0)
    target = (SessionTarget(a.deadline_ms, a.quantile, a.run_s, runs=confirm_runs,
                            margin=getattr(a, "confirm_margin", CONFIRM_MARGIN))
              if confirm_runs > 0 and not a.pooled else None)
    print("stage-1 load probe" + (f" (then up to {confirm_runs} confirm runs of {a.run_s:g} s "
                                  "sessions)" if target else ""), flush=True)
    fast_show = show("probe")

    def progress(s):
        if not s.get("confirm"):
            return fast_show(s)
        p99 = (s.get("latency_pooled_ms") or {}).get(str(a.quantile))
        print(f"  confirm: {s['sessions']:4d} sessions for {a.run_s:g} s, {s['over_pct']:5.1f} % "
              f"over, pooled p{a.quantile * 100:g} {p99 if p99 is None else round(p99, 2)} ms, "
              f"loss {s['loss'] or 0:.1%}, vCPU steal {_pct(s.get('vnf_steal_share'))}"
              + (f", others' CPU mean {o['mean']:.2f} max {o['max']:.2f} cores"
                 if (o := s.get("others_cpu")) else "")
              + (" (contended)" if s.get("contended") else "")
              + (f" -> set aside ({s['set_aside']}), run again" if s.get("set_aside") else ""),
              flush=True)
        if after_confirm is not None:
            after_confirm(s)

    return LoadProbe(session_pps=a.session_pps, prefix="fvsq", subnet=94, proto=a.proto,
                     client_nice=a.client_nice, step_s=a.probe_step, confirm=target).run(
        env, zone, progress=progress)


def probe_and_reference(a, env, zone, mgr, tag: str, clock):
    """(the stage-1 load probe, the per-session reference or None, the confirm runs' time
    line). With ``--interleave on`` (:func:`interleaved`) the reference's runs
    (:class:`ReferenceSweep`, its counts from :data:`INTERLEAVE_LO` to 1 x the fast estimate the
    confirm starts from) alternate with the confirm phase's, one after each, the rest after
    it: the host's drift over minutes then hits the yardstick and the reading alike. Else (or
    when the confirm ran nothing) the reference is run later by :func:`cmd_qoe`, around the
    capacity announced."""
    confirm_log: list[dict] = []
    ref_sweep = (ReferenceSweep(a, mgr, tag, lambda: sweep_counts(
                     confirm_log[0]["sessions"], a.session_points, INTERLEAVE_LO, 1.0), clock)
                 if interleaved(a) else None)

    def after_confirm(s):
        confirm_log.append({"sessions": s["sessions"], "t_end_s": round(clock(), 1),
                            "over_pct": s.get("over_pct"),
                            "client_cpu_share": s.get("client_cpu_share"),
                            "vnf_steal_share": s.get("vnf_steal_share"),
                            "set_aside": s.get("set_aside")})
        if ref_sweep is not None:                   # one reference run after each confirm run
            ref_sweep.step()

    per_ref = None
    try:
        probe = run_probe(a, env, zone, after_confirm)
        if not probe.ok:
            raise SystemExit(f"load probe failed: {probe.error}")
        if ref_sweep is not None and confirm_log:
            print("per-session reference: its runs after the confirm phase", flush=True)
            while ref_sweep.step():
                pass
            per_ref = ref_sweep.result()
    finally:
        if ref_sweep is not None:
            ref_sweep.close()
    return probe, per_ref, confirm_log


def cmd_qoe(a) -> dict:
    from bench.evaluator import make_zone
    from fluidvim.evaluator.qoeslots import fast_capacity, qoe_params
    from fluidvim.vnf.manager import VNFManager, make_conf

    if os.geteuid() != 0:
        raise SystemExit("bench.slots qoe needs root (network namespaces, bridges, taps)")
    tag = uuid.uuid4().hex[:6]
    overrides = {} if a.vcpu_nice is None else {"vcpu_nice": a.vcpu_nice}
    if getattr(a, "kernel", None):
        overrides["kernel"] = os.path.abspath(a.kernel)
    mgr = VNFManager(make_conf(state_dir=f"/tmp/fluidvim-fvsq-{tag}",
                               run_dir=f"/run/fluidvim-fvsq-{tag}", backend="qemu", **overrides))
    zone = make_zone(mgr)
    env = zone.env()
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    before = host_others(QUIET_CHECK_S)
    if before is not None:
        print(f"host before the run: others' CPU mean {before['mean']:.2f} max {before['max']:.2f} "
              f"cores over {QUIET_CHECK_S:g} s"
              + ("" if not contended_run(before) else
                 " - NOT QUIET: other processes take the CPU the VNF's capacity is measured in"),
              flush=True)
    print(f"path floor ({a.proto}, no VNF)", flush=True)
    floor = path_floor(a)

    def clock():
        return time.perf_counter() - t0

    probe, per_ref, confirm_log = probe_and_reference(a, env, zone, mgr, tag, clock)
    packets = max(1, round(a.run_s * a.session_pps))
    # the pooled reading of the fast steps (bench/evaluator's figure), for the record
    pooled = fast_capacity(probe, a.deadline_ms, a.quantile, a.session_pps)
    params = qoe_params(probe, a.deadline_ms, a.quantile, a.session_pps,
                        session_packets=None if a.pooled else packets)
    fast = None if a.pooled else fast_capacity(probe, a.deadline_ms, a.quantile, a.session_pps,
                                               session_packets=packets).slots
    print(f"qoe: {params.request()} ({params.basis})", flush=True)
    if probe.metrics.get("confirm"):
        print(f"A/B: the fast steps alone (late share) would announce {fast} slots; the confirm "
              f"phase took {probe.metrics.get('confirm', {}).get('seconds')} s; its runs read by "
              f"the reference's pooled rule (before the margin): {confirm_pooled_rule(probe)}",
              flush=True)
    whole = whole_step_capacity(a, probe)
    if whole is not None:
        print(f"A/B: the whole-step reading (before) would announce {whole} slots", flush=True)
    swept, swept_long = run_swept(a, env, zone, probe, [params.capacity, fast or 0])
    if per_ref is None and a.session_points > 0:
        print("per-session reference sweep", flush=True)
        per_ref = session_sweep(a, mgr, tag, params.capacity, clock)
    if per_ref is not None:
        print(f"per-session reference: {per_ref['slots']} slots ({per_ref['bound']} "
              f"{per_ref['lo']}..{per_ref['hi']})", flush=True)
    if params.capacity < 1:     # qoe capacity 0 is "off" (the flow table): nothing to admit
        print("the probe shows no session within the deadline: nothing admitted", flush=True)
        adm = {"admitted": 0, "offered": 0, "refused": 0, "trace": [], "accounting": None,
               "vnf_cpu": None, "guest": None,
               "final": {"qoe": {"capacity": 0, "shrinks": 0}},
               "run": {"per_session": {"latency_ms": []}},
               "judged": {"admitted_over_deadline": 0, "over_sessions": []}}
    else:
        adm = admit(a, mgr, params, tag)
    unconf = (admit_unconfirmed(a, mgr, probe, tag)
              if getattr(a, "unconfirmed", "on") == "on" and not a.pooled else None)
    at_ref = admit_at_reference(a, mgr, probe, tag, per_ref)
    mgr.close()
    for d in (f"/run/fluidvim-fvsq-{tag}", f"/tmp/fluidvim-fvsq-{tag}"):   # this run's alone
        shutil.rmtree(d, ignore_errors=True)
    per = adm["run"]["per_session"]
    judged = adm["judged"]
    admitted = adm["admitted"]
    drifted = show_drift(drift(per_ref, probe))
    filed = reference_slots(a.reference, a.deadline_ms, a.quantile)
    if filed:
        filed["same_environment"] = filed.get("environment") == env.uid
    announced = params.capacity
    ref = per_ref or swept or filed
    return {
        "command": command(a),
        "environment": env.uid, "seconds": round(time.perf_counter() - t0, 1),
        "kernel": mgr.kernel,
        "loadavg_start": list(load0), "loadavg_end": list(os.getloadavg()),
        # other processes' CPU (cores) just before the run, and the runs that failed while they
        # took > CONTENDED_OTHERS_CORES (left out and run again: confirm.counted_runs)
        "others_cpu_before": before,
        "contended_runs": contended_counts(probe, per_ref),
        "deadline_ms": a.deadline_ms, "quantile": a.quantile, "session_pps": a.session_pps,
        "run_s": a.run_s,
        "proto": a.proto, "client_nice": a.client_nice, "vcpu_nice": mgr.conf.vnf.vcpu_nice,
        "path_floor": floor,
        "qoe": params.request(), "basis": params.basis,
        "capacity_pooled": pooled.slots, "capacity_per_session": not a.pooled,
        # the confirm phase (session-length runs on the probe VNF) and the fast steps' reading
        # it started from (late share): the A/B of the confirm phase, on the same probe
        "confirm": probe.metrics.get("confirm"),
        "probe_s": probe.metrics.get("probe_s"),
        # the confirm runs read by the reference's pooled rule (the reading before the margin
        # and the every-run holds: evaluator/confirm.py confirm_reading), the A/B of the rule
        "capacity_confirm_pooled_rule": confirm_pooled_rule(probe),
        "capacity_fast": fast,
        "capacity_fast_error_pct": _error_pct(fast, ref) if fast is not None else None,
        # the probe's reading before the late-share statistic (whole-step p at the pooled
        # quantile), on the same probe: the A/B of the statistic
        "capacity_whole_step": whole,
        "capacity_whole_step_error_pct": _error_pct(whole, ref) if whole is not None else None,
        "probe_steps": [{k: s.get(k) for k in ("sessions", "offered_pps", "loss", "latency_ms",
                                               "latency_pooled_ms", "vnf_steal_share",
                                               "client_cpu_share", "vnf_latency_ns")}
                        for s in probe.metrics["steps"]],
        "admitted": admitted, "trace": adm["trace"],
        # the admission's pace: sessions offered (the VNF's free slots when told qoe), arriving
        # evenly over admit_over_s (0: all at once), those refused because it said full
        "offered": adm.get("offered"), "refused": adm.get("refused"),
        "admit_over_s": adm.get("admit_over_s"), "arrivals_per_s": adm.get("arrivals_per_s"),
        "admitted_at_s": adm.get("started_s"),
        "accounting_during_admission": adm["accounting"],
        "vnf_cpu_during_admission": adm["vnf_cpu"],
        "vnf_waits_during_admission": adm["guest"],
        "capacity_at_end": adm["final"]["qoe"]["capacity"],
        "shrinks": adm["final"]["qoe"]["shrinks"],
        **judged,
        "admitted_over_deadline_pct": (round(100.0 * judged["admitted_over_deadline"]
                                             / admitted, 2) if admitted else None),
        "run": {k: adm["run"].get(k) for k in ("offered_pps", "achieved_pps", "loss",
                                               "latency_ms", "latency_pooled_ms",
                                               "window_p99_ms")},
        "per_session_p_ms": per["latency_ms"],
        "reference_per_session": per_ref,
        # bench/evaluator's pooled sweep with --sweep-step s steps (4: the issue's "swept
        # reference") and, --session-step-sweep on, the same with steps of a session's length
        "reference_swept": swept,
        "reference_swept_session_step": swept_long,
        "reference_by_step_length": step_lengths(a, swept, swept_long, per_ref),
        "reference": filed,
        # against the per-session reference of this run when there is one, else the pooled
        # sweep of this run, else the file's
        "capacity_error_pct": _error_pct(announced, ref),
        "capacity_error_vs": ("per-session sweep" if per_ref else
                              "pooled sweep" if swept else "bench/results/evaluator.json"),
        "capacity_error_pct_vs_pooled_sweep": _error_pct(announced, swept),
        "capacity_error_pct_vs_pooled_sweep_session_step": _error_pct(announced, swept_long),
        "capacity_error_pct_vs_file": _error_pct(announced, filed),
        # the probe's pooled-quantile capacity (bench/evaluator's figure) against the same
        "capacity_pooled_error_pct": _error_pct(pooled.slots, ref),
        # the default deployment ([evaluator] load_probe_confirm_levels = service, in the
        # background): its confirm phase is the one above (the service's deadline and
        # quantile, --run-s s sessions); before it lands the VNF is told the fast reading x
        # load_probe_unconfirmed_share, admitted here the same way (admit_unconfirmed)
        "confirm_s": (probe.metrics.get("confirm") or {}).get("seconds"),
        "confirm_run_count": len((probe.metrics.get("confirm") or {}).get("runs") or ()),
        "unconfirmed": (dict(unconf, capacity_error_pct=_error_pct(unconf["capacity"], ref))
                        if unconf else None),
        # the reference's runs alternated with the confirm phase's (--interleave on), and what
        # the same count read minutes apart (drift), from the runs of this run
        "interleaved": bool(confirm_log) and interleaved(a),
        "confirm_timeline": confirm_log,
        "drift": drifted,
        # admissions with the VNF told a multiple of the per-session reference (the evidence
        # for the confirm's margin: what the run-time correction keeps at the knee itself)
        "admit_at_reference": at_ref,
    }


INTERLEAVE_LO = 0.5     # the interleaved reference sweeps from this share of the fast estimate


def interleaved(a) -> bool:
    """Whether the per-session reference's runs alternate with the confirm phase's
    (``--interleave on``, the default, with a confirm phase and a reference to run)."""
    return (getattr(a, "interleave", "off") == "on" and a.session_points > 0
            and getattr(a, "confirm_runs", 0) > 0 and not a.pooled)


def _pairs(runs_by_count: dict[int, list[dict]], cpu, t, over, steal) -> list[dict]:
    """Counts run more than once: their first and last run (time, over share, the client's
    CPU share, the VNF's steal) and how much the client's CPU for the same sessions moved."""
    out = []
    for n, rs in sorted(runs_by_count.items()):
        if len(rs) < 2:
            continue
        first, last = rs[0], rs[-1]
        c0, c1 = cpu(first), cpu(last)
        out.append({"sessions": n, "runs": len(rs), "t_end_s": [t(first), t(last)],
                    "over_pct": [over(first), over(last)],
                    "client_cpu_share": [c0, c1],
                    "vnf_steal_share": [steal(first), steal(last)],
                    "client_cpu_change_pct": (round(100.0 * (c1 - c0) / c0, 1)
                                              if c0 and c1 is not None else None)})
    return out


def drift(per_ref: dict | None, probe) -> dict:
    """The same session count measured minutes apart in this run: the per-session reference's
    repeats (:func:`_pairs`) and the confirm phase's (its announced count runs 3 times). On
    the 2-core host of bench/results/slots.md the client's CPU for the same sessions moved
    ~10 % over minutes (helper 87); these pairs show it in every run."""
    from fluidvim.evaluator.confirm import confirm_blocks

    ref_runs = {p["sessions"]: p.get("runs") or [] for p in (per_ref or {}).get("points", [])}
    acc = lambda r: r.get("accounting") or {}    # noqa: E731
    ref = _pairs(ref_runs, lambda r: acc(r).get("client_cpu_share"), lambda r: r.get("t_end_s"),
                 lambda r: r.get("over_pct"), lambda r: acc(r).get("vcpu_steal_share"))
    blocks = confirm_blocks(probe.metrics)
    by: dict[int, list[dict]] = {}
    for i, r in enumerate((blocks[0].get("runs") or []) if blocks else []):
        by.setdefault(int(r["sessions"]), []).append(dict(r, i=i))
    conf = _pairs(by, lambda r: r.get("client_cpu_share"), lambda r: r["i"],
                  lambda r: r.get("over_pct"), lambda r: r.get("vnf_steal_share"))
    changes = [p["client_cpu_change_pct"] for p in ref + conf
               if p["client_cpu_change_pct"] is not None]
    return {"reference_repeats": ref, "confirm_repeats": conf,
            "client_cpu_change_pct_max_abs": (max(abs(x) for x in changes) if changes
                                              else None)}


def show_drift(d: dict) -> dict:
    """Print the :func:`drift` pairs, one line each; ``d`` itself."""
    for kind in ("reference", "confirm"):
        for p in d[f"{kind}_repeats"]:
            print(f"drift ({kind}): {p['sessions']} sessions, {p['runs']} runs, first/last "
                  f"{'ended t=' if kind == 'reference' else 'run #'}{p['t_end_s'][0]} / "
                  f"{p['t_end_s'][1]}: over {p['over_pct'][0]:g} / {p['over_pct'][1]:g} %, "
                  f"client CPU {p['client_cpu_share'][0]} / {p['client_cpu_share'][1]} "
                  f"({p['client_cpu_change_pct']} %)", flush=True)
    return d


def admit_at_reference(a, mgr, probe, tag: str, per_ref: dict | None) -> list[dict]:
    """Admissions on fresh VNFs told ``--admit-at-reference`` multiples of the per-session
    reference (its tail and host-wait budgets as the product derives them for that capacity:
    :func:`fluidvim.evaluator.qoeslots.qoe_params_at`), admitted as the main admission: what
    the VNF's run-time correction keeps when the capacity announced is the knee itself (1.0)
    or over it, i.e. whether the confirm's margin is needed for <= 1 % over."""
    from fluidvim.evaluator.qoeslots import qoe_params_at

    mults = [float(x) for x in str(getattr(a, "admit_at_reference", "") or "").split(",")
             if x.strip()]
    if not mults or not per_ref or not per_ref.get("slots"):
        return []
    out = []
    for i, m in enumerate(mults):
        cap = max(1, round(m * per_ref["slots"]))
        params = qoe_params_at(probe, cap, a.deadline_ms, a.quantile, a.session_pps,
                               f"{m:g} x the per-session reference {per_ref['slots']}")
        print(f"admission at {m:g} x the reference: qoe {params.request()}", flush=True)
        adm = admit(a, mgr, params, f"{tag}r{i}")
        judged, admitted = adm["judged"], adm["admitted"]
        pct = (round(100.0 * judged["admitted_over_deadline"] / admitted, 2) if admitted
               else None)
        print(f"at {m:g} x the reference: {admitted} admitted, {pct} % over the deadline, "
              f"capacity at the end {adm['final']['qoe']['capacity']}", flush=True)
        out.append({"multiple": m, "capacity": cap, "qoe": params.request(),
                    "admitted": admitted, "offered": adm.get("offered"),
                    "refused": adm.get("refused"),
                    "admitted_over_deadline": judged["admitted_over_deadline"],
                    "admitted_over_deadline_pct": pct,
                    "capacity_at_end": adm["final"]["qoe"]["capacity"],
                    "shrinks": adm["final"]["qoe"]["shrinks"],
                    "accounting": adm["accounting"]})
    return out


def admit_unconfirmed(a, mgr, probe, tag: str) -> dict:
    """The admission at what the default announces before its confirm lands: the probe's fast
    steps read as a probe that confirms reads them for a level it has not confirmed
    (``unconfirmed_share``: :func:`fluidvim.evaluator.confirm.unconfirmed_capacity`), the
    VNF told those ``qoe`` parameters, sessions admitted as in the main admission."""
    import dataclasses

    from fluidvim.evaluator.confirm import UNCONFIRMED_SHARE
    from fluidvim.evaluator.qoeslots import qoe_params

    share = getattr(a, "unconfirmed_share", UNCONFIRMED_SHARE)
    metrics = {k: v for k, v in probe.metrics.items() if k != "confirm"}
    fast = dataclasses.replace(probe, metrics=dict(metrics, unconfirmed_share=share))
    params = qoe_params(fast, a.deadline_ms, a.quantile, a.session_pps,
                        session_packets=max(1, round(a.run_s * a.session_pps)))
    print(f"unconfirmed (before the confirm lands): qoe {params.request()}", flush=True)
    if params.capacity < 1:
        return {"share": share, "capacity": 0, "admitted": 0, "admitted_over_deadline_pct": None}
    adm = admit(a, mgr, params, tag + "u")
    judged, admitted = adm["judged"], adm["admitted"]
    pct = (round(100.0 * judged["admitted_over_deadline"] / admitted, 2) if admitted else None)
    print(f"unconfirmed: {admitted} admitted, {pct} % over the deadline", flush=True)
    return {"share": share, "capacity": params.capacity, "qoe": params.request(),
            "admitted": admitted, "offered": adm.get("offered"), "refused": adm.get("refused"),
            "admitted_over_deadline": judged["admitted_over_deadline"],
            "admitted_over_deadline_pct": pct,
            "capacity_at_end": adm["final"]["qoe"]["capacity"],
            "shrinks": adm["final"]["qoe"]["shrinks"],
            "accounting": adm["accounting"]}


def command(a) -> str:
    """The command line that repeats this run."""
    return (f"python -m bench.slots qoe --deadline-ms {a.deadline_ms:g} --quantile "
            f"{a.quantile:g} --session-pps {a.session_pps:g} --run-s {a.run_s:g} "
            f"--proto {a.proto} --client-nice {a.client_nice} --probe-step {a.probe_step:g} "
            f"--confirm-runs {getattr(a, 'confirm_runs', 0)} "
            f"--confirm-margin {getattr(a, 'confirm_margin', 0.1):g} "
            f"--admit-over-s {getattr(a, 'admit_over_s', 0):g} "
            f"--unconfirmed {getattr(a, 'unconfirmed', 'off')}"
            f"{' --pooled' if a.pooled else ''}"
            f"{'' if a.vcpu_nice is None else f' --vcpu-nice {a.vcpu_nice}'}"
            f"{f' --kernel {a.kernel}' if getattr(a, 'kernel', None) else ''} "
            f"--session-points {a.session_points} --session-refine {a.session_refine} "
            f"--session-repeats {getattr(a, 'session_repeats', 1)} "
            f"--interleave {getattr(a, 'interleave', 'off')} "
            f"{f'--admit-at-reference {aar} ' if (aar := getattr(a, 'admit_at_reference', '')) else ''}"
            f"--reference-passes {a.reference_passes} --points {a.points} "
            f"--sweep-step {a.sweep_step:g}"
            f"{' --session-step-sweep on' if getattr(a, 'session_step_sweep', 'off') == 'on' else ''}"
            f"{'' if getattr(a, 'part', 'qoe') == 'qoe' else f' --part {a.part}'}")
