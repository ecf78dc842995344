# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Traffic for the load probe: N UDP sessions at a fixed packet rate each, and a UDP echo.

Run inside the test network's namespaces (``python -m fluidvim.evaluator.loadgen client|echo``):

* ``echo`` (far namespace) sends every datagram back to where it came from;
* ``client`` (near namespace) opens one UDP socket per session (its own source port, so its own
  5-tuple flow - one session slot in the VNF), sends ``pps`` packets/s on each, evenly paced
  round-robin, and timestamps every echo on arrival with the kernel's receive timestamp
  (``SO_TIMESTAMPNS``), so the time this process needs to get around to reading a packet is not
  counted. A packet's latency is ``kernel receive time - time just before send`` = the round trip
  through the VNF (both directions) and the echo. Packets sent in the warm-up are not counted;
  a packet that has not come back ``drain`` seconds after the last send counts as lost.

Where no host namespace reaches the VNF under test (a Nova or Nomad zone), the traffic comes from a
**generator VNF** instead: the unikernel's ``FastUDPFlows`` source and ``TimestampDiff`` meter
(contract/PROTOCOL.md section 5), one ``configure`` per step. :func:`generator_config` writes that
configuration, :func:`vnf_result` turns the generator's ``stats`` into the same result object as
:func:`client` (latency there is the round trip as the generator VNF's engine sees it: its own
vCPU's scheduling delay included, unlike the client's kernel receive timestamps).

The client prints one JSON object: sent, received, loss, offered and achieved pps, and latency
quantiles in ms. With ``--windows N`` the measured time is split into N windows by send time and
``latency_ms``/``loss`` are the medians over the windows of each window's quantiles/loss (the
pooled figures are kept as ``latency_pooled_ms``/``loss_pooled``): a short burst of another
tenant's CPU use on a shared machine then moves one window, while saturation caused by the
offered load itself shows in every window. Plain functions, stdlib only (it runs under any
python3 in a namespace).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import socket
import struct
import sys
import time

from fluidvim.common.measure import median, quantile

HDR = struct.Struct("!QIq")          # seq, session, send time (ns, CLOCK_REALTIME)
QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 0.999)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def echo(bind_ip: str, port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((bind_ip, port))
    print("ready", flush=True)
    while True:
        data, addr = s.recvfrom(2048)
        s.sendto(data, addr)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


class UdpSessions:
    """One connected UDP socket per session: its own source port, so its own 5-tuple."""

    def __init__(self, src_ip, dst_ip, port, sessions):
        self.socks, self.by_fd = [], {}
        self.ep = select.epoll()
        for _ in range(sessions):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 18)
            s.bind((src_ip, 0))
            s.connect((dst_ip, port))
            s.setblocking(False)
            self.socks.append(s)
            self.by_fd[s.fileno()] = s
            self.ep.register(s.fileno(), select.EPOLLIN)

    def send(self, session, payload):
        self.socks[session].send(payload)

    def receive(self, timeout):
        """Yields (payload, kernel receive time ns) for what arrives within ``timeout``."""
        for fd, _ in self.ep.poll(timeout):
            s = self.by_fd[fd]
            while True:
                try:
                    data, anc, _, _ = s.recvmsg(2048, 64)
                except BlockingIOError:
                    break
                yield data, _rx_time(anc)

    def close(self):
        for s in self.socks:
            s.close()
        self.ep.close()


class IcmpSessions:
    """ICMP echo with one identifier per session (the VNF keys ICMP flows on it); the far
    namespace's kernel answers, so no user-space echo sits in the measured path."""

    def __init__(self, src_ip, dst_ip, sessions):
        self.dst = dst_ip
        self.s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self.s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.s.bind((src_ip, 0))
        self.s.setblocking(False)
        self.base = (os.getpid() * 7919) & 0xFFFF
        self.ids = {(self.base + i) & 0xFFFF for i in range(sessions)}
        self.seq = 0
        self.ep = select.epoll()
        self.ep.register(self.s.fileno(), select.EPOLLIN)

    def send(self, session, payload):
        ident = (self.base + session) & 0xFFFF
        self.seq = (self.seq + 1) & 0xFFFF
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, self.seq)
        csum = _checksum(hdr + payload)
        self.s.sendto(struct.pack("!BBHHH", 8, 0, csum, ident, self.seq) + payload, (self.dst, 0))

    def receive(self, timeout):
        if not self.ep.poll(timeout):
            return
        while True:
            try:
                data, anc, _, _ = self.s.recvmsg(2048, 64)
            except BlockingIOError:
                return
            ihl = (data[0] & 0x0F) * 4
            if len(data) < ihl + 8:
                continue
            typ, _, _, ident, _ = struct.unpack_from("!BBHHH", data, ihl)
            if typ == 0 and ident in self.ids:
                yield data[ihl + 8:], _rx_time(anc)

    def close(self):
        self.s.close()
        self.ep.close()


def _rx_time(anc) -> int:
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", cdata[:16])
            return sec * 1_000_000_000 + nsec
    return time.time_ns()


def client(src_ip: str, dst_ip: str, port: int, sessions: int, pps: float, duration: float,
           warmup: float, drain: float, size: int, proto: str = "udp", windows: int = 1,
           per_session_quantile: float | None = None, deadline_ms: float | None = None) -> dict:
    need = sessions + 64 if proto == "udp" else 64     # UDP: one socket per session
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(need, soft), max(need, hard)))
        except (ValueError, OSError) as e:
            raise SystemExit(f"--sessions {sessions} over UDP needs {need} open files; the limit "
                             f"is {hard} and cannot be raised ({e}): fewer sessions or --proto "
                             f"icmp (one socket)") from None
    if proto == "icmp":
        tr = IcmpSessions(src_ip, dst_ip, sessions)
    else:
        tr = UdpSessions(src_ip, dst_ip, port, sessions)
    pad = b"\0" * max(0, size - HDR.size)
    rate = sessions * pps
    total = max(1, int(rate * (warmup + duration)))
    first_measured = int(rate * warmup)
    rtts = []
    by_session: dict[int, list] = {}
    sent_by_session = [0] * sessions
    by_window: dict[int, list] = {}
    per_window = max(1.0, rate * duration / max(1, windows))       # packets sent per window
    sent = send_errors = 0
    late_ns = 0
    t0 = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    seq = 0

    def drain_socks(timeout):
        for data, rx in tr.receive(timeout):
            if len(data) < HDR.size:
                continue
            k, sess, tx = HDR.unpack_from(data)
            if k >= first_measured:
                rtts.append((rx - tx) / 1e6)
                if per_session_quantile is not None:
                    by_session.setdefault(sess, []).append((rx - tx) / 1e6)
                by_window.setdefault(int((k - first_measured) / per_window), []).append(
                    (rx - tx) / 1e6)

    while seq < total:
        now = time.perf_counter()
        due = min(total, int((now - t0) * rate) + 1)
        if due > seq:
            late_ns += int(max(0.0, now - t0 - seq / rate) * 1e9)
        while seq < due:
            try:
                tr.send(seq % sessions, HDR.pack(seq, seq % sessions, time.time_ns()) + pad)
                if seq >= first_measured:
                    sent += 1
                    sent_by_session[seq % sessions] += 1
            except (BlockingIOError, OSError):
                if seq >= first_measured:
                    send_errors += 1
            seq += 1
        wait = (t0 + seq / rate) - time.perf_counter()
        drain_socks(max(0.0, min(wait, 0.002)))
    send_done = time.perf_counter()
    deadline = send_done + drain
    while time.perf_counter() < deadline and len(rtts) < sent:
        drain_socks(min(0.05, max(0.0, deadline - time.perf_counter())))
    tr.close()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    wall = time.perf_counter() - t0
    rtts.sort()
    offered = sent + send_errors
    # per window (by send time): quantiles and loss; the step's figures are the medians over the
    # windows, so one burst of someone else's CPU use moves one window, not the step
    nwin = max(1, windows)
    win_lat, win_loss = [], []
    for w in range(nwin):
        lo, hi = int(w * per_window), int((w + 1) * per_window) if w < nwin - 1 else offered
        n_sent = max(0, hi - lo)
        got = sorted(by_window.get(w, []))
        if n_sent:
            win_loss.append(max(0.0, 1.0 - len(got) / n_sent))
        if got:
            win_lat.append({str(q): quantile(got, q) for q in QUANTILES})
    pooled = {str(q): quantile(rtts, q) for q in QUANTILES} if rtts else {}
    robust = ({k: median([w[k] for w in win_lat]) for k in pooled}
              if nwin > 1 and len(win_lat) == nwin else pooled)
    loss_pooled = (1.0 - len(rtts) / offered) if offered else 1.0
    extra = {}
    if per_session_quantile is not None:      # each session's own tail and loss
        extra["per_session"] = {
            "quantile": per_session_quantile,
            "latency_ms": [quantile(sorted(by_session.get(i, [])), per_session_quantile)
                           if by_session.get(i) else None for i in range(sessions)],
            "loss": [max(0.0, 1.0 - len(by_session.get(i, [])) / n) if n else None
                     for i, n in enumerate(sent_by_session)],
            "sent": sent_by_session}
        if deadline_ms is not None:     # packets later than the deadline, lost ones included
            extra["per_session"]["late"] = [
                (sum(1 for x in by_session.get(i, ()) if x > deadline_ms)
                 + max(0, n - len(by_session.get(i, ())))) if n else None
                for i, n in enumerate(sent_by_session)]
    return {**extra,
        "sessions": sessions, "session_pps": pps, "offered_pps": rate, "proto": proto,
        "achieved_pps": offered / max(1e-9, send_done - t0 - warmup) if offered else 0.0,
        "sent": offered, "received": len(rtts), "send_errors": send_errors,
        "windows": nwin,
        "loss": median(win_loss) if nwin > 1 and win_loss else loss_pooled,
        "loss_pooled": loss_pooled, "loss_worst_window": max(win_loss) if win_loss else None,
        "duration_s": duration, "mean_send_lag_ms": late_ns / max(1, total) / 1e6,
        "latency_ms": robust, "latency_pooled_ms": pooled,
        "window_p99_ms": [round(w["0.99"], 3) for w in win_lat] if nwin > 1 else None,
        # this client's own CPU (user + system, its kernel sends included) over its wall time:
        # on a host it shares with the VNF under test, CPU the VNF did not get
        "client_cpu_s": round(cpu_s, 3), "client_cpu_share": round(cpu_s / max(1e-9, wall), 3),
        "min_ms": rtts[0] if rtts else None, "max_ms": rtts[-1] if rtts else None,
    }


# the generator VNF's elements (contract/PROTOCOL.md section 5): source and meter names in its config
GEN_SOURCE, GEN_METER = "gen", "meter"
GEN_MAX_RATE = 10_000_000          # FastUDPFlows RATE, frames/s in all
GEN_MAX_FLOWS = 64512              # FastUDPFlows FLOWS
GEN_MIN_FRAME, GEN_MAX_FRAME = 60, 1514
_GEN_QUANTILE_KEYS = {0.5: "p50_ns", 0.75: "p75_ns", 0.9: "p90_ns", 0.95: "p95_ns",
                      0.99: "p99_ns", 0.999: "p999_ns"}


def generator_config(*, sessions: int, pps: float, duration: float, src_mac: str, dst_mac: str,
                     src_ip: str, dst_ip: str, frame: int = GEN_MIN_FRAME, tx_nic: int = 0,
                     rx_nic: int = 1, mirror_nic: int | None = None) -> str:
    """The generator VNF's configuration for one step: ``sessions`` UDP flows of ``pps`` frames/s
    each for ``duration`` s, out of NIC ``tx_nic`` from ``src_mac``/``src_ip`` to
    ``dst_mac``/``dst_ip``; what comes back on NIC ``rx_nic`` is measured (``TimestampDiff``).
    ``mirror_nic``: the generator is also the far end - what arrives on that NIC is sent back
    where it came from (``EtherMirror``, the netns probe's echo), so each frame crosses the VNF
    under test both ways and returns on ``rx_nic`` = ``tx_nic``.
    A bad value raises ``ValueError`` naming the argument and its range."""
    rate = round(sessions * pps)
    if not 1 <= sessions <= GEN_MAX_FLOWS:
        raise ValueError(f"sessions={sessions}: the generator makes 1..{GEN_MAX_FLOWS} flows")
    if not 1 <= rate <= GEN_MAX_RATE:
        raise ValueError(f"sessions * pps = {rate} frames/s: the generator sends 1.."
                         f"{GEN_MAX_RATE}; lower pps or sessions")
    if duration <= 0:
        raise ValueError(f"duration={duration}: a step lasts > 0 s")
    if not GEN_MIN_FRAME <= frame <= GEN_MAX_FRAME:
        raise ValueError(f"frame={frame}: frames are {GEN_MIN_FRAME}..{GEN_MAX_FRAME} bytes")
    if mirror_nic is not None and mirror_nic in (tx_nic, rx_nic):
        raise ValueError(f"mirror_nic={mirror_nic}: the reflecting NIC must not be the sending "
                         f"({tx_nic}) or the measuring ({rx_nic}) one")
    limit = max(1, round(rate * duration))
    mirror = ("" if mirror_nic is None else
              f"\nFromDevice({mirror_nic}) -> EtherMirror -> ToDevice({mirror_nic});")
    return (f"{GEN_SOURCE} :: FastUDPFlows({rate}, {limit}, {frame}, {src_mac}, {src_ip}, "
            f"{dst_mac}, {dst_ip}, {sessions}) -> ToDevice({tx_nic});\n"
            f"FromDevice({rx_nic}) -> {GEN_METER} :: TimestampDiff -> Discard;{mirror}")


def generator_elements(stats: dict) -> tuple[dict, dict]:
    """The source's and the meter's entries of a generator VNF's ``stats`` (KeyError if the
    VNF does not run :func:`generator_config`'s graph)."""
    by_name = {e["name"]: e for e in stats.get("elements", ())}
    return by_name[GEN_SOURCE], by_name[GEN_METER]


def vnf_result(stats: dict, *, sessions: int, pps: float, duration: float) -> dict:
    """One step's result from the generator VNF's ``stats`` read after the step (and a drain),
    in :func:`client`'s shape: ``sent`` = frames that left the generator, ``received`` = frames
    measured back, ``loss`` = 1 - received/sent; ``send_errors`` = tries its NIC refused (TX ring
    full; tried again) and ``missed`` = frames it skipped because it fell > 200 ms behind its
    schedule: the generator, not the VNF under test, was the limit."""
    src, meter = generator_elements(stats)
    sent, got = src["sent"], meter["count"]
    active_s = src["active_ns"] / 1e9
    lat = ({str(q): meter[k] / 1e6 for q, k in _GEN_QUANTILE_KEYS.items()} if got else {})
    return {
        "sessions": sessions, "session_pps": pps, "offered_pps": sessions * pps, "proto": "udp",
        "source": "vnf",
        "achieved_pps": (sent - 1) / active_s if active_s > 0 and sent > 1 else 0.0,
        "sent": sent, "received": got, "send_errors": src["refused"], "missed": src["missed"],
        "windows": 1, "loss": max(0.0, 1.0 - got / sent) if sent else 1.0,
        "loss_pooled": max(0.0, 1.0 - got / sent) if sent else 1.0, "loss_worst_window": None,
        "duration_s": duration, "mean_send_lag_ms": None,
        "latency_ms": lat, "latency_pooled_ms": lat,
        "min_ms": meter["min_ns"] / 1e6 if got else None,
        "max_ms": meter["max_ns"] / 1e6 if got else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fluidvim.evaluator.loadgen",
                                description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="role", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--bind", required=True)
    e.add_argument("--port", type=int, default=7)
    c = sub.add_parser("client")
    c.add_argument("--src", required=True)
    c.add_argument("--dst", required=True)
    c.add_argument("--port", type=int, default=7)
    c.add_argument("--sessions", type=int, required=True)
    c.add_argument("--pps", type=float, required=True, help="packets/s per session")
    c.add_argument("--duration", type=float, default=2.0)
    c.add_argument("--warmup", type=float, default=0.3)
    c.add_argument("--drain", type=float, default=0.5)
    c.add_argument("--size", type=int, default=64, help="payload bytes")
    c.add_argument("--windows", type=int, default=1,
                   help="split the measured time into N windows; report medians over them")
    c.add_argument("--per-session-quantile", type=float, default=None,
                   help="also report each session's latency at this quantile and its loss")
    c.add_argument("--deadline-ms", type=float, default=None,
                   help="with --per-session-quantile: also count each session's packets later "
                        "than this (lost ones included)")
    c.add_argument("--proto", choices=("udp", "icmp"), default="udp",
                   help="udp: one socket per session to the echo; icmp: one echo identifier "
                        "per session, answered by the far kernel")
    a = p.parse_args(argv)
    if a.role == "echo":
        echo(a.bind, a.port)
        return 0
    print(json.dumps(client(a.src, a.dst, a.port, a.sessions, a.pps, a.duration, a.warmup,
                            a.drain, a.size, a.proto, a.windows, a.per_session_quantile,
                            a.deadline_ms)),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
