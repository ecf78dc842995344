# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The project's import graph from the source, every ``import`` and ``from`` statement included
(function-local, ``try``-guarded and ``TYPE_CHECKING`` ones too: ``python -X importtime`` only sees
what one run happens to execute). See ARCHITECTURE.md.

    python tools/importgraph.py                # package-level edges and cycles
    python tools/importgraph.py --modules      # module-level cycles, with the statements
    python tools/importgraph.py --check-tests  # exit 1 if production code imports test/bench code
    python tools/importgraph.py --tree DIR     # a link tree of the installed layout (for lint-imports)

The source tree is not the installed layout (setup.py's PACKAGE_DIRS maps ``vnf/`` to
``fluidvim.vnf`` and so on), so module names come from that mapping; ``tests`` and ``bench`` are
the repo-root packages of the same names.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_dirs() -> dict:
    """setup.py's PACKAGE_DIRS (read, not executed: setup.py calls setup() at import)."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PACKAGE_DIRS":
            return ast.literal_eval(node.value)
    raise SystemExit("setup.py: PACKAGE_DIRS not found")


def modules() -> dict:
    """{module name: source path} of the project: fluidvim.* (every .py under each mapped
    directory, sub-packages without an entry in PACKAGE_DIRS included, e.g. migrations and
    nova_driver.tests), tests.* and bench.*."""
    roots = dict(package_dirs())
    roots["tests"] = "tests"
    roots["bench"] = "bench"
    found = {}
    # deepest mapping first, so orchestrator/mano is fluidvim.orchestrator.mano, not a sub-dir
    mapped = {os.path.normpath(d): p for p, d in roots.items()}
    for pkg, d in roots.items():
        base = os.path.join(ROOT, d)
        for dirpath, dirnames, filenames in os.walk(base):
            rel = os.path.relpath(dirpath, ROOT)
            if rel != os.path.normpath(d) and rel in mapped:
                dirnames[:] = []          # another mapping owns this directory
                continue
            dirnames[:] = [n for n in dirnames if n != "__pycache__"
                           and os.path.exists(os.path.join(dirpath, n, "__init__.py"))]
            sub = os.path.relpath(dirpath, base)
            prefix = pkg if sub == "." else pkg + "." + sub.replace(os.sep, ".")
            for fn in filenames:
                if not fn.endswith(".py"):
                    continue
                name = prefix if fn == "__init__.py" else f"{prefix}.{fn[:-3]}"
                found[name] = os.path.join(dirpath, fn)
    return found


@dataclass(frozen=True)
class Import:
    src: str
    dst: str          # the project module imported (resolved to a module that exists)
    line: int
    local: bool       # inside a function
    guarded: bool     # under try/except or `if TYPE_CHECKING`
    typing: bool = False   # under `if TYPE_CHECKING` (annotations only: not an edge of the graph)


def _resolve(name: str, known: dict) -> str | None:
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports_of(mod: str, path: str, known: dict) -> list:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_pkg = path.endswith("__init__.py")
    out = []

    def visit(node, local, guarded, typing):
        for child in ast.iter_child_nodes(node):
            lc = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            tc = typing or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            gd = guarded or tc or isinstance(child, ast.Try)
            if isinstance(child, ast.Import):
                for a in child.names:
                    dst = _resolve(a.name, known)
                    if dst:
                        out.append(Import(mod, dst, child.lineno, local, guarded, typing))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = mod.split(".")
                    parts = parts if is_pkg else parts[:-1]
                    parts = parts[:len(parts) - (child.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                for a in child.names:
                    dst = _resolve(f"{base}.{a.name}", known) or _resolve(base, known)
                    if dst:
                        out.append(Import(mod, dst, child.lineno, local, guarded, typing))
            visit(child, lc, gd, tc)

    visit(tree, False, False, False)
    return out


def imports(known: dict) -> list:
    """Every import of a project module by a project module (self-imports left out)."""
    out = []
    for mod, path in known.items():
        out += _imports_of(mod, path, known)
    return [i for i in out if i.src != i.dst and not i.typing]


def package_of(mod: str) -> str:
    """The layer a module belongs to: fluidvim.<pkg> (fluidvim.orchestrator.mano counts as its
    own), or the top module of fluidvim itself / tests / bench."""
    parts = mod.split(".")
    if parts[0] != "fluidvim":
        return parts[0]
    if len(parts) >= 3 and parts[1] == "orchestrator" and parts[2] in ("mano", "osm", "zones"):
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def sccs(nodes, edges) -> list:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    adj = {n: sorted({d for s, d in edges if s == n}) for n in nodes}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            n, it = work[-1]
            for m in it:
                if m not in index:
                    index[m] = low[m] = counter[0]
                    counter[0] += 1
                    stack.append(m)
                    on.add(m)
                    work.append((m, iter(adj[m])))
                    break
                if m in on:
                    low[n] = min(low[n], index[m])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[n])
                if low[n] == index[n]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        comp.append(m)
                        if m == n:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def is_test_code(mod: str) -> bool:
    parts = mod.split(".")
    return parts[0] in ("tests", "bench") or "tests" in parts[1:] or parts[-1].startswith("test_")


def check_tests(imps) -> int:
    bad = [i for i in imps if not is_test_code(i.src) and is_test_code(i.dst)]
    for i in bad:
        print(f"{i.src}:{i.line}: production module imports test/bench module {i.dst}")
    if bad:
        print("production code must not import tests or benchmarks (ARCHITECTURE.md)")
    return 1 if bad else 0


def link_tree(dest: str) -> None:
    """The installed layout of the production modules as symlinks to the source files
    (fluidvim/, fluidvim/vnf/, ...; no tests), for tools that find modules by walking a package's
    directory (grimp, so lint-imports)."""
    known = modules()
    for mod, path in known.items():
        if mod.split(".")[0] != "fluidvim" or is_test_code(mod):   # the contracts are about
            continue                                                # production code
        parts = mod.split(".")
        if path.endswith("__init__.py"):
            target = os.path.join(dest, *parts, "__init__.py")
        else:
            target = os.path.join(dest, *parts[:-1], parts[-1] + ".py")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.unlink(target)
        os.symlink(path, target)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modules", action="store_true", help="module-level cycles with statements")
    p.add_argument("--check-tests", action="store_true",
                   help="fail if a production module imports a test or bench module")
    p.add_argument("--tree", metavar="DIR", help="write a link tree of the installed layout")
    p.add_argument("--local", action="store_true", help="list function-local imports")
    a = p.parse_args(argv)
    if a.tree:
        link_tree(a.tree)
        return 0
    known = modules()
    imps = imports(known)
    if a.check_tests:
        return check_tests(imps)
    prod = [i for i in imps if not is_test_code(i.src)]
    if a.local:
        for i in sorted(prod, key=lambda i: (i.src, i.line)):
            if i.local:
                print(f"{i.src}:{i.line} -> {i.dst}{' (guarded)' if i.guarded else ''}")
        print(f"{sum(i.local for i in prod)} function-local imports of project modules", file=sys.stderr)
        return 0
    if a.modules:
        nodes = {i.src for i in prod} | {i.dst for i in prod}
        for comp in sccs(nodes, {(i.src, i.dst) for i in prod}):
            print("cycle:", " ".join(comp))
            for i in prod:
                if i.src in comp and i.dst in comp:
                    print(f"    {i.src}:{i.line} -> {i.dst}{' (local)' if i.local else ''}")
        return 0
    edges = {}
    for i in prod:
        s, d = package_of(i.src), package_of(i.dst)
        if s != d:
            edges.setdefault((s, d), []).append(i)
    for (s, d), lst in sorted(edges.items()):
        nl = sum(i.local for i in lst)
        print(f"{s:32} -> {d:32} {len(lst):3} imports ({nl} local)")
    nodes = {s for s, _ in edges} | {d for _, d in edges}
    for comp in sccs(nodes, set(edges)):
        print("package cycle:", " ".join(comp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
