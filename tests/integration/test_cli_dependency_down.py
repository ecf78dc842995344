# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim`` (the console script, as a user runs it) while libvirtd does not answer: a real
libvirt-backend VNF runs under the shared libvirtd, and the CLI is pointed at a libvirt URI whose
socket does not exist - what a client sees when libvirtd is down, without stopping the daemon
other tests use. ``vnf list`` answers from the store (the VNF ``unknown``, its stored status
beside it, one warning line); commands that need libvirt answer with one line naming libvirtd and
how to start it (exit 2); nothing is marked crashed, and with libvirt back the VNF is listed
running again."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.libvirt

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
DEAD_URI = "qemu+unix:///system?socket=/run/fluidvim-no-libvirtd/libvirt-sock"
FLUIDVIM = os.path.join(os.path.dirname(sys.executable), "fluidvim")


def fluidvim(conf_file, *args):
    p = subprocess.run([FLUIDVIM, "--config-file", str(conf_file), *args], capture_output=True,
                       text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, p.stdout, p.stderr.strip().splitlines()


def test_cli_while_libvirtd_is_down(make_manager, tmp_path):
    mgr = make_manager(backend="libvirt")
    res = mgr.launch(FORWARD, name="lvdown", nics=[None, None], slots=8, warm=False)
    down = tmp_path / "down.conf"
    up = tmp_path / "up.conf"
    common = f"[vnf]\nbackend = libvirt\nstate_dir = {mgr.conf.vnf.state_dir}\n" \
             f"run_dir = {mgr.run_dir}\n"
    down.write_text(common + f"libvirt_uri = {DEAD_URI}\n")
    up.write_text(common)

    rc, out, err = fluidvim(down, "vnf", "list")
    assert rc == 0, err
    row = [line for line in out.splitlines() if line.startswith("lvdown ")]
    assert len(row) == 1 and res.vnf_id in row[0], out
    assert row[0].split()[3] == "unknown", row
    assert row[0].endswith("(libvirtd down; last stored status running)"), row
    assert len(err) == 1, err
    assert err[0].startswith("fluidvim: warning: libvirtd is not running or not reachable "
                             f"(connect to {DEAD_URI} failed: "), err
    assert "systemctl start libvirtd" in err[0] and "tools/bootstrap.sh" in err[0], err
    assert err[0].endswith("libvirt VNFs are listed as last stored, not checked"), err

    rc, out, _ = fluidvim(down, "vnf", "list", "--json")
    assert rc == 0
    [rec] = [r for r in json.loads(out) if r["name"] == "lvdown"]
    assert (rec["status"], rec["stored_status"]) == ("unknown", "running")
    assert rec["reason"] == "libvirtd down; last stored status running"

    # what needs libvirt: one line, what is down and how to bring it back, exit 2
    for args in (("vnf", "stats", "lvdown"), ("vnf", "rm", "lvdown"),
                 ("vnf", "pause", "lvdown"),
                 ("vnf", "run", "--name", "lvdown2", "--config", FORWARD, "--cold")):
        rc, out, err = fluidvim(down, *args)
        assert rc == 2 and out == "", (args, out, err)
        assert len(err) == 1, (args, err)
        assert err[0].startswith("fluidvim: error: libvirtd is not running or not reachable "
                                 f"(connect to {DEAD_URI} failed: "), (args, err)
        assert err[0].endswith("or fix [vnf] libvirt_uri"), (args, err)

    # nothing was marked crashed or removed meanwhile; with libvirt reachable it is live again
    assert mgr.get("lvdown").status == "running"
    assert mgr.stats("lvdown")["slots"]["total"] == 8
    rc, out, err = fluidvim(up, "vnf", "list", "--json")
    assert rc == 0 and err == [], err
    [rec] = [r for r in json.loads(out) if r["name"] == "lvdown"]
    assert (rec["status"], rec["stored_status"], rec["reason"]) == ("running", "running", None)
    rc, out, err = fluidvim(up, "vnf", "stats", "lvdown")
    assert rc == 0 and "session slots: 0/8 used" in out, (out, err)
