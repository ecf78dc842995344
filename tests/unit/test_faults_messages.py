# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The one-line errors a request cut by a dependency's death gets (issue 26 item 5), classified
from what the transport or libvirt reports (faked here: the integration tests in
tests/integration/test_faults_daemons.py kill the real daemons).

Orchestrator RPC client (orchestrator/rpcapi.py): a request the broker returned (nothing
consumes the topic: an orchestrator that is not running, or that subscribes again after a
broker restart) is sent again until the call's timeout, then named as such; a timeout while the
broker is down names the broker (host:port, never the password) and its fix; a timeout while it
answers names the orchestrator.

libvirt backend (vnf/backends.py): a launch whose ``createXML`` fails names the daemon that is
down (virtlogd when libvirt says so or when libvirtd's own call to it broke; libvirtd when the
connection to it died) as ``DependencyDown``; anything else is libvirt refusing the domain.
"""

import logging
import socket
import threading

import oslo_messaging as messaging
import pytest

from fluidvim.common.errors import DependencyDown
from fluidvim.orchestrator import conf as orchconf, rpcapi
from fluidvim.orchestrator.exception import Unreachable
from fluidvim.vnf import backends, spec as specmod

TOPIC = "fvu-faults-messages"


class FakeClient:
    """Stands for oslo.messaging's RPC client (and its prepared call context): each call takes
    the next outcome, an exception to raise or a result to return."""

    def __init__(self, outcomes, timeout: float = 10.0):
        self.outcomes, self.timeout = list(outcomes), timeout
        self.target = messaging.Target(topic=TOPIC)
        self.version_cap = None
        self.calls = []

    def can_send_version(self, version):
        return True

    def prepare(self, **opts):
        self.timeout = opts.get("timeout", self.timeout)
        return self

    def call(self, ctxt, method, **kwargs):
        self.calls.append((method, kwargs))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class FakeClock:
    """time.monotonic and time.sleep of rpcapi: sleeping moves the clock, nothing waits."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def sleep(self, s):
        self.now += s


@pytest.fixture
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr(rpcapi.time, "monotonic", c.monotonic)
    monkeypatch.setattr(rpcapi.time, "sleep", c.sleep)
    return c


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def listening():
    """A local TCP port that accepts connections (a broker that answers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def api_on(port: int, outcomes, timeout: float = 10.0):
    """An OrchestratorAPI whose transport_url names a broker at ``port`` (with a password), its
    client faked with ``outcomes``."""
    conf = orchconf.make_conf(transport_url=f"rabbit://fvuser:s3cr3tpw@127.0.0.1:{port}/",
                              topic=TOPIC)
    transport = messaging.get_rpc_transport(conf, url="fake://")
    api = rpcapi.OrchestratorAPI(conf, transport=transport)
    api.client = FakeClient(outcomes, timeout)
    return api


def undeliverable():
    return messaging.MessageUndeliverable(Exception("NO_ROUTE"), "openstack", TOPIC, None)


def test_returned_request_is_sent_again_until_an_orchestrator_takes_it(clock, listening):
    # after a broker restart the orchestrator's queue is back only when it subscribes again:
    # the requests the broker returned reached nobody, the one it took is answered
    api = api_on(listening, [undeliverable(), undeliverable(), {"kind": "launched"}])
    assert api.resolve("fr") == {"kind": "launched"}
    assert [m for m, _ in api.client.calls] == ["resolve"] * 3


def test_returned_until_the_timeout_names_the_topic_and_the_broker_restart(clock, listening):
    api = api_on(listening, [undeliverable()] * 1000, timeout=2.0)
    with pytest.raises(Unreachable) as e:
        api.resolve("fr")
    msg = str(e.value)
    assert msg.startswith(f"no reply from the orchestrator on topic {TOPIC!r} (nothing "
                          "consumed the topic at the message broker for 2 s: none runs, or it "
                          "is reconnecting after a broker restart); is fluidvim-orchestrator "
                          "running with the same transport_url?"), msg
    # sent again every RESEND_EVERY_S until the timeout, not once more
    assert len(api.client.calls) == int(2.0 / rpcapi.RESEND_EVERY_S) + 1


def test_timeout_while_the_broker_is_down_names_the_broker_not_the_orchestrator():
    # the reply the broker's kill lost: the broker is what is down now
    port = closed_port()
    api = api_on(port, [messaging.MessagingTimeout("Timed out waiting for a reply to message "
                                                   "ID 1f2e")])
    with pytest.raises(Unreachable) as e:
        api.resolve("fr")
    msg = str(e.value)
    assert msg.startswith("no reply to resolve (Timed out waiting for a reply to message ID "
                          "1f2e; it may have been done): cannot reach the message broker "
                          f"(127.0.0.1:{port}: Connection refused): start RabbitMQ "), msg
    assert msg.endswith(rpcapi.BROKER_FIX) and "\n" not in msg
    assert "s3cr3tpw" not in msg and "fvuser" not in msg


def test_namespace_clients_share_the_call_path(clock):
    """The ``ns``, ``owners`` and ``vim`` clients send and classify as the orchestrator's own:
    mandatory publishing (a returned request sent again) and the broker named when it is what
    is down (they once borrowed only ``_call`` and failed with an AttributeError there)."""
    from fluidvim.orchestrator.mano.rpcapi import NSAPI
    from fluidvim.orchestrator.owners import OwnersAPI

    port = closed_port()
    api = api_on(port, [])
    ns, owners = NSAPI(api=api), OwnersAPI(api)
    for sub in (ns, owners):
        assert sub.client.transport_options.at_least_once
        assert sub.client.target.topic == TOPIC
        sub.client = FakeClient([undeliverable(), messaging.MessagingTimeout("Timed out")])
    with pytest.raises(Unreachable) as e:
        ns.show("sc1")
    assert "cannot reach the message broker (127.0.0.1:" in str(e.value)
    assert [m for m, _ in ns.client.calls] == ["show", "show"]
    with pytest.raises(Unreachable) as e:
        owners.get("instance", ["i-1"])
    assert "cannot reach the message broker" in str(e.value) and "s3cr3tpw" not in str(e.value)


def test_timeout_while_the_broker_answers_names_the_orchestrator(listening):
    api = api_on(listening, [messaging.MessagingTimeout("Timed out")])
    with pytest.raises(Unreachable) as e:
        api.resolve("fr")
    assert str(e.value) == (f"no reply from the orchestrator on topic {TOPIC!r} (Timed out); "
                            "is fluidvim-orchestrator running with the same transport_url?")


def test_delivery_failure_names_the_broker_and_its_fix(listening):
    detail = f"Unable to connect to AMQP server on 127.0.0.1:{listening} after 2 tries: [Errno 111]"
    api = api_on(listening, [messaging.MessageDeliveryFailure(detail)])
    with pytest.raises(Unreachable) as e:
        api.resolve("fr")
    assert str(e.value) == f"cannot reach the message broker ({detail}): {rpcapi.BROKER_FIX}"


def test_check_broker_names_each_node_without_credentials():
    conf = orchconf.make_conf()
    a, b = closed_port(), closed_port()
    with pytest.raises(Unreachable) as e:
        rpcapi.check_broker(conf, f"rabbit://u:pw1@127.0.0.1:{a},u:pw1@127.0.0.1:{b}/",
                            timeout=1.0)
    msg = str(e.value)
    assert msg.startswith(f"cannot reach the message broker (127.0.0.1:{a}: Connection "
                          f"refused; 127.0.0.1:{b}: Connection refused): "), msg
    assert "pw1" not in msg
    rpcapi.check_broker(conf, "fake://")           # not AMQP: nothing to check


def test_confirm_of_a_returned_request_is_not_logged(caplog):
    # closing the channel of a returned request, py-amqp ignores its unread Basic.Ack: not
    # worth a warning (a CLI would print it); any other method ignored still is
    from amqp import abstract_channel, spec

    log = logging.getLogger("amqp")
    with caplog.at_level(logging.WARNING, logger="amqp"):
        log.warning(abstract_channel.IGNORED_METHOD_DURING_CHANNEL_CLOSE, spec.Basic.Ack, 1)
        log.warning(abstract_channel.IGNORED_METHOD_DURING_CHANNEL_CLOSE, spec.Basic.Deliver, 1)
    assert [r.args[0] for r in caplog.records] == [spec.Basic.Deliver]


# -- libvirt backend --
class FakeLibvirtConn:
    """A connection to libvirtd whose ``createXML`` fails with ``error``; alive until then, and
    ``alive_after`` once it failed (False: libvirtd died during the call)."""

    def __init__(self, error, alive_after: bool = True):
        self.error, self.alive_after, self.called = error, alive_after, False

    def isAlive(self):
        return self.alive_after if self.called else True

    def createXML(self, xml, flags):
        self.called = True
        raise self.error


def libvirt_error(libvirt, message: str, domain: int):
    """A libvirtError as libvirt raises it: ``err`` is (code, domain, message, level, ...)."""
    e = libvirt.libvirtError(message)
    e.err = (libvirt.VIR_ERR_SYSTEM_ERROR, domain, message, libvirt.VIR_ERR_ERROR,
             None, None, None, -1, -1)
    return e


def spawn_with(libvirt, conn):
    """LibvirtBackend.spawn of a small VNF on ``conn`` (no libvirtd)."""
    be = backends.LibvirtBackend.__new__(backends.LibvirtBackend)
    be.libvirt, be.uri, be.emulator, be._expected = libvirt, "qemu:///system", "/qemu", set()
    be._conn, be._conn_lock = conn, threading.Lock()
    spec = specmod.VNFSpec(uuid="6f1c2b9e-3d4a-4c5b-9e8f-0a1b2c3d4e5f", name="fw", kernel="/k",
                           control_socket="/c", console_log="/l", machine="pc")
    return be.spawn(spec)


@pytest.mark.parametrize("message, domain, alive_after, what", [
    # virtlogd down before the launch: libvirtd cannot connect to it
    ("Failed to connect socket to '/run/libvirt/virtlogd-sock': Connection refused", "RPC",
     True, "virtlogd"),
    # virtlogd killed while libvirtd waited on it for this launch (session 15's gap)
    ("Cannot recv data: Connection reset by peer", "RPC", True, "virtlogd"),
    ("End of file while reading data: Input/output error", "RPC", True, "virtlogd"),
    # libvirtd itself killed during the call: the connection to it is dead
    ("Cannot recv data: Connection reset by peer", "RPC", False, "libvirtd"),
])
def test_launch_cut_by_a_daemon_names_it(message, domain, alive_after, what):
    libvirt = pytest.importorskip("libvirt")
    err = libvirt_error(libvirt, message, getattr(libvirt, f"VIR_FROM_{domain}"))
    with pytest.raises(DependencyDown) as e:
        spawn_with(libvirt, FakeLibvirtConn(err, alive_after))
    fix = backends.VIRTLOGD_FIX if what == "virtlogd" else backends.LIBVIRTD_FIX
    assert e.value.what == what and e.value.fix == fix
    assert str(e.value).startswith(f"{what} is not running or not reachable (libvirt could not "
                                   f"start the domain: {message}"), str(e.value)
    assert "\n" not in str(e.value)


def test_domain_libvirt_refuses_is_a_launch_error():
    libvirt = pytest.importorskip("libvirt")
    err = libvirt_error(libvirt, "unsupported configuration: machine type 'pc' not found",
                        libvirt.VIR_FROM_QEMU)
    with pytest.raises(backends.LaunchError) as e:
        spawn_with(libvirt, FakeLibvirtConn(err))
    assert str(e.value) == ("libvirt refused the domain: unsupported configuration: machine "
                            "type 'pc' not found")
