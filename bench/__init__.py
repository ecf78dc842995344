# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The benchmarks (``python -m bench.<name>``); what they share that is not traffic
(bench/dataplane has the traffic path)."""

import signal


def _exit_on_sigterm(signum, _frame):
    """A SIGTERM unwinds the run like Ctrl-C, so its VNFs and test networks are torn down (a
    killed ``slots qoe`` run left its two QEMUs and four namespaces behind)."""
    raise SystemExit(128 + signum)


def unwind_on_sigterm() -> None:
    """Make a SIGTERM (``kill``, ``timeout``) unwind the bench's ``finally`` and ``with``
    blocks, which destroy its VNFs, loadgens and namespaces (the default kills at once)."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
