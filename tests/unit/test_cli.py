# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
import pytest

from fluidvim import cli


@pytest.mark.parametrize("argv", [["--help"], ["vnf", "--help"], ["vnf", "run", "--help"],
                                  ["pool", "--help"], ["demo", "--help"]])
def test_help_shows_examples(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "fluidvim " in out


def test_run_needs_exactly_one_config_source(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["vnf", "run", "--nic", "br0"])
    assert "exactly one of --config" in str(e.value)


def test_progress_without_tqdm(capsys):
    """`fluidvim pool fill` in the core install (no tqdm): a plain count on stderr."""
    with cli._Progress(total=3, desc="booting shells", unit="shell") as bar:
        bar.update(1)
        bar.update(2)
    assert bar.n == 3
    assert capsys.readouterr().err.endswith("\rbooting shells: 3/3 shell(s)\n")
