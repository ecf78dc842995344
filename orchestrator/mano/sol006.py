# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Descriptors checked against ETSI's own SOL006 YANG modules (v3.6.1), with yangson.

The modules in ``yang/etsi/`` are ETSI's, unmodified (BSD-3-Clause, ``yang/etsi/LICENSE``); the two
IETF modules they import (RFC 6991) are in ``yang/ietf/``. Loading them (once per process,
:func:`data_model`) corrects two defects of the published modules, in memory only:

* 17 leafref ``path`` statements use ``deref()``, which RFC 7950's path grammar does not allow
  (libyang and yangson both refuse to load them); each is rewritten to the equivalent standard
  form with a predicate: ``deref(../vnfd-id)/../nfv:ext-cpd/nfv:id`` ->
  ``/nfv:nfv/nfv:vnfd[nfv:id = current()/../vnfd-id]/nfv:ext-cpd/nfv:id`` (:data:`LEAFREF_FIXES`);
* 9 ``when`` conditions compare an identityref with a string (``../type-of-storage =
  "nfv:block"``), true only where the engine resolves prefixes in string literals, and 4 of them
  misspell the identities ('IPv4' for ``ipv4``): as published, ``l3-protocol-data`` can never be
  present (ETSI's own ``nfv.xml`` example fails with libyang too); each is rewritten to
  ``derived-from-or-self(../type-of-storage, 'nfv:block')`` (:data:`WHEN_FIX_LINES`).

Two levels, chosen by what the document says it is:

* **SOL006** -- a top-level key qualified with the module (``etsi-nfv-vnfd:vnfd``,
  ``etsi-nfv-nsd:nsd``) or the ``nfv`` container of ``etsi-nfv-descriptors``: every field must be
  a SOL006 node with a value of its YANG type, then the documents together are validated in full:
  every missing mandatory node (:func:`missing_mandatory`), then list keys, leafrefs -- an NSD's
  references into its VNFDs too --, ``must``, ``when`` (yangson stops at the first of these).
* **OSM IM** -- ``vnfd:`` / ``nsd: {nsd: [...]}`` unqualified, as OSM (>= 9) writes them: OSM's
  information model is SOL006 augmented by OSM's own modules, and OSM's packages leave out nodes
  SOL006 marks mandatory (e.g. ``sw-image-desc`` with only ``id``/``name``/``image``). Every field
  that is a SOL006 node must have a value of its YANG type (and list entries their keys); the known
  OSM augmentations (:data:`OSM_EXTENSIONS`, e.g. ``vdu.cloud-init-file``, ``vnfd.mgmt-cp``) are
  set aside first; any other name is neither, and is reported as a warning. Mandatory nodes and
  references are left to fluidvim's own checks, which cover what fluidvim uses.

Every violation is a :class:`~.descriptors.Problem` with the field's path in fluidvim's form
(``vnfd.vdu[0].int-cpd[1].order``) and what to write instead.
"""

from __future__ import annotations

import decimal
import difflib
import functools
import json
import os
import re
import shutil
import tempfile

from yangson import DataModel, exceptions as yex, schemanode as sn
from yangson.datatype import Decimal64Type, IdentityrefType, IntegralType, LeafrefType, UnionType
from yangson.enumerations import ContentType, ValidationScope
from yangson.instvalue import ArrayValue, ObjectValue
from yangson.schpattern import NotAllowed

YANG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "yang")
ETSI_DIR = os.path.join(YANG_DIR, "etsi")
IETF_DIR = os.path.join(YANG_DIR, "ietf")
ETSI_VERSION = "3.6.1"
ETSI_REVISION = "2022-03-08"
NFV = "etsi-nfv-descriptors"
# top-level key -> (kind, claims SOL006)
TOP_KEYS = {"vnfd": ("vnfd", False), "nsd": ("nsd", False),
            "etsi-nfv-vnfd:vnfd": ("vnfd", True), "etsi-nfv-nsd:nsd": ("nsd", True),
            "etsi-nfv-pnfd:pnfd": ("pnfd", True),
            "nfv": ("nfv", True), f"{NFV}:nfv": ("nfv", True)}

_V = "/nfv:nfv/nfv:vnfd[nfv:id = current()/{}]"
_P = "/nfv:nfv/nfv:pnfd[nfv:id = current()/{}]"
# (file, line of the `path` statement) -> (ETSI's deref() path, the standard equivalent)
LEAFREF_FIXES = {
    ("etsi-nfv-ns.yang", 241): ("deref(../vnfd-id)/../nfv:ext-cpd/nfv:id",
                                _V.format("../vnfd-id") + "/nfv:ext-cpd/nfv:id"),
    ("etsi-nfv-ns.yang", 247): ("deref(../pnfd-id)/../nfv:ext-cpd/nfv:id",
                                _P.format("../pnfd-id") + "/nfv:ext-cpd/nfv:id"),
    ("etsi-nfv-ns.yang", 253): ("deref(../nsd-id)/../sapd/id",
                                "../../../../nsd[id = current()/../nsd-id]/sapd/id"),
    ("etsi-nfv-ns.yang", 553): ("deref(../vnfd-id)/../nfv:ext-cpd/nfv:id",
                                _V.format("../vnfd-id") + "/nfv:ext-cpd/nfv:id"),
    ("etsi-nfv-ns.yang", 568): ("deref(../pnfd-id)/../nfv:ext-cpd/nfv:id",
                                _P.format("../pnfd-id") + "/nfv:ext-cpd/nfv:id"),
    ("etsi-nfv-ns.yang", 585): ("deref(../nsd-id)/../sapd/id",
                                "../../../../../../nsd[id = current()/../nsd-id]/sapd/id"),
    ("etsi-nfv-ns.yang", 811): ("deref(../vnfd-id)/../nfv:df/nfv:id",
                                _V.format("../vnfd-id") + "/nfv:df/nfv:id"),
    ("etsi-nfv-ns.yang", 823): ("deref(../flavour-id)/../nfv:instantiation-level/nfv:id",
                                _V.format("../vnfd-id") + "/nfv:df[nfv:id = current()/"
                                "../flavour-id]/nfv:instantiation-level/nfv:id"),
    ("etsi-nfv-ns.yang", 919): ("deref(../../../vnfd-id)/../nfv:ext-cpd/nfv:id",
                                _V.format("../../../vnfd-id") + "/nfv:ext-cpd/nfv:id"),
    ("etsi-nfv-ns.yang", 1024): ("deref(../../../pnfd-id)/../nfv:ext-cpd/nfv:id",
                                 _P.format("../../../pnfd-id") + "/nfv:ext-cpd/nfv:id"),
    ("etsi-nfv-ns.yang", 1071): ("deref(../virtual-link-desc-id)/../df/id",
                                 "../../../virtual-link-desc[id = current()/"
                                 "../virtual-link-desc-id]/df/id"),
    ("etsi-nfv-ns.yang", 1648): ("deref(../nsd-id)/../df/id",
                                 "../../../../nsd[id = current()/../nsd-id]/df/id"),
    ("etsi-nfv-ns.yang", 1661): ("deref(../ns-df-id)/../ns-instantiation-level/id",
                                 "../../../../nsd[id = current()/../nsd-id]/df[id = current()/"
                                 "../ns-df-id]/ns-instantiation-level/id"),
    ("etsi-nfv-ns.yang", 1748): ("deref(../../../nsd-id)/../sapd/id",
                                 "../../../../../../nsd[id = current()/../../../nsd-id]/sapd/id"),
    ("etsi-nfv-ns.yang", 1840): ("deref(../vnfd-id)/../nfv:indicator/nfv:id",
                                 _V.format("../vnfd-id") + "/nfv:indicator/nfv:id"),
    ("etsi-nfv-vnf.yang", 1582): ("deref(../vdu-id)/../int-cpd/id",
                                  "../../../vdu[id = current()/../vdu-id]/int-cpd/id"),
    ("etsi-nfv-vnf.yang", 1812): ("deref(../../../ext-cpd/int-virtual-link-desc)/../nfv:flavour/"
                                  "nfv:id", "/nfv:nfv/nfv:vnfd/nfv:int-virtual-link-desc[nfv:id = "
                                  "current()/../../../ext-cpd/int-virtual-link-desc]/nfv:flavour/"
                                  "nfv:id"),
}
# `when` conditions that compare an identityref leaf with a string: in XPath that is a string
# comparison with the value's canonical form ("etsi-nfv-descriptors:block"), so only an engine that
# resolves prefixes inside string literals (libyang, with a warning) finds them true; four of them
# also spell the identities wrongly ('IPv4' for ipv4, 'Ethernet' for ethernet, ...), so not even
# libyang does. Each is rewritten to derived-from-or-self(), as RFC 7950 section 10.4.1 advises.
WHEN_FIX_LINES = {("etsi-nfv-common.yang", 839), ("etsi-nfv-common.yang", 865),
                  ("etsi-nfv-ns.yang", 1135), ("etsi-nfv-ns.yang", 1211),
                  ("etsi-nfv-vnf.yang", 1055), ("etsi-nfv-vnf.yang", 1068),
                  ("etsi-nfv-vnf.yang", 1090), ("etsi-nfv-vnf.yang", 1917),
                  ("etsi-nfv-vnf.yang", 1993)}
_IDENT_EQ = re.compile(r"""(\.\./[\w-]+)\s*=\s*['"](?:nfv:)?([\w-]+)['"]""")


def fix_when(arg: str) -> str:
    """``../type-of-storage = "nfv:block"`` -> ``derived-from-or-self(../type-of-storage,
    'nfv:block')``; ``../associated-layer-protocol = 'IPv4'`` -> ``...'nfv:ipv4')``."""
    return _IDENT_EQ.sub(lambda m: f"derived-from-or-self({m.group(1)}, 'nfv:{m.group(2).lower()}')",
                         arg)


# OSM IM augmentations of the SOL006 model (fluidvim path form, [] = any list entry): accepted in
# OSM IM documents without a warning (fluidvim reads the first five); not SOL006 nodes.
OSM_EXTENSIONS = {
    "vnfd.description", "nsd.nsd[].description", "vnfd.mgmt-cp", "vnfd.vdu[].cloud-init",
    "vnfd.vdu[].cloud-init-file",
    "vnfd.vdu[].supplemental-boot-data", "vnfd.vdu[].pdu-type", "vnfd.vdu[].alarm",
    "vnfd.vdu[].alternative-sw-image-desc", "vnfd.vdu[].int-cpd[].port-security-enabled",
    "vnfd.vdu[].int-cpd[].port-security-disable-strategy",
    "vnfd.vdu[].int-cpd[].virtual-network-interface-requirement[].virtual-interface",
    "vnfd.vdu[].int-cpd[].virtual-network-interface-requirement[].position",
    "vnfd.kdu", "vnfd.k8s-cluster",
    "vnfd.df[].lcm-operations-configuration.operate-vnf-op-config.day1-2",
    "nsd.nsd[].virtual-link-desc[].mgmt-network", "nsd.nsd[].virtual-link-desc[].vim-network-name",
    "nsd.nsd[].ns-configuration",
    "vnfd.df[].scaling-aspect[].scaling-policy",
}
# fluidvim's own extension of a SOL006 type, in OSM IM documents: memory in GB with more than the
# one decimal SOL006 allows (0.03125 GB = 32 MiB; a unikernel VNF needs far less than 0.1 GB)
OSM_FINER_DECIMALS = {"vnfd.virtual-compute-desc[].virtual-memory.size"}

_STR = r"""(?:"[^"]*"|'[^']*')"""
_STMT_RE = re.compile(rf"\b(path|when)\s+({_STR}(?:\s*\+\s*{_STR})*)\s*;")


def patch_module(name: str, text: str) -> tuple[str, int]:
    """ETSI's module text with :data:`LEAFREF_FIXES` and :data:`WHEN_FIX_LINES` applied (and how
    many statements were changed). Any other ``deref()`` in a path is an error: a new ETSI version
    needs the tables reviewed."""
    out, pos, count = [], 0, 0
    for m in _STMT_RE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        arg = "".join(x[1:-1] for x in re.findall(_STR, m.group(2)))
        if m.group(1) == "path":
            if (name, line) not in LEAFREF_FIXES:
                if "deref(" in arg:
                    raise RuntimeError(f"{name}:{line}: leafref path {arg!r} uses deref() and has "
                                       "no rewrite in sol006.LEAFREF_FIXES")
                continue
            want, new = LEAFREF_FIXES[(name, line)]
            if arg != want:
                raise RuntimeError(f"{name}:{line}: expected path {want!r}, found {arg!r}")
            stmt = f'path "{new}";'
        else:
            if (name, line) not in WHEN_FIX_LINES:
                continue
            new = fix_when(arg)
            if new == arg or "=" in new.replace("derived-from-or-self", ""):
                raise RuntimeError(f"{name}:{line}: when {arg!r} not rewritten as expected")
            stmt = f'when "{new}";'
        out.append(text[pos:m.start()] + stmt)
        pos = m.end()
        count += 1
    out.append(text[pos:])
    return "".join(out), count


def yang_library() -> str:
    """The YANG library (RFC 7895) yangson loads: ETSI's modules and the IETF ones they import."""
    rev = ETSI_REVISION

    def mod(name, ns, conf="implement", sub=()):
        m = {"name": name, "revision": rev, "namespace": ns, "conformance-type": conf}
        if sub:
            m["submodule"] = [{"name": s, "revision": rev} for s in sub]
        return m

    etsi = "urn:etsi:nfv:yang:"
    mods = [mod(NFV, etsi + NFV, sub=("etsi-nfv-common", "etsi-nfv-ns", "etsi-nfv-vnf",
                                      "etsi-nfv-pnf")),
            mod("etsi-nfv-vnfd", etsi + "etsi-nfv-vnfd"), mod("etsi-nfv-nsd", etsi + "etsi-nfv-nsd"),
            mod("etsi-nfv-pnfd", etsi + "etsi-nfv-pnfd")]
    for name in ("ietf-yang-types", "ietf-inet-types"):
        mods.append({"name": name, "revision": "2013-07-15", "conformance-type": "import",
                     "namespace": f"urn:ietf:params:xml:ns:yang:{name}"})
    return json.dumps({"ietf-yang-library:modules-state": {
        "module-set-id": f"etsi-sol006-{ETSI_VERSION}", "module": mods}})


def write_patched_modules(dest: str) -> int:
    """ETSI's modules, corrected, into ``dest`` (also what a yanglint cross-check loads)."""
    n = 0
    for f in sorted(os.listdir(ETSI_DIR)):
        if f.endswith(".yang"):
            with open(os.path.join(ETSI_DIR, f), encoding="utf-8") as src:
                text, k = patch_module(f, src.read())
            with open(os.path.join(dest, f), "w", encoding="utf-8") as out:
                out.write(text)
            n += k
    return n


@functools.lru_cache(maxsize=1)
def data_model() -> DataModel:
    """The SOL006 data model, loaded once per process (~0.3 s)."""
    tmp = tempfile.mkdtemp(prefix="fluidvim-sol006-")
    try:
        write_patched_modules(tmp)
        return DataModel(yang_library(), [tmp, IETF_DIR])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _root_node(kind: str) -> sn.InternalNode:
    """The schema node of one document's body: a VNFD (an entry of nfv/vnfd) or the NSD
    container (``etsi-nfv-nsd:nsd``, a list ``nsd``)."""
    schema = data_model().schema
    if kind == "vnfd":
        return schema.get_data_child("vnfd", "etsi-nfv-vnfd")
    if kind == "nsd":
        return schema.get_data_child("nsd", "etsi-nfv-nsd")
    if kind == "pnfd":
        return schema.get_data_child("pnfd", "etsi-nfv-pnfd")
    return schema.get_data_child("nfv", NFV)


def _fmt(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _generic(parts) -> str:
    """vnfd.vdu[].int-cpd[].order: the path with every list index left out."""
    return "".join("[]" if isinstance(p, int) else (f".{p}" if i else str(p))
                   for i, p in enumerate(parts))


def _type_hint(t) -> str:
    """What to write for a value of YANG type ``t``."""
    if isinstance(t, LeafrefType):
        return _type_hint(t.ref_type)
    if isinstance(t, IdentityrefType):
        names = sorted(i for i, _m in data_model().schema_data.derived_from_all(t.bases))
        return f"one of {', '.join(names)}"
    enum = getattr(t, "enum", None)
    if enum:
        return f"one of {', '.join(enum)}"
    if isinstance(t, Decimal64Type):
        return f"a decimal number with at most {t.fraction_digits} decimal(s)"
    if isinstance(t, UnionType):
        return " or ".join(_type_hint(m) for m in t.types)
    name = str(t)
    if name in ("boolean",):
        return "true or false"
    if name.startswith(("int", "uint")):
        return f"an integer ({name})"
    return f"a {name}"


def _scalar(t, v):
    """(raw RFC 7951 value, None) or (None, what is wrong)."""
    if isinstance(v, (dict, list)) or v is None:
        return None, f"{v!r} is not a value of YANG type {t}"
    it = t.ref_type if isinstance(t, LeafrefType) else t
    if isinstance(it, IdentityrefType) and isinstance(v, str):
        # YAML writers leave the module out (sha-256, nfv:sha-256): the identity's own module
        mod, _, name = v.rpartition(":")
        if mod not in {m for m, _rev in data_model().schema_data.modules}:
            owners = [m for i, m in data_model().schema_data.derived_from_all(it.bases)
                      if i == name]
            if len(owners) == 1:
                v = f"{owners[0]}:{name}"
    val = t.from_raw(v)
    if val is None or isinstance(t, Decimal64Type):
        text = ("true" if v else "false") if isinstance(v, bool) else str(v)
        val = t.parse_value(text)
    if val is None:
        return None, f"{v!r} is not a valid {t}"
    if val not in t:
        why = str(getattr(t, "error_message", None) or "")
        if "range" in why:
            return None, f"{v!r} is out of the range of this {t}"
        if "length" in why or "pattern" in why:
            return None, f"{v!r} is not a valid {t} here ({why})"
        return None, f"{v!r} is not a valid {t}"
    return t.to_raw(val), None


class _Walk:
    """Structure and types of one document against the schema: every problem, fluidvim paths."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.problems: list[tuple[str, str, str]] = []     # (path, message, fix)
        self.unknown: list[str] = []                        # OSM IM: neither SOL006 nor OSM
        self.numbers: list[tuple[list, object]] = []         # (path, number) given as a string

    def add(self, parts, message, fix=""):
        self.problems.append((_fmt(parts), message, fix))

    def node(self, snode, value, parts):
        if isinstance(snode, (sn.AnydataNode, sn.AnyxmlNode)):
            return value
        if isinstance(snode, sn.LeafListNode):
            if not isinstance(value, list):
                self.add(parts, f"{value!r} is not a list", f"write a list: [{value!r}]")
                return None
            out = []
            for i, x in enumerate(value):
                raw, why = _scalar(snode.type, x)
                if why:
                    self.add([*parts, i], why, f"write {_type_hint(snode.type)}")
                else:
                    out.append(raw)
            return out
        if isinstance(snode, sn.ListNode):
            if not isinstance(value, list):
                self.add(parts, f"is a list in SOL006, not a {type(value).__name__}",
                         "write a list of entries (- ...)")
                return None
            out = []
            for i, entry in enumerate(value):
                e = self.members(snode, entry, [*parts, i])
                if e is None:
                    continue
                for k in snode.keys:
                    key = k[0]
                    if key not in entry:
                        self.add([*parts, i, key], "is required (the key of the list)",
                                 f"give every {snode.name} entry its {key}")
                out.append(e)
            return out
        if isinstance(snode, sn.LeafNode):
            raw, why = _scalar(snode.type, value)
            if why:
                self.add(parts, why, f"write {_type_hint(snode.type)}")
                return None
            t = snode.type.ref_type if isinstance(snode.type, LeafrefType) else snode.type
            if isinstance(value, str) and isinstance(t, (Decimal64Type, IntegralType)):
                # RFC 7951 writes decimal64 and 64-bit integers as strings
                self.numbers.append((parts, float(value) if isinstance(t, Decimal64Type)
                                     else int(value)))
            if isinstance(snode.type, Decimal64Type) and not isinstance(value, bool):
                exp = decimal.Decimal(str(value)).as_tuple().exponent
                if isinstance(exp, int) and -exp > snode.type.fraction_digits:
                    if not self.strict and _generic(parts) in OSM_FINER_DECIMALS:
                        return str(decimal.Decimal(str(value)).quantize(
                            decimal.Decimal(10) ** -snode.type.fraction_digits))
                    self.add(parts, f"{value!r} has more than the {snode.type.fraction_digits} "
                             f"decimal(s) SOL006 allows", f"write {_type_hint(snode.type)}")
                    return None
            return raw
        return self.members(snode, value, parts)

    def members(self, snode, value, parts):
        if not isinstance(value, dict):
            self.add(parts, f"{value!r} is not a mapping", "write the fields as name: value")
            return None
        out = {}
        for name, v in value.items():
            name = str(name)
            mod, _, local = name.rpartition(":")
            child = snode.get_data_child(local, mod or snode.ns)
            p = [*parts, name]
            if child is None:
                if not self.strict and _generic(p) in OSM_EXTENSIONS:
                    continue
                if self.strict:
                    names = [c.name for c in snode.data_children()]
                    close = difflib.get_close_matches(local, names, n=1, cutoff=0.75)
                    if _generic(p) in OSM_EXTENSIONS:
                        fix = ("it is an OSM IM extension: remove it, or write the document as "
                               "OSM IM (unqualified top-level key) to use it")
                    elif close:
                        fix = f"did you mean {close[0]!r}?"
                    else:
                        fix = (f"remove it; the fields here are {', '.join(names[:10])}"
                               + (", ..." if len(names) > 10 else ""))
                    self.add(p, f"is not a field of SOL006 {ETSI_VERSION} here", fix)
                else:
                    self.unknown.append(_generic(p))
                continue
            r = self.node(child, v, p)
            if r is not None:
                out[local if not mod or mod == snode.ns else name] = r
        return out


def check_document(kind: str, body, strict: bool, prefix: str):
    """(problems [(path, message, fix)], unknown paths, raw RFC 7951 body, numbers) of one document
    body (``doc['vnfd']``, ``doc['nsd']``, ``doc['pnfd']``); ``prefix`` is the top key in fluidvim
    paths; ``numbers`` are the (path, value) of numbers written as strings (RFC 7951)."""
    w = _Walk(strict)
    raw = w.node(_root_node(kind), body, [prefix])
    seen, unknown = set(), []
    for u in w.unknown:
        if u not in seen:
            seen.add(u)
            unknown.append(u)
    return w.problems, unknown, raw, w.numbers


_TAG_TEXT = {"missing-data": "is required",
             "instance-required": "refers to nothing",
             "data-not-unique": "is not unique",
             "too-many-elements": "has too many entries",
             "too-few-elements": "has too few entries",
             "must-violation": "violates a SOL006 constraint",
             "non-unique-key": "duplicate key",
             "unexpected-node": "is not allowed here"}


_MANDATORY_FIX = ("add it: a document that claims SOL006 (a module-qualified top-level key) must "
                  "have every mandatory field")


def missing_mandatory(inst) -> list[tuple[tuple, str, str]]:
    """Every mandatory node missing in the subtree ``inst`` ([(route, message, fix)]), where
    yangson's validate() stops at the first: the same schema patterns (``when`` and choices
    included), evaluated at each node without raising. yangson 1.7.4 internals (pinned)."""
    out = []

    def visit(node):
        v = node.value
        if isinstance(v, ArrayValue):
            for i in range(len(v)):
                visit(node[i])
            return
        if not isinstance(v, ObjectValue):
            return
        snode = node.schema_node
        p = getattr(snode, "schema_pattern", None)
        if p is not None:
            p._eval_when(node)
            for m in node:
                p = p.deriv(m, ContentType.config)
                if isinstance(p, NotAllowed):
                    break                              # validate() reports that one
            else:
                if not p.nullable(ContentType.config):
                    names = [str(n) for n in (p._mandatory_members(ContentType.config) or [])]
                    plain = [n for n in names if not isinstance(
                        getattr(snode.get_data_child(*_qname(n, snode)), "parent", None),
                        sn.CaseNode)]
                    for n in plain:
                        out.append((tuple(node.path) + (n.rpartition(":")[2],), "is required",
                                    _MANDATORY_FIX))
                    rest = [n for n in names if n not in plain]
                    if rest:
                        out.append((tuple(node.path), "needs one of " + ", ".join(rest),
                                    "add one: SOL006 makes this choice mandatory"))
        for m in v:
            visit(node[m])

    visit(inst)
    return out


def _qname(name: str, snode) -> tuple[str, str]:
    mod, _, local = name.rpartition(":")
    return local, mod or snode.ns


def validate_tree(entries: dict, which: list) -> list[tuple[int, tuple, str, str]]:
    """Full validation (mandatory nodes, keys, leafrefs, must, when) of the descriptors ``which``
    ([("vnfd"|"nsd"|"pnfd", index)]) inside one ``nfv`` tree that holds every descriptor given
    (``entries``: {"vnfd": [raw VNFD], "nsd": [raw NSD entry], ...}), so that references between
    them resolve. Returns [(position in ``which``, route in the tree, message, fix)]: the first
    violation of each descriptor (yangson stops at the first) after every missing mandatory node."""
    dm = data_model()
    tree = {f"{NFV}:nfv": {k: v for k, v in entries.items() if v}}
    try:
        inst = dm.from_raw(tree)
    except yex.RawDataError as e:
        return [(0, (), f"not SOL006 data ({e})", "")]
    out = []
    for pos, (kind, i) in enumerate(which):
        node = inst[f"{NFV}:nfv"][kind][i]
        try:
            missing = missing_mandatory(node)
        except Exception:                              # noqa: BLE001 - validate() still runs
            missing = []
        out += [(pos, route, f"{msg}", fix) for route, msg, fix in missing]
        seen = {route for route, _m, _f in missing}
        try:
            node.validate(ValidationScope.all, ContentType.config)
        except yex.ValidationError as e:
            route = tuple(e.instance.path)
            msg = e.message or ""
            text = _TAG_TEXT.get(e.tag, e.tag)
            names = [n.rpartition(":")[2] for n in re.findall(r"'([\w:.-]+)'", msg)]
            if e.tag == "missing-data" and names:
                if route + (names[0],) not in seen and route not in seen:
                    out.append((pos, route + (names[0],), text, _MANDATORY_FIX))
            elif e.tag == "instance-required":
                out.append((pos, route, f"{e.instance.value!r} {text}"
                            + (f" ({msg})" if msg else ""),
                            "name an existing entry (SOL006 resolves it in the whole set of "
                            "descriptors given)"))
            elif e.tag == "must-violation":
                musts = [str(m.expression) for m in getattr(e.instance.schema_node, "must", [])]
                out.append((pos, route, text + (f" ({msg})" if msg else "")
                            + (f": must {' and '.join(musts)}" if musts else ""), ""))
            else:
                out.append((pos, route, f"{text}" + (f": {msg}" if msg else ""), ""))
        except yex.YangsonException as e:
            out.append((pos, (), f"SOL006 validation failed: {e}", ""))
    return out


def xml_to_raw(path: str) -> tuple[str, dict]:
    """An XML document of ETSI's modules (e.g. ETSI's ``example-data/*.xml``) -> (top-level key,
    its RFC 7951 JSON value): what fluidvim reads as JSON/YAML."""
    from lxml import etree

    schema = data_model().schema
    ns_mod = {m.xml_namespace: m.main_module[0] for m in data_model().schema_data.modules.values()
              if getattr(m, "xml_namespace", None)}
    root = etree.parse(path).getroot()
    qn = etree.QName(root)
    mod = ns_mod[qn.namespace]
    top = schema.get_data_child(qn.localname, mod)
    if top is None:
        raise ValueError(f"{path}: <{qn.localname}> is not a top-level SOL006 node")

    def conv(el, snode):
        if isinstance(snode, sn.LeafNode) or isinstance(snode, sn.LeafListNode):
            text = (el.text or "").strip()
            if isinstance(snode.type, IdentityrefType) or (
                    isinstance(snode.type, LeafrefType)
                    and isinstance(snode.type.ref_type, IdentityrefType)):
                pfx, _, ident = text.rpartition(":")
                text = f"{ns_mod[el.nsmap[pfx or None]]}:{ident}"
            val = snode.type.parse_value(text)
            if val is None:
                raise ValueError(f"{path}:{el.sourceline}: {text!r} is not a valid {snode.type}")
            return snode.type.to_raw(val)
        out = {}
        for ch in el:
            if not isinstance(ch.tag, str):
                continue
            cq = etree.QName(ch)
            cmod = ns_mod[cq.namespace]
            child = snode.get_data_child(cq.localname, cmod)
            if child is None:
                raise ValueError(f"{path}:{ch.sourceline}: <{cq.localname}> is not in SOL006")
            name = cq.localname if cmod == snode.ns else f"{cmod}:{cq.localname}"
            v = conv(ch, child)
            if isinstance(child, (sn.ListNode, sn.LeafListNode)):
                out.setdefault(name, []).append(v)
            else:
                out[name] = v
        return out

    return f"{mod}:{qn.localname}", conv(root, top)
