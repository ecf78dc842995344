# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Helpers of the orchestrator's RPC endpoints: :func:`rpc_method` (argument mistakes become
InvalidRequest, expected errors pass quietly), :func:`bind_endpoint` (the pass-through methods of
an endpoint, from the operation table) and the request validators (:func:`number_field`,
:func:`validate_service`).

A leaf below every endpoint module (``service``, ``mano.service``, ``osm.vim``), so that an
endpoint imports its helpers without importing the service that serves it (ARCHITECTURE.md).
"""

from __future__ import annotations

import functools
import inspect
import math
import re

import oslo_messaging as messaging

from fluidvim.vnf import limits

from .exception import ALL as EXPECTED, InvalidRequest, invalid
from .operations import Rpc, bound_arguments, rpc_methods
from .slots import validate_aliases

SERVICE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")


def number_field(field, value, lo=None, hi=None, integer=False, allow_none=False):
    if value is None and allow_none:
        return None
    try:
        v = int(value) if integer else float(value)
        if integer and float(value) != v:
            raise ValueError
    except (TypeError, ValueError):
        raise invalid(field, f"{value!r} is not {'an integer' if integer else 'a number'}") \
            from None
    if not math.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise invalid(field, f"{value!r} is out of range [{lo}, {hi}]")
    return v


def validate_service(name, click_config, *, deadline_ms=10.0, qos_quantile=0.99,
                     session_pps=100.0, max_queuing_delay_s=None, requirements=None,
                     aliases=None, min_instances=0, slots=None, memory_mb=None, vcpus=1,
                     kernel=None, max_price_per_hour=None, formula=None,
                     max_latency_ms=None) -> tuple[dict, dict]:
    """(profile, aliases) of a service registration; InvalidRequest names the field at fault."""
    if not isinstance(name, str) or not SERVICE_NAME_RE.fullmatch(name):
        raise invalid("name", f"{name!r} is not a valid service name",
                      "use 1-40 letters, digits, '_' or '-', starting with a letter or digit")
    if not isinstance(click_config, str) or not click_config.strip():
        raise invalid("click_config", "the service's VNF configuration is empty",
                      "give the Click-like configuration (e.g. --config-file etc/click/firewall.click)")
    if requirements is not None and not isinstance(requirements, dict):
        raise invalid("requirements", "must be a mapping key -> allowed values",
                      "e.g. --require accel=kvm")
    als = validate_aliases(aliases)
    if name in als:
        raise invalid(f"aliases.{name}", "a service cannot alias itself")
    if formula is not None:       # lazy: only a service that brings a formula needs its parser
        from fluidvim.evaluator.analyzers import FormulaAnalyzer
        from fluidvim.evaluator.formula import FormulaError
        try:
            FormulaAnalyzer(formula)
        except FormulaError as e:
            raise invalid("formula", str(e)) from None
    profile = {
        "name": name, "click_config": click_config,
        "deadline_ms": number_field("deadline_ms", deadline_ms, 0.001, 60000.0),
        "qos_quantile": number_field("qos_quantile", qos_quantile, 0.5, 1.0),
        "session_pps": number_field("session_pps", session_pps, 0.001, 1e9),
        "max_queuing_delay_s": number_field("max_queuing_delay_s", max_queuing_delay_s, 0.0, 86400.0,
                                       allow_none=True),
        "requirements": dict(requirements or {}),
        "min_instances": number_field("min_instances", min_instances, 0, 10000, integer=True),
        "slots": number_field("slots", slots, limits.SLOTS_MIN, limits.SLOTS_MAX, integer=True,
                              allow_none=True),
        "memory_mb": number_field("memory_mb", memory_mb, limits.MEMORY_MB_MIN,
                                  limits.MEMORY_MB_MAX, integer=True, allow_none=True),
        "vcpus": number_field("vcpus", vcpus, limits.VCPUS_MIN, limits.VCPUS_MAX, integer=True),
        "kernel": kernel,
        "max_price_per_hour": number_field("max_price_per_hour", max_price_per_hour, 0.0, None,
                                      allow_none=True),
        "formula": formula,
    }
    if max_latency_ms is not None:      # one-way, user's ingress site -> zone (hierarchy)
        profile["max_latency_ms"] = number_field("max_latency_ms", max_latency_ms, 0.0, 60000.0)
    return profile, als


def rpc_method(fn):
    """Turns argument mistakes into InvalidRequest; lets our expected errors through quietly."""
    sig = inspect.signature(fn)

    def wrapper(self, ctxt, **kwargs):
        try:
            sig.bind(self, ctxt, **kwargs)
        except TypeError as e:
            raise InvalidRequest(f"request: {fn.__name__}: {e}", field="request") from None
        return fn(self, ctxt, **kwargs)
    # (functools.wraps outside too: inspect.signature shows the method's, as the tests check)
    return functools.wraps(fn)(messaging.expected_exceptions(*EXPECTED)(wrapper))


def _passthrough(row: Rpc, service: str):
    own = [p for p in row.signature.parameters.values() if p.name != "timeout"]
    sig = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                             for n in ("self", "ctxt")] + own)

    def method(self, ctxt, **kwargs):
        kw = bound_arguments(sig, (self, ctxt), kwargs)
        del kw["self"], kw["ctxt"]
        return getattr(getattr(self, service), row.method)(**kw)

    method.__name__ = method.__qualname__ = row.method
    method.__doc__ = row.doc or f"RPC method {row.key} (API {row.version}; operations.RPC)."
    method.__signature__ = sig         # type: ignore[attr-defined]  # rpc_method checks by it
    return rpc_method(method)


def bind_endpoint(cls, namespace: str, service: str):
    """Gives the endpoint class ``cls`` an :func:`rpc_method` for every RPC method of
    ``namespace`` in the operation table that it does not write itself: it passes the table's
    parameters (defaults applied) on to ``self.<service>.<method>``."""
    for row in rpc_methods(namespace):
        if row.method not in cls.__dict__:
            setattr(cls, row.method, _passthrough(row, service))
    return cls
