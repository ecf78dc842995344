# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The Nova driver's kernel cache (as nova's ``virt/imagecache.py`` is the libvirt driver's).

The Glance image *is* the VNF kernel: it is downloaded once into ``[fluidvim] image_cache_dir``
(default ``<[vnf] state_dir>/images``), keyed by image id and checksum, verified (Glance's hash,
an ELF header) and booted directly. An index entry per image (``<image id>.json``) records the
verified file's checksum, size and mtime, so a boot whose kernel is cached and whose image
properties Nova's boot-time snapshot holds whole needs no Glance round trip at all
(:meth:`KernelCache._cached_boot`).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading

import nova.conf
from nova import exception, utils as nova_utils
from oslo_concurrency import lockutils
from oslo_log import log as logging

from fluidvim.vnf import conf as vnfconf, spec as specmod

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

SYSMETA_MAX = 255                         # Nova's system_metadata value length
ELF_MAGIC = b"\x7fELF"


def _unchanged(path: str, entry: dict) -> bool:
    """The cache file still has the size and mtime its index entry recorded."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_size == entry["size"] and st.st_mtime_ns == entry["mtime_ns"]


_FIRMWARE_PLACED: set = set()     # cache directories given the firmware by this process


class KernelCache:
    """Glance images as VNF kernels on this compute host. ``image_api`` is Nova's
    ``nova.image.glance.API`` (the driver's ``IMAGE_API``)."""

    def __init__(self, image_api):
        self.image_api = image_api

    def directory(self) -> str:
        d = CONF.fluidvim.image_cache_dir or os.path.join(CONF.vnf.state_dir, "images")
        os.makedirs(d, mode=0o750, exist_ok=True)
        if d not in _FIRMWARE_PLACED:
            self._place_firmware(d)
            _FIRMWARE_PLACED.add(d)
        return d

    @staticmethod
    def _place_firmware(d: str) -> None:
        """Put the microvm boot firmware beside the cached kernels (``[vnf] firmware = auto``
        takes it from the kernel's directory, vnf/spec.py firmware_for): a copy of the one beside
        the default kernel ([vnf] kernel), when that exists and the cache has none or another."""
        src = os.path.join(os.path.dirname(os.path.abspath(CONF.vnf.kernel or
                                                           vnfconf.default_kernel())),
                           specmod.PVH_FIRMWARE)
        dst = os.path.join(d, specmod.PVH_FIRMWARE)
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError:
            return
        try:
            with open(dst, "rb") as f:
                if f.read() == data:
                    return
        except OSError:
            pass
        part = f"{dst}.part-{os.getpid()}"
        with open(part, "wb") as f:
            f.write(data)
        os.replace(part, dst)

    def fetch(self, context, image_id, instance=None, image_meta=None):
        """The cached kernel of a Glance image: (path, properties, was_cached).

        A boot whose kernel is already cached does not ask Glance (like the libvirt driver's
        image cache): see :meth:`_cached_boot`. Otherwise the image's metadata comes from
        Glance, and the kernel is downloaded and verified (checksum, ELF) unless a cache file
        that still matches its index entry (or, failing that, its Glance checksum) exists.
        """
        if instance is not None and image_meta is not None:
            hit = self._cached_boot(instance, image_meta)
            if hit is not None:
                return hit[0], hit[1], True
        meta = self.image_api.get(context, image_id)
        algo, digest = meta.get("os_hash_algo"), meta.get("os_hash_value")
        if not digest and meta.get("checksum"):
            algo, digest = "md5", meta["checksum"]
        path = os.path.join(self.directory(), f"{image_id}-{(digest or 'any')[:32]}")
        props = dict(meta.get("properties") or {})
        with lockutils.lock(f"fluidvim-image-{image_id}"):
            if os.path.exists(path):
                entry = self._cache_entry(image_id)
                if entry is not None and entry["path"] == path and _unchanged(path, entry):
                    return path, props, True
                with open(path, "rb") as f:            # no (matching) index entry: verify once
                    data = f.read()
                try:
                    self._verify_kernel(image_id, data, algo, digest)
                except exception.ImageUnacceptable as e:
                    LOG.warning("fluidvim: cached kernel %s no longer matches image %s (%s); "
                                "downloading it again", path, image_id, e)
                    os.unlink(path)
                else:
                    self._index_kernel(image_id, path, meta)
                    return path, props, True
            part = f"{path}.part-{os.getpid()}"
            try:
                self.image_api.download(context, image_id, dest_path=part)
                with open(part, "rb") as f:
                    data = f.read()
                self._verify_kernel(image_id, data, algo, digest)
                os.replace(part, path)
            finally:
                if os.path.exists(part):
                    os.unlink(part)
            self._index_kernel(image_id, path, meta)
        LOG.info("fluidvim: cached image %s (%d bytes) at %s", image_id, len(data), path)
        return path, props, False

    @staticmethod
    def _verify_kernel(image_id, data: bytes, algo, digest) -> None:
        if digest and algo and algo in hashlib.algorithms_available:
            got = hashlib.new(algo, data).hexdigest()
            if got != digest:
                raise exception.ImageUnacceptable(
                    image_id=image_id, reason=f"{algo} {got} != {digest}")
        if data[:4] != ELF_MAGIC:
            raise exception.ImageUnacceptable(
                image_id=image_id, reason="not an ELF kernel: fluidvim boots the image "
                "as the VNF kernel (upload fluidvim-vnf.elf with disk_format aki or "
                "raw)")

    # The kernel cache's index: <cache>/<image id>.json names the verified file of that image
    # with Glance's md5 ``checksum`` and the file's size and mtime when it was verified. Glance
    # image data never changes once uploaded (a new upload is a new image id), so id + checksum
    # + size identify the kernel; size + mtime catch a cache file changed on disk since.
    def _index_path(self, image_id: str) -> str:
        return os.path.join(self.directory(), f"{image_id}.json")

    def _cache_entry(self, image_id: str) -> dict | None:
        try:
            with open(self._index_path(image_id)) as f:
                entry = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or not {"path", "checksum", "size",
                                               "mtime_ns"} <= set(entry):
            return None
        return entry

    def _index_kernel(self, image_id: str, path: str, meta: dict) -> None:
        st = os.stat(path)      # (without a Glance checksum the entry only spares re-hashing)
        entry = {"path": path, "checksum": meta.get("checksum"), "size": st.st_size,
                 "mtime_ns": st.st_mtime_ns, "os_hash_algo": meta.get("os_hash_algo"),
                 "os_hash_value": meta.get("os_hash_value")}
        index = self._index_path(image_id)
        tmp = f"{index}.part-{os.getpid()}-{threading.get_ident()}"
        with open(tmp, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, index)

    def _cached_boot(self, instance, image_meta):
        """(kernel, properties) of a boot served from the cache without asking Glance, or None.

        Taken only when everything needed is known without Glance: ``image_meta`` (the image as
        the API accepted the boot) has the id, md5 ``checksum`` and size of the cache index
        entry; the cache file still has the indexed size and mtime; and the instance's system
        metadata holds Nova's snapshot of the image properties (``image_*``, written by the API
        for every image boot) with no ``fluidvim_*`` value that Nova may have cut at 255
        characters. Otherwise the caller asks Glance, as before.
        """
        if not all(image_meta.obj_attr_is_set(f) for f in ("id", "checksum", "size")):
            return None
        sysmeta = instance.system_metadata or {}
        prefix = nova_utils.SM_IMAGE_PROP_PREFIX
        if f"{prefix}disk_format" not in sysmeta:
            return None                    # no boot-time snapshot of the image
        props = {k[len(prefix):]: v for k, v in sysmeta.items()
                 if k.startswith(f"{prefix}fluidvim_")}
        if any(len(str(v)) >= SYSMETA_MAX for v in props.values()):
            return None                    # possibly truncated by Nova: Glance has the whole
        entry = self._cache_entry(image_meta.id)
        if (entry is None or not entry["checksum"] or entry["checksum"] != image_meta.checksum
                or entry["size"] != image_meta.size or not _unchanged(entry["path"], entry)):
            return None
        return entry["path"], props
