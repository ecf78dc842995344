# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The differential run's inputs (tests/differential.sh): every config the C unit tests and the
contract vectors use, one file each in OUT_DIR, plus the fuzz seeds (copied as they are)."""
import json
import pathlib
import re
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
CALL = re.compile(r'\b(?:cfg|CFG_OK|CFG_ERR)\s*\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def unit_test_configs():
    src = (HERE / "test_click.c").read_text()
    for m in CALL.finditer(src):
        text = "".join(LITERAL.findall(m.group(1)))
        yield text.encode("latin-1").decode("unicode_escape").encode("latin-1")


def vector_configs():
    vectors = json.loads((HERE.parent.parent / "contract/vectors/protocol.json").read_text())
    for m in re.finditer(r'"config": ("(?:[^"\\]|\\.)*")', json.dumps(vectors)):
        yield json.loads(m.group(1)).encode()


def main(out_dir):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seen = set()
    for text in [*unit_test_configs(), *vector_configs()]:
        if text not in seen:
            seen.add(text)
            (out / f"cfg{len(seen):03d}.click").write_bytes(text)
    for seed in sorted((HERE.parent / "fuzz/corpus/config").iterdir()):
        shutil.copy(seed, out / f"seed-{seed.name}")
    print(f"{len(seen)} configs + the fuzz seeds in {out}")


if __name__ == "__main__":
    main(sys.argv[1])
