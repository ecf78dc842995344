# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The load generator's pure parts (the traffic itself runs in tests/integration/test_probes.py)."""

import struct

import pytest

from fluidvim.common import measure
from fluidvim.evaluator import loadgen


def test_quantiles_are_the_shared_helper():
    # a step's latency quantiles: fluidvim.common.measure.quantile, linear (tests/unit/test_measure.py)
    assert loadgen.quantile is measure.quantile and loadgen.median is measure.median


def test_icmp_checksum_verifies_to_zero():
    # RFC 1071: the checksum of a message including its own checksum is 0
    payload = loadgen.HDR.pack(7, 3, 123456789) + b"\0" * 40
    hdr = struct.pack("!BBHHH", 8, 0, 0, 0x1234, 1)
    csum = loadgen._checksum(hdr + payload)
    full = struct.pack("!BBHHH", 8, 0, csum, 0x1234, 1) + payload
    assert loadgen._checksum(full) == 0
    assert loadgen._checksum(b"\x00\x01\xf2") == (~(0x0001 + 0xf200) & 0xFFFF)   # odd length padded


def test_cli_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        loadgen.main(["--help"])
    assert "SO_TIMESTAMPNS" in capsys.readouterr().out


def _udp_echo():
    """A UDP echo on the loopback (a thread): what the far namespace's echo does."""
    import socket
    import threading

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                data, addr = s.recvfrom(2048)
            except TimeoutError:
                continue
            s.sendto(data, addr)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return s.getsockname()[1], stop, t, s


@pytest.mark.parametrize("deadline_ms,all_late", [(0.0, True), (1e9, False)])
def test_per_session_late_counts_packets_past_the_deadline(deadline_ms, all_late):
    # a deadline of 0 makes every packet late, one of 1e9 s none: no timing decides the outcome
    port, stop, t, s = _udp_echo()
    try:
        out = loadgen.client("127.0.0.1", "127.0.0.1", port, sessions=3, pps=50, duration=0.3,
                             warmup=0.05, drain=0.5, size=64, per_session_quantile=0.99,
                             deadline_ms=deadline_ms)
    finally:
        stop.set()
        t.join(2)
        s.close()
    per = out["per_session"]
    assert len(per["late"]) == len(per["sent"]) == 3 and sum(per["sent"]) == out["sent"]
    lost = [n - round(n * (1 - loss)) for n, loss in zip(per["sent"], per["loss"])]
    assert per["late"] == (per["sent"] if all_late else lost)


def test_per_session_has_no_late_counts_without_a_deadline():
    port, stop, t, s = _udp_echo()
    try:
        out = loadgen.client("127.0.0.1", "127.0.0.1", port, sessions=2, pps=50, duration=0.2,
                             warmup=0.05, drain=0.3, size=64, per_session_quantile=0.99)
    finally:
        stop.set()
        t.join(2)
        s.close()
    assert "late" not in out["per_session"] and len(out["per_session"]["sent"]) == 2
