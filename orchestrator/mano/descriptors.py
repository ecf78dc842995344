# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NSD and VNFD import: OSM IM descriptors (SOL006-based, OSM >= 9) -> a fluidvim deployment plan.

A VNFD file is ``vnfd: {...}``; an NSD file is ``nsd: {nsd: [{...}]}`` (OSM IM); pure SOL006 is
read too: ``etsi-nfv-vnfd:vnfd``, ``etsi-nfv-nsd:nsd`` or an ``nfv:`` container (:func:`split`).
Each descriptor is first checked against ETSI's SOL006 YANG modules (:mod:`.sol006`: in full for a
document that claims SOL006, structure and types for OSM IM); then the subset fluidvim uses is
checked with the JSON Schemas in ``schemas/`` and for references between ids. Every problem names
the field by path (``vnfd.vdu[0].sw-image-desc``) and says how to fix it, all of them are reported
at once, and where fluidvim and SOL006 name the same field, fluidvim's message is the one kept.
Fields outside the subset that fluidvim does not act on are accepted and listed in the plan's
warnings.

The mapping (etc/mano/README.md has the user's version):

* VNF profile (NSD ``df[0].vnf-profile[]``) x VDU -> one fluidvim service ``<ns>-<profile>``
  (``<ns>-<profile>-<vdu>`` when the VNFD has several VDUs), started
  ``vnf-profile.min-number-of-instances`` x the VDU's count in the VNFD df's default
  ``instantiation-level`` (else ``vdu-profile.min-number-of-instances``) times; ``min/max-number-
  of-instances`` (NSD vnf-profile x VNFD vdu-profile) bound scaling and healing;
* the VNFD df's ``scaling-aspect``s (``aspect-delta-details``, ``step-deltas``,
  ``max-scale-level``; OSM IM ``scaling-policy`` or ``fluidvim-scale-*`` properties for the
  slot-driven scaler) -> ``Plan.aspects`` (see :class:`Flavour`, :mod:`.scaling`);
* ``sw-image-desc`` -> the kernel: ``image`` (else ``name``) is a file (absolute, or relative to the
  descriptor's directory) for the local and Nomad zones, or a Glance image name for Nova; an optional
  ``checksum`` is verified against the file;
* ``virtual-compute-desc`` -> memory: ``virtual-memory.vdu-mem-requirements`` key
  ``fluidvim-memory-mib`` (MiB, exactly), else ``virtual-memory.size`` (GB; SOL006 allows one
  decimal, 0.1 = 103 MiB; finer fractions such as 0.03125 = 32 MiB are still read from OSM IM
  files), and ``virtual-cpu.num-virtual-cpu``;
* day-0 configuration = the Click configuration: the VDU's ``cloud-init`` (inline, OSM IM),
  ``boot-data`` (inline, SOL006) or ``cloud-init-file`` (looked up in ``cloud_init/`` next to the
  descriptor, as OSM packages have it, then next to the descriptor);
* the VDU's ``int-cpd`` list (sorted by ``order`` when given) -> NICs 0, 1, ...; an int-cpd on an
  ``int-virtual-link-desc`` is on the VNF's internal network, one exposed by an ``ext-cpd`` is on
  the NS virtual link the NSD's ``virtual-link-connectivity`` names for that ext-cpd;
* session slots, QoS and the tolerable queuing delay: SOL006 ``configurable-properties`` keys
  ``fluidvim-session-slots``, ``fluidvim-deadline-ms``, ``fluidvim-qos-quantile``,
  ``fluidvim-session-pps`` and ``fluidvim-max-queuing-delay-s``, in the VDU's
  ``configurable-properties`` list or, for every VDU, in the VNFD's
  ``configurable-properties.additional-configurable-property`` (the VDU's value wins).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import math
import os
import re

import jsonschema
import yaml

from fluidvim.vnf import limits

from . import packages, sol006

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")       # = the orchestrator's service names
NETWORK_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")    # = common.zonetypes.NETWORK_NAME_RE
MAX_NICS = limits.MAX_NICS
MAX_VCPUS = limits.VCPUS_MAX
MEMORY_MIB = (limits.MEMORY_MB_MIN, limits.MEMORY_MB_MAX)
CLOUD_INIT_DIRS = ("cloud_init", "")
PACKAGE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip", ".csar")   # in a --vnfd directory
# virtual-memory.vdu-mem-requirements key: the VNF's memory in MiB, exactly (wins over size)
MEMORY_KEY = "fluidvim-memory-mib"

# configurable-properties key -> (service field, type, lo, hi)
PROPERTIES = {
    "fluidvim-session-slots": ("slots", int, limits.SLOTS_MIN, limits.SLOTS_MAX),
    "fluidvim-deadline-ms": ("deadline_ms", float, 0.001, 60000.0),
    "fluidvim-qos-quantile": ("qos_quantile", float, 0.5, 1.0),
    "fluidvim-session-pps": ("session_pps", float, 0.001, 1e9),
    "fluidvim-max-queuing-delay-s": ("max_queuing_delay_s", float, 0.0, 86400.0),
}
# configurable-properties keys of the slot-driven scaler (etc/mano/README.md, "Scaling"); not
# service fields: they go to the scaling aspects of the VNFD (an OSM IM scaling-policy wins)
SCALE_PROPERTIES = {
    "fluidvim-scale-cooldown-s": ("cooldown_s", float, 0.0, 86400.0),
    "fluidvim-scale-in-idle-s": ("idle_s", float, 0.0, 86400.0),
    "fluidvim-autoscale": ("auto", bool, 0, 1),
    "fluidvim-scale-out-free-slots": ("headroom", int, 0, 65536),
}
SCALE_DEFAULTS = {"cooldown_s": 10.0, "idle_s": 30.0, "auto": True, "headroom": 0}
SCALING_TYPES = {"automatic": True, "manual": False}
CHECKSUMS = {"sha-224": "sha224", "sha-256": "sha256", "sha-384": "sha384", "sha-512": "sha512",
             "sha224": "sha224", "sha256": "sha256", "sha384": "sha384", "sha512": "sha512",
             "md5": "md5"}

# what fluidvim reads (True = the whole subtree); anything else is valid SOL006 it ignores
_KV = {"key": True, "value": True}
VNFD_USED = {"vnfd": {
    "id": True, "product-name": True, "provider": True, "version": True, "description": True,
    "mgmt-cp": True,
    "vdu": {"id": True, "name": True, "description": True, "sw-image-desc": True,
            "virtual-compute-desc": True, "cloud-init": True, "cloud-init-file": True,
            "boot-data": True, "configurable-properties": _KV,
            "int-cpd": {"id": True, "order": True, "int-virtual-link-desc": True,
                        "description": True}},
    "sw-image-desc": {"id": True, "name": True, "version": True, "image": True,
                      "checksum": {"algorithm": True, "hash": True}},
    "virtual-compute-desc": {"id": True, "virtual-memory": {"size": True,
                                                            "vdu-mem-requirements": _KV},
                             "virtual-cpu": {"num-virtual-cpu": True}},
    "int-virtual-link-desc": {"id": True, "description": True},
    "ext-cpd": {"id": True, "int-cpd": {"vdu-id": True, "cpd": True}, "int-virtual-link-desc": True,
                "description": True},
    "df": {"id": True, "description": True,
           "vdu-profile": {"id": True, "min-number-of-instances": True,
                           "max-number-of-instances": True},
           "instantiation-level": {"id": True, "description": True,
                                   "vdu-level": {"vdu-id": True, "number-of-instances": True},
                                   "scaling-info": {"scaling-aspect-id": True,
                                                    "scale-level": True}},
           "default-instantiation-level": True,
           "scaling-aspect": {"id": True, "name": True, "description": True,
                              "max-scale-level": True,
                              "aspect-delta-details": {
                                  "deltas": {"id": True,
                                             "vdu-delta": {"id": True,
                                                           "number-of-instances": True}},
                                  "step-deltas": True},
                              "scaling-policy": {"name": True, "scaling-type": True,
                                                 "cooldown-time": True, "threshold-time": True}}},
    "configurable-properties": {"additional-configurable-property": _KV},
}}
NSD_USED = {"nsd": {"nsd": {
    "id": True, "name": True, "version": True, "designer": True, "description": True,
    "vnfd-id": True,
    "virtual-link-desc": {"id": True, "description": True},
    "df": {"id": True, "description": True,
           "vnf-profile": {"id": True, "vnfd-id": True, "flavour-id": True,
                           "min-number-of-instances": True, "max-number-of-instances": True,
                           "virtual-link-connectivity": {
                               "virtual-link-profile-id": True,
                               "constituent-cpd-id": {"constituent-base-element-id": True,
                                                      "constituent-cpd-id": True}}},
           "virtual-link-profile": {"id": True, "virtual-link-desc-id": True}},
}}}
# SOL006 names that look like ours but are different fields: never "did you mean" them
_SOL006_NEIGHBOURS = {"virtual-storage-desc", "software-version",
                      "os-container-desc", "virtual-link-desc", "vip-cpd", "virtual-cpd",
                      "int-virtual-link-desc", "vnfd-id", "nsd-id", "pnfd-id", "sapd"}


@dataclasses.dataclass
class Problem:
    source: str                 # file (or label) of the descriptor
    path: str                   # vnfd.vdu[0].sw-image-desc
    message: str
    fix: str = ""

    def __str__(self) -> str:
        return f"{self.source}: {self.path}: {self.message}" + (f"; {self.fix}" if self.fix else "")


class DescriptorError(ValueError):
    """Invalid descriptors; ``problems`` has every one of them (the first is ``.path``)."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(map(str, self.problems)))

    @property
    def path(self) -> str:
        return self.problems[0].path if self.problems else ""


@dataclasses.dataclass
class Document:
    """One descriptor file: its YAML content, where it came from, and the files it refers to.

    ``files`` records every cloud-init file read (relative name -> text). A document rebuilt on the
    orchestrator (:meth:`from_dict`) reads only those, never the orchestrator host's disk."""

    doc: object
    source: str
    base_dir: str | None = None
    files: dict = dataclasses.field(default_factory=dict)
    offline: bool = False                  # True: `files` is all there is
    sol006: bool = False                   # claims SOL006 (set by split(), never sent)
    # more day-0 folders (relative to base_dir) of a package's descriptor: the package root's
    # cloud_init/ and Scripts/cloud_init/ (a CSAR's descriptor is in Definitions/); never sent
    package_dirs: tuple = ()

    def read(self, rel: str) -> str | None:
        if rel in self.files:
            return self.files[rel]
        if self.offline or self.base_dir is None:
            return None
        path = os.path.join(self.base_dir, rel)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        self.files[rel] = text
        return text

    def to_dict(self) -> dict:
        return {"doc": self.doc, "source": self.source, "base_dir": self.base_dir,
                "files": dict(self.files)}

    @classmethod
    def from_dict(cls, d: dict) -> "Document":
        if not isinstance(d, dict) or "doc" not in d:
            raise DescriptorError([Problem("request", "descriptors", "expected {doc, source, "
                                           "base_dir, files}", "send what Document.to_dict() makes")])
        files = d.get("files") or {}
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise DescriptorError([Problem(str(d.get("source")), "files", "must map names to text")])
        return cls(d["doc"], str(d.get("source") or "descriptor"), d.get("base_dir"), dict(files),
                   offline=True)


def load(path: str) -> Document:
    """Read one YAML descriptor file (DescriptorError names the line of a syntax error)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise DescriptorError([Problem(path, "file", e.strerror or str(e),
                                       "give the path of an NSD/VNFD YAML file")]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        raise DescriptorError([Problem(path, where, f"not valid YAML: "
                                       f"{getattr(e, 'problem', None) or e}")]) from None
    return Document(doc, path, os.path.dirname(os.path.abspath(path)))


def load_package(path: str) -> list[Document]:
    """The descriptors in an OSM package (``osm package-build`` .tar.gz) or a SOL004 CSAR (.zip),
    unpacked by :mod:`.packages`; each Document's source is ``PACKAGE:member``."""
    try:
        root, files = packages.unpack(path)
    except packages.PackageError as e:
        raise DescriptorError([Problem(path, e.field, e.message, e.fix)]) from None
    out = []
    for f in files:
        d = load(f)
        d.source = f"{path}:{os.path.relpath(f, root)}"
        up = os.path.relpath(root, os.path.dirname(f))
        d.package_dirs = tuple(os.path.normpath(os.path.join(up, sub)) for sub in
                               (("cloud_init", "Scripts/cloud_init", "Scripts") if up != "."
                                else ("Scripts/cloud_init", "Scripts")))
        if _kinds(d.doc) != [(None, False)]:
            out.append(d)
    if not out:
        raise DescriptorError([Problem(path, "file", "the package holds no VNFD or NSD (a YAML "
                                       "file with a top-level 'vnfd:' or 'nsd:')",
                                       "put the descriptor in the package's folder")])
    return out


def _has(d: Document, kind: str) -> bool:
    return any(k == kind for k, _ in _kinds(d.doc))


def load_vnfds(paths) -> list[Document]:
    """VNFD files; a directory contributes every *.yaml / *.yml / *.json under it whose top key is
    ``vnfd`` (an OSM package tree: one folder per package), ``etsi-nfv-vnfd:vnfd`` or an ``nfv``
    container with VNFDs, and the VNFDs of every package file in it; a package file (OSM
    .tar.gz, SOL004 CSAR .zip) contributes its VNFDs."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            found = []
            for root, _dirs, names in sorted(os.walk(p)):
                for n in sorted(names):
                    f = os.path.join(root, n)
                    if n.endswith((".yaml", ".yml", ".json")):
                        d = load(f)
                        if _has(d, "vnfd"):
                            found.append(d)
                    elif n.endswith(PACKAGE_SUFFIXES) and packages.is_package(f):
                        found += [d for d in load_package(f) if _has(d, "vnfd")]
            if not found:
                raise DescriptorError([Problem(p, "--vnfd", "no VNFD (a YAML file with a top-level "
                                               "'vnfd:', or a package) in this directory")])
            out += found
        elif packages.is_package(p):
            found = [d for d in load_package(p) if _has(d, "vnfd")]
            if not found:
                raise DescriptorError([Problem(p, "--vnfd", "this package holds no VNFD",
                                               "give the VNF package (an NS package goes first)")])
            out += found
        else:
            out.append(load(p))
    return out


def _kinds(doc) -> list[tuple[str | None, bool]]:
    """[(kind, claims SOL006)] of the descriptors in a file: ``vnfd:`` / ``nsd:`` (OSM IM),
    ``etsi-nfv-vnfd:vnfd`` / ``etsi-nfv-nsd:nsd`` (SOL006, RFC 7951 names) or an ``nfv:``
    (``etsi-nfv-descriptors:nfv``) container with lists ``vnfd`` and ``nsd``."""
    if not isinstance(doc, dict) or len(doc) != 1:
        return [(None, False)]
    key, body = next(iter(doc.items()))
    kind, strict = sol006.TOP_KEYS.get(key, (None, False))
    if kind != "nfv":
        return [(kind, strict)]
    if not isinstance(body, dict):
        return [(None, False)]
    return ([("vnfd", True)] * len(body.get("vnfd") or [])
            + [("pnfd", True)] * len(body.get("pnfd") or [])
            + [("nsd", True)] * (1 if body.get("nsd") else 0))


def split(d: Document) -> list[tuple[str | None, Document]]:
    """[(kind, Document in the unqualified form fluidvim maps)] for one file. A file of another
    shape is returned as it is (kind None) for the checks to name what is wrong."""
    doc = d.doc
    kinds = _kinds(doc)
    if kinds == [(None, False)]:
        return [(None, d)]
    key, body = next(iter(doc.items()))

    def part(kind, value, strict, label=None):
        return kind, dataclasses.replace(d, doc={kind: value}, sol006=strict,
                                         source=d.source + (f" ({label})" if label else ""))

    if sol006.TOP_KEYS[key][0] != "nfv":
        kind, strict = kinds[0]
        return [part(kind, body, strict)]
    out = [part(kind, v, True, f"{key}.{kind}[{i}]") for kind in ("vnfd", "pnfd")
           for i, v in enumerate(body.get(kind) or [])]
    if body.get("nsd"):
        out.append(part("nsd", {"nsd": body["nsd"]}, True, f"{key}.nsd"))
    return out or [(None, d)]


@functools.lru_cache(maxsize=None)
def schema(kind: str) -> dict:
    with open(os.path.join(SCHEMA_DIR, f"{kind}.schema.json"), encoding="utf-8") as f:
        return json.load(f)


def fmt_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _schema_problems(doc, kind: str, source: str) -> list[Problem]:
    v = jsonschema.Draft202012Validator(schema(kind))
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        path = fmt_path(e.absolute_path) or kind
        if e.validator == "required":
            missing = e.message.split("'")[1] if "'" in e.message else e.message
            out.append(Problem(source, f"{path}.{missing}" if e.absolute_path else missing,
                               "is required", f"add {missing!r} (see etc/mano/README.md)"))
        elif e.validator == "type":
            out.append(Problem(source, path, f"{e.instance!r} is not of type {e.validator_value}",
                               f"write a {' or '.join(_list(e.validator_value))}"))
        elif e.validator == "additionalProperties":
            continue
        else:
            out.append(Problem(source, path, e.message))
    return out


def _list(x):
    return x if isinstance(x, list) else [x]


def ignored_fields(doc, used, prefix: str = "") -> tuple[list[str], list[str]]:
    """(paths present in ``doc`` that fluidvim ignores, "did you mean" hints for likely typos)."""
    ignored, hints = [], []
    seen = set()

    def walk(node, spec, path):
        if spec is True:
            return
        if isinstance(node, list):
            for item in node:
                walk(item, spec, path + "[]")
            return
        if not isinstance(node, dict):
            return
        for k, v in node.items():
            p = f"{path}.{k}" if path else str(k)
            if k in spec:
                walk(v, spec[k], p)
            elif p not in seen:
                seen.add(p)
                ignored.append(p)
                close = difflib.get_close_matches(str(k), list(spec), n=1, cutoff=0.85)
                if close and k not in _SOL006_NEIGHBOURS:
                    hints.append(f"{p}: unknown field, ignored; did you mean {close[0]!r}?")

    walk(doc, used, prefix)
    return ignored, hints


# -- the model --
@dataclasses.dataclass
class Nic:
    cpd: str                    # the VDU's int-cpd id
    network: str | None         # logical network: an NS virtual link id or "<profile>/<ivl>"


@dataclasses.dataclass
class Unit:
    """One VDU of one VNF profile: a fluidvim service with ``instances`` launches."""

    profile: str
    vnfd: str
    vdu: str
    service: str                # service name (depends on the NS name)
    instances: int
    kernel: str                 # absolute path, or an image name (Nova)
    kernel_is_file: bool
    memory_mb: int | None
    vcpus: int
    click_config: str
    nics: list
    properties: dict            # service fields from configurable-properties
    min_instances: int = 1      # never fewer (scale in, heal), never more than max_instances
    max_instances: int = 1

    def service_fields(self) -> dict:
        """Keyword arguments of Orchestrator.register_service (besides name and click_config)."""
        return {"memory_mb": self.memory_mb, "vcpus": self.vcpus, "kernel": self.kernel,
                **self.properties}


@dataclasses.dataclass
class Plan:
    name: str
    nsd: str
    df: str
    vnfds: list                 # ids
    networks: dict              # logical network -> zone network name
    units: list
    warnings: list
    aspects: list = dataclasses.field(default_factory=list)   # scaling aspects (see Flavour)

    def to_dict(self) -> dict:
        return {"name": self.name, "nsd": self.nsd, "df": self.df, "vnfds": list(self.vnfds),
                "networks": dict(self.networks),
                "units": [dataclasses.asdict(u) for u in self.units],
                "warnings": list(self.warnings), "aspects": [dict(a) for a in self.aspects]}


def _overlap(a: str, b: str) -> bool:
    """One path is the other or inside it (vnfd.ext-cpd[0].int-cpd / ...int-cpd.cpd)."""
    return a == b or b.startswith((a + ".", a + "[")) or a.startswith((b + ".", b + "["))


class _Checker:
    def __init__(self):
        self.problems: list[Problem] = []
        self.warnings: list[str] = []
        self.yang: list[Problem] = []          # SOL006 YANG violations
        self.raw: dict = {}                    # id(Document) -> its RFC 7951 body (YANG checked)

    def add(self, source, path, message, fix=""):
        self.problems.append(Problem(source, path, message, fix))

    def merged(self) -> list[Problem]:
        """fluidvim's problems, then the YANG violations it did not name itself: where both
        catch the same field, fluidvim's message (which says what fluidvim needs) wins."""
        out = list(self.problems)
        for y in self.yang:
            if not any(p.source == y.source and _overlap(p.path, y.path) for p in self.problems):
                out.append(y)
        return out

    def yang_check(self, d: Document, kind: str) -> None:
        """The document's structure and types against ETSI's SOL006 YANG (sol006.check_document);
        an OSM IM document's fields that are neither SOL006 nor OSM IM become a warning."""
        body = d.doc[kind]
        try:
            probs, unknown, raw, numbers = sol006.check_document(kind, body, d.sol006, kind)
        except Exception as e:                         # noqa: BLE001 - never hide the mapping
            self.warnings.append(f"{d.source}: SOL006 YANG check failed: {e}")
            return
        for path, message, fix in probs:
            self.yang.append(Problem(d.source, path, f"SOL006: {message}", fix))
        if unknown:
            self.warnings.append(f"{d.source}: not in SOL006 {sol006.ETSI_VERSION} nor a known "
                                 f"OSM IM extension: {', '.join(unknown)}")
        if not probs and raw is not None:
            self.raw[id(d)] = raw
        for parts, number in numbers:              # "4.0" (RFC 7951 decimal64) -> 4.0
            node = d.doc
            for p in parts[:-1]:
                node = node[p]
            node[parts[-1]] = number

    def yang_tree(self, nsd: Document | None, vnfds: list, pnfds: list = ()) -> None:
        """Full SOL006 validation of the documents that claim SOL006, together with every
        descriptor given (an NSD's references into its VNFDs resolve)."""
        strict = [d for d in [*vnfds, *pnfds, nsd] if d is not None and d.sol006]
        if not strict or any(id(d) not in self.raw for d in strict):
            return                                     # structure/type problems come first
        entries, where, which = {"vnfd": [], "pnfd": [], "nsd": []}, {}, []
        for kind, docs in (("vnfd", vnfds), ("pnfd", pnfds)):
            ids = set()
            for d in docs:
                raw = self.raw.get(id(d))
                if raw is None or raw.get("id") in ids:
                    continue
                ids.add(raw.get("id"))
                where[(kind, len(entries[kind]))] = (d, kind, 0)
                entries[kind].append(raw)
        if nsd is not None and id(nsd) in self.raw:
            for k, e in enumerate(self.raw[id(nsd)].get("nsd") or []):
                where[("nsd", k)] = (nsd, "nsd.nsd", k)
                entries["nsd"].append(e)
        for key, (d, _p, _k) in where.items():
            if d.sol006:
                which.append(key)
        try:
            found = sol006.validate_tree(entries, which)
        except Exception as e:                         # noqa: BLE001
            self.warnings.append(f"SOL006 YANG validation failed: {e}")
            return
        for pos, route, message, fix in found:
            d, prefix, k = where[which[pos]]
            rest = list(route[3:])
            path = fmt_path([prefix, *rest]) if prefix != "nsd.nsd" else \
                fmt_path(["nsd", "nsd", k, *rest])
            self.yang.append(Problem(d.source, path, f"SOL006: {message}", fix))

    def ids(self, source, items, path, what) -> dict:
        """{id: index}; duplicates are problems."""
        out = {}
        for i, it in enumerate(items or []):
            if not isinstance(it, dict) or "id" not in it:
                continue
            if it["id"] in out:
                self.add(source, f"{path}[{i}].id", f"duplicate {what} id {it['id']!r} (also "
                         f"{path}[{out[it['id']]}])", "give every one its own id")
            else:
                out[it["id"]] = i
        return out


def _one_of(value, ids, what) -> str:
    return f"{value!r} is not one of the {what} ids ({', '.join(map(str, ids)) or 'none defined'})"


def _number(c, source, path, value, typ, lo, hi):
    try:
        v = typ(value) if not isinstance(value, bool) else None
        if v is None or (typ is int and float(value) != v):
            raise ValueError
    except (TypeError, ValueError):
        c.add(source, path, f"{value!r} is not {'an integer' if typ is int else 'a number'}")
        return None
    if not (math.isfinite(v) and lo <= v <= hi):
        c.add(source, path, f"{value!r} is out of range [{lo:g}, {hi:g}]")
        return None
    return v


def _memory_mib(c, source, vm: dict, path: str) -> int | None:
    """The exact memory in MiB from ``virtual-memory.vdu-mem-requirements`` key
    :data:`MEMORY_KEY` (SOL006's size is GB in steps of 0.1, far more than a unikernel VNF
    needs), or None when not given."""
    for i, kv in enumerate(vm.get("vdu-mem-requirements") or []):
        if isinstance(kv, dict) and kv.get("key") == MEMORY_KEY:
            return _number(c, source, f"{path}.vdu-mem-requirements[{i}].value",
                           kv.get("value"), int, *MEMORY_MIB)
    return None


def _properties(c, source, items, path) -> dict:
    out = {}
    for i, kv in enumerate(items or []):
        if not isinstance(kv, dict):
            continue
        key, p = kv.get("key"), f"{path}[{i}]"
        if key in SCALE_PROPERTIES and SCALE_PROPERTIES[key][1] is bool:
            if "value" not in kv:
                c.add(source, f"{p}.value", f"{key} needs a value")
                continue
            b = _boolean(kv["value"])
            if b is None:
                c.add(source, f"{p}.value", f"{kv['value']!r} is not a boolean",
                      "write true or false")
            else:
                out[SCALE_PROPERTIES[key][0]] = b
        elif key in PROPERTIES or key in SCALE_PROPERTIES:
            field, typ, lo, hi = PROPERTIES.get(key) or SCALE_PROPERTIES[key]
            if "value" not in kv:
                c.add(source, f"{p}.value", f"{key} needs a value")
                continue
            v = _number(c, source, f"{p}.value", kv["value"], typ, lo, hi)
            if v is not None:
                out[field] = v
        elif isinstance(key, str) and key.startswith("fluidvim-"):
            known = [*PROPERTIES, *SCALE_PROPERTIES]
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            c.add(source, f"{p}.key", f"unknown fluidvim property {key!r}",
                  f"did you mean {close[0]!r}?" if close else
                  f"use one of {', '.join(known)}")
    return out


def _boolean(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    return None


def _service_props(props: dict) -> dict:
    """The service fields among parsed configurable properties (the scaler's are not)."""
    fields = {f for f, *_ in PROPERTIES.values()}
    return {k: v for k, v in props.items() if k in fields}


def _kernel(c, d: Document, sw: dict, path: str) -> tuple[str, bool]:
    ref = sw.get("image") or sw.get("name")
    if not ref:
        c.add(d.source, f"{path}.image", "the image is missing",
              "give the VNF kernel: a file path (local/Nomad zones) or a Glance image name (Nova)")
        return "", False
    if re.match(r"[a-z][a-z0-9+.-]*://", str(ref)):
        c.add(d.source, f"{path}.{'image' if sw.get('image') else 'name'}", f"{ref!r} is a URL: "
              "fluidvim does not download images",
              "give the kernel file's path (local/Nomad zones) or a Glance image name (Nova)")
        return ref, False
    pathlike = "/" in ref or ref.startswith(".") or ref.endswith(".elf")
    full = ref if os.path.isabs(ref) else os.path.normpath(os.path.join(d.base_dir or ".", ref))
    is_file = os.path.isfile(full)
    if pathlike and not is_file:
        c.add(d.source, f"{path}.{'image' if sw.get('image') else 'name'}",
              f"kernel file {full} does not exist",
              "build it (make -C unikernel) or fix the path (relative paths are relative to the "
              "descriptor's directory)")
        return full, True
    if not is_file:
        return ref, False                              # an image name (Glance)
    member = packages.inside(full)
    if member is not None:
        c.add(d.source, f"{path}.{'image' if sw.get('image') else 'name'}",
              f"the package carries the kernel file {member}: fluidvim does not upload images",
              "copy it to the orchestrator host's [osm_vim] images_dir as NAME.elf and give "
              "sw-image-desc.image: NAME (OSM names images too)")
        return full, True
    ck = sw.get("checksum")
    if isinstance(ck, dict) and ck.get("algorithm") and ck.get("hash"):
        algo = CHECKSUMS.get(str(ck["algorithm"]).rpartition(":")[2].lower())  # nfv:sha-256
        if algo is None:
            c.add(d.source, f"{path}.checksum.algorithm", f"unsupported algorithm "
                  f"{ck['algorithm']!r}", "use sha-256, sha-512 or md5")
        else:
            h = hashlib.new(algo)
            with open(full, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            if h.hexdigest() != str(ck["hash"]).lower():
                c.add(d.source, f"{path}.checksum.hash", f"{full} has {ck['algorithm']} "
                      f"{h.hexdigest()}, not {ck['hash']}",
                      "update the hash (or remove checksum) after rebuilding the kernel")
    return full, True


def _day0(c, d: Document, vdu: dict, path: str) -> str | None:
    given = [k for k in ("cloud-init", "boot-data", "cloud-init-file") if k in vdu]
    if len(given) > 1:
        c.add(d.source, f"{path}.{given[1]}", f"both {given[0]} and {given[1]} are set",
              "give the Click configuration once")
        return None
    if not given:
        c.add(d.source, f"{path}.{'boot-data' if d.sol006 else 'cloud-init-file'}",
              "the VDU has no day-0 configuration",
              "set cloud-init-file (a Click configuration in cloud_init/ next to the descriptor) "
              "or cloud-init (inline) in OSM IM, boot-data (inline) in SOL006")
        return None
    key = given[0]
    if key != "cloud-init-file":
        text = vdu[key]
    else:
        name = vdu[key]
        if os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
            c.add(d.source, f"{path}.cloud-init-file", f"{name!r} must be a name inside the "
                  "package", "put the file in cloud_init/ next to the descriptor")
            return None
        text = None
        for sub in (*CLOUD_INIT_DIRS, *d.package_dirs):
            text = d.read(os.path.join(sub, name) if sub else name)
            if text is not None:
                # where the orchestrator's copy of the document looks first
                d.files.setdefault(os.path.join(CLOUD_INIT_DIRS[0], name), text)
                break
        if text is None:
            where = d.base_dir or "the descriptor's directory"
            c.add(d.source, f"{path}.cloud-init-file", f"{name!r} not found in "
                  f"{os.path.join(where, 'cloud_init')} or {where}",
                  "put the VDU's Click configuration there")
            return None
    if not isinstance(text, str) or not text.strip():
        c.add(d.source, f"{path}.{key}", "the Click configuration is empty",
              "write the VNF's packet-processing graph, e.g. FromDevice(0) -> ToDevice(1);")
        return None
    return text


@dataclasses.dataclass
class Flavour:
    """A VNFD deployment flavour as fluidvim uses it."""

    id: str
    vdus: dict                   # vdu id -> {"min", "max", "initial"} instances
    level: str | None            # the instantiation level applied (None: the vdu-profile minima)
    aspects: dict                # aspect id -> {"max_scale_level", "initial_level", "steps":
    #                              [{"delta", "vdus": {vdu: n}}], "cooldown_s", "idle_s", "auto"}


def _count(c, src, path, value, lo=0, hi=65535):
    """A uint16-ish instance count (None when it is not one; the problem is recorded)."""
    return _number(c, src, path, value, int, lo, hi)


def _flavour(c, src, df: dict, p: str, vdus: dict, props: dict) -> Flavour:
    """Check one VNFD ``df``: vdu-profile min/max, instantiation levels (the default one sets the
    instances a deploy starts), scaling aspects (aspect-delta-details, step-deltas; OSM IM
    scaling-policy or fluidvim-scale-* properties for the slot-driven scaler)."""
    out = {}
    for k, vp in enumerate(df.get("vdu-profile") or []):
        q = f"{p}.vdu-profile[{k}]"
        if vp["id"] not in vdus:
            c.add(src, f"{q}.id", _one_of(vp["id"], vdus, "vdu"))
            continue
        lo = _count(c, src, f"{q}.min-number-of-instances", vp.get("min-number-of-instances", 1))
        hi = vp.get("max-number-of-instances")
        if hi is not None:
            hi = _count(c, src, f"{q}.max-number-of-instances", hi)
            if hi is not None and lo is not None and hi < lo:
                c.add(src, f"{q}.max-number-of-instances", f"{hi} is below "
                      f"min-number-of-instances {lo}", "make max-number-of-instances >= "
                      "min-number-of-instances")
                hi = None
        lo = 1 if lo is None else lo
        out[vp["id"]] = {"min": lo, "max": hi, "initial": lo, "path": q}
    levels = c.ids(src, df.get("instantiation-level"), f"{p}.instantiation-level",
                   "instantiation-level")
    level = df.get("default-instantiation-level")
    if level is not None and level not in levels:
        c.add(src, f"{p}.default-instantiation-level",
              _one_of(level, levels, "instantiation-level"), "name one of the df's levels")
        level = None
    elif level is None and len(levels) > 1:
        c.add(src, f"{p}.default-instantiation-level", f"{len(levels)} instantiation levels "
              f"({', '.join(levels)}) and no default-instantiation-level",
              "name the level a deploy starts at (SOL006 requires it with several levels)")
    elif level is None and levels:
        level = next(iter(levels))              # a single level is the default (SOL006)
    scale_levels = {}
    initial = {}
    for lid, li in levels.items():              # every level within min/max (SOL006), the
        lp = f"{p}.instantiation-level[{li}]"   # default one sets what a deploy starts
        il = df["instantiation-level"][li]
        for m, vl in enumerate(il.get("vdu-level") or []):
            q = f"{lp}.vdu-level[{m}]"
            vid = vl.get("vdu-id")
            if vid not in out:
                c.add(src, f"{q}.vdu-id", _one_of(vid, list(out), f"df {df['id']} vdu-profile"),
                      "a level may only count VDUs of the flavour's vdu-profile")
                continue
            n = _count(c, src, f"{q}.number-of-instances", vl.get("number-of-instances", 1))
            if n is None:
                continue
            prof = out[vid]
            if n < prof["min"]:
                c.add(src, f"{q}.number-of-instances", f"{n} is below min-number-of-instances "
                      f"{prof['min']} of {prof['path']}", "raise it, or lower the minimum")
            elif prof["max"] is not None and n > prof["max"]:
                c.add(src, f"{q}.number-of-instances", f"{n} is above max-number-of-instances "
                      f"{prof['max']} of {prof['path']}", "lower it, or raise the maximum")
            elif lid == level:
                initial[vid] = n
        for m, si in enumerate(il.get("scaling-info") or []):
            scale_levels.setdefault(si.get("scaling-aspect-id"), []).append(
                (f"{lp}.scaling-info[{m}]", si.get("scale-level", 0), lid == level))
    for vid, n in initial.items():
        out[vid]["initial"] = n
    for prof in out.values():                   # SOL006's default maximum is 1: never below
        if prof["max"] is None:                 # what is started
            prof["max"] = max(prof["min"], prof["initial"])
    aspects = {}
    aids = c.ids(src, df.get("scaling-aspect"), f"{p}.scaling-aspect", "scaling-aspect")
    for aid, i in aids.items():
        a = df["scaling-aspect"][i]
        q = f"{p}.scaling-aspect[{i}]"
        top = a.get("max-scale-level")
        if top is not None:
            top = _count(c, src, f"{q}.max-scale-level", top, 1, 1 << 31)
        details = a.get("aspect-delta-details")
        if not isinstance(details, dict) or not details.get("deltas"):
            c.add(src, f"{q}.aspect-delta-details.deltas", "the aspect has no scaling delta",
                  "add aspect-delta-details: {deltas: [{id, vdu-delta: [{id: VDU, "
                  "number-of-instances: N}]}]}")
            continue
        dids = c.ids(src, details["deltas"], f"{q}.aspect-delta-details.deltas", "delta")
        deltas = {}
        for did, k in dids.items():
            dq = f"{q}.aspect-delta-details.deltas[{k}]"
            counts = {}
            for m, vd in enumerate(details["deltas"][k].get("vdu-delta") or []):
                if vd.get("id") not in out:
                    c.add(src, f"{dq}.vdu-delta[{m}].id", _one_of(
                        vd.get("id"), list(out), f"df {df['id']} vdu-profile"),
                        "a delta may only scale VDUs of the flavour's vdu-profile")
                    continue
                n = _count(c, src, f"{dq}.vdu-delta[{m}].number-of-instances",
                           vd.get("number-of-instances", 1))
                if n is not None:
                    counts[vd["id"]] = n
            if not any(counts.values()):
                c.add(src, f"{dq}.vdu-delta", "the delta adds no instance",
                      "give at least one vdu-delta with number-of-instances >= 1")
            deltas[did] = counts
        steps = details.get("step-deltas")
        if steps is None:
            if len(deltas) > 1:
                c.add(src, f"{q}.aspect-delta-details.step-deltas", f"{len(deltas)} deltas "
                      "and no step-deltas", "list the delta of each scaling step")
                continue
            steps = list(deltas)
        steps = steps if isinstance(steps, list) else [steps]
        bad = False
        for m, sid in enumerate(steps):
            if sid not in deltas:
                c.add(src, f"{q}.aspect-delta-details.step-deltas" + (
                    f"[{m}]" if isinstance(details.get("step-deltas"), list) else ""),
                    _one_of(sid, list(deltas), "delta"))
                bad = True
        if bad or not steps:
            continue
        cfg = {**SCALE_DEFAULTS, **{k: v for k, v in props.items() if k in SCALE_DEFAULTS}}
        for m, pol in enumerate(a.get("scaling-policy") or []):   # OSM IM: the first policy
            pq = f"{q}.scaling-policy[{m}]"
            st = pol.get("scaling-type")
            if st is not None:
                if st not in SCALING_TYPES:
                    c.add(src, f"{pq}.scaling-type", f"{st!r} is not one of "
                          f"{', '.join(SCALING_TYPES)}")
                else:
                    cfg["auto"] = SCALING_TYPES[st]
            for key, field in (("cooldown-time", "cooldown_s"), ("threshold-time", "idle_s")):
                if key in pol:
                    v = _number(c, src, f"{pq}.{key}", pol[key], float, 0.0, 86400.0)
                    if v is not None:
                        cfg[field] = v
            break
        initial = 0
        for sp, lvl, is_default in scale_levels.pop(aid, []):
            lvl = _count(c, src, f"{sp}.scale-level", lvl, 0, 1 << 31)
            if lvl is not None and top is not None and lvl > top:
                c.add(src, f"{sp}.scale-level", f"{lvl} is above max-scale-level {top} of {q}")
            elif lvl is not None and is_default:
                initial = lvl
        aspects[aid] = {"max_scale_level": top, "initial_level": initial, "path": q,
                        "steps": [{"delta": sid, "vdus": dict(deltas[sid])} for sid in steps],
                        **cfg}
        for vid in {v for s in steps for v, n in deltas[s].items() if n}:
            prof = out[vid]
            if prof["max"] <= prof["initial"]:
                c.warnings.append(f"{src}: {q}: VDU {vid} is at its max-number-of-instances "
                                  f"({prof['max']}) from the start: this aspect cannot scale it "
                                  f"out (set {prof['path']}.max-number-of-instances)")
    for aid, infos in scale_levels.items():
        for sp, _lvl, _d in infos:
            c.add(src, f"{sp}.scaling-aspect-id", _one_of(aid, list(aids), "scaling-aspect"))
    for prof in out.values():
        prof.pop("path")
    return Flavour(df["id"], out, level, aspects)


@dataclasses.dataclass
class _Vnfd:
    id: str
    doc: Document
    dfs: dict                    # df id -> Flavour
    vdus: list                   # [(vdu dict, kernel, is_file, memory, vcpus, config, cpds, props)]
    ext: dict                    # ext-cpd id -> (vdu id, int-cpd id), or (None, internal link)
    ivls: set


def check_vnfd(c: _Checker, d: Document) -> _Vnfd | None:
    src = d.source
    doc = d.doc
    if isinstance(doc, dict) and ("vnfd:vnfd-catalog" in doc or "vnfd-catalog" in doc):
        c.add(src, "vnfd-catalog", "this is the pre-SOL006 OSM IM format (OSM < 9)",
              "rewrite it in the SOL006-based format: a top-level 'vnfd:' with vdu, "
              "sw-image-desc, virtual-compute-desc, ext-cpd, df")
        return None
    if isinstance(doc, dict) and "vnfd" in doc:
        c.yang_check(d, "vnfd")
    probs = _schema_problems(doc, "vnfd", src)
    if probs:
        c.problems += probs
        return None
    v = doc["vnfd"]
    ign, hints = ignored_fields(doc, VNFD_USED)
    if ign:
        c.warnings.append(f"{src}: fluidvim ignores {', '.join(ign)}")
    c.warnings += [f"{src}: {h}" for h in hints]
    sw = c.ids(src, v["sw-image-desc"], "vnfd.sw-image-desc", "sw-image-desc")
    vc = c.ids(src, v.get("virtual-compute-desc"), "vnfd.virtual-compute-desc",
               "virtual-compute-desc")
    ivl = c.ids(src, v.get("int-virtual-link-desc"), "vnfd.int-virtual-link-desc",
                "int-virtual-link-desc")
    vdus = c.ids(src, v["vdu"], "vnfd.vdu", "vdu")
    defaults = _properties(c, src, (v.get("configurable-properties") or {}).get(
        "additional-configurable-property"),
        "vnfd.configurable-properties.additional-configurable-property")
    kernels = {}                    # checked once, and only the images a VDU uses
    out_vdus = []
    cpds_of = {}
    for i, vdu in enumerate(v["vdu"]):
        p = f"vnfd.vdu[{i}]"
        kernel, is_file = "", False
        if vdu["sw-image-desc"] not in sw:
            c.add(src, f"{p}.sw-image-desc", _one_of(vdu["sw-image-desc"], sw, "sw-image-desc"),
                  "name one of them, or add that sw-image-desc")
        else:
            sid = vdu["sw-image-desc"]
            if sid not in kernels:
                kernels[sid] = _kernel(c, d, v["sw-image-desc"][sw[sid]],
                                       f"vnfd.sw-image-desc[{sw[sid]}]")
            kernel, is_file = kernels[sid]
        memory, vcpus = None, 1
        if "virtual-compute-desc" in vdu:
            if vdu["virtual-compute-desc"] not in vc:
                c.add(src, f"{p}.virtual-compute-desc",
                      _one_of(vdu["virtual-compute-desc"], vc, "virtual-compute-desc"),
                      "name one of them, or add that virtual-compute-desc")
            else:
                j = vc[vdu["virtual-compute-desc"]]
                cd = v["virtual-compute-desc"][j]
                vm = cd.get("virtual-memory") or {}
                size = vm.get("size")
                exact = _memory_mib(c, src, vm, f"vnfd.virtual-compute-desc[{j}].virtual-memory")
                if exact is not None:
                    memory = exact
                elif size is not None:
                    mib = math.ceil(float(size) * 1024 - 1e-9)
                    if not MEMORY_MIB[0] <= mib <= MEMORY_MIB[1]:
                        c.add(src, f"vnfd.virtual-compute-desc[{j}].virtual-memory.size",
                              f"{size} GB = {mib} MiB is out of range [{MEMORY_MIB[0]}, "
                              f"{MEMORY_MIB[1]}] MiB", "VNFs need little: give size 0.1 (GB, "
                              f"SOL006's smallest step) and vdu-mem-requirements "
                              f"[{{key: {MEMORY_KEY}, value: '32'}}]")
                    else:
                        memory = mib
                n = (cd.get("virtual-cpu") or {}).get("num-virtual-cpu")
                if n is not None:
                    if n > MAX_VCPUS:
                        c.add(src, f"vnfd.virtual-compute-desc[{j}].virtual-cpu.num-virtual-cpu",
                              f"{n} vCPUs: a VNF has at most {MAX_VCPUS}", "use 1 (one core "
                              "polls all NICs)")
                    else:
                        vcpus = n
        config = _day0(c, d, vdu, p)
        cpds = list(enumerate(vdu.get("int-cpd") or []))
        c.ids(src, [x for _, x in cpds], f"{p}.int-cpd", "int-cpd")
        orders = [x.get("order") for _, x in cpds]
        if any(o is not None for o in orders):
            if any(o is None for o in orders):
                k = orders.index(None)
                c.add(src, f"{p}.int-cpd[{k}].order", "some int-cpds have an order and this one "
                      "has none", "give every int-cpd of the VDU an order, or none")
            elif len(set(orders)) != len(orders):
                c.add(src, f"{p}.int-cpd", f"duplicate order values {orders}",
                      "each NIC needs its own position")
            else:
                cpds.sort(key=lambda t: t[1]["order"])
        if not cpds:
            c.add(src, f"{p}.int-cpd", "the VDU has no int-cpd: a VNF needs NICs",
                  "add one int-cpd per NIC (in order), exposed by ext-cpds")
        if len(cpds) > MAX_NICS:
            c.add(src, f"{p}.int-cpd", f"{len(cpds)} int-cpds: a VNF has at most {MAX_NICS} NICs",
                  "remove some")
        for k, cp in cpds:
            link = cp.get("int-virtual-link-desc")
            if link is not None and link not in ivl:
                c.add(src, f"{p}.int-cpd[{k}].int-virtual-link-desc",
                      _one_of(link, ivl, "int-virtual-link-desc"), "name one of them, or add it")
        cpds_of[vdu["id"]] = {cp["id"] for _, cp in cpds}
        own = _properties(c, src, vdu.get("configurable-properties"),
                          f"{p}.configurable-properties")
        if set(own) - set(_service_props(own)):
            c.warnings.append(f"{src}: {p}.configurable-properties: the fluidvim-scale-* and "
                              "fluidvim-autoscale keys are read from the VNFD's "
                              "configurable-properties only (its aspects are the df's)")
        props = _service_props({**defaults, **own})
        out_vdus.append((vdu, kernel, is_file, memory, vcpus, config, [cp for _, cp in cpds],
                         props))
    ext = {}
    ext_ids = c.ids(src, v.get("ext-cpd"), "vnfd.ext-cpd", "ext-cpd")
    for cid, i in ext_ids.items():
        e = v["ext-cpd"][i]
        p = f"vnfd.ext-cpd[{i}]"
        ic = e.get("int-cpd")
        if ic is None and "int-virtual-link-desc" in e:
            # SOL006: the ext-cpd exposes an internal virtual link: the NICs on that link are
            # then on the NS virtual link this ext-cpd is connected to
            link = e["int-virtual-link-desc"]
            if link not in ivl:
                c.add(src, f"{p}.int-virtual-link-desc", _one_of(link, ivl,
                                                                 "int-virtual-link-desc"),
                      "name one of them, or add it")
            elif (None, link) in ext.values():
                c.add(src, f"{p}.int-virtual-link-desc", f"internal link {link!r} is already "
                      "exposed by another ext-cpd", "one ext-cpd per internal link")
            else:
                ext[cid] = (None, link)
            continue
        if ic is None:
            c.add(src, f"{p}.int-cpd", "an ext-cpd exposes a VDU's int-cpd or an internal virtual "
                  "link; this one names neither",
                  "set int-cpd: {vdu-id: VDU, cpd: INT-CPD} or int-virtual-link-desc: LINK")
            continue
        if ic["vdu-id"] not in vdus:
            c.add(src, f"{p}.int-cpd.vdu-id", _one_of(ic["vdu-id"], vdus, "vdu"))
        elif ic["cpd"] not in cpds_of.get(ic["vdu-id"], ()):
            c.add(src, f"{p}.int-cpd.cpd", _one_of(ic["cpd"], sorted(cpds_of[ic["vdu-id"]]),
                                                   f"vdu {ic['vdu-id']!r} int-cpd"),
                  "add the int-cpd to the VDU or fix the name")
        elif (ic["vdu-id"], ic["cpd"]) in ext.values():
            c.add(src, f"{p}.int-cpd", f"int-cpd {ic['cpd']!r} of {ic['vdu-id']!r} is already "
                  "exposed by another ext-cpd", "one ext-cpd per NIC")
        else:
            ext[cid] = (ic["vdu-id"], ic["cpd"])
    if "mgmt-cp" in v and v["mgmt-cp"] not in ext_ids:
        c.add(src, "vnfd.mgmt-cp", _one_of(v["mgmt-cp"], ext_ids, "ext-cpd"))
    dfs = {}
    for j, df in enumerate(v.get("df") or []):
        dfs[df["id"]] = _flavour(c, src, df, f"vnfd.df[{j}]", vdus, defaults)
    return _Vnfd(v["id"], d, dfs, out_vdus, ext, set(ivl))


def build_plan(nsd: Document, vnfds: list[Document], name: str | None = None) -> Plan:
    """Validate the NSD and VNFDs together and map them; DescriptorError lists every problem."""
    c = _Checker()
    given = [p for d in vnfds for p in split(d)]
    parts = split(nsd)
    nsds = [x for kind, x in parts if kind == "nsd"]
    if nsds:                                   # an nfv container may hold the VNFDs too
        given = [p for p in parts if p[0] in ("vnfd", "pnfd")] + given
    vnfds = [x for kind, x in given if kind in ("vnfd", None)]
    pnfds = [x for kind, x in given if kind == "pnfd"]   # only for SOL006 references
    nsd = nsds[0] if nsds else parts[0][1]     # else the checks below say what it is
    src = nsd.source
    doc = nsd.doc
    if isinstance(doc, dict) and ("nsd:nsd-catalog" in doc or "nsd-catalog" in doc):
        raise DescriptorError([Problem(src, "nsd-catalog", "this is the pre-SOL006 OSM IM format "
                                       "(OSM < 9)", "rewrite it as nsd: {nsd: [{id, vnfd-id, "
                                       "virtual-link-desc, df: [{vnf-profile}]}]}")])
    if isinstance(doc, dict) and "vnfd" in doc and "nsd" not in doc:
        raise DescriptorError([Problem(src, "nsd", "this file is a VNFD, not an NSD",
                                       "give the NSD first and the VNFD with --vnfd")])
    if isinstance(doc, dict) and isinstance(doc.get("nsd"), dict):
        c.yang_check(nsd, "nsd")
    for x in pnfds:
        c.yang_check(x, "pnfd")
    c.problems += _schema_problems(doc, "nsd", src)
    known = {}
    for d in vnfds:
        m = check_vnfd(c, d)
        if m is None:
            continue
        if m.id in known:
            c.add(d.source, "vnfd.id", f"VNFD {m.id!r} is also given by {known[m.id].doc.source}",
                  "give each VNFD once")
        known[m.id] = m
    c.yang_tree(nsd, vnfds, pnfds)
    if c.problems:
        raise DescriptorError(c.merged())
    ns = doc["nsd"]["nsd"][0]
    if len(doc["nsd"]["nsd"]) > 1:
        c.warnings.append(f"{src}: {len(doc['nsd']['nsd'])} NSDs in the file: "
                          f"deploying the first ({ns['id']})")
    ign, hints = ignored_fields(doc, NSD_USED)
    if ign:
        c.warnings.append(f"{src}: fluidvim ignores {', '.join(ign)}")
    c.warnings += [f"{src}: {h}" for h in hints]
    base = "nsd.nsd[0]"
    name = ns["id"] if name is None else name
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        c.add(src, "name" if name != ns["id"] else f"{base}.id",
              f"{name!r} cannot name the network service",
              "use 1-40 letters, digits, '_' or '-' (give --name to choose another name)")
        raise DescriptorError(c.merged())
    for i, vid in enumerate(ns["vnfd-id"]):
        if vid not in known:
            c.add(src, f"{base}.vnfd-id[{i}]", f"no VNFD with id {vid!r} was given "
                  f"(given: {', '.join(known) or 'none'})", "add --vnfd FILE (or a package "
                  "directory)")
    vls = c.ids(src, ns.get("virtual-link-desc"), f"{base}.virtual-link-desc", "virtual-link-desc")
    if len(ns["df"]) > 1:
        c.warnings.append(f"{src}: {len(ns['df'])} deployment flavours: using the first "
                          f"({ns['df'][0]['id']})")
    df = ns["df"][0]
    vlp = {}
    for k, lp in enumerate(df.get("virtual-link-profile") or []):
        if lp["virtual-link-desc-id"] not in vls:
            c.add(src, f"{base}.df[0].virtual-link-profile[{k}].virtual-link-desc-id",
                  _one_of(lp["virtual-link-desc-id"], vls, "virtual-link-desc"))
        vlp[lp["id"]] = lp["virtual-link-desc-id"]
    profiles = c.ids(src, df["vnf-profile"], f"{base}.df[0].vnf-profile", "vnf-profile")
    networks = {vl: f"{name}-{vl}" for vl in vls}
    units = []
    aspects = []
    used_vls = set()
    for pid, i in profiles.items():
        vp = df["vnf-profile"][i]
        p = f"{base}.df[0].vnf-profile[{i}]"
        m = known.get(vp["vnfd-id"])
        if vp["vnfd-id"] not in ns["vnfd-id"]:
            c.add(src, f"{p}.vnfd-id", f"{vp['vnfd-id']!r} is not in {base}.vnfd-id",
                  "list it there too")
        if m is None:
            if vp["vnfd-id"] in ns["vnfd-id"]:
                continue                                # reported at vnfd-id[] above
            c.add(src, f"{p}.vnfd-id", f"no VNFD with id {vp['vnfd-id']!r} was given",
                  "add --vnfd FILE")
            continue
        if m.dfs:
            fid = vp.get("flavour-id") or next(iter(m.dfs))
            if fid not in m.dfs:
                c.add(src, f"{p}.flavour-id", _one_of(fid, m.dfs, f"VNFD {m.id} df"))
                continue
            flavour = m.dfs[fid]
        else:
            flavour = Flavour("", {}, None, {})
        ns_min = vp.get("min-number-of-instances", 1)
        ns_max = vp.get("max-number-of-instances", ns_min)
        if ns_max < ns_min:
            c.add(src, f"{p}.max-number-of-instances", f"{ns_max} is below "
                  f"min-number-of-instances {ns_min}", "make max-number-of-instances >= "
                  "min-number-of-instances")
            ns_max = ns_min
        # ext-cpd -> logical network, from this profile's virtual-link-connectivity
        ext_net = {}
        for k, conn in enumerate(vp.get("virtual-link-connectivity") or []):
            cp = f"{p}.virtual-link-connectivity[{k}]"
            lid = conn["virtual-link-profile-id"]
            vl = vlp.get(lid, lid if lid in vls else None)
            if vl is None:
                c.add(src, f"{cp}.virtual-link-profile-id",
                      _one_of(lid, list(vlp) + [x for x in vls if x not in vlp],
                              "virtual-link-profile / virtual-link-desc"),
                      "name a virtual link of the NSD")
                continue
            used_vls.add(vl)
            for q, cc in enumerate(conn["constituent-cpd-id"]):
                cq = f"{cp}.constituent-cpd-id[{q}]"
                if cc["constituent-base-element-id"] != pid:
                    c.add(src, f"{cq}.constituent-base-element-id",
                          f"{cc['constituent-base-element-id']!r} is not this vnf-profile",
                          f"write {pid!r} (the id of the vnf-profile it is in)")
                    continue
                if cc["constituent-cpd-id"] not in m.ext:
                    c.add(src, f"{cq}.constituent-cpd-id",
                          _one_of(cc["constituent-cpd-id"], sorted(m.ext), f"VNFD {m.id} ext-cpd"))
                    continue
                if cc["constituent-cpd-id"] in ext_net:
                    c.add(src, f"{cq}.constituent-cpd-id", f"ext-cpd {cc['constituent-cpd-id']!r} "
                          f"is already on virtual link {ext_net[cc['constituent-cpd-id']]!r}",
                          "a NIC is on one virtual link")
                    continue
                ext_net[cc["constituent-cpd-id"]] = vl
        by_cpd = {m.ext[e]: vl for e, vl in ext_net.items()}
        for e in m.ext:
            if e not in ext_net:
                c.warnings.append(f"{src}: {p}: ext-cpd {e!r} of {m.id} is on no virtual link: "
                                  + ("its internal link stays internal" if m.ext[e][0] is None
                                     else "its NIC stays unplugged"))
        multi = len(m.vdus) > 1
        for vdu, kernel, is_file, memory, vcpus, config, cpds, props in m.vdus:
            svc = f"{name}-{pid}" + (f"-{vdu['id']}" if multi else "")
            if not NAME_RE.fullmatch(svc):
                c.add(src, f"{p}.id", f"service name {svc!r} (NS name-profile"
                      + ("-vdu" if multi else "") + ") is not a valid service name",
                      "use 1-40 letters, digits, '_' or '-' in total: shorten --name or the ids")
            nics = []
            for cp in cpds:
                if by_cpd.get((None, cp.get("int-virtual-link-desc"))):
                    # an internal link an ext-cpd exposes: the NS virtual link it is on
                    nics.append(Nic(cp["id"], by_cpd[(None, cp["int-virtual-link-desc"])]))
                elif cp.get("int-virtual-link-desc"):
                    key = f"{pid}/{cp['int-virtual-link-desc']}"
                    networks[key] = f"{name}-{pid}-{cp['int-virtual-link-desc']}"
                    nics.append(Nic(cp["id"], key))
                else:
                    nics.append(Nic(cp["id"], by_cpd.get((vdu["id"], cp["id"]))))
            vc = flavour.vdus.get(vdu["id"], {"min": 1, "max": 1, "initial": 1})
            count = ns_min * vc["initial"]
            if count > 1 and sum(1 for n in nics if n.network) > 1:
                c.warnings.append(f"{src}: {p}: {count} instances of {vdu['id']} between the same "
                                  "virtual links form a bridging loop unless their Click "
                                  "configuration prevents it")
            units.append(Unit(profile=pid, vnfd=m.id, vdu=vdu["id"], service=svc,
                              instances=count, kernel=kernel, kernel_is_file=is_file,
                              memory_mb=memory, vcpus=vcpus, click_config=config or "",
                              nics=nics, properties=props, min_instances=ns_min * vc["min"],
                              max_instances=ns_max * vc["max"]))
        svc_of = {vdu["id"]: f"{name}-{pid}" + (f"-{vdu['id']}" if multi else "")
                  for vdu, *_ in m.vdus}
        for aid, a in flavour.aspects.items():
            aspects.append({"name": aid, "profile": pid, "vnfd": m.id, "flavour": flavour.id,
                            "max_scale_level": a["max_scale_level"],
                            "initial_level": a["initial_level"], "cooldown_s": a["cooldown_s"],
                            "idle_s": a["idle_s"], "auto": a["auto"],
                            "headroom": a["headroom"],
                            "steps": [{"delta": st["delta"],
                                       "services": {svc_of[v]: n for v, n in st["vdus"].items()
                                                    if n}} for st in a["steps"]]})
    for vl, i in vls.items():
        if vl not in used_vls:
            c.warnings.append(f"{src}: {base}.virtual-link-desc[{i}] {vl!r} connects no VNF")
    for key, net in networks.items():
        if not NETWORK_RE.fullmatch(net):
            c.add(src, f"{base}.virtual-link-desc" if "/" not in key else f"{base}.df[0]."
                  "vnf-profile", f"network name {net!r} is not valid (1-63 letters, digits, "
                  "'_', '.', '-')", "shorten --name or the virtual link id")
    services = [u.service for u in units]
    for s in {s for s in services if services.count(s) > 1}:
        c.add(src, f"{base}.df[0].vnf-profile", f"two VNF profiles/VDUs map to service {s!r}",
              "rename a vnf-profile")
    if c.problems or c.yang:
        raise DescriptorError(c.merged())
    return Plan(name=name, nsd=ns["id"], df=df["id"], vnfds=[v for v in ns["vnfd-id"] if v in known],
                networks=networks,
                units=units, warnings=c.warnings, aspects=aspects)


def plan_files(nsd_path: str, vnfd_paths, name: str | None = None):
    """(plan, nsd Document, vnfd Documents) from files (what the CLI does before sending)."""
    if packages.is_package(nsd_path):               # an NS package (its VNFDs, if any, too)
        docs = load_package(nsd_path)
        nsd = next((d for d in docs if _has(d, "nsd")), docs[0])
        vnfds = [d for d in docs if d is not nsd and _has(d, "vnfd")] + load_vnfds(vnfd_paths)
    else:
        nsd = load(nsd_path)
        vnfds = load_vnfds(vnfd_paths)
    return build_plan(nsd, vnfds, name), nsd, vnfds
