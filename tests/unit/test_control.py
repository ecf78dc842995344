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


# -- a stopped VNF: every client gives up within the bound (control.TIMEOUT_S) --
BOUND_S = 0.2           # the bound the tests set; HANG_GUARD_S only catches a call that blocks
HANG_GUARD_S = BOUND_S * 5 + 5


def _guarded(fn):
    """``{"value": fn()}`` or ``{"error": what it raised}``, from a thread that must end within
    HANG_GUARD_S (else the call blocked)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - returned to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_GUARD_S)
    assert not t.is_alive(), "the call blocked"
    return out


def _full_queue_socket(path):
    """A listening socket that never accepts, its queue of pending connections full (a stopped
    QEMU after its clients gave up): a blocking connect to it waits forever. Returns what to
    close."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(0)
    held = [srv]
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        try:
            c.connect(path)
        except BlockingIOError:
            c.close()
            return held
        held.append(c)
        assert len(held) < 64, "the listen queue never filled"


def _silent_socket(path):
    """A listening socket with room in its queue whose peer never answers."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)
    return [srv]


STOPPED = {"full_queue": (_full_queue_socket, C.ConnectTimeout, "no connection"),
           "silent": (_silent_socket, C.ReplyTimeout, "no reply to 'stats'")}


@pytest.mark.parametrize("kind", STOPPED)
def test_a_stopped_vnf_fails_within_the_bound_naming_vnf_and_socket(kind, tmp_path):
    serve, error, what = STOPPED[kind]
    path = str(tmp_path / "ctl.sock")
    held = serve(path)
    try:
        err = _guarded(lambda: C.ControlChannel(path, "fw").connect(BOUND_S).stats(BOUND_S))["error"]
    finally:
        for s in held:
            s.close()
    assert isinstance(err, error), repr(err)
    assert err.code == "timeout"
    assert what in str(err) and f"VNF fw (control socket {path})" in str(err), str(err)


@pytest.mark.parametrize("kind", STOPPED)
def test_the_managers_stats_path_is_bounded_by_the_one_timeout(kind, tmp_path, monkeypatch):
    """VNFManager.stats (``fluidvim vnf stats``, the Nova driver's diagnostics, the exporter, the
    local zone) and .slots (the slot watchers) over a stopped VNF's socket: bounded by
    control.TIMEOUT_S, which they do not pass."""
    import uuid

    from fluidvim.vnf.manager import VNFManager, make_conf
    from fluidvim.vnf.store import VNFRecord

    monkeypatch.setattr(C, "TIMEOUT_S", BOUND_S)
    serve, error, _ = STOPPED[kind]
    path = str(tmp_path / "ctl.sock")
    held = serve(path)
    kernel = tmp_path / "vnf.elf"
    kernel.write_bytes(b"fluidvim")
    mgr = VNFManager(make_conf(run_dir=str(tmp_path / "run"), state_dir=str(tmp_path / "state"),
                               kernel=str(kernel)))
    try:
        vid = str(uuid.uuid4())
        spec = {"uuid": vid, "name": "fw", "kernel": str(kernel), "control_socket": path,
                "console_log": str(tmp_path / "console.log")}
        mgr.store.add(VNFRecord(id=vid, name="fw", backend="qemu", status="running",
                                spec_json=json.dumps(spec)))
        err = _guarded(lambda: mgr.stats("fw"))["error"]
        assert isinstance(err, error) and f"VNF fw (control socket {path})" in str(err), str(err)
        assert _guarded(mgr.slots)["value"]["vnfs"] == {}     # the silent VNF is left out
    finally:
        mgr.close()
        for s in held:
            s.close()
