# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The launch core: start VNFs cold or from a warm pool, track them, find them again after a restart.

This is the "embedded local zone" the orchestrator and the demo use, and what the Nova driver calls.

* **Cold launch** = spec → taps → hypervisor → the VNF's own ``ready`` → ``configure`` → forwarding.
* **Warm launch** = claim a booted, unconfigured shell from the pool → rename its taps when tap names
  are asked for (Neutron devnames) → plug them into the requested bridges → ``configure`` (with the
  asked-for MACs) → forwarding. The pool refills in the background (LightVM's split toolstack
  idea on KVM). Both report their phases; neither is ever mixed into the other's numbers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
import uuid as uuidlib

from oslo_config import cfg

from fluidvim.common.errors import DependencyDown, StoreFull
from fluidvim.common.measure import elapsed_ms

from . import (
    backends,
    cgroups,
    conf as vnfconf,
    limits,
    netdev,
    ovs as ovsmod,
    pool as poolmod,
    spec as specmod,
    states,
)
from .control import ControlChannel, ControlError
from .store import StateStore, VNFRecord

LOG = logging.getLogger(__name__)

COLD_PHASES = ("spec", "spawn", "boot", "net", "configure", "record")
# the state store's status of a shell in each state of contract/PROTOCOL.md §6.3 (a claimed shell is
# RUNNING from the claim on: the claim is one UPDATE; a removed one has no row)
_STATUS = {poolmod.BOOTING: states.BOOTING, poolmod.READY: states.POOL,
           poolmod.CLAIMED: states.RUNNING, poolmod.RUNNING: states.RUNNING}
WARM_PHASES = ("claim", "net", "configure", "record")
# the host's last power-attribution interval, in the run directory: written by `fluidvim metrics
# serve` (fluidvim.orchestrator.power.exporter), read by VNFManager.power
POWER_STATE = "power.json"


def make_conf(args=None, **overrides) -> cfg.ConfigOpts:
    """A private ConfigOpts with the [vnf] options registered (tests, the CLI, benchmarks).

    Logging is its user's business: the launch core logs through the standard library's
    loggers, which oslo.log (nova-compute, the orchestrator) formats like any library's."""
    conf = cfg.ConfigOpts()
    vnfconf.register_opts(conf)
    conf(args or [], project="fluidvim", default_config_files=[])
    for key, value in overrides.items():
        conf.set_override(key, value, group="vnf")
    return conf


@dataclasses.dataclass
class LaunchResult:
    vnf_id: str
    name: str
    backend: str
    kind: str                 # states.COLD or states.WARM
    phases_ms: dict
    total_ms: float
    boot_us: int | None       # guest-measured boot time (vCPU reset → ready)
    accel: str


class VNFManager:
    def __init__(self, conf: cfg.ConfigOpts | None = None):
        if conf is None:
            conf = cfg.CONF
            vnfconf.register_opts(conf)
        self.conf = conf
        c = conf.vnf
        self.kernel = os.path.abspath(c.kernel or vnfconf.default_kernel())
        self._firmwares: dict = {}          # (machine, kernel) -> firmware (_firmware)
        self.run_dir = c.run_dir
        os.makedirs(self.run_dir, mode=0o755, exist_ok=True)
        if c.ovsdb_connection:
            ovsmod.configure(c.ovsdb_connection)     # OVS NICs' database (process-wide)
        url = c.state_connection
        if not url:
            os.makedirs(c.state_dir, mode=0o750, exist_ok=True)
            url = "sqlite:///" + os.path.join(c.state_dir, "vnf.sqlite")
        self.store = StateStore(url)
        self.accel, self.accel_reason = backends.detect_accel(c.accel)
        self._tsc_khz = backends.host_tsc_khz() if self.accel == "tcg" else None
        self._backends: dict[str, backends.Backend] = {}
        self._lock = threading.Lock()
        self._pool_wakeup = threading.Event()
        self._pool_cv = threading.Condition()
        self._pool_stop = threading.Event()
        self._pool_thread: threading.Thread | None = None
        self._pool_targets: dict[tuple, int] = {}     # shape (sorted kwargs of fill_pool) -> size
        self.death_listeners: list = []      # callables(vnf_id, reason)
        # backend -> why it cannot be reached (recover(skip_unavailable=True)): its VNFs are
        # listed as the store has them, unchecked
        self.unavailable: dict[str, DependencyDown] = {}

    # -- plumbing --
    def backend(self, name: str | None = None) -> backends.Backend:
        name = name or self.conf.vnf.backend
        with self._lock:
            be = self._backends.get(name)
            if be is None:
                be = backends.make_backend(name, self.run_dir, self.conf)
                be.on_death(self._on_death)
                self._backends[name] = be
        return be

    def close(self) -> None:
        self.stop_pool()
        with self._lock:
            closing, self._backends = list(self._backends.values()), {}
        for be in closing:
            be.close()
        self.store.close()

    def _kernel_path(self, kernel: str | None) -> str:
        """The kernel of one launch: ``kernel`` when given (e.g. a Glance image), else [vnf]."""
        return os.path.abspath(kernel) if kernel else self.kernel

    def pool_key(self, backend: str, memory_mb: int, vcpus: int, nics: int,
                 kernel: str | None = None) -> str:
        """The pool key (``contract/PROTOCOL.md`` §6.2) of a launch of this shape: shells booted by
        this core have the spec's default flow timeout, as every launch it makes."""
        return poolmod.pool_key(backend, poolmod.kernel_id(self._kernel_path(kernel)), memory_mb,
                                vcpus, nics, limits.FLOW_TIMEOUT_MS_DEFAULT)

    def _net_backend(self, be) -> str:
        nb = self.conf.vnf.net_backend
        if nb != specmod.NET_TAP and be.machine != "microvm":
            raise specmod.SpecError("net_backend", f"[vnf] net_backend = {nb} needs the qemu "
                                    f"backend (microvm); the {be.name} backend uses tap")
        return nb

    def _firmware(self, machine: str, kernel: str) -> str | None:
        """spec.firmware_for, looked up once per (machine, kernel) rather than a stat per launch."""
        key = (machine, kernel)
        if key not in self._firmwares:
            self._firmwares[key] = specmod.firmware_for(machine, kernel, self.conf.vnf.firmware)
        return self._firmwares[key]

    def _shape(self, args: specmod.LaunchArgs) -> tuple[int, int]:
        """(memory_mb, session slots) of a launch: its own, or [vnf]'s."""
        return args.memory_mb or self.conf.vnf.memory_mb, args.slots or self.conf.vnf.session_slots

    def _new_spec(self, be, args: specmod.LaunchArgs) -> specmod.VNFSpec:
        """A new VNF's spec for ``args``: NIC i takes the request's tap name, MAC and bridge,
        or generated ones."""
        vid = str(uuidlib.uuid4())
        memory_mb, slots = self._shape(args)
        kernel = self._kernel_path(args.kernel)
        if not os.path.exists(kernel):
            raise specmod.SpecError("kernel", f"{kernel} does not exist: build it with "
                                    "`make -C unikernel` or set [vnf] kernel")
        nics = tuple(specmod.NicSpec(tap=n.tap or specmod.tap_for(vid, i),
                                     mac=n.mac or specmod.mac_for(vid, i),
                                     bridge=n.bridge, ovs=n.ovs)
                     for i, n in enumerate(args.nics))
        return specmod.VNFSpec(uuid=vid, name=args.name or f"vnf-{vid[:8]}", kernel=kernel,
                               memory_mb=memory_mb, vcpus=args.vcpus, nics=nics,
                               session_slots=slots, machine=be.machine, accel=self.accel,
                               tsc_khz=self._tsc_khz,
                               firmware=self._firmware(be.machine, kernel),
                               net_backend=self._net_backend(be),
                               cmdline_extra=("boot_log=full" if self.conf.vnf.boot_log == "full"
                                              else ""),
                               **be.paths(vid)).validate()

    # -- cold boot (also used to fill the pool) --
    def _boot(self, be, spec, status, pool_key=None, config=None, phases=None, launch=None):
        """Boot ``spec``; on any failure remove everything it created and raise LaunchError.
        With ``config`` the VNF is configured, then told ``spec.qoe`` when it has one.

        ``launch`` = (t0, on_record) for a cold launch: its final record is then written in
        one commit with the launch history row (:meth:`StateStore.finish_launch`)."""
        phases = phases if phases is not None else {}
        self.store.add(VNFRecord(id=spec.uuid, name=spec.name, backend=be.name,
                                 status=states.BOOTING, spec_json=json.dumps(spec.to_dict()),
                                 pool_key=pool_key))
        pid = None
        t = time.perf_counter()
        try:
            be.prepare(spec)
            ch, pid = be.spawn(spec)
            phases["spawn"] = elapsed_ms(t)
            if pid:
                self.store.update(spec.uuid, pid=pid)
            t = time.perf_counter()
            with ch:
                try:
                    ready = ch.wait_ready(self.conf.vnf.boot_timeout)
                except ControlError as e:
                    raise backends.LaunchError(
                        f"VNF {spec.name} did not become ready: {e}; {be.exit_message(spec)}"
                        f"; console: {be.console_output(spec, 600)[-600:]!r}") from None
                phases["boot"] = elapsed_ms(t)
                t = time.perf_counter()
                be.set_vcpu_nice(spec, pid, self.conf.vnf.vcpu_nice)
                be.plug(spec)
                phases["net"] = elapsed_ms(t)
                if config is not None:
                    t = time.perf_counter()
                    ch.configure(config, slots=spec.session_slots)
                    if spec.qoe is not None:
                        self._send_qoe(ch, spec.name, spec.qoe)
                    phases["configure"] = elapsed_ms(t)
            t = time.perf_counter()
            fields = {"status": status, "config": config, "boot_us": ready.get("boot_us")}
            if launch is None:
                self.store.update(spec.uuid, **fields)
            else:
                self.store.finish_launch(spec.uuid, fields, backend=be.name, kind=states.COLD,
                                         total_ms=elapsed_ms(launch[0]), phases=phases,
                                         on_record=launch[1])
            be.watch(spec, pid)
            phases["record"] = elapsed_ms(t)
        except BaseException:
            try:
                be.kill(spec, pid)
            finally:
                be.cleanup(spec)
                self.store.delete(spec.uuid)
            raise
        return ready

    def launch(self, args: specmod.LaunchArgs | str, *, on_record=None,
               **fields) -> LaunchResult:
        """Start a VNF: ``args`` is a :class:`~fluidvim.vnf.spec.LaunchArgs`, or its Click
        configuration with the other fields as keywords (``mgr.launch(config, nics=bridges,
        slots=64)``: one NIC per entry of ``nics``, a bridge name or None = unplugged, or a
        :class:`~fluidvim.common.zonetypes.NicRequest`).

        The VNF's image is ``args.kernel`` (default: [vnf] kernel); warm shells are only taken
        from the pool of the same kernel (it is part of the pool key).

        A NIC request's ``mac`` and ``tap`` fix its MAC / host tap name (None = generated; tap
        names are what Neutron calls the port's devname). A tap name that already exists on the
        host is refused (``SpecError`` naming ``nics[i].tap``) before anything is taken or
        booted. Uses a warm shell when one of this shape is ready (unless ``warm=False``),
        otherwise boots cold. A warm shell given MACs or tap names has its taps renamed at claim
        and is told its MACs in ``configure`` (the VNF then uses them as its own addresses; see
        :class:`~fluidvim.vnf.spec.NicSpec` for what the recorded spec holds).

        A request's ``ovs`` makes its bridge an Open vSwitch bridge: the Interface external ids
        (``iface-id``, ``vm-uuid``, ...; ``attached-mac`` is added). The tap is added to the OVS
        bridge once it exists (after boot, or after a warm shell's rename) and its port is
        removed with the VNF.

        A launch ends in one commit: the VNF's record, its launch history row and, when given,
        ``on_record(conn)`` — the caller's own rows about this VNF, written on that SQLAlchemy
        connection in the same transaction (the Nova driver's instance name). If the hook
        raises, the launch fails and the VNF is removed.
        ``args.qoe`` (a :class:`fluidvim.common.zonetypes.QoE`) is sent to the VNF right after
        its configuration, before the launch returns, and kept in its spec (a rebuild sends it
        again): its free slots are then the sessions it serves at the service's QoE. A VNF that
        refuses it fails the launch (``LaunchError``) and is removed.

        Raises ``ControlError`` (code ``config``) for a configuration the VNF rejects and
        ``LaunchError``/``SpecError`` for the rest; nothing is left behind.
        """
        if isinstance(args, str):
            args = specmod.LaunchArgs(args, **fields)
        elif fields:
            raise TypeError(f"launch: {', '.join(sorted(fields))} given with a LaunchArgs: "
                            "set them in it (LaunchArgs.with_changes)")
        be = self.backend(args.backend)
        self._check_host_nics(args.nics)
        if args.warm is not False:
            res = self._launch_warm(be, args, on_record)
            if res is not None:
                return res
        return self._launch_cold(be, args, on_record)

    @staticmethod
    def _send_qoe(ch, name: str, qoe) -> None:
        """Tell a configured VNF its slots at the service's QoE; LaunchError when it refuses
        (the launch then removes it)."""
        req = qoe.request()
        try:
            ch.qoe(**req)
        except ControlError as e:
            raise backends.LaunchError(f"VNF {name} refused its QoE (qoe {req}): {e}") from None

    @staticmethod
    def _check_host_nics(nics) -> None:
        """What a launch's NICs need of this host (the requests' own rules are LaunchArgs'):
        their bridges exist (of the right kind) and their tap names are free."""
        for i, nic in enumerate(nics):
            problem = (netdev.bridge_problem(nic.bridge, nic.ovs is not None)
                       if nic.bridge is not None else None)
            if problem:
                raise specmod.SpecError(f"nics[{i}].bridge", problem)
            if nic.tap is not None and netdev.exists(nic.tap):
                raise specmod.SpecError(f"nics[{i}].tap", f"a network device named {nic.tap} "
                                        "already exists on this host: remove it (ip link del "
                                        f"{nic.tap}) or pick another name")

    def _launch_cold(self, be, args: specmod.LaunchArgs, on_record=None):
        t0 = time.perf_counter()
        spec = self._new_spec(be, args).with_changes(click_config=args.click_config,
                                                      qoe=args.qoe)
        phases = {"spec": elapsed_ms(t0)}
        try:
            ready = self._boot(be, spec, states.RUNNING, config=args.click_config, phases=phases,
                               launch=(t0, on_record))
        except Exception as e:
            self._record_failure(spec.uuid, be.name, states.COLD, t0, phases, e)
            raise
        total = elapsed_ms(t0)
        LOG.info("cold launch of %s (%s) in %.1f ms: %s", spec.name, be.name, total, phases)
        return LaunchResult(spec.uuid, spec.name, be.name, states.COLD, phases, total,
                            ready.get("boot_us"), self.accel)

    def _record_failure(self, vnf_id, backend, kind, t0, phases, cause=None) -> None:
        """Records a failed launch; ``cause``: the launch's own error, which its caller gets.
        A store that cannot take the record says so in one warning, unless ``cause`` is that
        store's error already (a full store failing the launch, then its record): the caller's
        line is the one line (a CLI printed both)."""
        try:
            self.store.record_launch(vnf_id, backend, kind, False, elapsed_ms(t0), phases)
        except (DependencyDown, StoreFull) as e:     # the store is down: its one line will do
            log = LOG.debug if isinstance(cause, (DependencyDown, StoreFull)) else LOG.warning
            log("failed %s launch of %s not recorded: %s", kind, vnf_id, e)
        except Exception:  # noqa: BLE001 - keep the launch's own error
            LOG.exception("could not record the failed %s launch of %s", kind, vnf_id)

    def _launch_warm(self, be, args: specmod.LaunchArgs, on_record=None):
        t0 = time.perf_counter()
        memory_mb, slots = self._shape(args)
        key = self.pool_key(be.name, memory_mb, args.vcpus, len(args.nics), args.kernel)
        rec = self.store.claim_pool_shell(key, args.name or "claimed")
        if rec is None:
            return None
        spec = shell = rec.spec
        name = args.name or f"vnf-{spec.uuid[:8]}"
        taps = [n.tap for n in args.nics]
        phases = {"claim": elapsed_ms(t0)}
        t = time.perf_counter()
        renamed = []                # NIC indexes whose tap carries the requested name now
        try:
            try:
                for i, (nic, tap) in enumerate(zip(shell.nics, taps)):
                    if tap is not None and tap != nic.tap:
                        netdev.rename(nic.tap, tap)
                        renamed.append(i)
            except netdev.NetdevError as e:
                # e.g. the name was taken since launch() checked: nothing else happened yet
                field = f"nics[{i}].tap"
                self._unclaim(shell, key, renamed, taps, "tap_taken")
                self._record_failure(spec.uuid, be.name, states.WARM, t0, phases)
                raise specmod.SpecError(field, str(e)) from None
            # §6.4: requested taps and MACs replace the shell's; configure carries the MACs
            configure_macs, claimed = poolmod.claim_nics(shell.nics, args.nics)
            nics = tuple(specmod.NicSpec(tap=c["tap"], mac=c["mac"], bridge=n.bridge, ovs=n.ovs)
                         for c, n in zip(claimed, args.nics))
            spec = shell.with_changes(name=name, nics=nics, session_slots=slots,
                                      click_config=args.click_config, qoe=args.qoe)
            for nic in nics:
                netdev.attach(nic)
            phases["net"] = elapsed_ms(t)
            t = time.perf_counter()
            with be.connect(spec) as ch:
                ch.configure(args.click_config, slots=slots, macs=configure_macs)
                if args.qoe is not None:
                    self._send_qoe(ch, name, args.qoe)
            phases["configure"] = elapsed_ms(t)
            t = time.perf_counter()
            spec_json = json.dumps(spec.to_dict())
            if renamed or configure_macs or any(n.ovs for n in nics) or args.qoe:
                be.record_spec(spec, spec_json)     # what adopting it as an orphan reads
            self.store.finish_launch(
                spec.uuid, {"name": name, "config": args.click_config, "spec_json": spec_json},
                backend=be.name, kind=states.WARM, total_ms=elapsed_ms(t0), phases=phases,
                on_record=on_record)
            phases["record"] = elapsed_ms(t)
        except specmod.SpecError:
            raise
        except ControlError as e:
            if e.code == "config":
                # the shell is intact and still unconfigured (a rejected configure changes
                # neither the graph nor the MACs): back to the pool under its own tap names
                try:
                    for nic in spec.nics:
                        netdev.detach(nic)
                    self._unclaim(shell, key, renamed, taps, "config_rejected")
                except Exception:  # noqa: BLE001 - cannot restore it: remove it instead
                    LOG.exception("could not return shell %s to the pool", shell.uuid)
                    self._destroy_spec(be, spec, rec.pid)
            else:
                self._destroy_spec(be, spec, rec.pid)
            self._record_failure(spec.uuid, be.name, states.WARM, t0, phases)
            raise
        except BaseException as e:
            # e.g. a bridge vanished, or the record could not be written: the shell's state
            # is unknown, so it goes entirely (under the tap names it has now)
            # (``spec`` once built also names the OVS ports to remove)
            self._destroy_spec(be, spec if spec is not shell
                               else self._renamed(shell, renamed, taps), rec.pid)
            self._record_failure(spec.uuid, be.name, states.WARM, t0, phases, e)
            self._pool_wakeup.set()
            raise
        total = elapsed_ms(t0)
        self._pool_wakeup.set()     # refill after serving the request, not during it
        LOG.info("warm launch of %s (%s) in %.2f ms: %s", name, be.name, total, phases)
        return LaunchResult(spec.uuid, name, be.name, states.WARM, phases, total, rec.boot_us,
                            self.accel)

    @staticmethod
    def _renamed(shell, renamed, taps):
        """``shell``'s spec with the taps of the NICs in ``renamed`` under their new names."""
        return shell.with_changes(nics=tuple(
            dataclasses.replace(n, tap=taps[i]) if i in renamed else n
            for i, n in enumerate(shell.nics)))

    def _unclaim(self, shell, key, renamed, taps, event: str) -> None:
        """Give a claimed, unconfigured shell back to the pool with its own tap names (§6.3:
        ``event`` is why; the shell keeps its place as the oldest of its key)."""
        for i in reversed(renamed):
            netdev.rename(taps[i], shell.nics[i].tap)
        renamed.clear()
        status = _STATUS[poolmod.transition(poolmod.CLAIMED, event)]
        self.store.update(shell.uuid, status=status, pool_key=key, name=shell.name)
        self._pool_wakeup.set()

    # -- warm pool --
    def fill_pool(self, count: int, *, nics: int | None = None, memory_mb: int | None = None,
                  vcpus: int = 1, backend: str | None = None, progress=None,
                  kernel: str | None = None) -> int:
        """Boot shells until the pool for this shape holds ``count``; returns how many booted."""
        be = self.backend(backend)
        nics = self.conf.vnf.pool_nics if nics is None else nics
        memory_mb = memory_mb or self.conf.vnf.memory_mb
        key = self.pool_key(be.name, memory_mb, vcpus, nics, kernel)
        booted = 0
        while self.store.count_pool(key) < count:
            shape = specmod.LaunchArgs("", nics=(None,) * nics, name="pool-" + uuidlib.uuid4().hex[:8],
                                       slots=self.conf.vnf.session_slots, memory_mb=memory_mb,
                                       vcpus=vcpus, kernel=kernel)
            spec = self._new_spec(be, shape)
            self._boot(be, spec, states.POOL, pool_key=key)
            booted += 1
            with self._pool_cv:
                self._pool_cv.notify_all()
            if progress:
                progress(1)
        return booted

    def start_pool(self, size: int | None = None, *, nics: int | None = None,
                   memory_mb: int | None = None, vcpus: int = 1,
                   backend: str | None = None, kernel: str | None = None) -> str:
        """Keep ``size`` shells of this shape booted, refilling in a background thread."""
        size = self.conf.vnf.pool_size if size is None else size
        be = self.backend(backend)
        nics = self.conf.vnf.pool_nics if nics is None else nics
        memory_mb = memory_mb or self.conf.vnf.memory_mb
        key = self.pool_key(be.name, memory_mb, vcpus, nics, kernel)
        shape = (("backend", be.name), ("kernel", kernel), ("memory_mb", memory_mb),
                 ("nics", nics), ("vcpus", vcpus))
        self._pool_targets[shape] = size
        if self._pool_thread is None:
            self._pool_stop.clear()
            self._pool_thread = threading.Thread(target=self._pool_loop, daemon=True,
                                                 name="fluidvim-pool")
            self._pool_thread.start()
        self._pool_wakeup.set()
        return key

    def stop_pool(self) -> None:
        if self._pool_thread is not None:
            self._pool_stop.set()
            self._pool_wakeup.set()
            self._pool_thread.join(timeout=60)
            self._pool_thread = None

    def _pool_loop(self):
        failed = False
        while not self._pool_stop.is_set():
            # a failed refill is retried after REFILL_BACKOFF_S, or at the next claim or death
            self._pool_wakeup.wait(poolmod.REFILL_BACKOFF_S if failed else None)
            self._pool_wakeup.clear()
            failed = False
            for shape, size in list(self._pool_targets.items()):
                shape = dict(shape)
                try:
                    # the key of the kernel file as it is now (§6.1): a rebuilt kernel is a new
                    # key, and the shells booted from the old file are removed, never claimed
                    key = self.pool_key(shape["backend"], shape["memory_mb"], shape["vcpus"],
                                        shape["nics"], shape["kernel"])
                    self._remove_stale_shells(key)
                except Exception:  # noqa: BLE001 - e.g. the kernel file is gone for now
                    LOG.exception("warm pool refill for %s failed", shape)
                    failed = True
                    continue
                while not self._pool_stop.is_set() and self.store.count_pool(key) < size:
                    try:
                        self.fill_pool(self.store.count_pool(key) + 1, **shape)
                    except Exception:  # noqa: BLE001 - keep refilling other keys
                        LOG.exception("warm pool refill for %s failed", key)
                        failed = True
                        break

    def _remove_stale_shells(self, key: str) -> None:
        """Destroy the ready shells of ``key``'s shape booted from another kernel file."""
        for rec in self.store.list(statuses=(states.POOL,), backend=key.split("/", 1)[0]):
            if rec.pool_key and poolmod.same_shape_other_kernel(key, rec.pool_key):
                LOG.info("removing warm shell %s: the kernel file changed since it booted", rec.id)
                self._destroy_spec(self.backend(rec.backend), rec.spec, rec.pid)

    def wait_pool(self, key: str, count: int, timeout: float = 60.0) -> bool:
        """Block until ``count`` shells of ``key`` are booted (the refill thread's progress)."""
        deadline = time.monotonic() + timeout
        with self._pool_cv:
            while self.store.count_pool(key, (states.POOL,)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._pool_cv.wait(left)
        return True

    def drain_pool(self, backend: str | None = None) -> int:
        n = 0
        for rec in self.store.list(statuses=(states.POOL,), backend=backend):
            self.destroy(rec.id)
            n += 1
        return n

    # -- lifecycle --
    def _on_death(self, vnf_id: str, reason: str) -> None:
        rec = self.store.get(vnf_id)
        if rec is None:
            return
        be = self.backend(rec.backend)
        be.cleanup(rec.spec)
        if rec.status == states.POOL:
            self.store.delete(vnf_id)
            self._pool_wakeup.set()
        else:
            self.store.update(vnf_id, status=states.CRASHED, reason=reason, pid=None)
        for cb in list(self.death_listeners):
            cb(vnf_id, reason)

    def _destroy_spec(self, be, spec, pid) -> None:
        try:
            be.kill(spec, pid)
        finally:
            be.cleanup(spec)
            self.store.delete(spec.uuid)

    def get(self, id_or_name: str) -> VNFRecord:
        rec = self.store.find(id_or_name)
        if rec is None:
            raise KeyError(f"no VNF named or with id {id_or_name!r} (see `fluidvim vnf list`)")
        return rec

    def destroy(self, id_or_name: str) -> None:
        rec = self.get(id_or_name)
        self._destroy_spec(self.backend(rec.backend), rec.spec, rec.pid)

    def destroy_all(self) -> int:
        """Stop the pool refill and destroy every VNF and shell this store knows (tests, benches)."""
        self.stop_pool()
        n = 0
        for rec in self.store.list():
            try:
                self.destroy(rec.id)
                n += 1
            except KeyError:                        # already gone
                pass
        return n

    def pause(self, id_or_name: str) -> VNFRecord:
        """Stop a running VNF's vCPUs, keeping everything else (:data:`states.PAUSED`); a paused
        one stays paused."""
        rec = self.get(id_or_name)
        if rec.status == states.PAUSED:
            return rec
        if rec.status != states.RUNNING:
            raise ControlError("not_running", f"VNF {rec.name} is {rec.status}: only a running "
                               "VNF can be paused")
        self.backend(rec.backend).pause(rec.spec, rec.pid)
        self.store.update(rec.id, status=states.PAUSED)
        return self.get(rec.id)

    def unpause(self, id_or_name: str) -> VNFRecord:
        """Let a paused VNF run again (:data:`states.RUNNING`); a running one is left as it is."""
        rec = self.get(id_or_name)
        if rec.status == states.RUNNING:
            return rec
        if rec.status != states.PAUSED:
            raise ControlError("not_paused", f"VNF {rec.name} is {rec.status}, not paused")
        self.backend(rec.backend).unpause(rec.spec, rec.pid)
        self.store.update(rec.id, status=states.RUNNING)
        return self.get(rec.id)

    def rebuild(self, id_or_name: str) -> VNFRecord:
        """Boot a VNF again from its recorded spec and configuration: same id, name, NICs (tap
        names, MACs, bridges), kernel and Click configuration; a crashed one comes back, a
        running or paused one restarts from scratch (flow table and counters reset). Raises
        ``LaunchError`` when the new boot fails (the VNF is then gone, as after destroy)."""
        rec = self.get(id_or_name)
        if rec.status not in states.LISTED:
            raise ControlError("not_launched", f"VNF {rec.name} is {rec.status}: only a "
                               "launched VNF (running, paused or crashed) can be rebuilt")
        if not rec.config:
            raise ControlError("no_config", f"VNF {rec.name} has no recorded configuration "
                               "to boot again with")
        be = self.backend(rec.backend)
        spec = rec.spec
        self._destroy_spec(be, spec, rec.pid)
        self._boot(be, spec, states.RUNNING, config=rec.config)
        LOG.info("rebuilt VNF %s (%s)", spec.name, spec.uuid)
        return self.get(spec.uuid)

    def _answering(self, id_or_name: str) -> VNFRecord:
        """The record of a VNF that can answer requests: a paused one cannot (its request would
        only time out)."""
        rec = self.get(id_or_name)
        if rec.status == states.PAUSED:
            raise ControlError("paused", f"VNF {rec.name} is paused: it answers again once "
                               "unpaused")
        return rec

    def channel(self, id_or_name: str) -> ControlChannel:
        rec = self._answering(id_or_name)
        return self.backend(rec.backend).connect(rec.spec)

    def stats(self, id_or_name: str) -> dict:
        with self.channel(id_or_name) as ch:
            return ch.stats()

    def set_qoe(self, id_or_name: str, capacity: int, budget_ns: int | None = None,
                quantile_ppm: int | None = None, wait_ppm: int | None = None) -> dict:
        """The VNF's session slots at the service's QoE (its ``stats`` free slots from now on);
        ``capacity`` 0 = the flow table's slots. See :mod:`fluidvim.evaluator.qoeslots`."""
        with self.channel(id_or_name) as ch:
            return ch.qoe(capacity, budget_ns, quantile_ppm, wait_ppm=wait_ppm)

    def power_state(self, max_age_s: float | None = 300.0) -> dict | None:
        """The last attribution interval of this host's exporter (``fluidvim metrics serve``,
        ``<run_dir>/power.json``: host watts, and per VNF id its watts, joules, components and
        power source), or None when there is none or it is older than ``max_age_s``."""
        try:
            with open(os.path.join(self.run_dir, POWER_STATE)) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return None
        if max_age_s is not None and time.time() - doc.get("at", 0) > max_age_s:
            return None
        return doc

    def power(self, id_or_name: str, max_age_s: float | None = 300.0) -> dict | None:
        """One VNF's entry of :meth:`power_state` (None: not attributed lately)."""
        doc = self.power_state(max_age_s)
        if doc is None:
            return None
        v = doc.get("vnfs", {}).get(self.get(id_or_name).id)
        return None if v is None else dict(v, at=doc.get("at"), host_watts=doc.get("host_watts"),
                                           idle_rule=doc.get("idle_rule"))

    def configure(self, id_or_name: str, config: str, slots: int | None = None) -> dict:
        rec = self._answering(id_or_name)
        with self.backend(rec.backend).connect(rec.spec) as ch:
            result = ch.configure(config, slots=slots)
        self.store.update(rec.id, config=config)
        return result

    def list(self, include_pool: bool = False) -> list[VNFRecord]:
        statuses = (*states.LISTED, states.POOL) if include_pool else states.LISTED
        return self.store.list(statuses=statuses)

    def recover(self, skip_unavailable: bool = False) -> dict:
        """After a restart: re-attach to live VNFs, mark dead ones, adopt orphans, clean up.

        ``skip_unavailable`` (the CLI's commands): a backend whose daemon is down
        (:class:`~fluidvim.common.errors.DependencyDown`, e.g. libvirtd) leaves its VNFs as the
        store has them - not checked, never marked crashed - and is recorded in
        :attr:`unavailable`; without it (a service starting) the error propagates."""
        summary = {"reattached": 0, "crashed": 0, "removed": 0, "adopted": 0}
        known = set()
        for rec in self.store.list():
            known.add(rec.id)
            if rec.backend in self.unavailable:
                continue
            try:
                be = self.backend(rec.backend)
            except DependencyDown as e:
                if not skip_unavailable:
                    raise
                LOG.info("recovery: %s VNFs not checked: %s", rec.backend, e)
                self.unavailable[rec.backend] = e
                continue
            spec = rec.spec
            alive = be.alive(spec, rec.pid)
            if rec.status == states.BOOTING or (rec.status == states.POOL and (
                    not alive or not poolmod.key_is_current(rec.pool_key))):
                # half-created or dead shell, or one of an older pool-key form (never claimed)
                self._destroy_spec(be, spec, rec.pid)
                summary["removed"] += 1
            elif rec.status in (states.RUNNING, states.PAUSED, states.POOL) and alive:
                be.watch(spec, rec.pid)             # a paused VNF stays paused
                summary["reattached"] += 1
            elif rec.status in (states.RUNNING, states.PAUSED):
                be.cleanup(spec)
                self.store.update(rec.id, status=states.CRASHED, pid=None,
                                  reason="not running when the launch core restarted")
                summary["crashed"] += 1
        summary["adopted"] = self._adopt_orphans(known, skip_unavailable)
        # groups of VNFs this host lost track of (a core or test killed -9, its QEMUs later)
        summary["swept"] = len(cgroups.sweep(keep={r.id for r in self.store.list()}))
        LOG.info("recovery: %s", summary)
        return summary

    def _adopt_orphans(self, known: set, skip_unavailable: bool = False) -> int:
        """Record the running VNFs of this run directory that the store does not know."""
        # a backend tells its own VNFs by their run directories: with none here that the store
        # does not know, there is nothing to look for (no /proc scan, no libvirt connection)
        if not set(os.listdir(self.run_dir)) - known:
            return 0
        adopted = 0
        for name in self._backends_in_use():
            if name in self.unavailable:
                continue
            try:
                be = self.backend(name)
            except DependencyDown as e:
                if not skip_unavailable:
                    raise
                self.unavailable[name] = e
                continue
            for vnf_id, pid in be.discover():
                if vnf_id in known:
                    continue
                spec = self._orphan_spec(be, vnf_id)
                if spec is None:
                    continue
                self.store.add(VNFRecord(id=vnf_id, name=spec.name, backend=be.name,
                                         status=states.RUNNING, spec_json=json.dumps(spec.to_dict()),
                                         pid=pid))
                be.watch(spec, pid)
                adopted += 1
        return adopted

    def _backends_in_use(self):
        names = {self.conf.vnf.backend} | {r.backend for r in self.store.list()}
        return sorted(names)

    def _orphan_spec(self, be, vnf_id):
        """The spec of a running VNF the store does not know: the run directory's spec.json
        (kept current by warm claims), else what the backend kept (a libvirt domain's metadata:
        its spec at creation)."""
        try:
            with open(os.path.join(be.vnf_dir(vnf_id), "spec.json")) as f:
                return specmod.VNFSpec.from_dict(json.load(f))
        except (OSError, ValueError):
            pass
        return be.metadata_spec(vnf_id)

    # -- what the host can offer: session slots and queuing delay --
    def queuing_delay(self, backend: str | None = None) -> dict:
        """Expected time until a new slot exists = the on-demand launch time, from history.

        A ready warm shell means the next launch is warm, so the recent warm launch times apply;
        otherwise cold ones. ``seconds`` is None while there is no history to go on.
        """
        be = self.backend(backend)
        n = self.conf.vnf.launch_history
        shells = sum(self.store.count_pool(k, (states.POOL,)) for k in self._pool_keys(be.name))
        kind = states.WARM if shells else states.COLD         # §6.5: only this kind's history is read
        recent = [r.total_ms for r in self.store.recent_launches(n, be.name, kind)]
        qd = poolmod.queuing_delay(shells, {kind: recent}, n)
        return dict(qd, warm_shells=shells, backend=be.name)

    def _pool_keys(self, backend_name: str):
        return {r.pool_key for r in self.store.list(statuses=(states.POOL,), backend=backend_name)
                if r.pool_key}

    def slots(self) -> dict:
        """Session slots of all running VNFs on this host (asks each VNF)."""
        total = used = free = 0
        per_vnf = {}
        for rec in self.store.list(statuses=(states.RUNNING,)):
            try:
                s = self.stats(rec.id)["slots"]
            except (ControlError, OSError) as e:
                LOG.warning("no stats from %s: %s", rec.name, e)
                continue
            per_vnf[rec.name] = s
            total += s["total"]
            used += s["used"]
            free += s["free"]          # the VNF's own: at its QoE capacity when one is set
        return {"total": total, "used": used, "free": free, "vnfs": per_vnf}

