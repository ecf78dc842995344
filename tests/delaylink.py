# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A wide-area link between two interfaces: every Ethernet frame that arrives on one is sent out
of the other ``delay_ms`` later (both directions), for emulating propagation delay between zones
where ``tc netem`` is absent (kernels without ``CONFIG_NET_SCH_NETEM``, as on the machines this
project is tested on: ``tc qdisc add ... netem`` fails with "Specified qdisc kind is unknown").

Like netem, it only ever holds a frame *at least* the delay (a frame is never sent early), so a
round trip through two such links takes at least twice the one-way delay; the order of frames is
kept. It runs as its own process (``python tests/delaylink.py IF_A IF_B DELAY_MS``; it
prints ``ready`` once both raw sockets are bound) so its timing does not share an interpreter
lock with the caller. Root only (AF_PACKET); the interfaces are put in promiscuous mode through
the socket (membership ends with the process).
"""

from __future__ import annotations

import heapq
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_OUTGOING = 4


def _open(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, 0))
    idx = socket.if_nametoindex(ifname)
    s.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, struct.pack("iHH8s", idx, PACKET_MR_PROMISC,
                                                                0, b""))
    s.setblocking(False)
    return s


def relay(if_a: str, if_b: str, delay_ms: float, ready=None, stop=None) -> None:
    """Relay frames a <-> b with ``delay_ms`` each way until ``stop()`` is true (or forever)."""
    delay = max(0.0, float(delay_ms)) / 1000.0
    a, b = _open(if_a), _open(if_b)
    other = {a.fileno(): b, b.fileno(): a}
    due: list = []
    seq = 0
    if ready:
        ready()
    while stop is None or not stop():
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else 0.5
        r, _, _ = select.select([a, b], [], [], timeout)
        now = time.monotonic()
        for s in r:
            while True:
                try:
                    frame, addr = s.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:      # our own sends on this interface
                    continue
                seq += 1
                heapq.heappush(due, (now + delay, seq, other[s.fileno()], frame))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, out, frame = heapq.heappop(due)
            try:
                out.send(frame)
            except OSError:                          # link down or frame too big: dropped
                pass


class DelayLink:
    """``with DelayLink(a, b, ms):`` - the relay process between ``a`` and ``b``."""

    def __init__(self, if_a: str, if_b: str, delay_ms: float):
        self.if_a, self.if_b, self.delay_ms = if_a, if_b, float(delay_ms)
        self.proc: subprocess.Popen | None = None

    def start(self) -> "DelayLink":
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), self.if_a,
                                      self.if_b, repr(self.delay_ms)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            self.stop()
            raise RuntimeError(f"delay link {self.if_a}<->{self.if_b}: {line or err.strip()}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python tests/delaylink.py IF_A IF_B DELAY_MS", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        relay(args[0], args[1], float(args[2]), ready=lambda: print("ready", flush=True))
    except OSError as e:
        print(f"delaylink: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
