# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Cold migrate, resize and evacuate of VNF servers; live migration refused with what to do instead.

A VNF has no disk and nothing in its memory worth copying: what it runs is the server's Click
configuration (user_data, else the flavor's or image's), its flavor (vCPUs, memory, session slots)
and its ports, all of them in Nova's database. Moving it is starting it elsewhere from the same
spec. In Nova's terms (the compute manager calls these in this order; the driver keeps nothing the
database does not hold):

``migrate_disk_and_power_off`` (source)
    Checks the *new* flavor's ``fluidvim:*`` extra specs first: a flavor the VNF cannot run leaves
    the server running where it is (``InstanceFaultRollback``: ACTIVE again, the migration in
    ``error``, the reason in the server's fault). Then powers the VNF off as ``power_off`` does
    (its process, taps and launch-core record go; its instance name and slot-service records
    too: the slot agent announces it ``gone``) and unplugs its VIFs (os-vif's part, as the libvirt
    driver does). Returns an empty disk list. Its slots and memory are no longer used on this host;
    Placement keeps the source allocation under the migration's consumer until confirm/revert.
``finish_migration`` (target; the same host for a resize with ``allow_resize_to_same_host``)
    Starts the VNF from the instance as ``spawn`` does — with the *new* flavor's vCPUs, memory and
    session slots on a resize — unless the server was SHUTOFF (then it stays off). Like the libvirt
    driver it does not wait for ``network-vif-plugged`` here (Neutron may never see the unplug and
    replug of a moved port); ``finish_revert_migration`` and ``spawn`` do.
``confirm_migration`` (source)
    Nothing runs here any more; a VNF of the server still in this store (a power-off cut short) is
    removed. After a same-host resize the VNF that runs *is* the resized one: nothing is touched.
``revert_resize`` (target: ``destroy``) then ``finish_revert_migration`` (source)
    The target's VNF goes; the source starts the VNF again from the instance, whose flavor Nova
    has already put back (the old vCPUs, memory and slots), waiting for ``network-vif-plugged``
    as ``spawn`` does.
evacuate (``rebuild`` with ``evacuate=True``, ``supports_evacuate``)
    Nova's default implementation: ``spawn`` on the target. The source is down, its VNF may still
    run (a dead nova-compute, a network partition); when its nova-compute comes back, Nova's own
    ``_destroy_evacuated_instances`` asks the driver for its VNFs (``list_instance_uuids``:
    running, paused or crashed) and destroys the evacuated ones.

Restart rule (``process_instances_at_startup``, run by nova-compute's ``init_host`` after Nova's
evacuation cleanup and before any instance is touched or any request is served): every server VNF
in this compute's store whose instance Nova places on *another* host (``instance.host``) is
removed — with its taps, its VIFs (os-vif) and its name and slot-service records. That is a move
cut short between the target's start and Nova recording it (an evacuation target that died
before ``finish_evacuation`` set the host; a revert's target that died in its ``destroy``), or a
source whose power-off was cut short. Nova holds the truth (the instance's host); the VNF that
disagrees with it goes, so a server never runs twice and a later evacuation to this host is not
refused with "instance exists". VNFs of servers Nova no longer has (deleted) are left to Nova's
``running_deleted_instance_action`` periodic task, as for any driver. A crash on the *source*
before the move left it (``task_state`` RESIZE_MIGRATING) is Nova's own rule: ``_init_instance``
reverts it through ``finish_revert_migration``, which starts the VNF here again.

Two nova-compute services on one machine (the functional fixtures, the real-services run) share
its taps and Open vSwitch: servers with Neutron ports keep their ports' devnames on both hosts, so
a move between two computes of one machine works for VIFs whose tap does not still exist; the
tests move servers with launch-core tap names (``--nic none``).

Live migration is refused at its pre-check on the destination (``check_can_live_migrate_*``)
with ``NoValidHost`` naming what to do instead (cold migrate): no host can live-migrate a VNF, so
the conductor stops at once (a ``MigrationPreCheckError`` would make it try every other host and
report a bare "No valid host was found") and keeps the server ACTIVE on its VNF (a
NotImplementedError there would put it in ERROR). The message reaches the user as the API's 400
(``openstack server migrate --live-migration`` at microversions below 2.25, the CLI's default) or
the instance action's event (``openstack --os-compute-api-version 2.84 server event show``).
"""

from __future__ import annotations

import time

from nova import exception, objects
from oslo_log import log as logging

from fluidvim.common.measure import elapsed_ms
from fluidvim.nova_driver import extra_specs as fextra

LOG = logging.getLogger(__name__)

SYSMETA_STOPPED_AT = "fluidvim_move_stopped_at"   # wall clock when the source's VNF stopped
SYSMETA_MOVE_GAP = "fluidvim_move_gap_ms"         # source stopped -> target running (ms)

LIVE_MIGRATION_REFUSED = (       # Nova keeps 255 characters of a fault, "No valid host..." too
    "fluidvim: no live migration of VNFs (a VNF's state is its configuration and flavor); "
    "cold-migrate: `openstack server migrate SERVER`, then `openstack server migrate confirm "
    "SERVER`: it restarts there in milliseconds")


class MoveMixin:
    """Nova's move operations for :class:`~fluidvim.nova_driver.driver.UnikernelDriver` (which
    provides ``_start``, ``_vnf_off``, ``_destroy_vnfs``, ``unplug_vifs``,
    ``list_instance_uuids``, ``_slot_notes`` and ``_host``)."""

    # -- cold migrate and resize --
    def migrate_disk_and_power_off(self, context, instance, dest, flavor, network_info,
                                   block_device_info=None, timeout=0, retry_interval=0):
        problems = fextra.check(dict(flavor.extra_specs or {}))
        if problems:
            # before anything stops: the server stays where it is, ACTIVE
            raise exception.InstanceFaultRollback(inner_exception=exception.ResizeError(
                reason=f"flavor {flavor.name}: {'; '.join(problems)}"))
        t0 = time.perf_counter()
        n = self._vnf_off(instance, forget=True)
        self.unplug_vifs(instance, network_info)
        instance.system_metadata[SYSMETA_STOPPED_AT] = f"{time.time():.6f}"
        LOG.info("fluidvim: %s moves to %s: stopped %d VNF(s) here in %.1f ms", instance.uuid,
                 dest, n, elapsed_ms(t0, 1), instance=instance)
        return "[]"                                   # no disks to copy

    def finish_migration(self, context, migration, instance, disk_info, network_info,
                         image_meta, resize_instance, allocations, block_device_info=None,
                         power_on=True, share_info=None):
        image_id = image_meta.id if image_meta.obj_attr_is_set("id") else instance.image_ref
        self._move_in(context, instance, image_id, network_info, power_on, allocations,
                      image_meta, wait_vifs=False, what=f"{migration.migration_type} from "
                      f"{migration.source_compute}")

    def confirm_migration(self, context, migration, instance, network_info):
        if migration.source_compute == migration.dest_compute:
            return                  # a same-host resize: the VNF running here is the new one
        n = self._destroy_vnfs(instance.uuid, forget=True)
        if n:
            LOG.warning("fluidvim: removed %d VNF(s) of %s left on the source of its move",
                        n, instance.uuid, instance=instance)

    def finish_revert_migration(self, context, instance, network_info, migration,
                                block_device_info=None, power_on=True, share_info=None):
        self._move_in(context, instance, instance.image_ref, network_info, power_on,
                      what=f"revert of its move to {migration.dest_compute}")

    def _move_in(self, context, instance, image_id, network_info, power_on, allocations=None,
                 image_meta=None, *, wait_vifs=True, what=""):
        sysmeta = instance.system_metadata
        if power_on:
            self._start(context, instance, image_id, network_info, allocations, image_meta,
                        wait_vifs=wait_vifs)
        else:
            self._vnf_off(instance)                   # normally none: a SHUTOFF server stays off
        stopped = sysmeta.pop(SYSMETA_STOPPED_AT, None)
        gap = None
        if stopped and power_on:
            gap = round((time.time() - float(stopped)) * 1000.0, 1)
            sysmeta[SYSMETA_MOVE_GAP] = str(gap)
        if self._slot_notes is not None:
            self._slot_notes.spawned(instance)       # its service, for the slot updates
        LOG.info("fluidvim: %s %s here (%s)%s", instance.uuid,
                 "started" if power_on else "stays off", what,
                 "" if gap is None else f"; {gap} ms since its VNF stopped on the source",
                 instance=instance)

    # -- live migration: refused where Nova asks first --
    def check_can_live_migrate_destination(self, context, instance, src_compute_info,
                                           dst_compute_info, block_migration=False,
                                           disk_over_commit=False):
        raise exception.NoValidHost(reason=LIVE_MIGRATION_REFUSED)

    def check_can_live_migrate_source(self, context, instance, dest_check_data,
                                      block_device_info=None):
        raise exception.NoValidHost(reason=LIVE_MIGRATION_REFUSED)

    # -- restart: no half-moved VNF --
    def process_instances_at_startup(self, context, instances):
        """The restart rule of this module's docstring; then start publishing slot updates (not
        before: a VNF about to be removed as evacuated or half-moved is never announced)."""
        try:
            self._remove_half_moved(context, {i.uuid for i in instances})
        finally:
            if self._slot_notes is not None:
                self._slot_notes.start()
        return instances

    def _remove_half_moved(self, context, owned: set) -> int:
        strays = sorted(set(self.list_instance_uuids()) - owned)
        if not strays:
            return 0
        found = {i.uuid: i for i in objects.InstanceList.get_by_filters(
            context, {"uuid": strays, "deleted": False},
            expected_attrs=["info_cache", "system_metadata"])}
        removed = 0
        for uuid in strays:
            inst = found.get(uuid)
            if inst is None:
                LOG.info("fluidvim: VNF of %s, a server Nova no longer has: left to "
                         "[DEFAULT] running_deleted_instance_action", uuid)
                continue
            if inst.host == self._host:
                continue            # Nova's own (e.g. an evacuation it is cleaning up)
            n = self._destroy_vnfs(uuid, forget=True)
            self.unplug_vifs(inst, inst.get_network_info())
            removed += n
            LOG.warning("fluidvim: removed %d VNF(s) of %s found here at start-up: Nova places "
                        "the server on %s (task %s), so this copy is a move cut short", n, uuid,
                        inst.host, inst.task_state, instance=inst)
        return removed
