# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Hypervisor backends of the launch core: a direct QEMU process, or a libvirt domain.

Both start a VNF from a :class:`~fluidvim.vnf.spec.VNFSpec` (the mapping itself lives in ``spec``),
connect its control channel *before* the guest runs (so the ``ready`` event cannot be missed),
detect its death, find running VNFs again after a restart, and remove everything they created.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time

from fluidvim.common.errors import DependencyDown

from . import cgroups, conf as vnfconf, netdev, spec as specmod, states
from .control import ControlChannel

LOG = logging.getLogger(__name__)

KVM_GET_API_VERSION = 0xAE00


def detect_accel(requested: str = "auto") -> tuple[str, str]:
    """Return (accel, why): KVM when /dev/kvm opens and answers, else TCG."""
    if requested == "tcg":
        return "tcg", "requested"
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
        try:
            api = fcntl.ioctl(fd, KVM_GET_API_VERSION)
        finally:
            os.close(fd)
        if api == 12:
            return "kvm", "/dev/kvm works"
        why = f"/dev/kvm API version {api} (need 12)"
    except OSError as e:
        why = f"/dev/kvm unusable: {e.strerror}"
    if requested == "kvm":
        raise RuntimeError(f"accel=kvm requested but {why}; set [vnf] accel = auto or tcg")
    LOG.warning("no KVM (%s): VNFs run under TCG", why)
    return "tcg", why


def host_tsc_khz() -> int | None:
    """The host's TSC rate in kHz, for TCG guests (whose TSC is the host's and who have no
    kvmclock or CPUID leaf to calibrate against). None unless the TSC is constant."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().split("\n\n", 1)[0]
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if "constant_tsc" not in fields.get("flags", "").split() or "cpu MHz" not in fields:
        return None
    return int(float(fields["cpu MHz"]) * 1000)


class LaunchError(RuntimeError):
    """A VNF failed to start; everything it had created has been removed."""


class Backend:
    name = ""                  # one of states.BACKENDS
    machine = ""
    has_qmp = False            # a QMP socket in the VNF's run directory (paths()["qmp_socket"])

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._death_cb = None

    def vnf_dir(self, vnf_uuid: str) -> str:
        return os.path.join(self.run_dir, vnf_uuid)

    def paths(self, vnf_uuid: str) -> dict:
        d = self.vnf_dir(vnf_uuid)
        return {"control_socket": os.path.join(d, "ctl.sock"),
                "console_log": os.path.join(d, "console.log"),
                "qmp_socket": os.path.join(d, "qmp.sock") if self.has_qmp else None}

    def on_death(self, callback) -> None:
        """``callback(vnf_uuid, reason)`` runs (in a backend thread) when a VNF dies on its own."""
        self._death_cb = callback

    def _died(self, vnf_uuid: str, reason: str) -> None:
        if self._death_cb:
            try:
                self._death_cb(vnf_uuid, reason)
            except Exception:  # noqa: BLE001 - a callback bug must not kill the watcher
                LOG.exception("death callback for %s failed", vnf_uuid)

    # -- shared steps --
    def prepare(self, spec: specmod.VNFSpec) -> None:
        """Create the run directory (with a copy of the spec, for adopting orphans).

        Taps are created by QEMU (``-netdev tap,ifname=``) or libvirt (``<target dev=>``), not
        here: they live exactly as long as the hypervisor process, so even a ``kill -9`` leaks
        no tap. :meth:`plug` attaches them to their bridges once the VNF has booted.
        """
        d = self.vnf_dir(spec.uuid)
        os.makedirs(d, mode=0o750, exist_ok=True)
        with open(os.path.join(d, "spec.json"), "w") as f:
            json.dump(spec.to_dict(), f)

    def record_spec(self, spec: specmod.VNFSpec, spec_json: str | None = None) -> None:
        """Replace the spec kept with a running VNF (a claimed warm shell's new name, taps and
        MACs) so that adopting it as an orphan after a restart finds its taps. ``spec_json`` is
        ``json.dumps(spec.to_dict())`` when the caller has it already (the warm path).

        Both backends keep this file; a libvirt domain's <metadata> keeps the spec it was
        created with (virDomainSetMetadata would cost ~2-4 ms on the warm path): recovery reads
        the file first and the metadata only when the run directory is gone."""
        path = os.path.join(self.vnf_dir(spec.uuid), "spec.json")
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
        try:
            os.write(fd, (spec_json or json.dumps(spec.to_dict())).encode())
        finally:
            os.close(fd)
        os.replace(path + ".tmp", path)

    @staticmethod
    def plug(spec: specmod.VNFSpec) -> None:
        """Attach each NIC's tap to its Linux or OVS bridge (NICs without a bridge stay
        unplugged): :func:`fluidvim.vnf.netdev.attach`."""
        for nic in spec.nics:
            netdev.attach(nic)

    def cleanup(self, spec: specmod.VNFSpec) -> None:
        """Remove leftover taps (normally gone with their process), the OVS ports of OVS NICs
        (a tap's Port row outlives the tap), the VNF's cgroup and the run directory."""
        cgroups.remove(cgroups.dirs(spec.uuid))
        for nic in spec.nics:
            if nic.ovs is not None:
                try:
                    netdev.detach(nic)
                except Exception:  # noqa: BLE001
                    LOG.exception("could not remove OVS port %s", nic.tap)
            try:
                netdev.delete_link(nic.tap)
            except Exception:  # noqa: BLE001
                LOG.exception("could not delete tap %s", nic.tap)
        shutil.rmtree(self.vnf_dir(spec.uuid), ignore_errors=True)

    def connect(self, spec: specmod.VNFSpec) -> ControlChannel:
        return ControlChannel(spec.control_socket, spec.name or spec.uuid).connect()

    def console_output(self, spec: specmod.VNFSpec, max_bytes: int = 65536) -> str:
        try:
            with open(spec.console_log, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - max_bytes))
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    # -- per backend --
    def spawn(self, spec: specmod.VNFSpec) -> tuple[ControlChannel, int | None]:
        raise NotImplementedError

    def alive(self, spec: specmod.VNFSpec, pid: int | None) -> bool:
        raise NotImplementedError

    def kill(self, spec: specmod.VNFSpec, pid: int | None) -> None:
        raise NotImplementedError

    def pause(self, spec: specmod.VNFSpec, pid: int | None) -> None:
        """Stop the VNF's vCPUs (memory, taps and QEMU stay)."""
        raise NotImplementedError

    def unpause(self, spec: specmod.VNFSpec, pid: int | None) -> None:
        """Let a paused VNF's vCPUs run again."""
        raise NotImplementedError

    def discover(self) -> list[tuple[str, int | None]]:
        """(VNF uuid, pid or None) of the running VNFs of this run directory that this backend
        can see (used when the state store lost them)."""
        return []

    def metadata_spec(self, vnf_uuid: str) -> specmod.VNFSpec | None:
        """The spec a running VNF was created with, as the backend keeps it (None: it keeps
        none; the run directory's spec.json is the other source)."""
        return None

    def watch(self, spec: specmod.VNFSpec, pid: int | None) -> None:
        """Start watching a running VNF for death."""

    def set_vcpu_nice(self, spec: specmod.VNFSpec, pid: int | None, nice: int) -> None:
        """Lower the VNF's vCPU threads to ``nice`` ([vnf] vcpu_nice); a no-op where the
        backend does not own the process (libvirt: its domain's <cputune>)."""

    def close(self) -> None:
        pass


class QemuBackend(Backend):
    """One QEMU process per VNF on ``microvm``; control channel and QMP as inherited sockets."""

    name = states.QEMU
    machine = "microvm"
    has_qmp = True

    def __init__(self, run_dir: str, qemu_binary: str = specmod.QEMU_AUTO,
                 vhost_net_binary: str | None = None):
        super().__init__(run_dir)
        self.qemu_binary = qemu_binary          # as configured: a name, a path or "auto"
        self.vhost_net_binary = vhost_net_binary
        self._vhost: dict[str, subprocess.Popen] = {}   # uuid -> its fluidvim-vhost-net
        self._qemu_paths: dict[tuple[str, str], str] = {}   # (machine, accel) -> resolved path
        self._procs: dict[str, subprocess.Popen] = {}
        self._sel = selectors.DefaultSelector()
        self._sel_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._watched: dict[str, int] = {}       # uuid -> pidfd
        self._expected: set[str] = set()         # deaths we caused (kill)
        self._watcher = None
        self._closing = False

    def _qemu_path(self, spec) -> str:
        """The QEMU that runs ``spec`` (spec.qemu_binary), looked up on PATH once per shape."""
        key = (spec.machine, spec.accel)
        path = self._qemu_paths.get(key)
        if path is None:
            qemu = specmod.qemu_binary(spec, self.qemu_binary)
            path = self._qemu_paths[key] = shutil.which(qemu) or qemu
        return path

    @staticmethod
    def _listen(path: str) -> socket.socket:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen(8)
        return s

    @staticmethod
    def _cgroup(spec) -> list[str] | None:
        """The VNF's cgroup with the limits of its spec (from the flavor: memory_mb, vcpus;
        vnf/cgroups.py); None, with a warning, where they cannot be enforced."""
        try:
            return cgroups.create(spec.uuid, spec.memory_mb, spec.vcpus)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise LaunchError(f"cannot set up the VNF's resource limits: {e}") from None
            # not root, or a read-only hierarchy (containers): said, never silent
            LOG.warning("VNF %s: resource limits NOT enforced: %s", spec.name, e)
            return None

    def spawn(self, spec):
        group = self._cgroup(spec)
        ctl = self._listen(spec.control_socket)
        qmp = self._listen(spec.qmp_socket)
        stderr_path = os.path.join(self.vnf_dir(spec.uuid), "qemu.stderr")
        try:
            if spec.net_backend == specmod.NET_VHOST_USER and spec.nics:
                self._start_vhost(spec)
            argv = specmod.qemu_argv(spec, qemu=self._qemu_path(spec), control_fd=ctl.fileno(),
                                     qmp_fd=qmp.fileno())
            with open(stderr_path, "wb") as err:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=err,
                                        pass_fds=(ctl.fileno(), qmp.fileno()),
                                        start_new_session=True)
            if group:   # before the guest touches its memory: QEMU maps guest RAM lazily
                try:
                    cgroups.add(group, proc.pid)
                except OSError as e:
                    proc.kill()
                    proc.wait()
                    raise LaunchError(f"cannot move QEMU into its cgroup: {e}") from None
        except BaseException:
            self._stop_vhost(spec.uuid, kill=True)
            if group:
                cgroups.remove(group)
            raise
        finally:
            ctl.close()
            qmp.close()
        self._procs[spec.uuid] = proc
        try:
            ch = self.connect(spec)
        except OSError as e:
            proc.wait(timeout=10)
            raise LaunchError(f"QEMU exited at start ({e.strerror}): "
                              f"{self._stderr(spec)}") from None
        return ch, proc.pid

    def _start_vhost(self, spec) -> None:
        """Start fluidvim-vhost-net for ``spec``'s NICs on sockets the launcher already listens
        on (so QEMU, started next, can connect at once); it creates the taps and exits when
        QEMU hangs up."""
        exe = self.vhost_net_binary
        if not exe or not os.access(exe, os.X_OK):
            raise LaunchError(f"net_backend vhost-user: no fluidvim-vhost-net at {exe!r}; build "
                              "it (make -C vhost) or set [vnf] vhost_net_binary, or use "
                              "[vnf] net_backend = tap")
        socks = [self._listen(specmod.vhost_socket(spec, i)) for i in range(len(spec.nics))]
        try:
            with open(os.path.join(self.vnf_dir(spec.uuid), "vhost.stderr"), "wb") as err:
                self._vhost[spec.uuid] = subprocess.Popen(
                    [exe] + [f"{s.fileno()}:{nic.tap}" for s, nic in zip(socks, spec.nics)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    pass_fds=[s.fileno() for s in socks], start_new_session=True)
        except OSError as e:
            raise LaunchError(f"cannot start {exe}: {e.strerror}") from None
        finally:
            for s in socks:
                s.close()

    def set_vcpu_nice(self, spec, pid: int | None, nice: int) -> None:
        """Give every thread of the VNF's QEMU but its main thread (the vCPUs, and QEMU's RCU
        and worker threads, which do little) ``nice``: the main thread moves the frames."""
        if not pid or not nice:
            return
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
        except FileNotFoundError:
            return
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except (ProcessLookupError, PermissionError) as e:
                LOG.debug("VNF %s: nice %d on thread %d: %s", spec.name, nice, tid, e)

    def helper_pids(self, vnf_uuid: str) -> list[int]:
        """Processes besides QEMU that a VNF started here runs on (its fluidvim-vhost-net)."""
        proc = self._vhost.get(vnf_uuid)
        return [proc.pid] if proc is not None and proc.poll() is None else []

    VHOST_EXIT_GRACE_S = 1.0

    def _stop_vhost(self, vnf_uuid: str, kill: bool = False) -> None:
        """Reap the VNF's fluidvim-vhost-net: it exits within milliseconds of QEMU's sockets
        closing (``kill``: QEMU never started). One still there after VHOST_EXIT_GRACE_S is
        waiting for a QEMU that never connected (it died at start): killed, it holds nothing."""
        proc = self._vhost.pop(vnf_uuid, None)
        if proc is None:
            return
        if kill:
            proc.kill()
        try:
            proc.wait(timeout=self.VHOST_EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def cleanup(self, spec):
        self._stop_vhost(spec.uuid)
        super().cleanup(spec)

    def _stderr(self, spec) -> str:
        try:
            with open(os.path.join(self.vnf_dir(spec.uuid), "qemu.stderr"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace").strip() or "(no message)"
        except FileNotFoundError:
            return "(no message)"

    def exit_message(self, spec) -> str:
        return self._stderr(spec)

    def alive(self, spec, pid):
        if not pid:
            return False
        proc = self._procs.get(spec.uuid)
        if proc is not None:
            return proc.poll() is None
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            return False
        # a recycled pid is not our VNF: require our -uuid on its command line
        try:
            return args[args.index(b"-uuid") + 1].decode() == spec.uuid
        except (ValueError, IndexError):
            return False

    def kill(self, spec, pid):
        self._expected.add(spec.uuid)
        proc = self._procs.pop(spec.uuid, None)
        if proc is None and not pid:
            # spawned by a process that died before recording the pid: find it by its -uuid
            pid = next((p for u, p in self.discover() if u == spec.uuid), None)
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        elif pid and self.alive(spec, pid):
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                pidfd = None
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if pidfd is not None:
                sel = selectors.DefaultSelector()
                sel.register(pidfd, selectors.EVENT_READ)
                sel.select(timeout=30)
                sel.close()
                os.close(pidfd)
        self._unwatch(spec.uuid)

    def pause(self, spec, pid):
        self._qmp_or_fail(spec, "stop", "pause")

    def unpause(self, spec, pid):
        self._qmp_or_fail(spec, "cont", "unpause")

    def _qmp_or_fail(self, spec, command: str, what: str):
        try:
            self.qmp(spec, command)
        except Exception as e:  # noqa: BLE001 - QMP's errors have no common base below Exception
            raise LaunchError(f"cannot {what} VNF {spec.name}: QMP {command!r}: {e}") from None

    def qmp(self, spec, command: str, **args):
        """Run one QMP command on the VNF's monitor (e.g. ``query-status``)."""
        from qemu.qmp.legacy import QEMUMonitorProtocol

        mon = QEMUMonitorProtocol(spec.qmp_socket)
        mon.connect()
        try:
            return mon.cmd(command, **args) if args else mon.cmd(command)
        finally:
            mon.close()

    def discover(self):
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"-uuid" not in args or not any(a.startswith(b"microvm,") for a in args):
                continue
            try:
                vnf_uuid = args[args.index(b"-uuid") + 1].decode()
            except IndexError:
                continue
            if os.path.isdir(self.vnf_dir(vnf_uuid)):
                found.append((vnf_uuid, int(pid)))
        return found

    # -- death detection: one thread, pidfds in a selector --
    def watch(self, spec, pid):
        if not pid:
            return
        with self._sel_lock:
            if spec.uuid in self._watched:  # already watched (e.g. recover() ran twice): keep that pidfd
                return
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._died(spec.uuid, "QEMU process is gone")
            return
        with self._sel_lock:
            if spec.uuid in self._watched:  # lost a race with another watch() of the same VNF
                os.close(pidfd)
                return
            self._watched[spec.uuid] = pidfd
            self._sel.register(pidfd, selectors.EVENT_READ, spec.uuid)
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch_loop, daemon=True,
                                                 name="fluidvim-qemu-watch")
                self._watcher.start()
        os.write(self._wake_w, b"x")

    def _unwatch(self, vnf_uuid):
        with self._sel_lock:
            pidfd = self._watched.pop(vnf_uuid, None)
            if pidfd is not None:
                self._sel.unregister(pidfd)
                os.close(pidfd)

    def close(self):
        """Stop watching (running VNFs keep running) and release the watcher's descriptors."""
        self._closing = True
        if self._watcher is not None:
            os.write(self._wake_w, b"x")
            self._watcher.join(timeout=10)
            self._watcher = None
        with self._sel_lock:
            for pidfd in self._watched.values():
                os.close(pidfd)
            self._watched.clear()
            self._sel.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _watch_loop(self):
        while not self._closing:
            try:
                ready = self._sel.select()
            except (OSError, ValueError) as e:
                if self._closing:           # close() raced with select(): we are done
                    return
                # a pidfd closed by _unwatch() (another thread) while select() waited on it:
                # under eventlet (nova-compute) that raises IOClosed in this thread. It is
                # already unregistered, so select again; dying here would stop death detection
                LOG.debug("QEMU watcher: select interrupted (%s); continuing", e)
                time.sleep(0.001)           # never a busy loop, whatever the cause
                continue
            for key, _ in ready:
                if key.data is None:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
                    continue
                vnf_uuid = key.data
                expected = vnf_uuid in self._expected
                self._unwatch(vnf_uuid)
                proc = self._procs.pop(vnf_uuid, None)
                if expected:
                    self._expected.discard(vnf_uuid)
                    continue
                reason = "QEMU exited"
                if proc is not None:
                    rc = proc.wait()
                    reason = (f"QEMU killed by signal {-rc}" if rc < 0
                              else f"QEMU exited with status {rc}")
                LOG.warning("VNF %s died: %s", vnf_uuid, reason)
                self._died(vnf_uuid, reason)


LIBVIRTD_FIX = ("start it (`systemctl start libvirtd virtlogd`, or `libvirtd -d; virtlogd -d`; "
                "on a test machine re-run tools/bootstrap.sh) or fix [vnf] libvirt_uri")

VIRTLOGD_FIX = ("start it (`systemctl start virtlogd`, or `virtlogd -d`; on a test machine "
                "re-run tools/bootstrap.sh); VNFs already running keep forwarding")


class LibvirtBackend(Backend):
    """A transient libvirt domain per VNF (pc + qboot), with the spec in its <metadata>."""

    name = states.LIBVIRT
    machine = "pc"
    _event_loop_started = False
    _event_lock = threading.Lock()

    def __init__(self, run_dir: str, uri: str = "qemu:///system",
                 emulator: str = "/usr/bin/qemu-system-x86_64"):
        super().__init__(run_dir)
        import libvirt

        self.libvirt = libvirt
        # every libvirt error is raised as libvirtError and handled where it happens; libvirt's
        # default handler would also print it to stderr ("libvirt: XML-RPC error : ...")
        libvirt.registerErrorHandler(lambda ctx, err: None, None)
        self._start_event_loop()
        self.uri = uri
        self._conn = None
        self._conn_lock = threading.Lock()
        self.emulator = shutil.which(emulator) or emulator
        self._expected: set[str] = set()
        self.conn  # noqa: B018 - connects now: a libvirtd that is down fails the backend's creation

    @property
    def conn(self):
        """The connection to libvirtd, opened again when libvirtd went away and is back (a
        restart, a ``kill -9``): every call after that would otherwise fail ("client socket is
        closed") for the life of this process. :class:`DependencyDown` while it is down."""
        with self._conn_lock:
            if self._conn is not None:
                try:
                    if self._conn.isAlive():
                        return self._conn
                except self.libvirt.libvirtError:
                    pass
                LOG.warning("the connection to libvirtd (%s) was lost: reconnecting", self.uri)
                with contextlib.suppress(self.libvirt.libvirtError):
                    self._conn.close()
                self._conn = None
            try:
                conn = self.libvirt.open(self.uri)
            except self.libvirt.libvirtError as e:
                raise DependencyDown("libvirtd", f"connect to {self.uri} failed: {e}",
                                     LIBVIRTD_FIX) from None
            self._cb_id = conn.domainEventRegisterAny(
                None, self.libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._lifecycle, None)
            self._conn = conn
            return conn

    @classmethod
    def _start_event_loop(cls):
        import libvirt

        with cls._event_lock:
            if cls._event_loop_started:
                return
            libvirt.virEventRegisterDefaultImpl()

            def run():
                while True:
                    libvirt.virEventRunDefaultImpl()

            threading.Thread(target=run, daemon=True, name="fluidvim-libvirt-events").start()
            cls._event_loop_started = True

    def _lifecycle(self, conn, dom, event, detail, opaque):
        lv = self.libvirt
        name = dom.name()
        if not name.startswith(specmod.DOMAIN_PREFIX) or event != lv.VIR_DOMAIN_EVENT_STOPPED:
            return
        vnf_uuid = dom.UUIDString()
        if vnf_uuid in self._expected:
            self._expected.discard(vnf_uuid)
            return
        reasons = {lv.VIR_DOMAIN_EVENT_STOPPED_CRASHED: "guest crashed",
                   lv.VIR_DOMAIN_EVENT_STOPPED_FAILED: "QEMU failed (killed or crashed)",
                   lv.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN: "guest shut down",
                   lv.VIR_DOMAIN_EVENT_STOPPED_DESTROYED: "destroyed outside fluidvim"}
        reason = reasons.get(detail, f"stopped (libvirt detail {detail})")
        LOG.warning("VNF %s died: %s", vnf_uuid, reason)
        self._died(vnf_uuid, reason)

    def _lookup(self, vnf_uuid):
        for _ in range(2):      # libvirtd went away: once more (DependencyDown, or it is back)
            conn = self.conn
            try:
                return conn.lookupByUUIDString(vnf_uuid)
            except self.libvirt.libvirtError:
                if conn.isAlive():
                    return None         # no such domain
        return None

    def spawn(self, spec):
        lv = self.libvirt
        xml = specmod.libvirt_xml(spec, emulator=self.emulator)
        conn = self.conn
        try:
            dom = conn.createXML(xml, lv.VIR_DOMAIN_START_PAUSED)
        except lv.libvirtError as e:
            raise self._spawn_error(conn, e) from None
        try:
            ch = self.connect(spec)     # libvirt's QEMU listens before the guest runs
            dom.resume()
        except Exception:
            self.kill(spec, None)
            raise
        return ch, None

    def _spawn_error(self, conn, e) -> Exception:
        """What a failed ``createXML`` means: a daemon down (:class:`DependencyDown` naming
        it), or libvirt refusing the domain (:class:`LaunchError`)."""
        what = f"libvirt could not start the domain: {e}"
        if "virtlogd" in str(e):        # libvirt hands QEMU's output to virtlogd: it is down
            return DependencyDown("virtlogd", what, VIRTLOGD_FIX)
        if not conn.isAlive():          # libvirtd went away during the call
            return DependencyDown("libvirtd", what, LIBVIRTD_FIX)
        if e.get_error_domain() == self.libvirt.VIR_FROM_RPC:
            # an RPC error on a connection to libvirtd that still answers is libvirtd's own
            # call to virtlogd (opening the domain's log) cut by virtlogd's death: "Cannot recv
            # data: Connection reset by peer", "End of file while reading data"
            return DependencyDown("virtlogd", f"{what} (libvirtd lost its connection to "
                                  "virtlogd)", VIRTLOGD_FIX)
        return LaunchError(f"libvirt refused the domain: {e}")

    def pause(self, spec, pid):
        self._domain_call(spec, "suspend", "pause")

    def unpause(self, spec, pid):
        self._domain_call(spec, "resume", "unpause")

    def _domain_call(self, spec, method: str, what: str):
        dom = self._lookup(spec.uuid)
        if dom is None:
            raise LaunchError(f"cannot {what} VNF {spec.name}: its libvirt domain is gone")
        try:
            getattr(dom, method)()
        except self.libvirt.libvirtError as e:
            raise LaunchError(f"cannot {what} VNF {spec.name}: libvirt: {e}") from None

    def exit_message(self, spec) -> str:
        return "libvirt domain stopped; see /var/log/libvirt/qemu/" + specmod.domain_name(spec) \
            + ".log"

    def alive(self, spec, pid):
        dom = self._lookup(spec.uuid)
        return bool(dom and dom.isActive())

    def kill(self, spec, pid):
        dom = self._lookup(spec.uuid)
        if dom is None:
            return
        self._expected.add(spec.uuid)
        try:
            dom.destroy()
        except self.libvirt.libvirtError as e:
            if self._lookup(spec.uuid) is not None:
                raise LaunchError(f"cannot destroy domain {dom.name()}: {e}") from None

    def discover(self):
        found = []
        for dom in self.conn.listAllDomains(self.libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            # only this launch core's domains (its run dir): another one on the same host (a
            # nova-compute next to an orchestrator's local zone) keeps its own
            if dom.name().startswith(specmod.DOMAIN_PREFIX) and \
                    os.path.isdir(self.vnf_dir(dom.UUIDString())):
                found.append((dom.UUIDString(), None))
        return found

    def metadata_spec(self, vnf_uuid: str) -> specmod.VNFSpec | None:
        dom = self._lookup(vnf_uuid)
        if dom is None:
            return None
        text = dom.metadata(self.libvirt.VIR_DOMAIN_METADATA_ELEMENT, specmod.XMLNS)
        return specmod.spec_from_libvirt_metadata(text)

    def close(self):
        with self._conn_lock:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.domainEventDeregisterAny(self._cb_id)
            conn.close()
        except self.libvirt.libvirtError:
            pass


PR_SET_THP_DISABLE = 41
PR_SET_MEMORY_MERGE = 67


def share_vnf_memory(enable: bool = True) -> list[str]:
    """Make the QEMU processes this process starts from now on cheap to keep idle: no
    transparent huge pages (one guest write would pin 2 MiB), and all their anonymous memory
    KSM-mergeable. Both are prctl flags of *this* process that children inherit across fork and
    exec (Linux >= 6.4 for the merge flag); they change nothing else for the launcher, whose own
    memory KSM may scan too. ``enable=False`` clears both (QEMU as it comes). Returns what could
    not be set (older kernels, no CAP_SYS_RESOURCE)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    failed = []
    for name, op in (("PR_SET_THP_DISABLE", PR_SET_THP_DISABLE),
                     ("PR_SET_MEMORY_MERGE", PR_SET_MEMORY_MERGE)):
        if libc.prctl(op, int(enable), 0, 0, 0) != 0:
            failed.append(f"{name}: {os.strerror(ctypes.get_errno())}")
    return failed


def make_backend(name: str, run_dir: str, conf=None) -> Backend:
    if name == states.QEMU:
        for problem in share_vnf_memory(conf is None or conf.vnf.share_memory):
            LOG.warning("VNF memory sharing: %s", problem)
        return QemuBackend(run_dir, qemu_binary=conf.vnf.qemu_binary if conf else
                           specmod.QEMU_AUTO,
                           vhost_net_binary=os.path.abspath(conf.vnf.vhost_net_binary or
                                                            vnfconf.default_vhost_net())
                           if conf else vnfconf.default_vhost_net())
    if name == states.LIBVIRT:
        return LibvirtBackend(run_dir, uri=conf.vnf.libvirt_uri if conf else "qemu:///system")
    raise ValueError(f"unknown backend {name!r} (known: {', '.join(states.BACKENDS)})")


__all__ = ["Backend", "QemuBackend", "LibvirtBackend", "LaunchError", "detect_accel",
           "make_backend"]
