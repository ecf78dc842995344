# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Control-channel encoding/decoding against contract/vectors/protocol.json, and the client over a
socketpair with a scripted peer."""

import json
import os
import socket
import threading

import pytest

from fluidvim.vnf import control as C

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "contract", "vectors", "protocol.json")
with open(VECTORS) as f:
    V = json.load(f)


@pytest.mark.parametrize("req", V["requests"], ids=lambda r: f"{r['op']}-{r['id']}")
def test_encode_request_matches_vector(req):
    assert C.encode_request(req["id"], req["op"], **req["fields"]).decode() == req["line"]


@pytest.mark.parametrize("g", V["guest_lines"], ids=lambda g: g["kind"] + str(g.get("id")))
def test_decode_guest_lines(g):
    msg = C.decode_line(g["line"])
    assert msg["kind"] == g["kind"]
    if g["kind"] == "event":
        assert msg["event"] == g["event"]
    else:
        assert msg["id"] == g["id"]
    if g["kind"] == "error":
        err = msg["error"]
        assert err.code == g["code"]
        assert err.line == g.get("err_line") and err.col == g.get("err_col")
        assert err.field == g.get("field")


@pytest.mark.parametrize("bad", V["invalid_guest_lines"])
def test_invalid_guest_lines_raise(bad):
    with pytest.raises(C.ControlError) as e:
        C.decode_line(bad)
    assert e.value.code == "protocol"


def test_unknown_op_and_too_long_rejected_client_side():
    with pytest.raises(ValueError, match="unknown op"):
        C.encode_request(1, "reboot")
    with pytest.raises(ValueError, match="8192"):
        C.encode_request(1, "configure", config="x" * 9000)


class FakeVNF(threading.Thread):
    """A peer on a socketpair that speaks the protocol from canned replies."""

    def __init__(self, sock, script):
        super().__init__(daemon=True)
        self.sock, self.script, self.received = sock, script, []

    def run(self):
        f = self.sock.makefile("rwb")
        for item in self.script:
            if "emit" in item:
                f.write(item["emit"].encode() + b"\n")
                f.flush()
                continue
            req = json.loads(f.readline())
            self.received.append(req)
            reply = item["reply"](req)
            if reply is None:
                break
            f.write(json.dumps(reply).encode() + b"\n")
            f.flush()
        self.sock.close()


def channel_with(script):
    a, b = socket.socketpair()
    ch = C.ControlChannel("<socketpair>")
    ch._sock = a
    peer = FakeVNF(b, script)
    peer.start()
    return ch, peer


def test_ready_then_requests_and_stale_replies_skipped():
    ready = V["guest_lines"][0]["line"]
    ch, peer = channel_with([
        {"emit": ready},
        {"reply": lambda r: {"id": r["id"], "ok": True, "result": {"pong": True}}},
        {"emit": '{"id":999,"ok":true,"result":{}}'},     # stale reply: ignored
        {"emit": '{"ev":"error","message":"nic 1 down"}'},
        {"reply": lambda r: {"id": r["id"], "ok": False,
                             "error": {"code": "config", "line": 2, "col": 5,
                                       "message": "bad"}}},
    ])
    assert ch.wait_ready(5)["boot_us"] == 812
    assert ch.ping() == {"pong": True}
    with pytest.raises(C.ControlError) as e:
        ch.configure("FromDevice(0) -> ToDevice(1);", slots=8)
    assert (e.value.code, e.value.line, e.value.col) == ("config", 2, 5)
    assert "line 2, column 5" in str(e.value)
    assert ch.events == [{"ev": "error", "message": "nic 1 down"}]
    peer.join(5)
    assert peer.received[1] == {"id": 2, "op": "configure",
                                "config": "FromDevice(0) -> ToDevice(1);", "slots": 8}


def test_closed_and_timeout_are_distinct():
    ch, peer = channel_with([{"reply": lambda r: None}])
    with pytest.raises(C.ChannelClosed):
        ch.ping(timeout=5)
    a, b = socket.socketpair()
    ch = C.ControlChannel("<socketpair>")
    ch._sock = a
    with pytest.raises(C.ReplyTimeout):
        ch.ping(timeout=0.05)
    b.close()


def test_fragments_from_a_previous_client_are_skipped():
    ch, peer = channel_with([
        {"emit": 'ult":{"pong":true}}'},                                  # tail of an old reply
        {"emit": '{"ok":false,"error":{"code":"parse","message":"x"}}'},  # answer to old junk
        {"reply": lambda r: {"id": r["id"], "ok": True, "result": {"pong": True}}},
    ])
    assert ch.ping() == {"pong": True}
    peer.join(5)


def _requests(f):
    """The requests a fake VNF reads from ``f`` (empty lines skipped, as the VNF does)."""
    while line := f.readline():
        if line.strip():
            yield json.loads(line)


@pytest.fixture
def ctl_socket(tmp_path):
    """(path, listening socket) of a VNF's control socket as QEMU serves it."""
    path = str(tmp_path / "ctl.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(2)
    yield path, srv
    srv.close()


def test_first_request_on_a_connection_starts_with_an_empty_line(ctl_socket):
    path, srv = ctl_socket
    ch = C.ControlChannel(path).connect()
    conn, _ = srv.accept()
    f = conn.makefile("rwb")
    first = ch._next_id
    ch._send(b"")                                   # the empty line goes with the first request
    assert f.readline() == b"\n"
    t = threading.Thread(target=lambda: [f.write(b'{"id":%d,"ok":true,"result":{}}\n'
                                                 % (first + k)) for k in (0, 1)] + [f.flush()])
    t.start()
    ch.ping()
    ch.ping()
    t.join()
    assert [r["id"] for _, r in zip(range(2), _requests(f))] == [first, first + 1]
    ch.close()
    conn.close()


def test_a_late_reply_to_a_previous_client_is_not_taken_for_the_next(ctl_socket):
    """A stopped QEMU answers, once it runs again, the request its client gave up on; the
    reply reaches the next client, whose own request must not be matched with it (ids start
    at random on each connection)."""
    path, srv = ctl_socket
    old = C.ControlChannel(path).connect()
    conn, _ = srv.accept()
    with pytest.raises(C.ReplyTimeout):
        old.poll(1000, timeout=0.05)                     # the VNF is stopped: no answer
    old.close()
    late = next(_requests(conn.makefile("rb")))
    conn.close()
    new = C.ControlChannel(path).connect()
    conn, _ = srv.accept()
    f = conn.makefile("rwb")
    f.write(b'{"id":%d,"ok":true,"result":{"window_us":1000}}\n' % late["id"])   # the late one
    f.flush()
    t = threading.Thread(target=lambda: [
        f.write(b'{"id":%d,"ok":true,"result":{"window_us":800}}\n' % next(_requests(f))["id"]),
        f.flush()])
    t.start()
    assert new.poll(800, timeout=5)["window_us"] == 800
    t.join()
    new.close()
    conn.close()


def test_a_lost_ready_is_recovered_by_a_ping(monkeypatch):
    """QEMU accepts the control connection asynchronously: a `ready` sent before that is lost.
    wait_ready then asks with a ping (id 0); the reply stands in for the lost event."""
    monkeypatch.setattr(C.ControlChannel, "READY_PING_AFTER_S", 0.05)
    ch, peer = channel_with([
        {"reply": lambda r: {"id": r["id"], "ok": True,
                             "result": {"pong": True, "uptime_us": 40000, "configured": False,
                                        "boot_us": 33868}}},
        {"reply": lambda r: {"id": r["id"], "ok": True, "result": {"pong": True}}},
    ])
    assert ch.wait_ready(5) == {"boot_us": 33868, "late": True}
    assert ch.ping() == {"pong": True}                     # the channel goes on as usual
    peer.join(5)
    assert [r["id"] for r in peer.received] == [0, 1] and peer.received[0]["op"] == "ping"


def test_a_silent_vnf_still_times_out_after_the_ping(monkeypatch):
    monkeypatch.setattr(C.ControlChannel, "READY_PING_AFTER_S", 0.05)
    a, b = socket.socketpair()
    silent = C.ControlChannel("<socketpair>")
    silent._sock = a
    with pytest.raises(C.ReplyTimeout, match="'ready' event"):
        silent.wait_ready(0.3)
    assert b.recv(100) == b'{"id":0,"op":"ping"}\n'   # it did ask
    b.close()
