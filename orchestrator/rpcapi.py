# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Versioned client API of the orchestrator (what the CLI, the OSM plugin and others call).

API versions:

* 1.0 - ping, register_service, list_services, remove_service, place, explain, list_decisions,
  resolve, list_zones, slots, list_instances, terminate.

A method added in 1.x is called with ``_call(..., version="1.x")``: the client refuses it
(``can_send_version``) when ``version_cap`` pins an older server, instead of failing remotely.
Errors the server reports on purpose (:mod:`.exception`) arrive as the same classes.
"""

from __future__ import annotations

import oslo_messaging as messaging

from .exception import OrchestratorError

RPC_API_VERSION = "1.3"       # 1.1: list_networks, create_network, delete_network;
#                               1.2: power_plan, power_hosts; 1.3: instance_action
EXMODS = ["fluidvim.orchestrator.exception"]
BROKER_FIX = ("start RabbitMQ (systemctl start rabbitmq-server), or fix [orchestrator] "
              "transport_url / --transport-url")


def check_broker(conf, url: str, timeout: float = 3.0) -> None:
    """Fail fast with a clear error when no broker host of ``url`` accepts a TCP connection
    (oslo.messaging itself would retry the connection forever, even with ``retry`` set)."""
    import socket

    parsed = messaging.TransportURL.parse(conf, url)
    if not parsed.transport.startswith(("rabbit", "amqp", "kombu")) or not parsed.hosts:
        return
    tried = []
    for h in parsed.hosts:
        port = h.port or 5672
        try:
            socket.create_connection((h.hostname or "127.0.0.1", port), timeout=timeout).close()
            return
        except OSError as e:
            tried.append(f"{h.hostname}:{port}: {e.strerror or e}")
    raise OrchestratorError("cannot reach the message broker (" + "; ".join(tried) + "): "
                            + BROKER_FIX)


class OrchestratorAPI:
    def __init__(self, conf, *, topic: str | None = None, version_cap: str | None = None,
                 timeout: float | None = None, transport=None, retry: int | None = 2):
        """``retry``: reconnection attempts when the broker is unreachable before the call fails
        (None = forever, oslo.messaging's default; a client should rather say so)."""
        o = conf.orchestrator
        self.retry = retry
        if transport is None:
            check_broker(conf, o.transport_url)
        self._own_transport = transport is None
        self.transport = transport or messaging.get_rpc_transport(
            conf, url=o.transport_url, allowed_remote_exmods=EXMODS)
        target = messaging.Target(topic=topic or o.topic, version=RPC_API_VERSION)
        self.client = messaging.get_rpc_client(self.transport, target,
                                               version_cap=version_cap,
                                               timeout=timeout or o.rpc_timeout)

    def close(self) -> None:
        if self._own_transport:
            self.transport.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method: str, version: str = "1.0", timeout: float | None = None, **kwargs):
        if not self.client.can_send_version(version):
            raise OrchestratorError(f"{method} needs orchestrator RPC API {version}; this client "
                                    f"is capped at {self.client.version_cap}")
        opts = {"version": version, "retry": self.retry}
        if timeout is not None:          # prepare(timeout=None) would mean the 60 s default
            opts["timeout"] = timeout
        cctxt = self.client.prepare(**opts)
        try:
            return cctxt.call({}, method, **kwargs)
        except messaging.MessagingTimeout as e:
            raise OrchestratorError(
                f"no reply from the orchestrator on topic {self.client.target.topic!r} "
                f"({e}); is fluidvim-orchestrator running with the same transport_url?") from None
        except messaging.MessageDeliveryFailure as e:
            raise OrchestratorError(
                f"cannot reach the message broker ({e}): {BROKER_FIX}") from None

    def ping(self, timeout: float | None = None):
        return self._call("ping", timeout=timeout)

    def register_service(self, name: str, click_config: str, **fields):
        return self._call("register_service", name=name, click_config=click_config, **fields)

    def list_services(self):
        return self._call("list_services")

    def remove_service(self, name: str):
        return self._call("remove_service", name=name)

    def place(self, service: str, location: str | None = None, deploy: bool = False):
        return self._call("place", service=service, location=location, deploy=deploy)

    def explain(self, decision_id: str):
        return self._call("explain", decision_id=decision_id)

    def list_decisions(self, limit: int = 20):
        return self._call("list_decisions", limit=limit)

    def resolve(self, service: str, client_location: str | None = None):
        return self._call("resolve", service=service, client_location=client_location)

    def list_zones(self):
        return self._call("list_zones")

    def slots(self, service: str | None = None, level: str = "zone"):
        return self._call("slots", service=service, level=level)

    def list_instances(self, service: str | None = None):
        return self._call("list_instances", service=service)

    def terminate(self, instance: str):
        return self._call("terminate", instance=instance)

    def instance_action(self, instance: str, action: str):
        """pause, unpause, reboot or rebuild one instance (zonetypes.INSTANCE_ACTIONS)."""
        return self._call("instance_action", version="1.3", instance=instance, action=action)

    def list_networks(self, zone: str | None = None):
        return self._call("list_networks", version="1.1", zone=zone)

    def create_network(self, zone: str, name: str):
        return self._call("create_network", version="1.1", zone=zone, name=name)

    def delete_network(self, zone: str, network: str):
        return self._call("delete_network", version="1.1", zone=zone, network=network)

    def power_plan(self):
        return self._call("power_plan", version="1.2")

    def power_hosts(self):
        return self._call("power_hosts", version="1.2")
