# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Versioned client API of the orchestrator (what the CLI, the OSM plugin and others call).

Its methods are the RPC methods of the operation table (:data:`.operations.RPC`, namespace
``""``), added by :func:`bind_client`: each takes the table's parameters and sends them with the
version that added the method. The client refuses a method newer than ``version_cap`` (an older
server) instead of failing remotely. Errors the server reports on purpose (:mod:`.exception`)
arrive as the same classes.
"""

from __future__ import annotations

import logging
import time

import oslo_messaging as messaging

from .exception import OrchestratorError, Unreachable
from .operations import Rpc, api_version, client_method, rpc_methods

RPC_API_VERSION = api_version("")     # 1.1: networks; 1.2: power; 1.3: instance_action;
#                                       1.4: slots(watts=)
EXMODS = ["fluidvim.orchestrator.exception"]
BROKER_FIX = ("start RabbitMQ (systemctl start rabbitmq-server), or fix [orchestrator] "
              "transport_url / --transport-url")
RESEND_EVERY_S = 0.25   # a request no orchestrator's queue took is sent again this often


class _ReturnedRequestAck(logging.Filter):
    """A request the broker returned (mandatory publishing, no queue) leaves its publisher
    confirm (``Basic.Ack``) unread on the channel: the channel's next wait reads it (no promise
    pending: ignored), but when the channel closes first (a CLI's exit) py-amqp warns that it
    ignores it. Expected, so not logged (it would land in the CLI's output)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from amqp import abstract_channel, spec

        return not (record.msg == abstract_channel.IGNORED_METHOD_DURING_CHANNEL_CLOSE
                    and isinstance(record.args, tuple) and record.args[:1] == (spec.Basic.Ack,))


logging.getLogger("amqp").addFilter(_ReturnedRequestAck())


def broker_hosts(conf, url: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of each RabbitMQ node of ``url`` (never its credentials); empty
    for a transport that is not AMQP (``fake://``)."""
    parsed = messaging.TransportURL.parse(conf, url)
    if not parsed.transport.startswith(("rabbit", "amqp", "kombu")):
        return []
    return [(h.hostname or "127.0.0.1", h.port or 5672) for h in parsed.hosts]


def broker_unreachable(detail: str) -> Unreachable:
    """The one error for a message broker that cannot be reached: ``detail`` (which node, what
    failed) and how to bring it back."""
    return Unreachable(f"cannot reach the message broker ({detail}): {BROKER_FIX}")


def check_broker(conf, url: str, timeout: float = 3.0) -> None:
    """Fail fast with a clear error when no broker host of ``url`` accepts a TCP connection
    (oslo.messaging itself would retry the connection forever, even with ``retry`` set)."""
    import socket

    tried = []
    for host, port in broker_hosts(conf, url):
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as e:
            tried.append(f"{host}:{port}: {e.strerror or e}")
    if tried:
        raise broker_unreachable("; ".join(tried))


def rpc_client(transport, topic: str, version: str, timeout: float | None,
               namespace: str | None = None, version_cap: str | None = None):
    """The RPC client of every API here: mandatory publishing, so a request no queue takes (no
    orchestrator subscribed to the topic) comes back from the broker as MessageUndeliverable
    instead of being dropped (:meth:`CallPath._call` sends it again)."""
    target = messaging.Target(topic=topic, namespace=namespace, version=version)
    return messaging.get_rpc_client(
        transport, target, version_cap=version_cap, timeout=timeout,
        transport_options=messaging.TransportOptions(at_least_once=True))


class CallPath:
    """The call path of every RPC client here (the orchestrator's own methods and each
    namespace's): version check, a request no queue took sent again, and errors that say
    whether the broker or the orchestrator is what does not answer. Needs ``client``, ``retry``,
    ``_conf`` and ``_url`` (the transport URL)."""

    def _call(self, method: str, version: str = "1.0", timeout: float | None = None, **kwargs):
        if not self.client.can_send_version(version):
            raise OrchestratorError(f"{method} needs orchestrator RPC API {version}; this client "
                                    f"is capped at {self.client.version_cap}")
        opts = {"version": version, "retry": self.retry}
        if timeout is not None:          # prepare(timeout=None) would mean the 60 s default
            opts["timeout"] = timeout
        cctxt = self.client.prepare(**opts)
        # a request that no queue took is sent again until the call's timeout has passed; the
        # one delivered then gets the whole timeout for its reply
        wait = cctxt.timeout or 60.0
        deadline = time.monotonic() + wait
        while True:
            try:
                return cctxt.call({}, method, **kwargs)
            except messaging.MessageUndeliverable:
                # no queue took it: nobody got the request, so sending it again is safe (an
                # orchestrator subscribes again a few seconds after the broker restarted)
                if time.monotonic() >= deadline:
                    raise self._no_orchestrator(
                        f"nothing consumed the topic at the message broker for {wait:g} s: none "
                        "runs, or it is reconnecting after a broker restart") from None
                time.sleep(RESEND_EVERY_S)
            except messaging.MessagingTimeout as e:
                self._broker_gone(method, e)
                raise self._no_orchestrator(str(e)) from None
            except messaging.MessageDeliveryFailure as e:
                raise broker_unreachable(str(e)) from None

    def _no_orchestrator(self, why: str) -> Unreachable:
        return Unreachable(
            f"no reply from the orchestrator on topic {self.client.target.topic!r} ({why}); "
            "is fluidvim-orchestrator running with the same transport_url?")

    def _broker_gone(self, method: str, timeout: Exception) -> None:
        """A call whose broker died under it ends in a timeout, as if the orchestrator were
        down: when the broker is what is unreachable now, say so (and that the call may have
        been done)."""
        try:
            check_broker(self._conf, self._url, timeout=1.0)
        except Unreachable as down:
            raise Unreachable(f"no reply to {method} ({timeout}; it may have been done): "
                              f"{down}") from None



class OrchestratorAPI(CallPath):
    def __init__(self, conf, *, topic: str | None = None, version_cap: str | None = None,
                 timeout: float | None = None, transport=None, retry: int | None = 2):
        """``retry``: reconnection attempts when the broker is unreachable before the call fails
        (None = forever, oslo.messaging's default; a client should rather say so)."""
        o = conf.orchestrator
        self.retry = retry
        self._conf, self._url = conf, o.transport_url
        if transport is None:
            check_broker(conf, o.transport_url)
        self._own_transport = transport is None
        self.transport = transport or messaging.get_rpc_transport(
            conf, url=o.transport_url, allowed_remote_exmods=EXMODS)
        self.client = rpc_client(self.transport, topic or o.topic, RPC_API_VERSION,
                                 timeout or o.rpc_timeout, version_cap=version_cap)

    def namespace_api(self, api: CallPath, namespace: str, version: str,
                      version_cap: str | None = None) -> None:
        """Make ``api`` a client of ``namespace`` on this client's transport, topic, timeout,
        retry and call path."""
        api.retry, api._conf, api._url = self.retry, self._conf, self._url
        api.client = rpc_client(self.transport, self.client.target.topic, version,
                                getattr(self.client, "timeout", None), namespace=namespace,
                                version_cap=version_cap)

    def close(self) -> None:
        if self._own_transport:
            self.transport.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

def _client_method(row: Rpc):
    def send(self, kw):
        return self._call(row.method, version=row.version, timeout=kw.pop("timeout", None), **kw)

    return client_method(row, send,
                         f"RPC method {row.key} (API {row.version}; operations.RPC).")


def bind_client(cls, namespace: str):
    """Gives the client class ``cls`` (which has ``_call``) a method for every RPC method of
    ``namespace`` in the operation table that it does not write itself (a method that does more
    than pass its arguments through); ``timeout`` is the call's."""
    for row in rpc_methods(namespace):
        if row.method not in cls.__dict__:
            setattr(cls, row.method, _client_method(row))
    return cls


bind_client(OrchestratorAPI, "")
