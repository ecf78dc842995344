# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NFV packages as users hand them in: OSM packages and ETSI SOL004 CSARs.

* an **OSM package** (``osm package-build``): a ``.tar.gz`` holding one folder with the
  descriptor YAML, ``checksums.txt`` (``<md5> <path>`` per file, verified here), ``cloud_init/``,
  ``Scripts/``, ``charms/``, ``icons/``, ...;
* a **SOL004 CSAR** (``.zip``/``.csar``): ``TOSCA-Metadata/TOSCA.meta`` whose
  ``Entry-Definitions`` names the descriptor, or, without it, the one YAML file at the root
  (SOL004 §4.3.2: then a ``.mf`` manifest sits next to it).

:func:`unpack` extracts a package into a private temporary directory (removed when the process
exits; nothing in it escapes the directory) and returns the descriptor files to read, so the
descriptors are then read like files on disk (cloud-init files next to them, ...). The kernel of
a VNF is not taken from a package: a deploy names the image (``[osm_vim] images_dir``) or a file
on the orchestrator's host, and :func:`inside` lets the descriptor checks say so.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tarfile
import tempfile
import zipfile

DESCRIPTOR_SUFFIXES = (".yaml", ".yml", ".json")
META = os.path.join("TOSCA-Metadata", "TOSCA.meta")
_EXTRACTED: list[str] = []          # this process's temporary package directories


class PackageError(Exception):
    """A package that cannot be read: ``field`` (its member or part), the problem, the fix."""

    def __init__(self, field: str, message: str, fix: str = ""):
        super().__init__(message)
        self.field, self.message, self.fix = field, message, fix


def is_package(path: str) -> bool:
    """A tar (an OSM package, gzip or not) or zip (a CSAR) file."""
    if not os.path.isfile(path):
        return False
    try:
        return tarfile.is_tarfile(path) or zipfile.is_zipfile(path)
    except OSError:
        return False


def inside(path: str) -> str | None:
    """``path`` relative to the package it was unpacked from, or None."""
    full = os.path.abspath(path)
    for d in _EXTRACTED:
        if full.startswith(d + os.sep):
            return os.path.relpath(full, d)
    return None


@atexit.register
def _cleanup() -> None:
    while _EXTRACTED:
        shutil.rmtree(_EXTRACTED.pop(), ignore_errors=True)


def _extract(path: str, dest: str) -> None:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                parts = name.replace("\\", "/").split("/")
                if name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
                    raise PackageError(name, "a member outside the package's folder",
                                       "rebuild the CSAR with relative paths only")
            zf.extractall(dest)
        return
    try:
        with tarfile.open(path) as tf:
            tf.extractall(dest, filter="data")     # no absolute paths, links out, devices
    except tarfile.FilterError as e:
        raise PackageError(getattr(getattr(e, "tarinfo", None), "name", "tar"),
                           f"refused: {e}", "rebuild the package (osm package-build)") from None


def _root(dest: str) -> str:
    """The package's folder: an OSM tarball has exactly one at its top."""
    entries = [e for e in os.listdir(dest) if not e.startswith(".")]
    if os.path.isdir(os.path.join(dest, os.path.dirname(META))):
        return dest                                       # a CSAR's root
    if len(entries) == 1 and os.path.isdir(os.path.join(dest, entries[0])):
        return os.path.join(dest, entries[0])
    return dest


def _check_sums(root: str) -> None:
    """OSM's ``checksums.txt``: an md5 per file; a changed or missing file is refused."""
    path = os.path.join(root, "checksums.txt")
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(None, 1)
        if len(fields) != 2:
            raise PackageError(f"checksums.txt line {n}", f"{line!r} is not '<md5> <path>'",
                               "regenerate it (osm package-build)")
        want, name = fields[0].lower(), fields[1].strip()
        file = os.path.normpath(os.path.join(root, name))
        if not file.startswith(root + os.sep) or not os.path.isfile(file):
            raise PackageError(f"checksums.txt line {n}", f"{name} is not in the package",
                               "regenerate checksums.txt (osm package-build)")
        with open(file, "rb") as f:
            got = hashlib.md5(f.read(), usedforsecurity=False).hexdigest()
        if got != want:
            raise PackageError(f"checksums.txt line {n}", f"{name} has md5 {got}, not {want}: "
                               "the package was changed after it was built",
                               "rebuild it (osm package-build) or fix the file")


def _entry(root: str) -> list[str]:
    """The descriptor files of a CSAR: Entry-Definitions of TOSCA.meta, else the root YAML."""
    meta = os.path.join(root, META)
    if os.path.isfile(meta):
        with open(meta, encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "Entry-Definitions" and value.strip():
                    file = os.path.normpath(os.path.join(root, value.strip()))
                    if not file.startswith(root + os.sep) or not os.path.isfile(file):
                        raise PackageError(META, f"Entry-Definitions {value.strip()} is not in "
                                           "the package", "name the descriptor's path in it")
                    return [file]
        raise PackageError(META, "no Entry-Definitions", "add Entry-Definitions: <descriptor "
                           "path> (SOL004 §4.3.2)")
    return [os.path.join(root, n) for n in sorted(os.listdir(root))
            if n.endswith(DESCRIPTOR_SUFFIXES) and os.path.isfile(os.path.join(root, n))]


def unpack(path: str) -> tuple[str, list[str]]:
    """(the package's folder, its candidate descriptor files) after extracting ``path``. For an
    OSM package every YAML/JSON file of the folder and below; for a CSAR its entry descriptor."""
    dest = os.path.realpath(tempfile.mkdtemp(prefix="fluidvim-pkg-"))
    _EXTRACTED.append(dest)
    try:
        _extract(path, dest)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as e:
        raise PackageError("file", f"cannot unpack it: {e}",
                           "give an OSM package (.tar.gz) or a SOL004 CSAR (.zip)") from None
    root = _root(dest)
    _check_sums(root)
    if zipfile.is_zipfile(path) or os.path.isfile(os.path.join(root, META)):
        files = _entry(root)
    else:
        files = [os.path.join(r, n) for r, _d, names in sorted(os.walk(root))
                 for n in sorted(names) if n.endswith(DESCRIPTOR_SUFFIXES)]
    if not files:
        raise PackageError("file", "no descriptor (YAML/JSON) in the package",
                           "put the VNFD/NSD YAML in the package's folder")
    return root, files
