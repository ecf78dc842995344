# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A real Redfish BMC emulator for tests: sushy-tools' ``sushy-emulator`` (the one OpenStack
Ironic's own CI drives), on a free localhost port, one ComputerSystem per host.

Two back ends, as sushy-tools has them:

* ``fake`` (default): its fake driver with one system per host name, each with a power state; a
  power action takes effect 1-11 s later (the emulator's model of real hardware), seen on the
  next read. With ``notify``, the emulator PUTs a system's record to a local HTTP endpoint on
  every change (its ``external_notifier``): :class:`PowerHook` turns that into callbacks
  ``on_off(name)`` / ``on_on(name)``, so a test can make a host follow its BMC (stop a Nomad
  agent when its system goes Off, start it on On).
* ``libvirt``: the emulator's libvirt driver over ``qemu:///system``, restricted to the given
  domains (``SUSHY_EMULATOR_ALLOWED_INSTANCES``): power On starts the domain, so a domain that
  cannot start is a BMC that refuses to power its host on.

Usage::

    with BMCEmulator({"host-a": "On", "host-b": "Off"}) as bmc:
        url = bmc.url("host-a")               # http://127.0.0.1:PORT/redfish/v1/Systems/<uuid>
        bmc.power("host-a")                   # "On"
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PowerHook:
    """The endpoint the fake driver notifies (``EXTERNAL_NOTIFICATION_URL``): calls ``on_off`` /
    ``on_on`` with the system's name when its reported power state changes, before answering
    (so once the emulator reports Off, the host has gone off)."""

    def __init__(self, on_off=None, on_on=None):
        self.on_off, self.on_on = on_off, on_on
        self.seen: dict[str, str] = {}
        self.events: list[tuple[float, str, str]] = []
        self.errors: list[str] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                name, state = body.get("name"), body.get("power_state")
                try:
                    if state and hook.seen.get(name) != state:
                        hook.seen[name] = state
                        hook.events.append((time.time(), name, state))
                        fn = hook.on_off if state == "Off" else hook.on_on if state == "On" \
                            else None
                        if fn is not None:
                            fn(name)
                except Exception as e:  # noqa: BLE001 - reported to the test
                    hook.errors.append(f"{name} {state}: {e!r}")
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/notify"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class BMCEmulator:
    """sushy-emulator with one system per host (module doc). ``systems``: name -> "On"/"Off"
    (fake driver) or, with ``libvirt=True``, name -> a libvirt domain's UUID (its power is the
    domain's)."""

    def __init__(self, systems: dict[str, str], *, libvirt: bool = False,
                 hook: PowerHook | None = None, port: int | None = None):
        self.libvirt = libvirt
        self.hook = hook
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="fluidvim-bmc-")
        self.proc: subprocess.Popen | None = None
        if libvirt:
            self.ids = dict(systems)                # name -> domain UUID (the system identity)
        else:
            self.ids = {name: str(uuid.uuid4()) for name in systems}
            if hook is not None:                    # what the hosts are at the start
                hook.seen.update(systems)
        self.systems = dict(systems)

    def config(self) -> str:
        # its state (the fake systems' power) in our directory: it survives stop()/start() as a
        # host's power survives its BMC's restart, and nothing is left in a shared place
        lines = ["SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'", f"SUSHY_EMULATOR_LISTEN_PORT = {self.port}",
                 f"SUSHY_EMULATOR_STATE_DIR = {self.dir!r}"]
        if self.libvirt:
            lines += ["SUSHY_EMULATOR_LIBVIRT_URI = 'qemu:///system'",
                      f"SUSHY_EMULATOR_ALLOWED_INSTANCES = {sorted(self.ids.values())!r}"]
        else:
            systems = [{"uuid": self.ids[n], "name": n, "power_state": s, "nics": [],
                        "external_notifier": self.hook is not None}
                       for n, s in self.systems.items()]
            lines += ["SUSHY_EMULATOR_FAKE_DRIVER = True",
                      f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}"]
            if self.hook is not None:
                lines.append(f"EXTERNAL_NOTIFICATION_URL = {self.hook.url!r}")
        return "\n".join(lines) + "\n"

    def url(self, name: str) -> str:
        """The host's Redfish ComputerSystem (what [host_power] bmcs maps the host to)."""
        return f"http://127.0.0.1:{self.port}/redfish/v1/Systems/{self.ids[name]}"

    def log(self) -> str:
        try:
            with open(os.path.join(self.dir, "emulator.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def start(self, timeout: float = 30) -> BMCEmulator:
        cfg = os.path.join(self.dir, "emulator.conf")
        with open(cfg, "w") as f:
            f.write(self.config())
        log = open(os.path.join(self.dir, "emulator.log"), "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "sushy_tools.emulator.main",
                                      "--config", cfg] + ([] if self.libvirt else ["--fake"]),
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sushy-emulator exited rc={self.proc.returncode}:\n{self.log()}")
            try:
                doc = self.get("/redfish/v1/Systems")
                if len(doc.get("Members", [])) >= len(self.ids):
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sushy-emulator not answering after {timeout} s:\n{self.log()}")
            time.sleep(0.1)

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
            return json.load(r)

    def power(self, name: str) -> str:
        """The system's PowerState as the emulator reports it now."""
        return self.get(f"/redfish/v1/Systems/{self.ids[name]}")["PowerState"]

    def stop(self) -> None:
        """Stop the emulator process (start() again: the systems' power is what it was)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def close(self) -> None:
        self.stop()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> BMCEmulator:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()


def answers(url: str) -> bool:
    """Whether anything answers HTTP at ``url`` (for a test's precondition)."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
        return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
