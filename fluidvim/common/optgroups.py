# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Registering a module's oslo.config group and its options on a ``ConfigOpts``, once: the one
way every ``register_opts`` of the launch core, the evaluator and the orchestrator does it."""

from __future__ import annotations

import threading

_LOCK = threading.Lock()


def register_group(conf, group, opts) -> None:
    """Register ``group`` (an ``OptGroup``) and ``opts`` in it on ``conf``, unless ``conf`` has a
    group of that name already (a second call, or nova-compute's global CONF: nothing changes).

    ``conf`` gets a group object of its own, a copy of ``group``: oslo.config keeps
    ``set_override()`` values in the ``OptGroup`` (``ConfigOpts.register_group`` copies it
    shallowly, sharing them), and two ConfigOpts in one process (launch cores of a test or a
    benchmark) must not share overrides. Thread-safe (services register lazily)."""
    with _LOCK:
        if group.name in conf:
            return
        own = type(group)(group.name, title=group.title, help=group.help)
        conf.register_group(own)
        conf.register_opts(opts, group=own)
