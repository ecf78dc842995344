# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""What every ``fluidvim`` command module shares (:mod:`fluidvim.cmd.cli`, :mod:`fluidvim.cmd.demo`,
the orchestrator's :mod:`fluidvim.orchestrator.clicommon`): a leaf with nothing but the standard
library at import, so the command modules import it instead of each other (ARCHITECTURE.md).
"""

from __future__ import annotations

import logging


def time_ago(at: float | None) -> str:
    """``at`` (epoch seconds) as "N s ago"; None (never happened) as "never"."""
    import time

    return "never" if at is None else f"{max(0.0, time.time() - at):.0f} s ago"


def setup_logging(conf, verbose):
    """Log to stderr: warnings, everything with -v.

    A configuration carrying oslo.log's options (the orchestrator's: its commands load
    oslo.messaging, hence oslo.log, anyway) is set up by oslo.log. The launch core's (``vnf``,
    ``pool``, ``status``, ``demo``) uses the standard library: oslo.log would be ~40 ms of a
    ``fluidvim vnf list`` that should take 150 ms, and the launch core's loggers are standard ones.
    """
    if "debug" not in conf:
        logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                            format="%(asctime)s.%(msecs)03d %(process)d %(levelname)s %(name)s "
                                   "%(message)s", datefmt="%Y-%m-%d %H:%M:%S")
        return
    from oslo_log import log as oslo_logging

    conf.set_override("debug", verbose)
    if not verbose:
        conf.set_override("default_log_levels",
                          ["fluidvim=WARNING", "qemu=WARNING", "pyroute2=WARNING"])
    oslo_logging.setup(conf, "fluidvim")


def opt_help(opts, name: str, group: str) -> str:
    """argparse help of a flag that overrides oslo.config option ``[group] name`` (one of
    ``opts``): the option's own help and default, so that both are written once, on the option
    (the configuration sample and ``--help`` say the same)."""
    opt = next(o for o in opts if o.name == name)
    default = "unset" if opt.default is None else opt.default
    return f"{opt.help} Default: [{group}] {name}, {default}.".replace("%", "%%")
