# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The Markdown documentation (README.md, ARCHITECTURE.md, docs/, the READMEs beside the code):
every relative link names a file or directory of the tree, and a `#anchor` into a Markdown file
names one of its headings (GitHub's rule: lower case, punctuation dropped, spaces to hyphens).
Standard library only: `tox -e docs` runs it without installing the package."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP_DIRS = {".git", ".venv", ".venv-dist", ".tox", "node_modules", "dist", "build"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _markdown_files():
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")
                       and not d.endswith(".egg-info")]
        out += [os.path.join(dirpath, f) for f in filenames if f.endswith(".md")]
    return sorted(out)


def _prose(path, code_spans=False):
    """The lines outside fenced code blocks, inline code spans removed (or only their backticks)."""
    lines, fenced = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                lines.append(line.replace("`", "") if code_spans else re.sub(r"`[^`]*`", "", line))
    return lines


def _anchors(path):
    seen, out = {}, set()
    for line in _prose(path, code_spans=True):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    for line in _prose(path):                                  # <a name="..."> / id="..."
        out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
    return out


MARKDOWN = _markdown_files()


def test_there_is_documentation():
    rel = {os.path.relpath(p, ROOT) for p in MARKDOWN}
    assert {"README.md", "ARCHITECTURE.md", "docs/operators.md"} <= rel, sorted(rel)


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(path):
    broken = []
    for lineno, line in enumerate(_prose(path), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):           # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            if not os.path.exists(dest):
                broken.append(f"line ~{lineno}: {target} (no {os.path.relpath(dest, ROOT)})")
            elif anchor and dest.endswith(".md") and anchor not in _anchors(dest):
                broken.append(f"line ~{lineno}: {target} (no heading #{anchor} in "
                              f"{os.path.relpath(dest, ROOT)})")
    assert not broken, f"{os.path.relpath(path, ROOT)}: broken links, fix the target:\n" + \
        "\n".join(broken)
