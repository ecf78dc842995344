# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A throwaway PostgreSQL server for tests: its own cluster (initdb) in a temporary directory, on
a free localhost port, started with pg_ctl (no systemd) and removed afterwards.

Debian's ``postgresql`` package provides the binaries (tools/bootstrap.sh installs it). As root
the server runs as the ``postgres`` user (PostgreSQL refuses root), else as the caller.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid


def bindir() -> str | None:
    """The newest installed PostgreSQL server's bin directory (Debian layout), else None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[-3]) if p.split("/")[-3].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, durable: bool = False):
        """``durable``: commits are on disk when acknowledged (PostgreSQL's default,
        ``synchronous_commit = on``), for tests that kill the server; else off (faster: a
        crash may lose the last commits)."""
        self.durable = durable
        self.bin = bindir()
        if self.bin is None:
            raise RuntimeError("no PostgreSQL server binaries (apt-get install postgresql)")
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        self.dir = tempfile.mkdtemp(prefix="fluidvim-pg-")
        self.data = os.path.join(self.dir, "data")
        self.port = _free_port()
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o700)

    def _run(self, *argv, check=True):
        cmd = [os.path.join(self.bin, argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, cwd="/")

    def start(self) -> "PgServer":
        self._run("initdb", "-D", self.data, "-U", self.user, "--auth=trust", "-E", "UTF8",
                  "--no-sync")
        return self.start_again()

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash: its backends notice and exit), then wait until the
        port is closed."""
        import signal
        import time

        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pid = int(f.readline())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"PostgreSQL on port {self.port} still answers after SIGKILL")
        # and until its backends have noticed and exited (a restart refuses to start while they
        # hold the old shared memory)
        while time.monotonic() < deadline and _children_alive(pid):
            time.sleep(0.05)

    def start_again(self) -> "PgServer":
        """Start the server of this cluster (after :meth:`kill`: crash recovery, as a service
        manager would restart it)."""
        for lock in [os.path.join(self.data, "postmaster.pid"),
                     *glob.glob(os.path.join(self.dir, ".s.PGSQL.*.lock"))]:
            _drop_stale_lock(lock)
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.dir} -c fsync=off "
                f"-c synchronous_commit={'on' if self.durable else 'off'} "
                "-c full_page_writes=off")
        r = self._run("pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "server.log"),
                      "-o", opts, "-w", "-t", "60", "start", check=False)
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {r.stdout}{r.stderr}{self.log()}")
        return self

    def log(self) -> str:
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"

    def _admin(self, sql: str) -> None:
        import sqlalchemy as sa

        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(sql)
        finally:
            engine.dispose()

    def create_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        name = "fluidvim_" + uuid.uuid4().hex[:12]
        self._admin(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, Z, ...), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _children_alive(pid: int) -> bool:
    """Whether a live (not zombie) process has ``pid`` as its parent."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 1 and int(fields[1]) == pid and fields[0] != "Z":
            return True
    return False


def _drop_stale_lock(path: str) -> None:
    """Remove a lock file (``postmaster.pid``, a socket's ``.lock``) if its postmaster is dead
    or a zombie nobody reaped yet: the server takes a zombie's pid for a running postmaster and
    refuses to start (after a kill -9 the orphan is reaped by init, whenever init gets to it)."""
    try:
        with open(path) as f:
            pid = int(f.readline())
    except (OSError, ValueError):
        return
    if _state(pid) in (None, "Z"):
        os.unlink(path)
