# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Real network topologies under the zones: which site each zone sits at and how far apart the
sites are, for hierarchical placement (:mod:`.hierarchy`).

A topology is a graph of sites (PoPs) and links with a length in km, loaded from the ``topohub``
package (SNDlib and Internet Topology Zoo graphs shipped inside the wheel, so nothing is
downloaded: ``sndlib/abilene``, ``sndlib/geant``, ``topozoo/Abilene``, ``topozoo/Geant2012``, ...)
or from a NetworkX node-link JSON file of the same shape (nodes with ``name`` and ``pos``
(longitude, latitude), edges with ``dist`` in km).

One-way latency between two sites = the propagation delay along the shortest path by delay:
each link's length over the speed of light in fibre (``c / 1.468`` = 204.2 km/ms), or its great
circle length when the dataset gives none. Queuing and switching inside the network are not in
it (they are what the zones' own queuing delay and the VNF add).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
import os

KM_PER_MS = 204.2          # light in silica fibre: c / 1.468 (group index) = 204.2 km per ms


class TopologyError(Exception):
    """A topology cannot be loaded or a site is unknown; the message says what and how to fix it."""


def great_circle_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Haversine distance of two (longitude, latitude) points in km."""
    lon1, lat1, lon2, lat2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = (math.sin((lat2 - lat1) / 2) ** 2
         + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2)
    return 2 * 6371.0088 * math.asin(min(1.0, math.sqrt(h)))


@dataclasses.dataclass
class Topology:
    name: str
    nodes: dict[str, tuple[float, float] | None]          # site -> (longitude, latitude)
    links: list[tuple[str, str, float]]                     # (site, site, km)
    km_per_ms: float = KM_PER_MS
    _adj: dict = dataclasses.field(default_factory=dict, repr=False)
    _from: dict = dataclasses.field(default_factory=dict, repr=False)

    def __post_init__(self):
        if self.km_per_ms <= 0:
            raise TopologyError(f"km_per_ms must be > 0, not {self.km_per_ms}")
        adj: dict[str, dict[str, float]] = {n: {} for n in self.nodes}
        for a, b, km in self.links:
            if a not in adj or b not in adj:
                raise TopologyError(f"topology {self.name}: link {a}-{b} names an unknown site")
            if km < 0 or math.isnan(km):
                raise TopologyError(f"topology {self.name}: link {a}-{b} has length {km} km")
            ms = km / self.km_per_ms
            if a != b and ms < adj[a].get(b, math.inf):     # parallel links: the shorter
                adj[a][b] = adj[b][a] = ms
        self._adj = adj

    def check_site(self, site: str, what: str = "site") -> str:
        if site not in self.nodes:
            shown = ", ".join(sorted(self.nodes)[:12])
            more = f" (and {len(self.nodes) - 12} more)" if len(self.nodes) > 12 else ""
            raise TopologyError(f"{what} {site!r} is not a site of topology {self.name}: "
                                f"sites are {shown}{more}")
        return site

    def link_ms(self, a: str, b: str) -> float:
        return self._adj[a][b]

    def latencies_from(self, src: str) -> dict[str, float]:
        """One-way propagation delay (ms) from ``src`` to every site it reaches (Dijkstra;
        cached per source: the graph does not change)."""
        self.check_site(src)
        if src in self._from:
            return self._from[src][0]
        dist, prev = {src: 0.0}, {src: None}
        heap = [(0.0, src)]
        done = set()
        while heap:
            d, n = heapq.heappop(heap)
            if n in done:
                continue
            done.add(n)
            for m, w in self._adj[n].items():
                nd = d + w
                if nd < dist.get(m, math.inf):
                    dist[m], prev[m] = nd, n
                    heapq.heappush(heap, (nd, m))
        self._from[src] = (dist, prev)
        return dist

    def latency_ms(self, a: str, b: str) -> float | None:
        """One-way delay a -> b in ms; None when b cannot be reached from a."""
        self.check_site(b)
        return self.latencies_from(a).get(b)

    def path(self, a: str, b: str) -> list[str]:
        """The sites of the shortest path a -> b (empty when unreachable)."""
        self.check_site(b)
        self.latencies_from(a)
        prev = self._from[a][1]
        if b not in prev:
            return []
        out = [b]
        while prev[out[-1]] is not None:
            out.append(prev[out[-1]])
        return out[::-1]


def from_node_link(data: dict, name: str | None = None, km_per_ms: float = KM_PER_MS) -> Topology:
    """A :class:`Topology` from a NetworkX node-link dict (topohub's format). Sites are named by
    the nodes' ``name`` (``name#id`` where two nodes share a name), link lengths are ``dist`` km
    or, without it, the great-circle distance of the nodes' ``pos``."""
    nodes = data.get("nodes") or []
    edges = data.get("edges", data.get("links")) or []
    name = name or (data.get("graph") or {}).get("name") or "topology"
    counts: dict[str, int] = {}
    for n in nodes:
        counts[str(n.get("name", n["id"]))] = counts.get(str(n.get("name", n["id"])), 0) + 1
    ids, sites = {}, {}
    for n in nodes:
        label = str(n.get("name", n["id"]))
        site = label if counts[label] == 1 else f"{label}#{n['id']}"
        ids[n["id"]] = site
        pos = n.get("pos")
        sites[site] = (float(pos[0]), float(pos[1])) if pos and len(pos) == 2 else None
    links = []
    for e in edges:
        a, b = ids.get(e["source"]), ids.get(e["target"])
        if a is None or b is None:
            raise TopologyError(f"topology {name}: edge {e['source']}-{e['target']} names an "
                                f"unknown node")
        km = e.get("dist")
        if km is None:
            if sites[a] is None or sites[b] is None:
                raise TopologyError(f"topology {name}: link {a}-{b} has no length (dist) and "
                                    f"its sites no position (pos)")
            km = great_circle_km(sites[a], sites[b])
        links.append((a, b, float(km)))
    if not sites:
        raise TopologyError(f"topology {name} has no nodes")
    return Topology(name, sites, links, km_per_ms)


def load(spec: str, km_per_ms: float = KM_PER_MS) -> Topology:
    """``spec``: a topohub key (``sndlib/abilene``, ``topozoo/Geant2012``, ...) or the path of a
    node-link JSON file."""
    if spec.endswith(".json") or os.path.isfile(spec):
        try:
            with open(spec, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise TopologyError(f"topology file {spec}: {e}") from None
        return from_node_link(data, os.path.splitext(os.path.basename(spec))[0], km_per_ms)
    try:
        import topohub
    except ImportError:
        raise TopologyError(f"topology {spec!r} is a topohub key but the topohub package is not "
                            "installed: pip install 'fluidvim[orchestrator]' (or give the path "
                            "of a node-link JSON file)") from None
    try:
        data = topohub.get(spec)
    except KeyError:
        raise TopologyError(f"topology {spec!r} is not in topohub {topohub.__version__}: keys "
                            "look like sndlib/abilene, sndlib/geant, topozoo/Abilene, "
                            "topozoo/Geant2012, gabriel/25/0") from None
    return from_node_link(data, spec, km_per_ms)


def available(group: str) -> list[str]:
    """The topohub keys of one group (``sndlib``, ``topozoo``), sorted."""
    import importlib.resources

    import topohub

    root = importlib.resources.files(topohub) / "data" / group
    return sorted(f"{group}/{p.name[:-5]}" for p in root.iterdir() if p.name.endswith(".json"))
