# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The size habit (lint stage): no production module over 600 lines and no function over 60 lines,
unless tools/sizes-allowed.txt lists it with a one-line reason.

Production code: the Python packages setup.py ships, the C of the kernel and the vhost backend,
the Go of the Nomad plugin (not tests). Python functions are measured by ast (decorators to last
line); C and Go functions from the line that opens them at column 0 to their closing `}` there.

    python tools/sizes.py            exit 1 if something over a limit is not listed
"""
import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = ROOT / "tools" / "sizes-allowed.txt"
MAX_MODULE, MAX_FUNCTION = 600, 60
PY_DIRS = ["fluidvim", "vnf", "orchestrator", "evaluator", "nova_driver", "nova_shim"]
C_DIRS = ["unikernel/src", "vhost"]
GO_DIRS = ["nomad_driver"]
C_FUNC = re.compile(r"^[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;]*$")
GO_FUNC = re.compile(r"^func (?:\([^)]*\) )?(\w+)")


def python_functions(path, text):
    tree = ast.parse(text, str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield node.name, node.end_lineno - first + 1


def brace_functions(lines, head):
    """C/Go functions: a head line at column 0, its body up to the next `}` at column 0."""
    name, start = None, 0
    for i, line in enumerate(lines):
        if name is None:
            m = head.match(line)
            if m and not line.rstrip().endswith((";", "}")):  # a declaration, a one-line body
                name, start = m.group(1), i
        elif line.startswith("}"):
            yield name, i - start + 1
            name = None
        elif line and not line[0].isspace() and not line.startswith(("{", "//", "#", "/*", " *")) \
                and head is C_FUNC and i == start + 1:
            name = None  # a declaration spanning lines, not a definition


def sources():
    for d in PY_DIRS:
        for p in sorted((ROOT / d).rglob("*.py")):
            if "tests" not in p.relative_to(ROOT).parts:
                yield p, "py"
    for d in C_DIRS:
        for p in sorted((ROOT / d).rglob("*.[ch]")):
            if not {"tests", "fuzz", "build"} & set(p.relative_to(ROOT).parts):
                yield p, "c"
    for d in GO_DIRS:
        for p in sorted((ROOT / d).rglob("*.go")):
            if not p.name.endswith("_test.go"):
                yield p, "go"


def oversized():
    """(key, what) for everything over a limit: key is path or path:function."""
    for path, lang in sources():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if len(lines) > MAX_MODULE:
            yield rel, f"{len(lines)} lines (module limit {MAX_MODULE})"
        if lang == "py":
            funcs = python_functions(path, text)
        else:
            funcs = brace_functions(lines, GO_FUNC if lang == "go" else C_FUNC)
        for name, n in funcs:
            if n > MAX_FUNCTION:
                yield f"{rel}:{name}", f"{n} lines (function limit {MAX_FUNCTION})"


def allowed():
    """The listed keys; a line is `key  reason`, the reason is required."""
    keys, errors = {}, []
    for no, line in enumerate(ALLOWED.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, reason = line.partition(" ")
        if not reason.strip():
            errors.append(f"{ALLOWED.name}:{no}: {key} needs a one-line reason after it")
        keys[key] = reason.strip()
    return keys, errors


def main():
    keys, errors = allowed()
    found = dict(oversized())
    for key, what in sorted(found.items()):
        if key not in keys:
            errors.append(f"{key}: {what}: shorten it, or list it in tools/{ALLOWED.name} with a reason")
    stale = sorted(set(keys) - set(found))
    for key in stale:  # not an error: another change may have just shortened it
        print(f"sizes: {key} is within the limits now; remove its line from tools/{ALLOWED.name}")
    for e in errors:
        print(e, file=sys.stderr)
    print(f"sizes: {len(found)} over the limits, {len(found) - len(errors)} of them listed with a reason")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
