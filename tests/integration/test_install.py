# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The release artefacts of ``make dist`` as an operator uses them, with no checkout.

The wheel goes into a fresh venv (``python -m venv``, no system site-packages), installed with
``pip install -c constraints.txt <wheel>``: its dependencies come from the package index pinned
as CI pins them, fluidvim itself only from the wheel. Every command runs from an empty temporary
directory with no PYTHONPATH, so nothing of the source tree can be imported or found. Then:
- the installed launch core resolves its default kernel to the wheel's image;
- ``fluidvim vnf run`` (the venv's console script) launches a VNF between two network
  namespaces; pings cross it, ``vnf stats`` counts them, its QEMU booted the wheel's kernel;
- the Nomad plugin binary answers go-plugin's handshake as Nomad starts it.

The artefacts: ``$FLUIDVIM_DIST`` or the checkout's dist/; built with ``make dist`` when the
wheel of this version is not there (~1 min). SHA256SUMS is checked first."""

import glob
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import uuid

import pytest

import fluidvim
from fluidvim.vnf import testnet

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIST = os.environ.get("FLUIDVIM_DIST") or os.path.join(REPO, "dist")
VERSION = fluidvim.__version__
FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
# Nomad's plugins/base Handshake (the value every Nomad client sets for its plugins)
NOMAD_COOKIE = ("NOMAD_PLUGIN_MAGIC_COOKIE",
                "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255")


def _clean_env(**extra) -> dict:
    """The environment of an operator's shell: no PYTHONPATH, no venv of the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def dist():
    wheels = glob.glob(os.path.join(DIST, f"fluidvim-{VERSION}-*.whl"))
    if not wheels:
        if DIST != os.path.join(REPO, "dist"):
            pytest.fail(f"FLUIDVIM_DIST={DIST} holds no fluidvim-{VERSION}-*.whl: run `make dist`")
        subprocess.run(["make", "-C", REPO, "dist"], check=True, stdout=subprocess.DEVNULL,
                       timeout=900)
        wheels = glob.glob(os.path.join(DIST, f"fluidvim-{VERSION}-*.whl"))
    assert len(wheels) == 1, wheels
    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=DIST, capture_output=True,
                          text=True)
    assert sums.returncode == 0, sums.stdout + sums.stderr
    checked = {line.rsplit(":", 1)[0] for line in sums.stdout.splitlines()
               if line.endswith(": OK")}
    plugin = f"fluidvim-unikernel_{VERSION}_linux_amd64"
    assert {os.path.basename(wheels[0]), f"fluidvim-{VERSION}.tar.gz", plugin} <= checked, checked
    return {"wheel": wheels[0], "plugin": os.path.join(DIST, plugin)}


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory):
    root = tmp_path_factory.mktemp("operator")
    env_dir, cwd = root / "venv", root / "cwd"
    cwd.mkdir()
    # the interpreter the project runs on, not the checkout's venv (its base installation)
    subprocess.run([sys._base_executable, "-m", "venv", str(env_dir)], check=True, cwd=cwd,
                   env=_clean_env())
    pip = subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                          "-c", os.path.join(REPO, "constraints.txt"), dist["wheel"]],
                         cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr
    return {"bin": env_dir / "bin", "cwd": cwd, "root": root}


def _run(venv, *cmd, timeout=120):
    return subprocess.run([str(c) for c in cmd], cwd=venv["cwd"], env=_clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_installed_package_finds_its_kernel(venv):
    probe = ("import json, fluidvim, fluidvim.vnf.conf as c; "
             "print(json.dumps([fluidvim.__file__, c.default_kernel(), c.default_vhost_net()]))")
    p = _run(venv, venv["bin"] / "python", "-c", probe)
    assert p.returncode == 0, p.stderr
    pkg, kernel, vhost = json.loads(p.stdout)
    site = str(venv["root"])
    assert pkg.startswith(site) and not pkg.startswith(REPO), pkg
    assert kernel.startswith(site) and kernel.endswith("fluidvim/vnf/images/fluidvim-vnf.elf")
    assert os.path.isfile(os.path.join(os.path.dirname(kernel), "fluidvim-pvh.bin"))
    assert vhost.startswith(site) and os.access(vhost, os.X_OK), vhost


def test_vnf_run_from_the_wheel_forwards(venv):
    state = venv["root"] / "state"
    run_dir = f"/run/fluidvim-install-{uuid.uuid4().hex[:8]}"
    cli = [venv["bin"] / "fluidvim", "--state-dir", state, "--run-dir", run_dir]
    name = f"inst{uuid.uuid4().hex[:6]}"
    with testnet.TestNet(prefix="fvi") as net:
        try:
            p = _run(venv, *cli, "vnf", "run", "--name", name, "--config", FORWARD, "--cold",
                     "--json", *(a for br in net.bridges for a in ("--nic", br)))
            assert p.returncode == 0, p.stderr
            res = json.loads(p.stdout)
            assert res["name"] == name and res["kind"] == "cold", res

            p = _run(venv, *cli, "vnf", "list", "--json")
            assert p.returncode == 0, p.stderr
            [rec] = [r for r in json.loads(p.stdout) if r["name"] == name]
            assert rec["status"] == "running", rec
            with open(f"/proc/{rec['pid']}/cmdline", "rb") as f:
                argv = f.read().decode().split("\0")
            kernel = argv[argv.index("-kernel") + 1]
            assert kernel.startswith(str(venv["root"])), argv

            assert net.ping(count=3) == 3
            p = _run(venv, *cli, "vnf", "stats", name, "--json")
            assert p.returncode == 0, p.stderr
            nics = json.loads(p.stdout)["nics"]
            assert nics[0]["rx"] >= 4 and nics[1]["tx"] >= 4, nics    # ARP + 3 echo requests
            assert nics[1]["rx"] >= 3 and nics[0]["tx"] >= 3, nics    # 3 echo replies
        finally:
            p = _run(venv, *cli, "vnf", "rm", "--all")
            listed = _run(venv, *cli, "vnf", "list", "--json")
            shutil.rmtree(run_dir, ignore_errors=True)
            assert p.returncode == 0, p.stderr
    assert [r for r in json.loads(listed.stdout) if r["name"] == name] == [], listed.stdout


def test_plugin_binary_answers_nomads_handshake(dist, venv):
    """go-plugin's server side: with Nomad's magic cookie set it serves gRPC on a Unix socket
    and prints CORE-PROTOCOL|APP-PROTOCOL|NETWORK|ADDRESS|PROTOCOL on stdout; without it, it
    refuses to run."""
    refuse = subprocess.run([dist["plugin"]], cwd=venv["cwd"], env=_clean_env(),
                            capture_output=True, text=True, timeout=30)
    assert refuse.returncode != 0 and "This binary is a plugin" in refuse.stdout + refuse.stderr

    proc = subprocess.Popen([dist["plugin"]], cwd=venv["cwd"], env=_clean_env(**dict([NOMAD_COOKIE])),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no handshake line within 30 s"
        fields = proc.stdout.readline().strip().split("|")
        core, app, network, address, protocol = fields[:5]
        assert core == "1", fields                         # go-plugin's core protocol
        assert app.isdigit() and int(app) >= 1, fields      # Nomad's plugin API version
        assert (network, protocol) == ("unix", "grpc"), fields
        assert os.path.exists(address), address
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
