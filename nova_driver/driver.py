# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Nova compute driver for unikernel VNFs: ``[DEFAULT] compute_driver = fluidvim.UnikernelDriver``.

A Nova server is one VNF of the launch core (:class:`fluidvim.vnf.manager.VNFManager`), named after
the instance UUID. The Glance image *is* the VNF kernel (a PVH ELF, disk_format ``aki`` or
``raw``): it is downloaded once into a cache keyed by image id and checksum and booted directly —
no disk, no config drive, no key injection. A boot whose kernel is cached and whose
image properties Nova's boot-time snapshot holds whole needs no Glance round trip at all
(:mod:`~fluidvim.nova_driver.imagecache`). What the VNF runs comes from the flavor's
extra specs and the image's properties:

===============================  ===================================  =========================
flavor extra spec                image property                       meaning
===============================  ===================================  =========================
``fluidvim:click_config``        ``fluidvim_click_config``            Click configuration
``resources:CUSTOM_VNF_SESSION_SLOT`` / ``fluidvim:session_slots``
                                 ``fluidvim_session_slots``           session slots (flow table)
``fluidvim:nics``                ``fluidvim_nics``                    NICs when there is no VIF
``fluidvim:warm``                                                     false: never a warm shell
``fluidvim:backend``                                                  qemu or libvirt
``fluidvim:qoe_capacity``, ``fluidvim:qoe_deadline_ms``, ``fluidvim:qoe_quantile``
                                                                     slots at the QoE
``fluidvim:qoe_budget_ns``, ``fluidvim:qoe_wait_ppm``                 its budgets (optional)
===============================  ===================================  =========================

The flavor wins over the image, both over ``[fluidvim]``/``[vnf]`` defaults. The server's
``user_data`` (day-0 configuration from Heat, Tacker, OSM, ``openstack server create --user-data``)
wins over all of them for the Click configuration when it holds one: plain Click text, or the
``#click-config`` / ``text/x-click-config`` part of a MIME multi-part (cloud-config and script
parts are ignored with a log line; :mod:`~fluidvim.nova_driver.userdata`). A configuration the VNF
rejects aborts the build with the server's fault naming its source, line and column. Unknown
``fluidvim:*`` extra specs or bad values fail the build too (the rules nova-api applies at
microversion 2.86+: :mod:`~fluidvim.nova_driver.extra_specs`). Memory and vCPUs are
the flavor's. VIFs of type ``bridge`` are plugged into their network's bridge with their MAC and
their port's devname as tap name; VIFs of type ``ovs`` (ML2/OVS, OVN) go through os-vif as in the
libvirt driver (hybrid: the tap joins ``qbr``; plain: the launch core adds the tap to the
integration bridge with the port's external ids; see :mod:`fluidvim.nova_driver.vifs`); a
server without VIFs (``--nic none``) gets unplugged NICs.
With ``[vnf] pool_size`` > 0 a server is a warm launch when a shell of its shape is ready: flavor
memory = ``[vnf] memory_mb``, 1 vCPU, NIC count (its VIFs, or ``fluidvim:nics``) =
``[vnf] pool_nics``, and the image's kernel the same bytes as ``[vnf] kernel``; Neutron ports'
MACs and devnames do not prevent it.

Cold migrate, resize (also to the same host) and evacuate start the VNF on the target from the
server's spec and remove it on the source; live migration is refused with what to do instead; a VNF
that a move cut short is removed when its nova-compute restarts
(:mod:`~fluidvim.nova_driver.moves`).
"""

from __future__ import annotations

import json
import os
import threading
import time

import nova.conf
import nova.virt.node
import os_resource_classes as orc
from nova import exception
from nova.compute import power_state
from nova.image import glance
from nova.objects import fields as obj_fields
from nova.virt import driver, event as virtevent, hardware
from oslo_log import log as logging
from oslo_utils import versionutils

import fluidvim
from fluidvim.common.measure import elapsed_ms
from fluidvim.nova_driver import (
    compat,
    conf as fconf,
    slots as fslots,
    vifs as vifmod,
)
from fluidvim.nova_driver.imagecache import SYSMETA_MAX, KernelCache
from fluidvim.nova_driver.moves import LIVE_MIGRATION_REFUSED, MoveMixin
from fluidvim.nova_driver.names import InstanceNames
from fluidvim.nova_driver.request import SLOT_RC, server_launch, spec_error_reason
from fluidvim.vnf import (
    backends,
    cgroups,
    conf as vnfconf,
    limits,
    ovs as ovsmod,
    spec as specmod,
    states as vstates,
)
from fluidvim.vnf.control import ControlError
from fluidvim.vnf.manager import VNFManager

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF
vnfconf.register_opts(CONF)
fconf.register_opts(CONF)

IMAGE_API = glance.API()

ACCEL_TRAITS = {"kvm": "CUSTOM_UNIKERNEL_KVM", "tcg": "CUSTOM_UNIKERNEL_TCG"}
BACKEND_TRAITS = {vstates.QEMU: "CUSTOM_FLUIDVIM_BACKEND_QEMU",
                  vstates.LIBVIRT: "CUSTOM_FLUIDVIM_BACKEND_LIBVIRT"}
# a VNF status -> the server's Nova power state (get_info); a RUNNING or PAUSED VNF whose process
# is gone reads CRASHED, a status not here (booting, stopped) NOSTATE
POWER_STATE = {vstates.RUNNING: power_state.RUNNING, vstates.PAUSED: power_state.PAUSED,
               vstates.CRASHED: power_state.CRASHED}
# the launch-core records that are a server's VNF (not a warm shell)
_SERVER_STATUSES = (vstates.BOOTING, vstates.RUNNING, vstates.PAUSED, vstates.CRASHED,
                    vstates.STOPPED)
# the VNFs that hold their memory and vCPUs
_RESIDENT = (vstates.RUNNING, vstates.PAUSED)
MAX_VNF_VCPUS = limits.VCPUS_MAX            # placement max_unit = what one VNF may ask for
MAX_VNF_MEMORY_MB = limits.MEMORY_MB_MAX
SYSMETA_POWER = "fluidvim_power"          # "off" after power_off: get_info says SHUTDOWN
VERSION = fluidvim.__version__



def _phases_json(phases: dict, limit: int = SYSMETA_MAX) -> str:
    """``phases`` as compact JSON that fits a system_metadata value (255 characters): rounded
    to 0.1 ms and then without the launch core's sub-phases if needed — always valid JSON."""
    text = json.dumps(phases, separators=(",", ":"))
    if len(text) > limit:
        phases = {k: round(v, 1) for k, v in phases.items()}
        text = json.dumps(phases, separators=(",", ":"))
    if len(text) > limit:
        text = json.dumps({k: v for k, v in phases.items() if not k.startswith("launch_")},
                          separators=(",", ":"))
    return text


def _host_memory_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 0


class UnikernelDriver(MoveMixin, driver.ComputeDriver):
    """Servers are unikernel VNFs started by fluidvim's launch core."""

    capabilities = dict(
        driver.ComputeDriver.capabilities,
        # a VNF is recreated from its spec on another host (moves.py)
        supports_evacuate=True,
        # the image is the kernel: an "aki" (kernel image) or a raw upload of the ELF
        supports_image_type_aki=True,
        supports_image_type_raw=True,
    )

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi)
        self._manager = None
        self._names = None
        self._manager_lock = threading.Lock()
        self._slot_notes = None           # [fluidvim] slot_notifications: the publisher thread
        self.image_cache = KernelCache(IMAGE_API)    # Glance images = VNF kernels, cached here
        # the node this driver serves (init_host's host, the node uuid): several nova-compute
        # services in one process (Nova's functional fixtures) share CONF.host and Nova's cached
        # local node uuid
        self._host = None
        self._node_uuid = None

    # -- the launch core --
    @property
    def manager(self) -> VNFManager:
        with self._manager_lock:
            if self._manager is None:
                vifmod.initialize()
                if not CONF.vnf.ovsdb_connection:
                    # the OVS database os-vif uses is the one OVS NICs' taps are added to
                    ovsmod.configure(CONF.os_vif_ovs.ovsdb_connection)
                self._manager = VNFManager(CONF)
                self._manager.death_listeners.append(self._vnf_died)
            return self._manager

    @property
    def names(self) -> InstanceNames:
        manager = self.manager          # outside the lock: the property takes it too
        with self._manager_lock:
            if self._names is None:
                # the launch core's database and engine: one WAL commit per spawn
                self._names = InstanceNames(manager.store.engine, CONF.vnf.state_dir)
            return self._names

    def init_host(self, host):
        self._host = host
        summary = self.manager.recover()
        LOG.info("fluidvim: launch core on %s (%s, %s): %s", host, self.manager.accel,
                 self.manager.accel_reason, summary)
        if CONF.vnf.pool_size:
            key = self.manager.start_pool()
            LOG.info("fluidvim: warm pool %s of %d shells", key, CONF.vnf.pool_size)
        # publishing starts in process_instances_at_startup, after Nova's evacuation cleanup
        self._slot_notes = fslots.SlotNotifications.start_if_enabled(
            CONF, lambda: self.manager, self.names, host, start=False)

    _startup_done = False

    def _startup_without_hook(self):
        """nova 31-33 have no process_instances_at_startup: run it on the first resource update
        after init_host (nova_driver/compat.py), with the instances Nova places on this host."""
        from nova import context as nova_context, objects

        self._startup_done = True
        ctx = nova_context.get_admin_context()
        self.process_instances_at_startup(ctx, objects.InstanceList.get_by_host(ctx, self._host))

    def cleanup_host(self, host):
        if self._slot_notes is not None:
            self._slot_notes.stop()
            self._slot_notes = None
        if self._manager is not None:
            self._manager.close()
            self._manager = None
        if self._names is not None:
            self._names.close()
            self._names = None

    def _records(self, instance_uuid: str):
        """Launch-core records of a server, oldest first (normally exactly one)."""
        return self.manager.store.list(statuses=_SERVER_STATUSES,
                                       name=instance_uuid)

    def _record(self, instance):
        recs = self._records(instance.uuid)
        return recs[-1] if recs else None

    def _destroy_vnfs(self, instance_uuid: str, forget: bool = False) -> int:
        if forget:
            self.names.forget(instance_uuid)
        n = 0
        for vnf_id in self.manager.store.ids_named(instance_uuid):
            try:
                self.manager.destroy(vnf_id)
                n += 1
            except KeyError:
                pass            # gone meanwhile (e.g. its death was just handled)
        if forget and self._slot_notes is not None:
            self._slot_notes.destroyed(instance_uuid)
        return n

    def _vnf_died(self, vnf_id, reason):
        """The launch core saw a VNF die on its own: tell the compute manager at once."""
        rec = self.manager.store.get(vnf_id)
        if rec is None or rec.status == vstates.POOL:
            return
        LOG.warning("fluidvim: VNF %s of instance %s died: %s", vnf_id, rec.name, reason)
        try:
            self.emit_event(virtevent.LifecycleEvent(rec.name,
                                                     virtevent.EVENT_LIFECYCLE_STOPPED))
        except Exception:  # noqa: BLE001 - never kill the launch core's watcher thread
            LOG.exception("fluidvim: could not emit the lifecycle event of %s", rec.name)

    # -- instances --
    def list_instances(self):
        """Instance names (``instance-0000002a``) of the servers whose VNF runs here."""
        names = self.names.all()
        return [names.get(u, u) for u in self.list_instance_uuids()]

    def list_instance_uuids(self):
        return [r.name for r in self.manager.list() if _is_uuid(r.name)]

    def get_info(self, instance, use_cache=True):
        rec = self._record(instance)
        if rec is None:
            if (instance.system_metadata or {}).get(SYSMETA_POWER) == "off":
                return hardware.InstanceInfo(state=power_state.SHUTDOWN)
            raise exception.InstanceNotFound(instance_id=instance.uuid)
        state = POWER_STATE.get(rec.status, power_state.NOSTATE)
        if rec.status in _RESIDENT and not self.manager.backend(rec.backend).alive(rec.spec,
                                                                                    rec.pid):
            state = power_state.CRASHED
        return hardware.InstanceInfo(state=state, internal_id=rec.id)

    def get_console_output(self, context, instance):
        rec = self._record(instance)
        if rec is None:
            raise exception.ConsoleNotAvailable()
        return self.manager.backend(rec.backend).console_output(rec.spec)

    def get_diagnostics(self, instance):
        """The VNF's own counters (control channel ``stats``): uptime, session slots, where its
        vCPU's time went (``vcpu_busy_us``/``_poll_us``/``_halt_us``/``_stolen_us``, the last
        the time the host kept it from running: a VNF that polls shows ~100 % on the host while
        busy is what its processing used), and per tap rx/tx packets,
        bytes and drops; ``power_watts``, ``power_joules`` and ``power_source`` when the host's
        exporter attributes power (``fluidvim metrics serve``). (The newer
        ``get_instance_diagnostics`` object only admits the libvirt/xenapi/vmwareapi/ironic/hyperv
        drivers, so it is not offered.) ``vnf_stats``: the ``stats`` reply itself
        (contract/PROTOCOL.md: NIC MACs, element counters, latency histogram; with ``host_cpu``
        where the VNF's cgroup has schedstat), which the orchestrator's Nova zone reads."""
        rec = self._record(instance)
        if rec is None or rec.status != vstates.RUNNING:
            raise exception.InstanceNotRunning(instance_id=instance.uuid)
        try:
            st = self.manager.stats(rec.id)
        except (ControlError, OSError) as e:
            raise exception.InstanceNotRunning(instance_id=instance.uuid) from e
        spec = rec.spec
        diag = {"uptime": st["uptime_us"] // 1_000_000, "memory": spec.memory_mb * 1024,
                "vcpus": spec.vcpus, "session_slots_total": st["slots"]["total"],
                "session_slots_used": st["slots"]["used"],
                "session_slots_rejected": st["slots"]["rejected"]}
        for key in ("busy_us", "poll_us", "halt_us", "stolen_us"):
            if key in st.get("cpu", {}):
                diag[f"vcpu_{key}"] = st["cpu"][key]
        for nic, counters in zip(spec.nics, st["nics"]):
            for key in ("rx", "tx", "drop", "rx_bytes", "tx_bytes"):
                diag[f"{nic.tap}_{key}"] = counters[key]
        waits = cgroups.cpu_waits(rec.id)
        diag["vnf_stats"] = st if waits is None else {**st, "host_cpu": waits}
        # its power by useful work, when the host runs `fluidvim metrics serve`: watts of the
        # last interval, joules since the exporter started, and which source measured the host
        pw = self.manager.power(rec.id)
        if pw is not None:
            diag.update(power_watts=round(pw["watts"], 3), power_joules=round(pw["joules"], 1),
                        power_source=pw["source"])
        return diag

    def poll_rebooting_instances(self, timeout, instances):
        """Nothing to do: a reboot (reconfigure or relaunch) finishes inside ``reboot()``."""

    def get_host_uptime(self):
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        return (f"{time.strftime('%H:%M:%S')} up {int(up // 86400)} days, "
                f"{int(up % 86400 // 3600)}:{int(up % 3600 // 60):02d}, "
                f"load average: {', '.join(load)}")

    def get_host_ip_addr(self):
        return CONF.my_ip

    # -- spawn and friends --
    def spawn(self, context, instance, image_meta, injected_files, admin_password,
              allocations, network_info=None, block_device_info=None, power_on=True,
              accel_info=None):
        if block_device_info and block_device_info.get("block_device_mapping"):
            raise exception.BuildAbortException(
                instance_uuid=instance.uuid,
                reason="fluidvim VNFs have no disks: volumes cannot be attached")
        if injected_files:
            LOG.warning("fluidvim: ignoring %d injected files of %s (VNFs have no "
                        "filesystem)", len(injected_files), instance.uuid, instance=instance)
        image_id = image_meta.id if image_meta.obj_attr_is_set("id") else instance.image_ref
        self._start(context, instance, image_id, network_info, allocations, image_meta)
        if self._slot_notes is not None:
            self._slot_notes.spawned(instance)
        if not power_on:
            self.power_off(instance)

    def _start(self, context, instance, image_id, network_info, allocations=None,
               image_meta=None, wait_vifs=True):
        t0 = time.perf_counter()
        phases = {}
        if not image_id:
            raise exception.BuildAbortException(
                instance_uuid=instance.uuid,
                reason="fluidvim needs a Glance image (the VNF kernel); boot from volume is "
                       "not supported")
        kernel, props, cached = self.image_cache.fetch(context, image_id, instance, image_meta)
        phases["image"] = elapsed_ms(t0, 2)
        t = time.perf_counter()
        launch = server_launch(instance, props, network_info, CONF)
        vnics = launch.vifs
        phases["spec"] = elapsed_ms(t, 2)
        t = time.perf_counter()
        stale = self._destroy_vnfs(instance.uuid)      # normally none (one query)
        if stale:
            LOG.info("fluidvim: removed %d stale VNF(s) of %s", stale, instance.uuid,
                     instance=instance)
        phases["stale"] = elapsed_ms(t, 2)
        os_vifs = any(n.osvif is not None for n in vnics)
        if os_vifs:
            t = time.perf_counter()
            vifmod.plug(instance, vnics)               # os-vif: qbr/veths, integration bridge
            phases["os_vif"] = elapsed_ms(t, 2)
        try:
            iname = instance.name
        except Exception:  # noqa: BLE001 - e.g. no id yet: list_instances falls back to the uuid
            LOG.debug("fluidvim: no instance name for %s", instance.uuid)
            iname = None
        # the name is written in the launch's own commit: no VNF, no name
        on_record = self.names.writer(instance.uuid, iname) if iname else None
        try:
            res = self._launch_when_plugged(instance, launch.args.with_changes(kernel=kernel),
                                            launch.config_source, on_record, network_info,
                                            phases, wait_vifs)
        except BaseException:
            if os_vifs:             # like the libvirt driver's _cleanup_failed_start
                vifmod.unplug(instance, network_info)
            raise
        if res.kind == vstates.COLD and res.boot_us is not None:
            # the guest's own clock, vCPU reset → ready: the part of launch_boot that is the
            # kernel booting (the rest is QEMU starting and the ready event reaching us)
            phases["guest_boot"] = round(res.boot_us / 1000.0, 2)
        total = elapsed_ms(t0, 2)
        phases["total"] = total
        sysmeta = instance.system_metadata
        sysmeta["fluidvim_vnf_id"] = res.vnf_id
        sysmeta["fluidvim_launch_kind"] = res.kind
        sysmeta["fluidvim_backend"] = res.backend
        sysmeta["fluidvim_spawn_ms"] = str(total)
        sysmeta["fluidvim_phases_ms"] = _phases_json(phases)
        sysmeta[SYSMETA_POWER] = "on"
        LOG.info("fluidvim: spawned %s as %s VNF %s (%s, %s) in %.1f ms (image %s): %s",
                 instance.uuid, res.kind, res.vnf_id, res.backend, res.accel, total,
                 "cached" if cached else "downloaded", phases, instance=instance)
        return res

    def _launch_when_plugged(self, instance, args, source, on_record, network_info, phases,
                             wait_vifs=True):
        """Launch the VNF; like the libvirt driver, VIFs Neutron reports down must come up
        (network-vif-plugged, sent once its agent sees the tap) before the server is ACTIVE —
        unless ``wait_vifs`` is false (a migration's target, as the libvirt driver's)."""
        timeout = CONF.vif_plugging_timeout
        events = vifmod.plug_events(network_info) if timeout and wait_vifs else []
        t = time.perf_counter()
        try:
            with compat.wait_for_instance_event(self.virtapi, instance, events, timeout,
                                                error_callback=self._neutron_failed):
                res = self._launch(instance, args, source, on_record)
                phases["launch"] = elapsed_ms(t, 2)
                t = time.perf_counter()
        except compat.EVENT_TIMEOUT:
            if CONF.vif_plugging_is_fatal:
                self._destroy_vnfs(instance.uuid)
                LOG.error("fluidvim: timed out after %ss waiting for %s of %s", timeout, events,
                          instance.uuid, instance=instance)
                raise exception.VirtualInterfaceCreateException() from None
            LOG.warning("fluidvim: timed out after %ss waiting for %s of %s; continuing "
                        "([DEFAULT] vif_plugging_is_fatal = false)", timeout, events,
                        instance.uuid, instance=instance)
        except exception.VirtualInterfaceCreateException:
            self._destroy_vnfs(instance.uuid)          # Neutron reported the port failed
            raise
        if events:
            phases["vif_wait"] = elapsed_ms(t, 2)
        for k, v in res.phases_ms.items():          # the launch core's own phases
            phases[f"launch_{k}"] = round(v, 2)
        return res

    def _launch(self, instance, args, source, on_record):
        """Launch ``args`` (:mod:`~fluidvim.nova_driver.request`): the launch core's errors
        as Nova's (``source``: where the Click configuration came from)."""
        try:
            return self.manager.launch(args, on_record=on_record)
        except ControlError as e:
            if e.code == "config" and e.field:          # e.g. macs[1]: a port's MAC
                raise exception.BuildAbortException(
                    instance_uuid=instance.uuid,
                    reason=f"the VNF rejected {e.field}: {e}") from e
            if e.code == "config":
                # where first: Nova keeps 255 characters of the fault message
                where = f" at line {e.line}, column {e.col}" if e.line else ""
                raise exception.BuildAbortException(
                    instance_uuid=instance.uuid,
                    reason=f"the VNF rejected the Click configuration from {source}{where}: "
                           f"{e.message}") from e
            raise exception.InstanceDeployFailure(reason=str(e)) from e
        except specmod.SpecError as e:
            raise exception.BuildAbortException(instance_uuid=instance.uuid,
                                                reason=spec_error_reason(e, source)) from e
        except backends.LaunchError as e:
            raise exception.InstanceDeployFailure(reason=str(e)) from e

    @staticmethod
    def _neutron_failed(event_name, instance):
        LOG.error("fluidvim: Neutron reported failure on %s of %s", event_name, instance.uuid,
                  instance=instance)
        if CONF.vif_plugging_is_fatal:
            raise exception.VirtualInterfaceCreateException()

    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        n = self._destroy_vnfs(instance.uuid, forget=True)
        self.unplug_vifs(instance, network_info)
        LOG.info("fluidvim: destroyed %d VNF(s) of %s", n, instance.uuid, instance=instance)

    def cleanup(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, migrate_data=None, destroy_vifs=True,
                destroy_secrets=True):
        self._destroy_vnfs(instance.uuid, forget=True)
        if destroy_vifs:
            self.unplug_vifs(instance, network_info)

    def reboot(self, context, instance, network_info, reboot_type,
               block_device_info=None, bad_volumes_callback=None, accel_info=None,
               share_info=None):
        rec = self._record(instance)
        if reboot_type == "SOFT" and rec is not None and rec.status == vstates.RUNNING:
            # a soft reboot restarts the VNF's element graph (counters and flow table reset)
            try:
                self.manager.configure(rec.id, rec.config, slots=rec.spec.session_slots)
                LOG.info("fluidvim: soft reboot of %s reconfigured VNF %s", instance.uuid,
                         rec.id, instance=instance)
                return
            except (ControlError, OSError) as e:
                LOG.warning("fluidvim: soft reboot of %s failed (%s); rebooting hard",
                            instance.uuid, e, instance=instance)
        self._start(context, instance, instance.image_ref, network_info)

    def pause(self, instance):
        """Stop the VNF's vCPUs (QMP ``stop`` / libvirt suspend): it keeps its memory, flows,
        taps and counters, forwards nothing and offers no session slot until unpaused."""
        self._power_op(instance, self.manager.pause)

    def unpause(self, instance):
        self._power_op(instance, self.manager.unpause)

    def _power_op(self, instance, op) -> None:
        rec = self._record(instance)
        if rec is None:
            raise exception.InstanceNotFound(instance_id=instance.uuid)
        try:
            op(rec.id)
        except (ControlError, backends.LaunchError) as e:
            raise exception.NovaException(f"fluidvim: {e}") from None

    def power_off(self, instance, timeout=0, retry_interval=0):
        self._vnf_off(instance)

    def _vnf_off(self, instance, forget: bool = False) -> int:
        """Destroy the server's VNF(s) and remember it is off (get_info: SHUTDOWN); ``forget``:
        also its instance name and slot records (it is leaving this host)."""
        n = self._destroy_vnfs(instance.uuid, forget=forget)
        instance.system_metadata[SYSMETA_POWER] = "off"
        return n

    def power_on(self, context, instance, network_info, block_device_info=None,
                 accel_info=None, share_info=None):
        self._start(context, instance, instance.image_ref, network_info)

    def resume_state_on_host_boot(self, context, instance, network_info, share_info,
                                  block_device_info=None):
        self._start(context, instance, instance.image_ref, network_info)

    def plug_vifs(self, instance, network_info):
        """os-vif's part of ``ovs`` VIFs (hybrid bridges, the integration bridge); taps are
        made by the hypervisor and plugged by the launch core when the VNF starts."""
        vifmod.plug(instance, vifmod.nics_for(instance.uuid, network_info))

    def unplug_vifs(self, instance, network_info):
        """Taps go with their VNF (and the launch core removes their OVS ports); os-vif
        removes what it made for ``ovs`` VIFs."""
        vifmod.unplug(instance, network_info)

    # -- resources --
    def get_available_nodes(self, refresh=False):
        return [self._host or CONF.host]

    def _local_node_uuid(self) -> str:
        # Nova reads the node's uuid once per process (compute_id file); kept per driver from its
        # first use (ComputeManager.init_host, right after ours) for several services in one process
        if self._node_uuid is None:
            self._node_uuid = nova.virt.node.get_local_node_uuid()
        return self._node_uuid

    def get_nodenames_by_uuid(self, refresh=False):
        return {self._local_node_uuid(): self.get_available_nodes()[0]}

    def _slot_capacity(self) -> int:
        if CONF.fluidvim.session_slot_capacity:
            return CONF.fluidvim.session_slot_capacity
        mem = max(0, _host_memory_mb() - CONF.reserved_host_memory_mb)
        return max(1, mem // CONF.vnf.memory_mb) * CONF.vnf.session_slots

    def _host_resources(self) -> dict:
        st = os.statvfs(self.image_cache.directory())
        specs = [r.spec for r in self.manager.list() if r.status in _RESIDENT]
        return {
            "vcpus": os.cpu_count() or 1,
            "memory_mb": _host_memory_mb(),
            "local_gb": st.f_blocks * st.f_frsize // 1024 ** 3,
            "local_gb_free": st.f_bavail * st.f_frsize // 1024 ** 3,
            "vcpus_used": sum(s.vcpus for s in specs),
            "memory_mb_used": sum(s.memory_mb for s in specs),
        }

    def host_stats(self) -> dict:
        """What the scheduler weighers read (host_state.stats), all strings."""
        qd = self.manager.queuing_delay()
        slots = self.manager.slots()
        stats = {
            "fluidvim_queuing_delay_ms": ("" if qd["seconds"] is None
                                          else f"{qd['seconds'] * 1000.0:.3f}"),
            "fluidvim_queuing_basis": qd["basis"],
            "fluidvim_warm_shells": str(qd["warm_shells"]),
            "fluidvim_slot_capacity": str(self._slot_capacity()),
            "fluidvim_slots_total": str(slots["total"]),
            "fluidvim_slots_used": str(slots["used"]),
            "fluidvim_slots_free": str(slots["free"]),
            "fluidvim_accel": self.manager.accel,
        }
        return stats

    def get_available_resource(self, nodename):
        if not compat.STARTUP_HOOK and not self._startup_done and self._host is not None:
            self._startup_without_hook()
        res = self._host_resources()
        hv_type = (obj_fields.HVType.KVM if self.manager.accel == "kvm"
                   else obj_fields.HVType.QEMU)
        return {
            "vcpus": res["vcpus"],
            "memory_mb": res["memory_mb"],
            "local_gb": res["local_gb"],
            "vcpus_used": res["vcpus_used"],
            "memory_mb_used": res["memory_mb_used"],
            "local_gb_used": res["local_gb"] - res["local_gb_free"],
            "hypervisor_type": "fluidvim",
            "hypervisor_version": versionutils.convert_version_to_int(VERSION),
            "hypervisor_hostname": nodename,
            "cpu_info": json.dumps({"arch": obj_fields.Architecture.X86_64,
                                    "accel": self.manager.accel}),
            "disk_available_least": res["local_gb_free"],
            "supported_instances": [(obj_fields.Architecture.X86_64, hv_type,
                                     obj_fields.VMMode.HVM)],
            "numa_topology": None,
            "uuid": self._local_node_uuid(),
            "stats": self.host_stats(),
        }

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        res = self._host_resources()
        ratios = self._get_allocation_ratios(provider_tree.data(nodename).inventory)
        capacity = self._slot_capacity()
        inventory = {
            orc.VCPU: {
                "total": res["vcpus"], "min_unit": 1,
                "max_unit": min(res["vcpus"], MAX_VNF_VCPUS), "step_size": 1,
                "allocation_ratio": ratios[orc.VCPU], "reserved": CONF.reserved_host_cpus,
            },
            orc.MEMORY_MB: {
                "total": res["memory_mb"], "min_unit": 1,
                "max_unit": min(res["memory_mb"], MAX_VNF_MEMORY_MB), "step_size": 1,
                "allocation_ratio": ratios[orc.MEMORY_MB],
                "reserved": CONF.reserved_host_memory_mb,
            },
            SLOT_RC: {
                "total": capacity, "min_unit": 1, "max_unit": min(capacity, limits.SLOTS_MAX),
                "step_size": 1, "allocation_ratio": 1.0, "reserved": 0,
            },
        }
        if res["local_gb"] > 0:
            inventory[orc.DISK_GB] = {
                "total": res["local_gb"], "min_unit": 1, "max_unit": res["local_gb"],
                "step_size": 1, "allocation_ratio": ratios[orc.DISK_GB],
                "reserved": self._get_reserved_host_disk_gb_from_config(),
            }
        provider_tree.update_inventory(nodename, inventory)
        want = {ACCEL_TRAITS[self.manager.accel], BACKEND_TRAITS[CONF.vnf.backend]}
        stale = (set(ACCEL_TRAITS.values()) | set(BACKEND_TRAITS.values())) - want
        provider_tree.remove_traits(nodename, *stale)
        provider_tree.add_traits(nodename, *want)


def _is_uuid(name: str) -> bool:
    from oslo_utils import uuidutils
    return uuidutils.is_uuid_like(name)


def _unsupported(op: str, why: str = "unikernel VNFs have no disk or guest agent"):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"fluidvim: {op} is not supported ({why})")
    method.__name__ = op
    method.__doc__ = f"Not supported by fluidvim: {why}."
    return method


for _op in ("snapshot", "set_admin_password", "rescue", "unrescue", "suspend", "resume",
            "soft_delete", "restore", "trigger_crash_dump", "attach_volume", "detach_volume",
            "swap_volume", "extend_volume", "get_vnc_console", "get_spice_console",
            "get_serial_console", "get_mks_console", "quiesce", "unquiesce",
            "get_volume_connector"):
    setattr(UnikernelDriver, _op, _unsupported(_op))
for _op in ("live_migration", "pre_live_migration"):      # never reached: the pre-check refuses
    setattr(UnikernelDriver, _op, _unsupported(_op, LIVE_MIGRATION_REFUSED.split(": ", 1)[1]))
for _op in ("attach_interface", "detach_interface"):
    setattr(UnikernelDriver, _op, _unsupported(
        _op, "a VNF's NICs are fixed at boot: the microvm machine's virtio-mmio devices have no "
             "hotplug; rebuild or recreate the server with the new ports"))
del _op
