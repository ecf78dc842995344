# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim-nova-compute``: nova-compute (``nova.cmd.compute:main``, the same arguments) whose
``compute_driver = fluidvim.UnikernelDriver`` resolves wherever fluidvim is installed.

Nova loads ``compute_driver = X`` as ``nova.virt.X`` (``nova.virt.driver.load_compute_driver``
prefixes every value with ``nova.virt.``: a dotted path outside ``nova.virt`` is not accepted),
so the wheel ships the one sub-package ``nova/virt/fluidvim`` (setup.py ``SHIM_DIRS``). Installed
into nova's own environment that directory lands inside nova's package and nothing more is needed:
plain ``nova-compute`` finds it. A distro nova is different: nova lives in
``/usr/lib/python3/dist-packages`` and fluidvim in a venv made with ``--system-site-packages``
(pip may not write the distro's directories). There ``nova`` is a regular package of the distro's
directory, its ``nova.virt.__path__`` names only that directory, and the shim beside it in the
venv is never searched. This command runs under the venv's interpreter, adds every
``<sys.path entry>/nova/virt`` that holds the shim to ``nova.virt.__path__`` (after nova's own, so
nothing of nova is shadowed) and then runs nova-compute's own ``main``::

    ExecStart=/opt/fluidvim/bin/fluidvim-nova-compute --config-file /etc/nova/nova.conf

(etc/systemd/nova-compute.service.d/fluidvim.conf is the drop-in for the distro's unit).
"""

from __future__ import annotations

import os
import sys

SHIM = "fluidvim"     # nova/virt/<SHIM>/__init__.py: the sub-package setup.py ships


def shim_dirs(path: list[str] | None = None) -> list[str]:
    """The ``<entry>/nova/virt`` directories of ``path`` (default ``sys.path``) holding the shim."""
    found = []
    for entry in sys.path if path is None else path:
        virt = os.path.join(entry or os.getcwd(), "nova", "virt")
        if os.path.isfile(os.path.join(virt, SHIM, "__init__.py")) and virt not in found:
            found.append(virt)
    return found


def extend_nova_virt(path: list[str] | None = None) -> list[str]:
    """Make ``nova.virt.fluidvim`` importable: append the shim's directories that nova.virt's
    ``__path__`` lacks. Returns what was added (nothing when nova and fluidvim share one
    site-packages)."""
    import nova.virt

    have = {os.path.realpath(p) for p in nova.virt.__path__}
    added = [d for d in shim_dirs(path) if os.path.realpath(d) not in have]
    for d in added:
        nova.virt.__path__.append(d)
    return added


def main():
    # nova.cmd first: importing it applies nova's monkey patching (eventlet releases) before
    # anything else is imported, as nova-compute's own console script does
    from nova.cmd import compute

    extend_nova_virt()
    return compute.main()


if __name__ == "__main__":
    sys.exit(main())
