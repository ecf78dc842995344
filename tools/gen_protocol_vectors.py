#!/usr/bin/env python3
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Write contract/vectors/protocol.json: the control-channel vectors of contract/PROTOCOL.md.

* ``requests``: what a client must send, byte for byte, for a request (id, op, fields);
* ``guest_lines``: lines a VNF sends and how a client must classify them;
* ``exchanges``: a line sent to a real VNF and what its reply must contain (checked against the
  booted unikernel by tests/integration/test_vnf.py, and by the Go driver's tests). ``field``:
  the error's ``field`` (the request field at fault, e.g. ``macs[1]``); ``nic_macs``: each NIC's
  ``mac`` in the ``stats`` result, ``null`` = still the MAC the VNF booted with (its device's);
  ``free`` / ``slots_free``: the ``free`` of the result / of ``stats``' ``slots``;
  ``slots_keys``: keys ``stats``' ``slots`` must have; ``cpu_keys``: keys of its ``cpu``, and
  ``cpu_wall``: its ``busy_us + poll_us + halt_us + stolen_us`` (the main loop's wall time) is at
  most ``uptime_us``;
  ``window_us`` / ``coalesce_us``: the ``window_us`` / ``coalesce_us`` of the result (``poll``).
"""

import json
import os
import sys

import fluidvim

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contract", "vectors",
                   "protocol.json")

FWD = "FromDevice(0) -> Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"


def line(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True) + "\n"


requests = [
    {"id": 1, "op": "ping", "fields": {}},
    {"id": 2, "op": "configure", "fields": {"config": FWD, "slots": 256}},
    {"id": 3, "op": "configure", "fields": {"config": "FromDevice(0) -> Discard;"}},
    {"id": 4, "op": "stats", "fields": {}},
    {"id": 2147483647, "op": "configure",
     "fields": {"config": "// caf\u00e9 \"quoted\" \\ tab\t\nFromDevice(0) -> ToDevice(0);"}},
    # macs: one entry per NIC, null keeps that NIC's MAC (a warm shell given a Neutron port's MAC)
    {"id": 5, "op": "configure",
     "fields": {"config": FWD, "macs": ["fa:16:3e:12:34:56", None], "slots": 64}},
    # session slots at the service's QoE: the probe's capacity, the VNF's latency budget
    {"id": 6, "op": "qoe", "fields": {"capacity": 200, "budget_ns": 8192, "quantile_ppm": 990000}},
    # the busy-poll window after the last frame (the latency controller's knob)
    {"id": 7, "op": "poll", "fields": {"window_us": 200}},
    # and interrupt moderation: naps on the timer, RX interrupts off, one kick per nap
    {"id": 8, "op": "poll", "fields": {"window_us": 0, "coalesce_us": 1000}},
]
for r in requests:
    msg = {"id": r["id"], "op": r["op"]}
    msg.update({k: r["fields"][k] for k in sorted(r["fields"])})
    r["line"] = line(msg)

guest_lines = [
    {"line": '{"ev":"ready","proto":1,"name":"vnf","version":"' + fluidvim.__version__ + '",'
             '"boot_us":812,'
             '"clock":"kvmclock","ctl":"virtio","nics":2,"macs":["52:54:00:12:34:01","52:54:00:12:34:02"],'
             '"slots":1024}', "kind": "event", "event": "ready"},
    {"line": '{"ev":"error","message":"virtio-net 1: queue 0 size 0"}', "kind": "event",
     "event": "error"},
    {"line": '{"id":1,"ok":true,"result":{"pong":true,"uptime_us":123456,"configured":false,'
             '"boot_us":812}}', "kind": "reply", "id": 1},
    {"line": '{"id":2,"ok":false,"error":{"code":"config","line":1,"col":17,'
             '"message":"unknown element class \'Countr\'"}}', "kind": "error", "id": 2,
     "code": "config", "err_line": 1, "err_col": 17},
    {"line": '{"ok":false,"error":{"code":"too_long","message":"line longer than 8192 bytes"}}',
     "kind": "error", "id": None, "code": "too_long"},
    {"line": '{"id":5,"ok":false,"error":{"code":"config","field":"macs[1]","message":"macs[1]: '
             '\'01:00:5e:00:00:01\' is a multicast address (the first octet must be even): a NIC '
             'needs a unicast address"}}', "kind": "error", "id": 5, "code": "config",
     "field": "macs[1]"},
]

invalid_guest_lines = ["not json", "[1,2]", '{"id":1}', ""]

exchanges = [
    {"send": line({"id": 1, "op": "ping"}), "ok": True, "id": 1,
     "result_keys": ["pong", "uptime_us", "configured", "boot_us"]},
    {"send": line({"id": 7, "op": "dance"}), "ok": False, "id": 7, "code": "unknown_op"},
    {"send": "this is not json\n", "ok": False, "id": None, "code": "parse"},
    {"send": line({"op": "ping"}), "ok": False, "id": None, "code": "bad_request",
     "message_contains": "id"},
    {"send": line({"id": "x", "op": "ping"}), "ok": False, "id": None, "code": "bad_request",
     "message_contains": "id"},
    {"send": line({"id": 8}), "ok": False, "id": 8, "code": "bad_request",
     "message_contains": "op"},
    {"send": line({"id": 9, "op": "configure"}), "ok": False, "id": 9, "code": "bad_request",
     "message_contains": "config"},
    {"send": line({"id": 10, "op": "configure", "config": "FromDevice(0) -> Countr -> ToDevice(1);"}),
     "ok": False, "id": 10, "code": "config", "err_line": 1, "message_contains": "Countr"},
    {"send": line({"id": 11, "op": "configure", "config": "FromDevice(0) -> ToDevice(1);\n"
                   "FromDevice(1) -> q :: Queue(0) -> ToDevice(0);"}),
     "ok": False, "id": 11, "code": "config", "err_line": 2, "message_contains": "Queue"},
    {"send": line({"id": 12, "op": "configure", "config": "FromDevice(9) -> Discard;"}),
     "ok": False, "id": 12, "code": "config", "err_line": 1, "message_contains": "9"},
    {"send": "x" * 9000 + "\n", "ok": False, "id": None, "code": "too_long"},
    {"send": line({"id": 13, "op": "configure", "config": FWD, "slots": 64}), "ok": True,
     "id": 13, "result_keys": ["forwarding", "elements", "config_us"]},
    {"send": line({"id": 14, "op": "stats"}), "ok": True, "id": 14,
     "result_keys": ["uptime_us", "configured", "cpu", "slots", "nics", "elements", "latency_ns"],
     "slots_keys": ["total", "used", "free", "rejected", "opened"],
     "cpu_keys": ["busy_us", "poll_us", "halt_us", "stolen_us", "halts", "kicks", "naps",
                  "naps_empty"], "cpu_wall": True},
    # macs (the exchanges run against a VNF with 2 NICs): rejected ones change nothing
    {"send": line({"id": 15, "op": "configure", "config": FWD, "macs": ["fa:16:3e:12:34:56"]}),
     "ok": False, "id": 15, "code": "config", "field": "macs", "message_contains": "1 entry for 2 NICs"},
    {"send": line({"id": 16, "op": "configure", "config": FWD,
                   "macs": [None, "fa:16:3e:12:34"]}),
     "ok": False, "id": 16, "code": "config", "field": "macs[1]", "message_contains": "macs[1]"},
    {"send": line({"id": 17, "op": "configure", "config": FWD,
                   "macs": ["fa:16:3e:12:34:56", "01:00:5e:00:00:01"]}),
     "ok": False, "id": 17, "code": "config", "field": "macs[1]", "message_contains": "multicast"},
    {"send": line({"id": 18, "op": "configure", "config": FWD, "macs": "fa:16:3e:12:34:56"}),
     "ok": False, "id": 18, "code": "bad_request", "message_contains": "macs"},
    {"send": line({"id": 19, "op": "configure", "config": "FromDevice(0) -> Countr;",
                   "macs": ["fa:16:3e:12:34:56", None]}),
     "ok": False, "id": 19, "code": "config", "err_line": 1, "message_contains": "Countr"},
    {"send": line({"id": 20, "op": "stats"}), "ok": True, "id": 20, "result_keys": ["nics"],
     "nic_macs": [None, None]},
    {"send": line({"id": 21, "op": "configure", "config": FWD,
                   "macs": ["fa:16:3e:12:34:56", None]}),
     "ok": True, "id": 21, "result_keys": ["forwarding"]},
    {"send": line({"id": 22, "op": "stats"}), "ok": True, "id": 22, "result_keys": ["nics"],
     "nic_macs": ["fa:16:3e:12:34:56", None]},
    # qoe (after id 13's configure with 64 slots): free = min(table free, capacity - used)
    {"send": line({"id": 23, "op": "qoe", "capacity": 20, "budget_ns": 8192,
                   "quantile_ppm": 990000}),
     "ok": True, "id": 23, "result_keys": ["total", "used", "free", "qoe"], "free": 20},
    {"send": line({"id": 24, "op": "stats"}), "ok": True, "id": 24, "result_keys": ["slots"],
     "slots_free": 20},
    {"send": line({"id": 25, "op": "qoe", "capacity": 20}), "ok": False, "id": 25,
     "code": "bad_request", "message_contains": "budget_ns"},
    {"send": line({"id": 26, "op": "qoe", "capacity": -1}), "ok": False, "id": 26,
     "code": "bad_request", "message_contains": "capacity"},
    {"send": line({"id": 27, "op": "qoe", "capacity": 0}), "ok": True, "id": 27,
     "result_keys": ["total", "used", "free"], "free": 64},
    # the optional host-wait budget (wait_ppm) is a share of a window: at most 10^6 ppm
    {"send": line({"id": 33, "op": "qoe", "capacity": 20, "budget_ns": 8192,
                   "quantile_ppm": 990000, "wait_ppm": 1000001}), "ok": False, "id": 33,
     "code": "bad_request", "message_contains": "wait_ppm"},
    {"send": line({"id": 28, "op": "stats"}), "ok": True, "id": 28, "result_keys": ["slots"],
     "slots_free": 64},
    # poll: set the busy-poll window, read it back, refuse what is out of range
    {"send": line({"id": 29, "op": "poll", "window_us": 200}), "ok": True, "id": 29,
     "result_keys": ["window_us"], "window_us": 200},
    {"send": line({"id": 30, "op": "poll"}), "ok": True, "id": 30, "result_keys": ["window_us"],
     "window_us": 200},
    {"send": line({"id": 31, "op": "poll", "window_us": 100001}), "ok": False, "id": 31,
     "code": "bad_request", "message_contains": "window_us"},
    {"send": line({"id": 32, "op": "poll", "window_us": 1000}), "ok": True, "id": 32,
     "result_keys": ["window_us"], "window_us": 1000},
    # the host's halt polling (KVM poll control, where offered: the reply says it then)
    {"send": line({"id": 33, "op": "poll", "host_halt_poll": "no"}), "ok": False, "id": 33,
     "code": "bad_request", "message_contains": "host_halt_poll"},
    {"send": line({"id": 34, "op": "poll", "window_us": 1000, "host_halt_poll": True}),
     "ok": True, "id": 34, "result_keys": ["window_us"], "window_us": 1000},
    # interrupt moderation: set, read back, refuse what is out of range, off again
    {"send": line({"id": 35, "op": "poll", "coalesce_us": 1000}), "ok": True, "id": 35,
     "result_keys": ["window_us", "coalesce_us"], "window_us": 1000, "coalesce_us": 1000},
    {"send": line({"id": 36, "op": "poll", "coalesce_us": 10001}), "ok": False, "id": 36,
     "code": "bad_request", "message_contains": "coalesce_us"},
    {"send": line({"id": 37, "op": "poll", "coalesce_us": 0}), "ok": True, "id": 37,
     "result_keys": ["coalesce_us"], "coalesce_us": 0},
]

text = json.dumps({"version": 1, "max_line": 8192, "requests": requests, "guest_lines": guest_lines,
                   "invalid_guest_lines": invalid_guest_lines, "exchanges": exchanges},
                  indent=2) + "\n"
if "--check" in sys.argv:          # tests/unit/test_version.py: the file is current
    with open(OUT) as f:
        sys.exit(0 if f.read() == text else 1)
with open(OUT, "w") as f:
    f.write(text)
print("wrote", OUT)
