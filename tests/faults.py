# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The load of the fault tests (issue 26 item 5; bench/results/faults.md): requests made one
after the other in a thread while a dependency is killed and brought back, each outcome kept so
the test can check that every one completed or failed with a clear error.

Used by tests/integration/test_faults_load.py, tests/integration/test_faults_daemons.py and
tests/e2e/test_faults_nomad.py.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Callable

from fluidvim.vnf import states


class Outcomes:
    """Calls ``call(i)`` (i = 1, 2, ...) one after the other in a thread until :meth:`stop`, or
    until ``limit`` calls completed; each outcome is kept in order: ("ok", result) or ("error",
    exception). After an error the thread waits ``pause`` seconds (a dependency that is down
    fails fast: no busy loop)."""

    def __init__(self, call: Callable[[int], Any], *, pause: float = 0.05,
                 limit: int | None = None):
        self.call, self.pause, self.limit = call, pause, limit
        self.outcomes: list[tuple[str, Any]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Outcomes:
        self.thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set() and (self.limit is None or len(self.results()) < self.limit):
            i += 1
            try:
                self.outcomes.append(("ok", self.call(i)))
            except Exception as e:  # noqa: BLE001 - every outcome is checked by the test
                self.outcomes.append(("error", e))
                time.sleep(self.pause)

    def wait(self, pred, timeout: float = 60, what: str = "an outcome") -> float:
        """Waits until ``pred(outcomes)`` holds; the monotonic time it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.outcomes):
                return time.monotonic()
            time.sleep(0.02)
        raise AssertionError(f"timed out ({timeout} s) waiting for {what}: {self.outcomes[-3:]}")

    def ok_after(self, n: int, timeout: float = 60, what: str = "a request that completes"
                 ) -> float:
        """Waits for a call completing after the first ``n`` outcomes; its monotonic time."""
        return self.wait(lambda o: any(k == "ok" for k, _ in o[n:]), timeout, what)

    def error_after(self, n: int, timeout: float = 60, what: str = "a request that fails"
                    ) -> float:
        return self.wait(lambda o: any(k == "error" for k, _ in o[n:]), timeout, what)

    def errors(self, start: int = 0, end: int | None = None) -> list[Exception]:
        return [v for k, v in self.outcomes[start:end] if k == "error"]

    def results(self, start: int = 0, end: int | None = None) -> list:
        return [v for k, v in self.outcomes[start:end] if k == "ok"]

    def stop(self, timeout: float = 120) -> None:
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=timeout)
        assert not self.thread.is_alive(), f"a request still in flight after {timeout} s"


def report(name: str, t0: float, recovered: float, errors: list, note: str) -> None:
    """The line bench/results/faults.md collects: ``FAULT <name> recovery_ms=<n> ...``."""
    print(f"\nFAULT {name} recovery_ms={(recovered - t0) * 1000:.0f} ({note}) "
          f"errors_while_down={len(errors)}")


def qemu_pids(run_dir: str) -> set[int]:
    """QEMU processes whose command line names ``run_dir`` (this manager's VNFs)."""
    pids = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and b"qemu" in os.path.basename(argv[0]) and \
                any(run_dir.encode() in a for a in argv):
            pids.add(int(pid))
    return pids


def check_orchestrator(orch, rpc, load: Outcomes, service: str, cut: int = 0) -> None:
    """After recovery: every session granted names a live instance, the instances are exactly
    the running VNFs, the QEMUs of the run dir are theirs, and the orchestrator's slots are
    what the VNFs report. ``cut``: requests whose reply a fault cut (the orchestrator may have
    granted them: up to that many sessions more may be held)."""
    instances = {i["id"]: i for i in rpc.list_instances(service)}
    granted = {r["instance"] for r in load.results()}
    assert granted <= set(instances), f"sessions on lost instances: {granted - set(instances)}"
    mgr = orch.manager
    running = {r.id: r for r in mgr.list() if r.status == states.RUNNING}
    assert set(running) == set(instances), (set(running), set(instances))
    assert qemu_pids(mgr.run_dir) == {r.pid for r in running.values()}, "orphan or lost QEMU"
    # the registry's free slots: each VNF's own report less the sessions granted on it (held
    # as reservations: these sessions carry no traffic)
    held = collections.Counter(r["instance"] for r in load.results())
    expected = {v: mgr.stats(v)["slots"]["free"] - held[v] for v in running}

    def unexplained(known) -> int | None:
        """Sessions held beyond the granted ones (None: a VNF unknown, or more free slots
        than the VNF reports)."""
        gaps = [free - known.get(v, free + 1) for v, free in expected.items()]
        return sum(gaps) if all(g >= 0 for g in gaps) else None

    deadline = time.monotonic() + 15
    while True:
        known = rpc.slots(service, "instance")[service]
        extra = unexplained(known)
        if extra == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert extra is not None and extra <= cut, ({v: known.get(v) for v in expected}, expected,
                                                f"cut={cut}")
    assert sum(held.values()) == load.limit


class PrivateRabbit:
    """A RabbitMQ node of one test's own: the host's rabbitmq-server, run as its ``rabbitmq``
    user (and Erlang cookie) with its own node name, AMQP and distribution ports, Mnesia and log
    dirs in a directory of its own under /tmp (the ``rabbitmq`` user cannot enter pytest's
    tmp_path), no plugins. Killing it touches no other test's broker. Boots in about 7 s on this
    project's 2-core machine. :meth:`stop` kills it and removes its directory."""

    def __init__(self, ports: tuple[int, int]):
        self.port, self.dist_port = ports
        self.node = f"fvfault{self.port}@localhost"
        self.url = f"rabbit://guest:guest@127.0.0.1:{self.port}/"
        self.proc: subprocess.Popen | None = None
        self.work = tempfile.mkdtemp(prefix=f"fvrabbit-{self.port}-")
        shutil.chown(self.work, "rabbitmq", "rabbitmq")

    def start(self, timeout: float = 120) -> PrivateRabbit:
        env = {"PATH": os.environ["PATH"], "HOME": "/var/lib/rabbitmq",
               "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
               "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_DIST_PORT": str(self.dist_port),
               "RABBITMQ_MNESIA_BASE": f"{self.work}/mnesia", "RABBITMQ_LOG_BASE": f"{self.work}/log",
               "RABBITMQ_PID_FILE": f"{self.work}/pid",
               "RABBITMQ_ENABLED_PLUGINS_FILE": f"{self.work}/enabled_plugins",
               "RABBITMQ_CONFIG_FILE": f"{self.work}/none"}
        with open(f"{self.work}/out.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["setpriv", "--reuid=rabbitmq", "--regid=rabbitmq", "--init-groups",
                 "rabbitmq-server"], env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop(remove=False)
                    raise AssertionError(f"RabbitMQ node {self.node} did not start:\n"
                                         + self.log_tail()) from None
                time.sleep(0.1)

    def log_tail(self, n: int = 3000) -> str:
        parts = []
        for name in ("out.log", f"log/{self.node}.log"):
            with contextlib.suppress(OSError), open(f"{self.work}/{name}", errors="replace") as f:
                parts.append(f.read()[-n:])
        return "\n".join(parts)

    def beam_pid(self) -> int:
        """The node's Erlang VM (``beam.smp``, the broker itself) in the script's session."""
        for pid in os.listdir("/proc"):
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/comm") as f:
                    comm = f.read().strip()
                if comm.startswith("beam") and int(fields[3]) == self.proc.pid:
                    return int(pid)
        raise AssertionError(f"no beam.smp under rabbitmq-server pid {self.proc.pid}")

    def kill(self) -> None:
        """``kill -9`` of the broker (its Erlang VM); the script around it then ends."""
        os.kill(self.beam_pid(), signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, remove: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        if remove:
            shutil.rmtree(self.work, ignore_errors=True)


class PrivateLibvirtd:
    """A libvirtd (and a virtlogd) of one test's own, so that killing either touches no other
    test's domains: the host's daemons in a mount namespace of their own (a ``sleep`` holds
    it) where /run/libvirt (virtlogd's socket too), /var/lib/libvirt, /var/cache/libvirt (the
    host's QEMU capabilities copied: no re-probe) and /etc/libvirt (a copy without domains) are
    directories of this test's; libvirtd's socket is in that directory, :attr:`uri` names it.
    Started under ``tini -s`` as tools/bootstrap.sh starts the host's (it reaps the QEMUs
    libvirt daemonizes). :meth:`stop` ends the daemons and the namespace and removes the
    directory (its domains must be gone by then)."""

    def __init__(self):
        self.work = tempfile.mkdtemp(prefix="fvlibvirtd-")
        self.uri = f"qemu:///system?socket={self.work}/sock/libvirt-sock"
        for d in ("run", "lib/qemu", "cache/qemu", "sock"):
            os.makedirs(f"{self.work}/{d}")
        shutil.copytree("/etc/libvirt", f"{self.work}/etc", symlinks=True)
        for d in ("qemu", "qemu/autostart", "qemu/networks/autostart"):
            for f in glob.glob(f"{self.work}/etc/{d}/*.xml"):
                os.unlink(f)
        with contextlib.suppress(FileNotFoundError):
            shutil.copytree("/var/cache/libvirt/qemu/capabilities",
                            f"{self.work}/cache/qemu/capabilities")
        with open(f"{self.work}/etc/libvirtd.conf", "w") as f:
            f.write(f'unix_sock_dir = "{self.work}/sock"\n')
        binds = " && ".join(f"mount --bind {self.work}/{src} {dst}" for src, dst in (
            ("run", "/run/libvirt"), ("lib", "/var/lib/libvirt"),
            ("cache", "/var/cache/libvirt"), ("etc", "/etc/libvirt")))
        # the daemons must not enter the namespace before the binds are in place: they would
        # take the host's /run/libvirt (virtlogd unlinks the host's socket to bind its own)
        self.holder = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "--", "sh", "-c",
             f"{binds} && echo bound && exec sleep infinity"], start_new_session=True,
            stdout=subprocess.PIPE, text=True)
        if self.holder.stdout.readline().strip() != "bound":
            self.holder.wait(timeout=30)
            shutil.rmtree(self.work, ignore_errors=True)
            raise AssertionError(f"private libvirt namespace: bind mounts failed "
                                 f"(exit {self.holder.returncode})")
        self.procs: dict[str, subprocess.Popen] = {}

    def _spawn(self, daemon: str, *args: str) -> None:
        with open(f"{self.work}/{daemon}.log", "ab") as log:
            self.procs[daemon] = subprocess.Popen(
                ["nsenter", "-t", str(self.holder.pid), "-m", "--", "tini", "-s", "--", daemon,
                 "--pid-file", f"{self.work}/{daemon}.pid", *args], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout: float = 60) -> PrivateLibvirtd:
        """Starts virtlogd (unless it runs) and libvirtd; returns once both answer."""
        import libvirt

        if "virtlogd" not in self.procs or self.procs["virtlogd"].poll() is not None:
            self.start_virtlogd()
        self._spawn("libvirtd", "--config", f"{self.work}/etc/libvirtd.conf")
        deadline = time.monotonic() + timeout
        libvirt.registerErrorHandler(lambda ctx, err: None, None)
        while True:
            try:
                libvirt.open(self.uri).close()
                return self
            except libvirt.libvirtError:
                if self.holder.poll() is not None or self.procs["libvirtd"].poll() is not None \
                        or time.monotonic() > deadline:
                    self.stop(remove=False)
                    raise AssertionError("private libvirtd did not start:\n"
                                         + self.log_tail("libvirtd")) from None
                time.sleep(0.05)

    def start_virtlogd(self, timeout: float = 30) -> None:
        """Starts virtlogd; returns once its socket accepts."""
        self._spawn("virtlogd")
        sock = f"{self.work}/run/virtlogd-sock"
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as s:
                s.connect(sock)
                return
            if self.procs["virtlogd"].poll() is not None or time.monotonic() > deadline:
                raise AssertionError("private virtlogd did not start:\n"
                                     + self.log_tail("virtlogd"))
            time.sleep(0.05)

    def log_tail(self, daemon: str) -> str:
        with open(f"{self.work}/{daemon}.log", errors="replace") as f:
            return f.read()[-3000:]

    def kill(self, daemon: str = "libvirtd") -> None:
        """``kill -9`` of the daemon; the QEMUs run on (tini ends with it)."""
        with open(f"{self.work}/{daemon}.pid") as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)
        self.procs[daemon].wait(timeout=30)

    def stop(self, remove: bool = True) -> None:
        for p in (*self.procs.values(), self.holder):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=30)
        if remove:
            shutil.rmtree(self.work, ignore_errors=True)
