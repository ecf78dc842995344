# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
import argparse

import pytest

from fluidvim.cmd import cli


def _command_paths():
    """Every command and sub-command of ``fluidvim``, as the argv that names it."""
    top = cli.build_parser()
    for name in cli.COMMANDS:
        with pytest.raises(SystemExit):       # fills the command's parser in (lazily loaded)
            top.parse_args([name, "--help"])
    todo = [([], top)]
    while todo:
        path, parser = todo.pop()
        yield path
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(path + [name], sub) for name, sub in action.choices.items()]


def test_every_help_shows_examples(capsys):
    paths = list(_command_paths())
    assert ["vnf", "rm"] in paths and ["ns", "heal"] in paths
    for path in paths:
        with pytest.raises(SystemExit) as e:
            cli.main(path + ["--help"])
        assert e.value.code == 0, path
        out = capsys.readouterr().out
        assert "\n  fluidvim " in "\n" + out.partition("\nexamples:\n")[2], path


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


def test_every_command_loads_its_parser(capsys):
    # the top-level parser knows commands by name; each one's module fills its parser in
    for name in cli.COMMANDS:
        with pytest.raises(SystemExit) as e:
            cli.main([name, "--help"])
        assert e.value.code == 0, name
        assert capsys.readouterr().out.startswith(f"usage: fluidvim {name} ")


# What the launch core's commands must not import: each is 50-250 ms of a command that should
# take 150 ms (issue 11); bench/cli.py has the times. (oslo_log the package is oslo.config's.)
HEAVY = ("sqlalchemy", "oslo_log.log", "oslo_messaging", "matplotlib", "openstack", "numpy",
         "pyroute2", "libvirt", "qemu.qmp", "tqdm", "yaml", "jsonschema", "xml.sax.saxutils",
         "fluidvim.orchestrator.cli")


def imported_by(argv, tmp_path) -> set:
    """The modules a fresh interpreter has imported after ``fluidvim ARGV``."""
    import json
    import subprocess
    import sys

    out = tmp_path / "modules.json"
    code = ("import json, sys\nfrom fluidvim.cmd import cli\n"
            f"try:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"json.dump(sorted(sys.modules), open({str(out)!r}, 'w'))\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return set(json.loads(out.read_text()))


def test_vnf_list_imports_only_what_it_needs(tmp_path):
    argv = ["--state-dir", str(tmp_path / "state"), "--run-dir", str(tmp_path / "run"), "vnf", "list"]
    first = imported_by(argv, tmp_path)
    assert "alembic" in first          # the first command on a host creates the schema (once)
    mods = imported_by(argv, tmp_path)  # every later one: a database at head, one query
    assert "fluidvim.vnf.manager" in mods                  # it did run
    assert not [m for m in HEAVY if m in mods]


def test_help_imports_no_command(tmp_path):
    mods = imported_by(["--help"], tmp_path)
    assert not [m for m in HEAVY + ("oslo_config", "fluidvim.vnf.manager") if m in mods]
