# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Client for the VNF control channel: line-delimited JSON over a unix socket (contract/PROTOCOL.md).

Message encoding and decoding are plain functions (``encode_request``, ``decode_line``) so they can be
checked against ``contract/vectors/protocol.json``; :class:`ControlChannel` adds the socket.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time

from . import limits

LOG = logging.getLogger(__name__)

MAX_LINE = limits.MAX_CONTROL_LINE
PROTO_VERSION = 1
OPS = ("ping", "configure", "stats", "qoe", "poll")

# The bound, defined once, on connecting to a VNF's control socket and on each reply to a request
# (what ``timeout=None`` of connect and of the ops means, read at each call). A stopped QEMU
# neither accepts nor answers: each client that gave up leaves its connection in the socket's
# listen queue, and once that is full a blocking connect waits forever - so every client
# (``fluidvim vnf stats``, the Nova driver's diagnostics, the metrics exporter, the slot
# watchers, the orchestrator's local zone) gives up after this long with an error naming the VNF
# and its socket.
TIMEOUT_S = 5.0
# configure (its reply) waits twice as long: the guest builds the Click graph before it answers
CONFIGURE_TIMEOUT_FACTOR = 2
# how often a connect to a full listen queue is tried again within its bound
CONNECT_RETRY_S = 0.02


class ControlError(Exception):
    """The VNF answered a request with an error, or the channel failed."""

    def __init__(self, code: str, message: str, line: int | None = None,
                 col: int | None = None, field: str | None = None):
        where = f" (line {line}, column {col})" if line else ""
        super().__init__(f"{code}: {message}{where}")
        self.code, self.message, self.line, self.col = code, message, line, col
        self.field = field      # the request field at fault when it is not the config text


class ChannelClosed(ControlError):
    def __init__(self, message="control channel closed: the VNF (or its QEMU) has exited"):
        super().__init__("closed", message)


class ReplyTimeout(ControlError):
    def __init__(self, what: str, seconds: float, where: str = "the VNF"):
        super().__init__("timeout", f"no {what} from {where} within {seconds:.1f} s")


class ConnectTimeout(ControlError):
    """The VNF's control socket accepted no connection within the bound (its listen queue is
    full: the QEMU is stopped, or too busy to accept)."""

    def __init__(self, where: str, seconds: float):
        super().__init__("timeout", f"{where}: no connection within {seconds:.1f} s (its listen "
                                    "queue is full: the QEMU is stopped or does not accept)")


def encode_request(req_id: int, op: str, **fields) -> bytes:
    """One request line. Field order is fixed (id, op, then fields sorted) so vectors are exact."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r} (known: {', '.join(OPS)})")
    msg = {"id": req_id, "op": op}
    msg.update({k: fields[k] for k in sorted(fields) if fields[k] is not None})
    line = json.dumps(msg, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
    if len(line) > MAX_LINE:
        raise ValueError(f"request is {len(line)} bytes; the control channel carries at most "
                         f"{MAX_LINE} bytes per line (shorten the click config)")
    return line


def decode_line(line: bytes | str) -> dict:
    """Parse one guest line into a dict with a ``kind`` of ``event``, ``reply`` or ``error``."""
    try:
        msg = json.loads(line)
    except ValueError as e:
        raise ControlError("protocol", f"guest sent a line that is not JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ControlError("protocol", "guest sent JSON that is not an object")
    if "ev" in msg:
        return {"kind": "event", "event": msg["ev"], "body": msg}
    if "ok" not in msg:
        raise ControlError("protocol", "guest line has neither 'ev' nor 'ok'")
    if msg["ok"]:
        return {"kind": "reply", "id": msg.get("id"), "result": msg.get("result", {})}
    err = msg.get("error") or {}
    return {"kind": "error", "id": msg.get("id"),
            "error": ControlError(err.get("code", "unknown"), err.get("message", ""),
                                  err.get("line"), err.get("col"), err.get("field"))}


class ControlChannel:
    """A connection to one VNF's control socket. Thread-safe; one request at a time."""

    def __init__(self, path: str, name: str | None = None):
        """``name``: the VNF's, for errors (a launcher passes it; else only the socket is named)."""
        self.path, self.name = path, name
        self._timeout = TIMEOUT_S
        self._sock: socket.socket | None = None
        self._buf = b""
        self._next_id = 1
        self._lock = threading.Lock()
        self._fresh = False
        self.ready: dict | None = None      # the `ready` event, once seen
        self.events: list[dict] = []        # other events (e.g. boot errors)

    def connect(self, timeout: float | None = None) -> "ControlChannel":
        """Connect within ``timeout`` s (None: :data:`TIMEOUT_S`; :class:`ConnectTimeout` after
        it). A UNIX socket's connect waits with no bound while the listener's queue of connections
        it has not accepted is full, so it is made without blocking (EAGAIN while the queue is
        full) and tried again."""
        s = socket.socket(socket.AF_UNIX,
                          socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        timeout = TIMEOUT_S if timeout is None else timeout
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    s.connect(self.path)
                    break
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ConnectTimeout(self.where, timeout) from None
                    time.sleep(min(CONNECT_RETRY_S, left))
        except BaseException:
            s.close()
            raise
        s.settimeout(timeout)       # blocking again; each send and reply sets its bound
        self._sock = s
        self._fresh = True
        # A reply the VNF sends after its client gave up (a stopped QEMU answering late) reaches
        # whoever connects next; ids that start at random on each connection keep it from
        # matching this client's request with the same number (PROTOCOL.md §2).
        self._next_id = random.randrange(1, 0x7FFFFFFF)
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def where(self) -> str:
        """The VNF and its socket, as errors name them."""
        sock = f"control socket {self.path}"
        return f"VNF {self.name} ({sock})" if self.name else sock

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock else -1

    # -- reading --
    def _readline(self, deadline: float, what: str) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ReplyTimeout(what, self._timeout, self.where)
            sock = self._connected()
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                raise ReplyTimeout(what, self._timeout, self.where) from None
            except OSError as e:
                raise ChannelClosed(f"control channel failed: {e}") from None
            if not chunk:
                raise ChannelClosed()
            self._buf += chunk
            if len(self._buf) > 4 * MAX_LINE and b"\n" not in self._buf:
                raise ControlError("protocol", "guest sent an over-long line")

    def _next_message(self, deadline: float, what: str) -> dict:
        """Next well-formed guest message. A connection may begin with the tail of a line meant
        for a previous client (the channel has one client at a time and no framing beyond
        newlines): such a fragment, and error replies without an id (answers to a previous
        client's fragment), are skipped."""
        while True:
            line = self._readline(deadline, what)
            try:
                msg = decode_line(line)
            except ControlError:
                LOG.debug("control %s: skipping fragment %r", self.path, line[:80])
                continue
            if msg["kind"] == "error" and msg["id"] is None:
                LOG.debug("control %s: skipping unaddressed error %s", self.path, msg["error"])
                continue
            return msg

    def _note_event(self, msg: dict) -> None:
        if msg["event"] == "ready":
            self.ready = msg["body"]
        else:
            self.events.append(msg["body"])

    # How long to wait for `ready` before asking with a `ping` whether it was lost (below).
    READY_PING_AFTER_S = 2.0

    def wait_ready(self, timeout: float = 30.0) -> dict:
        """Block until the VNF's own ``ready`` event arrives (a fresh boot).

        QEMU accepts the launcher's pending connection on the control socket in its main loop,
        asynchronously; a guest that sends ``ready`` before that (seen under CPU contention: the
        guest printed "ready in 29 ms" on COM1 and the launcher never received it) has its event
        discarded (contract/PROTOCOL.md §1). So after ``READY_PING_AFTER_S`` without ``ready``, ask with
        a ``ping``: the guest answers requests only after sending ``ready``, so a reply without a
        ``ready`` before it means the event was lost, and the reply's ``boot_us`` stands in."""
        if self.ready is not None:
            return self.ready
        self._timeout = timeout
        deadline = time.monotonic() + timeout
        ping_at = time.monotonic() + min(self.READY_PING_AFTER_S, timeout)
        with self._lock:
            while self.ready is None:
                try:
                    msg = self._next_message(min(deadline, ping_at), "'ready' event")
                except ReplyTimeout:
                    if time.monotonic() >= deadline or ping_at >= deadline:
                        raise ReplyTimeout("'ready' event", timeout, self.where) from None
                    ping_at = deadline
                    self._send(encode_request(0, "ping"))
                    continue
                if msg["kind"] == "event":
                    self._note_event(msg)
                elif msg["kind"] == "reply" and msg["id"] == 0 and self.ready is None:
                    LOG.warning("control %s: the 'ready' event was lost (QEMU accepted the "
                                "connection after the guest sent it); the VNF answered ping",
                                self.path)
                    self.ready = {"boot_us": msg["result"].get("boot_us"), "late": True}
        return self.ready

    def _connected(self) -> socket.socket:
        if self._sock is None:
            raise ChannelClosed("control channel is not connected")
        return self._sock

    def _send(self, line: bytes) -> None:
        if self._fresh:
            # end any partial line a previous client left in the VNF's input buffer
            line = b"\n" + line
            self._fresh = False
        sock = self._connected()
        sock.settimeout(self._timeout)
        try:
            sock.sendall(line)
        except TimeoutError:
            raise ControlError("timeout", f"{self.where}: the VNF read no request within "
                                          f"{self._timeout:.1f} s") from None
        except OSError as e:
            raise ChannelClosed(f"control channel failed: {e}") from None

    def request(self, op: str, timeout: float | None = None, **fields) -> dict:
        """Send a request and return its result within ``timeout`` s (None: :data:`TIMEOUT_S`);
        raise :class:`ControlError` on an error reply, :class:`ReplyTimeout` after the bound."""
        if self._sock is None:
            raise ChannelClosed("control channel is not connected")
        timeout = self._timeout = TIMEOUT_S if timeout is None else timeout
        with self._lock:
            req_id = self._next_id
            self._next_id = (self._next_id % 0x7FFFFFFF) + 1
            self._send(encode_request(req_id, op, **fields))
            deadline = time.monotonic() + timeout
            while True:
                msg = self._next_message(deadline, f"reply to {op!r}")
                if msg["kind"] == "event":
                    self._note_event(msg)
                    continue
                if msg["id"] != req_id:
                    continue   # a stale reply to a request that timed out earlier
                if msg["kind"] == "error":
                    raise msg["error"]
                return msg["result"]

    # -- the operations --
    def ping(self, timeout: float | None = None) -> dict:
        return self.request("ping", timeout=timeout)

    def configure(self, config: str, slots: int | None = None,
                  timeout: float | None = None, macs=None) -> dict:
        """``macs``: one MAC address string (or None = keep) per NIC, applied with the config;
        the VNF then uses it as that NIC's own address (contract/PROTOCOL.md §4)."""
        if timeout is None:
            timeout = CONFIGURE_TIMEOUT_FACTOR * TIMEOUT_S
        return self.request("configure", timeout=timeout, config=config, slots=slots,
                            macs=list(macs) if macs is not None else None)

    def stats(self, timeout: float | None = None) -> dict:
        return self.request("stats", timeout=timeout)

    def poll(self, window_us: int | None = None, timeout: float | None = None,
             host_halt_poll: bool | None = None, coalesce_us: int | None = None) -> dict:
        """The VNF's busy-poll window after the last frame, in µs (contract/PROTOCOL.md §4
        ``poll``): set it to ``window_us`` (0..100000), or only read it (None); whether
        the host may poll after it halts (``host_halt_poll``; None: as the window says, off
        for 0); and its interrupt moderation (``coalesce_us``, 0..10000, 0 = off: naps on its
        timer with RX interrupts off, one notification per nap). The reply's
        ``host_halt_poll`` is there where KVM offers that control; an image older than
        ``coalesce_us`` ignores it and its reply has none."""
        return self.request("poll", timeout=timeout, window_us=window_us,
                            host_halt_poll=host_halt_poll, coalesce_us=coalesce_us)

    def qoe(self, capacity: int, budget_ns: int | None = None, quantile_ppm: int | None = None,
            timeout: float | None = None, wait_ppm: int | None = None) -> dict:
        """Session slots at the service's QoE (contract/PROTOCOL.md §4 ``qoe``): the load
        probe's capacity at the service's deadline and quantile and the VNF's own latency budget
        at that quantile (:func:`fluidvim.evaluator.qoeslots.qoe_params`); 0 turns it off.
        ``wait_ppm``: the optional host-wait budget (steal share of a window, ppm)."""
        return self.request("qoe", timeout=timeout, capacity=capacity, budget_ns=budget_ns,
                            quantile_ppm=quantile_ppm, wait_ppm=wait_ppm or None)
