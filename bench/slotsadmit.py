# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots qoe's admission: sessions that arrive over time, admitted while the VNF has room.

The probe's traffic client (``fluidvim.evaluator.loadgen client``) starts all its sessions at
once, and so did the admission: the VNF's announced free slots were read once and that many
sessions started in the same instant. A user's sessions arrive one after another, and the VNF's
run-time correction (``unikernel/include/qoe.h``: a window of >= 1 s over its tail or host-wait
budget shrinks the capacity to 7/8 of the sessions carried) can only keep out sessions that have
not arrived yet. So the admission now offers its sessions at a workload's pace
(:func:`arrival_times`, ``--admit-over-s``; by default the announced capacity over one session's
length: the arrival rate that keeps the VNF full of sessions of that length, by Little's law)
and admits each only while the VNF still says it has room (:func:`admit_now`).

This module is also the traffic client of that admission (``python -m bench.slotsadmit``, run
in the client's namespace): the probe's transports and packet format, but it starts with no
session; each line on its stdin is the number of sessions admitted so far (non-decreasing), from
then on that many send ``--pps`` each; ``end`` (or EOF) ends the arrivals and the sessions run
``--duration`` s more. Every packet is measured (no warm-up: a session's first packets are its
own). Its result line has loadgen's ``per_session`` block for the sessions admitted and the
pooled figures, plus each session's start.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import sys
import time


def arrival_times(sessions: int, over_s: float) -> list[float]:
    """When each of ``sessions`` sessions arrives (s after the first), evenly over ``over_s``
    (0: all at once, the admission before)."""
    n = max(0, int(sessions))
    if n == 0:
        return []
    if over_s <= 0 or n == 1:
        return [0.0] * n
    return [over_s * i / (n - 1) for i in range(n)]


def admit_now(due: int, free: int, used: int, admitted: int) -> int:
    """Of ``due`` sessions that arrived since the last reading, how many are admitted: the VNF's
    announced ``free`` slots less the sessions admitted that it does not carry yet
    (``admitted`` - ``used``: their first packet has not reached its flow table), at least 0."""
    room = int(free) - max(0, int(admitted) - int(used))
    return max(0, min(int(due), room))


def read_admissions(fd: int, buf: bytes) -> tuple[bytes, list]:
    """What arrived on ``fd`` (readable now): the rest of an unfinished line, and per full line
    the count admitted so far (an int) or "end" (also at EOF)."""
    chunk = os.read(fd, 4096)
    buf += chunk if chunk else b"\nend\n"
    *lines, buf = buf.split(b"\n")
    out: list = []
    for line in (x.strip() for x in lines):
        if line:
            out.append("end" if line == b"end" else int(line))
    return buf, out


def _result(a, sent: list[int], by_session: dict, started: list, send_errors: int,
            cpu_s: float, wall: float) -> dict:
    """The client's result line for its ``len(started)`` admitted sessions (module docstring)."""
    from fluidvim.common.measure import quantile

    n = len(started)
    lat = [sorted(by_session.get(i, [])) for i in range(n)]
    rtts = sorted(x for xs in lat for x in xs)
    offered = sum(sent[:n])
    loss = (1.0 - len(rtts) / offered) if offered else 1.0
    pooled = {str(q): quantile(rtts, q) for q in (0.5, 0.9, 0.99, 0.999)} if rtts else {}
    late = [(sum(1 for x in lat[i] if x > a.deadline_ms) + max(0, sent[i] - len(lat[i])))
            if sent[i] else None for i in range(n)]
    return {
        "sessions": n, "session_pps": a.pps, "offered_pps": n * a.pps, "proto": a.proto,
        "sent": offered, "received": len(rtts), "send_errors": send_errors,
        "loss": loss, "loss_pooled": loss, "latency_ms": pooled, "latency_pooled_ms": pooled,
        "started_s": started, "duration_s": a.duration,
        "client_cpu_s": round(cpu_s, 3), "client_cpu_share": round(cpu_s / max(1e-9, wall), 3),
        "per_session": {
            "quantile": a.per_session_quantile,
            "latency_ms": [quantile(xs, a.per_session_quantile) if xs else None for xs in lat],
            "loss": [max(0.0, 1.0 - len(lat[i]) / sent[i]) if sent[i] else None
                     for i in range(n)],
            "sent": sent[:n], "late": late}}


def _transport(a):
    from fluidvim.evaluator.loadgen import IcmpSessions, UdpSessions

    if a.proto != "udp":
        return IcmpSessions(a.src, a.dst, a.sessions)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < a.sessions + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (a.sessions + 64, max(a.sessions + 64, hard)))
    return UdpSessions(a.src, a.dst, a.port, a.sessions)


def client(a, fd: int) -> dict:
    """The admission's traffic (module docstring): ``a`` the parsed arguments of :func:`main`,
    ``fd`` where the admitted counts arrive."""
    from fluidvim.evaluator.loadgen import HDR

    sessions = a.sessions
    tr = _transport(a)
    pad = b"\0" * max(0, a.size - HDR.size)
    by_session: dict[int, list[float]] = {}
    sent = [0] * sessions
    started: list[float] = []
    send_errors = seq = 0
    t0 = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    base_t, base_seq = t0, 0
    end_at: float | None = None
    buf = b""

    def drain(timeout):
        for data, rx in tr.receive(timeout):
            if len(data) >= HDR.size:          # sessions past the admitted: not read
                _, sess, tx = HDR.unpack_from(data)
                by_session.setdefault(sess, []).append((rx - tx) / 1e6)

    while end_at is None or time.perf_counter() < end_at:
        now = time.perf_counter()
        if end_at is None and select.select([fd], [], [], 0)[0]:
            buf, got = read_admissions(fd, buf)
            k = max([x for x in got if x != "end"], default=0)
            if min(sessions, k) > len(started):          # from now on, at the new rate
                started += [round(now - t0, 3)] * (min(sessions, k) - len(started))
                base_t, base_seq = now, seq
            if "end" in got:
                end_at = now + a.duration
        active = len(started)
        if not active:
            time.sleep(0.002)
            continue
        due = base_seq + int((now - base_t) * active * a.pps) + 1
        while seq < due:
            s = seq % active
            try:
                tr.send(s, HDR.pack(seq, s, time.time_ns()) + pad)
            except (BlockingIOError, OSError):
                send_errors += 1
            sent[s] += 1
            seq += 1
        wait = base_t + (seq - base_seq) / (active * a.pps) - time.perf_counter()
        drain(max(0.0, min(wait, 0.002)))
    stop = time.perf_counter() + 0.5
    while time.perf_counter() < stop and sum(map(len, by_session.values())) < sum(sent):
        drain(0.05)
    tr.close()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return _result(a, sent, by_session, started, send_errors, cpu_s, time.perf_counter() - t0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.slotsadmit", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example (bench/slotsqoe.py runs it in the client's namespace, stdin a pipe; "
               "here on loopback):\n"
               "  (echo 2; sleep 0.5; echo 3; echo end) | .venv/bin/python -m bench.slotsadmit \\\n"
               "      --src 127.0.0.1 --dst 127.0.0.1 --sessions 3 --pps 20 --duration 1 \\\n"
               "      --per-session-quantile 0.99 --deadline-ms 10")
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, default=7)
    p.add_argument("--sessions", type=int, required=True, help="sessions at most")
    p.add_argument("--pps", type=float, required=True)
    p.add_argument("--duration", type=float, required=True,
                   help="seconds the sessions run after the arrivals end")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--proto", choices=("udp", "icmp"), default="icmp")
    p.add_argument("--per-session-quantile", type=float, required=True)
    p.add_argument("--deadline-ms", type=float, required=True)
    a = p.parse_args(argv)
    print("ready", flush=True)
    r = client(a, sys.stdin.fileno())
    print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
