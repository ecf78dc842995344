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
