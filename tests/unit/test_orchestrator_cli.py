# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator's `fluidvim` commands: argument errors and a clean
one-line error when no orchestrator answers."""

import pytest

from fluidvim.cmd import cli

# every command's --help shows examples: tests/unit/test_cli.py test_every_help_shows_examples


def test_register_needs_exactly_one_config_source():
    with pytest.raises(SystemExit) as e:
        cli.main(["service", "register", "fw", "--rpc-timeout", "1"])
    assert "exactly one of --config" in str(e.value)


def test_alias_must_be_key_value():
    with pytest.raises(SystemExit) as e:
        cli.main(["service", "register", "fw", "--config", "x", "--alias", "premium",
                  "--rpc-timeout", "1"])
    assert "--alias 'premium': expected KEY=VALUE" in str(e.value)


def test_no_orchestrator_is_one_clear_line(capsys):
    # nothing listens on this topic (or no broker at all): exit 2 and say what to check
    rc = cli.main(["resolve", "fw", "--topic", "fvo-unit-nobody", "--rpc-timeout", "1"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("fluidvim: error:") and "orchestrator" in err


def test_unreachable_broker_fails_fast(capsys):
    # (a command that only reads may answer from the database: test_cli_store_answers.py)
    rc = cli.main(["resolve", "fw", "--transport-url", "rabbit://guest:guest@127.0.0.1:1/"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("fluidvim: error: cannot reach the message broker (127.0.0.1:1:")
