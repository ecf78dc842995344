# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""cliff's formatters in the ``fluidvim`` CLI's API commands (``-f``, ``-c``; ``--json`` and the
commands' own text unchanged), and the ``openstack fluidvim`` plugin's entry points as
python-openstackclient loads them (real cliff, osc-lib, stevedore; the commands against a real
API are in tests/integration/test_osc_plugin.py)."""

import argparse
import importlib.metadata
import io
import json

import pytest

from fluidvim.orchestrator import clicommon

ROWS = [{"name": "fw", "slots": 4, "aliases": {"premium": 4}},
        {"name": "nat", "slots": None, "requirements": {"accel": ["kvm"]}}]


def emitted(data, fmt, columns=None):
    buf = io.StringIO()
    clicommon.emit(data, fmt, columns, stdout=buf)
    return buf.getvalue()


def test_json_keeps_nested_data_and_every_key():
    assert json.loads(emitted(ROWS, "json")) == [
        {"name": "fw", "slots": 4, "aliases": {"premium": 4}, "requirements": None},
        {"name": "nat", "slots": None, "aliases": None, "requirements": {"accel": ["kvm"]}}]
    assert json.loads(emitted(ROWS[0], "json")) == ROWS[0]


def test_value_and_columns_in_the_order_given():
    assert emitted(ROWS, "value", ["slots", "name"]) == "4 fw\nNone nat\n"
    assert emitted(ROWS[0], "value", ["aliases"]) == '{"premium": 4}\n'


def test_table_shows_nested_data_as_json():
    out = emitted(ROWS, "table", ["name", "aliases"])
    assert out.splitlines()[1].split() == ["|", "name", "|", "aliases", "|"]
    assert '| fw   | {"premium": 4} |' in out
    one = emitted(ROWS[0], "table")
    assert "| Field   | Value          |" in one and "| slots   | 4              |" in one


def test_yaml_and_csv():
    import yaml

    assert yaml.safe_load(emitted(ROWS, "yaml", ["name"])) == [{"name": "fw"}, {"name": "nat"}]
    assert emitted(ROWS, "csv", ["name", "slots"]).splitlines() == [
        '"name","slots"', '"fw",4', '"nat",""']
    with pytest.raises(SystemExit, match="-f csv: this command prints one object"):
        emitted(ROWS[0], "csv")


def test_an_unknown_column_names_the_columns():
    with pytest.raises(SystemExit) as e:
        emitted(ROWS, "table", ["name", "nope"])
    assert str(e.value) == ("fluidvim: error: -c nope: no such column; the columns are "
                            "name, slots, aliases, requirements")


def test_out_dispatches_on_the_options(capsys):
    p = clicommon.common(argparse.ArgumentParser())
    texts = []
    clicommon.out(p.parse_args([]), ROWS, texts.append)
    assert texts == [ROWS] and capsys.readouterr().out == ""
    clicommon.out(p.parse_args(["--json"]), ROWS, texts.append)
    assert json.loads(capsys.readouterr().out) == ROWS            # --json as before
    clicommon.out(p.parse_args(["-c", "name"]), ROWS, texts.append)  # -c alone: a table
    assert "| name |" in capsys.readouterr().out
    clicommon.out(p.parse_args(["-f", "value", "-c", "name"]), ROWS, texts.append)
    assert capsys.readouterr().out == "fw\nnat\n" and len(texts) == 1


def test_the_openstack_plugin_contract():
    """python-openstackclient's contract: one `openstack.cli.extension` module with the API name,
    version option and factories, and every `openstack.fluidvim.v1` command a cliff command."""
    from cliff.command import Command

    ext = [ep for ep in importlib.metadata.entry_points(group="openstack.cli.extension")
           if ep.name == "fluidvim"]
    assert len(ext) == 1
    plugin = ext[0].load()
    assert (plugin.API_NAME, plugin.API_VERSION_OPTION, plugin.API_VERSIONS) == (
        "fluidvim", "os_fluidvim_api_version", ("1",))
    parser = plugin.build_option_parser(argparse.ArgumentParser())
    assert parser.parse_args(["--os-fluidvim-api-version", "1"]).os_fluidvim_api_version == "1"
    cmds = {ep.name: ep.load() for ep in importlib.metadata.entry_points(
        group="openstack.fluidvim.v1")}
    assert set(cmds) >= {f"fluidvim_{c}" for c in (
        "service_list", "service_show", "placement_create", "placement_explain", "slots_list",
        "zone_list", "instance_list", "instance_show", "instance_delete", "ns_list", "ns_show",
        "ns_create", "ns_scale", "ns_heal", "ns_delete", "ns_operation_list")}
    assert all(issubclass(c, Command) for c in cmds.values())


def test_plugin_columns():
    from fluidvim.orchestrator.osc import v1

    cols, rows = v1._rows(ROWS, ("name", "slots"), long=False)
    assert cols == ("name", "slots") and rows == [("fw", 4), ("nat", None)]
    cols, rows = v1._rows(ROWS, ("name",), long=True)
    assert cols == ("name", "slots", "aliases", "requirements")
    assert rows[0][2].human_readable() == '{"premium": 4}'
    assert rows[0][2].machine_readable() == {"premium": 4}
    cols, values = v1._one(ROWS[0])
    assert cols == ("aliases", "name", "slots") and values[1:] == ("fw", 4)


def test_every_plugin_command_has_examples_that_parse():
    """`openstack fluidvim X --help` shows its family's examples, one a line, and the examples
    of X itself parse with X's parser."""
    import shlex
    from unittest import mock

    cmds = {ep.name: ep.load() for ep in importlib.metadata.entry_points(
        group="openstack.fluidvim.v1")}
    for name, cls in cmds.items():
        words = name.split("_")[1:]                          # fluidvim_ns_operation_list
        cmd = cls(mock.Mock(), None, cmd_name="fluidvim " + " ".join(words))
        parser = cmd.get_parser("openstack fluidvim " + " ".join(words))
        lines = parser.format_help().partition("\nexamples:\n")[2].splitlines()
        own = [ln.strip() for ln in lines
               if ln.strip().startswith("openstack fluidvim " + " ".join(words) + " ")]
        assert own, name
        for line in own:
            parser.parse_args(shlex.split(line)[2 + len(words):])
