# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Every place an operation lives, checked against the operation table
(orchestrator/operations.py): the RPC clients send each method with the table's arguments and
version, each endpoint takes exactly the table's arguments and hands them to a service method
that accepts them, each namespace's version is the newest of its methods', every API operation
has its handler and its REST client method, and the REST client sends each operation's method,
path, query and body. What is derived from the table is checked the same way as what is written
by hand (the NS and VIM endpoints, the NS client's descriptor methods, the REST client's
deletes), so a method added in one place only fails here, naming it."""

import inspect
import types

import oslo_messaging as messaging
import pytest

from fluidvim.orchestrator import operations, owners
from fluidvim.orchestrator.api.app import API
from fluidvim.orchestrator.apiclient import APIClient
from fluidvim.orchestrator.exception import InvalidRequest
from fluidvim.orchestrator.mano import service as mano_service
from fluidvim.orchestrator.mano.rpcapi import NSAPI
from fluidvim.orchestrator.operations import HTTP, HTTP_BY_CLIENT, RPC, RPC_BY_KEY, Rpc
from fluidvim.orchestrator.osm import vim
from fluidvim.orchestrator.rpcapi import OrchestratorAPI
from fluidvim.orchestrator.service import Orchestrator, OrchestratorEndpoint

#: namespace -> (RPC client class, endpoint class, the attribute the endpoint serves from, the
#: class of that attribute, the namespace's version constant)
NAMESPACES = {
    "": (OrchestratorAPI, OrchestratorEndpoint, "orch", Orchestrator, None),
    "ns": (NSAPI, mano_service.NSEndpoint, "ns", mano_service.NSManager,
           mano_service.NS_API_VERSION),
    "vim": (None, vim.VimEndpoint, "vim", vim.VimService, vim.VIM_API_VERSION),
    "owners": (owners.OwnersAPI, owners.OwnersEndpoint, "owners", owners.OwnersService,
               owners.API_VERSION),
}
#: RPC methods of the orchestrator that fluidvim-api does not offer (on purpose)
RPC_ONLY = {"ping", "power_plan", "power_hosts", "instance_action"}
#: a client method's arguments when they are not the table's (NSAPI.start takes the method's
#: name and its arguments as keywords, and sends them as ``what`` and ``kwargs``)
CLIENT_ARGS = {"ns.start": (("scale",), {"name": "n1", "aspect": "a", "direction": "out"})}


def sample(row: Rpc) -> dict:
    """An argument for every parameter of ``row`` (its default, or a string naming it)."""
    out = {}
    for p in row.signature.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD or p.name == "timeout":
            continue
        out[p.name] = f"<{p.name}>" if p.default is inspect.Parameter.empty else p.default
    return out


class Sent(Exception):
    """What a client's ``_call`` was asked to send."""


def _record_call(self, method, version="1.0", timeout=None, **kwargs):
    raise Sent(method, version, kwargs)


def test_the_table_is_consistent():
    assert len(RPC_BY_KEY) == len(RPC)
    assert {r.namespace for r in RPC} == set(operations.NAMESPACES)
    assert len(operations.HTTP_BY_ID) == len(HTTP) and len(HTTP_BY_CLIENT) == len(HTTP)
    for o in HTTP:
        assert o.path.startswith("/v1/") and o.method in ("get", "post", "delete"), o.op_id
        in_path = {s[1:-1] for s in o.path.split("/") if s.startswith("{")}
        assert in_path == set(o.path_params), o.op_id
        assert (o.location is not None) == (o.code in (201, 202)), o.op_id
        assert (o.body is not None) == (o.method == "post"), o.op_id


@pytest.mark.parametrize("row", [r for r in RPC if NAMESPACES[r.namespace][0] is not None],
                         ids=lambda r: r.key)
def test_rpc_client_sends_the_table_method(row):
    cls = NAMESPACES[row.namespace][0]
    client = type("Recording", (cls,), {"_call": _record_call})
    api = object.__new__(client)
    method = getattr(api, row.method, None)
    assert method is not None, f"{cls.__name__} has no {row.method} (operations.RPC {row.key})"
    args, kwargs = CLIENT_ARGS.get(row.key, ((), sample(row)))
    with pytest.raises(Sent) as sent:
        method(*args, **kwargs)
    name, version, sent_kw = sent.value.args
    assert (name, version) == (row.method, row.version), row.key
    assert set(sent_kw) == set(sample(row)), row.key


class Recorder:
    """Stands for the service behind an endpoint: records the method called and its keyword
    arguments (an endpoint that passes positional arguments is recorded by their names)."""

    def __init__(self, cls):
        self.cls, self.calls = cls, []

    def __getattr__(self, name):
        real = getattr(self.cls, name)

        def method(*args, **kwargs):
            bound = inspect.signature(real).bind(None, *args, **kwargs)   # TypeError: mismatch
            self.calls.append((name, {k: v for k, v in bound.arguments.items() if k != "self"}))
            return types.SimpleNamespace(to_dict=dict)
        return method


@pytest.mark.parametrize("row", RPC, ids=lambda r: r.key)
def test_endpoint_takes_the_table_arguments_to_its_service(row):
    _client, endpoint, attr, service, _v = NAMESPACES[row.namespace]
    ep = object.__new__(endpoint)
    rec = Recorder(service)
    setattr(ep, attr, rec if row.method != "ping" else types.SimpleNamespace(zones={}))
    method = getattr(ep, row.method, None)
    assert method is not None, f"{endpoint.__name__} has no {row.method} ({row.key})"
    kwargs = sample(row)
    if row.key == "ns.start":
        kwargs = {"what": "scale", "kwargs": {"name": "n1", "aspect": "a", "direction": "out"}}
    method({}, **kwargs)
    if row.method != "ping":
        assert rec.calls, f"{endpoint.__name__}.{row.method} called no {service.__name__} method"
    if "**" in row.params:
        return
    with pytest.raises(messaging.ExpectedException) as e:     # what the dispatcher answers
        method({}, **kwargs, no_such_argument=1)
    assert e.value.exc_info[0] is InvalidRequest


@pytest.mark.parametrize("namespace", list(NAMESPACES))
def test_endpoints_have_the_table_methods_and_version(namespace):
    _client, endpoint, _a, _s, version = NAMESPACES[namespace]
    public = {n for n, v in vars(endpoint).items()
              if callable(v) and not n.startswith("_") and n != "target"}
    assert public == {r.method for r in operations.rpc_methods(namespace)}, endpoint.__name__
    for r in operations.rpc_methods(namespace):
        params = list(inspect.signature(getattr(endpoint, r.method)).parameters.values())[2:]
        assert params == [p for p in r.signature.parameters.values() if p.name != "timeout"], \
            f"{endpoint.__name__}.{r.method} takes other parameters than operations.RPC {r.key}"
    assert endpoint.target.version == operations.api_version(namespace)
    if version is not None:
        assert version == operations.api_version(namespace)


def test_every_api_operation_has_its_handler_and_client():
    ns_client = type(APIClient.ns_api(object.__new__(APIClient)))
    for o in HTTP:
        assert callable(getattr(API, f"op_{o.op_id}", None)), o.op_id
        space, _, name = o.client.rpartition(".")
        if space == "vim":
            assert o.client in RPC_BY_KEY, o.op_id
        elif space == "ns":
            assert o.client in RPC_BY_KEY and callable(getattr(ns_client, name, None)), o.op_id
        else:
            assert callable(getattr(APIClient, name, None)), o.op_id
    over_http = {o.client for o in HTTP}
    for r in operations.rpc_methods(""):
        assert (r.method in over_http) != (r.method in RPC_ONLY), \
            f"{r.method}: give it an operation in operations.HTTP or list it in RPC_ONLY"


def _sent_request(call):
    sent = []

    def request(self, method, path, body=None, query=None, timeout=None):
        sent.append((method, path, body, {k: v for k, v in (query or {}).items()
                                          if v is not None}))
        return []
    api = object.__new__(type("Recording", (APIClient,), {"request": request}))
    call(api)
    return sent[0]


@pytest.mark.parametrize("op", HTTP, ids=lambda o: o.op_id)
def test_rest_client_sends_the_operation(op):
    row = RPC_BY_KEY.get(op.client)
    args = sample(row) if row is not None else {k: f"<{k}>" for k in op.path_params}
    space, _, name = op.client.rpartition(".")
    if space == "vim":
        sent = _sent_request(lambda api: api.vim(name, **args))
    elif space == "ns":               # the NS client's methods that start one poll it: call
        sent = _sent_request(lambda api: api.call(op.client, **args))
    else:
        sent = _sent_request(lambda api: getattr(api, name)(**args))
    method, path, body, query = sent
    assert method == op.method.upper()
    assert path == op.path.format_map({k: f"%3C{k}%3E" for k in op.path_params})
    assert set(query) <= set(op.query)
    if op.body is None:
        assert body is None
    else:
        assert set(body) <= set(op.body["properties"]) and set(op.body["required"]) <= set(body)


def test_rest_ns_client_uses_the_table():
    """The NS client reads and validates through :meth:`APIClient.call` (its long operations
    poll; their first request is the one above)."""
    ns = APIClient.ns_api(object.__new__(APIClient))
    for name, args in [("show", {"name": "n1"}), ("list", {}), ("operations", {}),
                       ("operation", {"op_id": "o1"}),
                       ("validate", {"nsd": {}, "vnfds": [], "name": None})]:
        op = HTTP_BY_CLIENT["ns." + name]
        sent = _sent_request(lambda api, n=name, a=args: getattr(type(ns)(api), n)(**a))
        assert sent[:2] == (op.method.upper(), op.path.replace("{name}", "n1")
                            .replace("{op_id}", "o1")), name


@pytest.mark.parametrize("row", [r for r in RPC if r.key != "ns.start"], ids=lambda r: r.key)
def test_clients_take_the_table_parameters(row):
    """The RPC client's method (and the REST client's, for one the API offers) takes the
    table's parameters, with its defaults (NSAPI.start takes the method's own as keywords)."""
    clients = [NAMESPACES[row.namespace][0]]
    if row.namespace == "" and row.method in HTTP_BY_CLIENT:
        clients.append(APIClient)
    want = list(row.signature.parameters.values())
    for cls in filter(None, clients):
        got = list(inspect.signature(getattr(cls, row.method)).parameters.values())[1:]
        if cls is APIClient:              # the REST client's timeout is the session's
            want = [p for p in want if p.name != "timeout"]
        assert [(p.name, p.default) for p in got] == [(p.name, p.default) for p in want], \
            f"{cls.__name__}.{row.method}"
