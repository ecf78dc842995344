# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The release artefacts of ``make dist`` as an operator uses them, with no checkout.

The wheel goes into a fresh venv (``python -m venv``, no system site-packages), installed with
``uv pip install -c constraints.txt <wheel>`` (the pinned uv of tools/bootstrap.sh, whose cache
holds these pins: ~1 CPU-second against pip's ~25 with ensurepip; pip where uv is not there):
its dependencies come from the package index pinned as CI pins them, fluidvim itself only from
the wheel. The distro-nova venv below keeps pip, since pip's handling of a distro's nova is
what that test shows. Every command runs from an empty temporary
directory with no PYTHONPATH, so nothing of the source tree can be imported or found. Then:
- the installed launch core resolves its default kernel to the wheel's image;
- ``fluidvim vnf run`` (the venv's console script) launches a VNF between two network
  namespaces; pings cross it, ``vnf stats`` counts them, its QEMU booted the wheel's kernel;
- the Nomad plugin binary answers go-plugin's handshake as Nomad starts it;
- over a distro-style nova (a --system-site-packages venv, nova outside it): ``pip install
  <wheel>[nova]`` keeps that nova, and nova-compute's own driver loader finds
  ``fluidvim.UnikernelDriver`` when started as ``fluidvim-nova-compute``.

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
from importlib import metadata

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


def _stale(wheel: str) -> bool:
    """The checkout's dist/ wheel is older than a file git tracks (built before a change)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    built = os.path.getmtime(wheel)
    return any(os.path.getmtime(p) > built for f in files if f
               if os.path.isfile(p := os.path.join(REPO, f)))


@pytest.fixture(scope="module")
def dist():
    wheels = glob.glob(os.path.join(DIST, f"fluidvim-{VERSION}-*.whl"))
    if DIST == os.path.join(REPO, "dist") and wheels and _stale(wheels[0]):
        wheels = []                     # a developer's old `make dist`: build this tree's
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
    uv = os.path.join(os.path.dirname(sys.executable), "uv")
    have_uv = os.access(uv, os.X_OK)
    # the interpreter the project runs on, not the checkout's venv (its base installation)
    subprocess.run([sys._base_executable, "-m", "venv", *(["--without-pip"] if have_uv else []),
                    str(env_dir)], check=True, cwd=cwd, env=_clean_env())
    install = ([uv, "pip", "install", "-q", "-p", str(env_dir / "bin" / "python")] if have_uv else
               [str(env_dir / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"])
    pip = subprocess.run([*install, "-c", os.path.join(REPO, "constraints.txt"), dist["wheel"]],
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


def test_sdist_carries_what_operators_take(dist):
    """docs/operators.md has operators take these from the sdist: the dependency sets (all and
    per Nova release), the config samples, the Nomad client config and the systemd units."""
    import tarfile

    top = f"fluidvim-{VERSION}/"
    with tarfile.open(os.path.join(DIST, f"fluidvim-{VERSION}.tar.gz")) as tar:
        names = {n[len(top):] for n in tar.getnames() if n.startswith(top)}
    want = {"constraints.txt", "etc/nomad/client.hcl", "etc/fluidvim-orchestrator.conf.sample",
            "etc/fluidvim-api/fluidvim-api.conf.sample", "etc/nova/nova-fluidvim.conf.sample"}
    want |= {os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "etc", "systemd", "**"),
                                                          recursive=True) if os.path.isfile(p)}
    want |= {os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "tools", "constraints",
                                                                       "nova*.txt"))}
    assert len(want) > 8 and want <= names, sorted(want - names)


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


# -- a distro nova: nova in the system's dist-packages, fluidvim in a --system-site-packages venv --

# what a distro's nova install leaves out of its dist-packages: this checkout's own fluidvim
# (editable finder, metadata) and the .pth files that would activate it
_NOT_DISTRO = ("fluidvim", "__editable__", "_distutils_hack", "distutils-precedence.pth")


@pytest.fixture(scope="module")
def distro_venv(dist, tmp_path_factory):
    """Debian's layout without Debian's nova (bookworm's python3-nova is nova 26, older than the
    oldest release the driver supports, 31): the nova this test runs with (a real install, with
    its dependencies) stands for /usr/lib/python3/dist-packages as a directory of symlinks
    without anything of fluidvim; the venv is made with --system-site-packages and that
    directory is a site directory after the venv's own, where a Debian interpreter has
    dist-packages (the base interpreter's site-packages, shared with other users of this
    machine, is not written to). Then `pip install <wheel>[nova]`, as an operator would."""
    nova = pytest.importorskip("nova", reason="the distro-nova test needs nova (extra [nova])")
    site = os.path.dirname(os.path.dirname(nova.__file__))
    root = tmp_path_factory.mktemp("distro")
    dist_packages, env_dir, cwd = root / "dist-packages", root / "venv", root / "cwd"
    dist_packages.mkdir()
    cwd.mkdir()
    for name in os.listdir(site):
        if not name.startswith(_NOT_DISTRO) and not name.endswith(".pth") or name.endswith("nspkg.pth"):
            os.symlink(os.path.join(site, name), dist_packages / name)
    assert not os.path.exists(dist_packages / "nova" / "virt" / "fluidvim")
    subprocess.run([sys._base_executable, "-m", "venv", "--system-site-packages", str(env_dir)],
                   check=True, cwd=cwd, env=_clean_env())
    py = env_dir / "bin" / "python"
    venv_site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, cwd=cwd,
                               env=_clean_env()).stdout.strip()
    with open(os.path.join(venv_site, "zz-distro-dist-packages.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({str(dist_packages)!r})\n")
    pip = subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                          "-c", os.path.join(REPO, "constraints.txt"), f"{dist['wheel']}[nova]"],
                         cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr
    return {"bin": env_dir / "bin", "cwd": cwd, "root": root, "site": venv_site,
            "dist_packages": str(dist_packages), "nova_version": metadata.version("nova")}


def _probe(venv, code):
    p = _run(venv, venv["bin"] / "python", "-c", code, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(900)     # the distro venv: a venv, pip (and make dist when first)
def test_pip_install_extra_nova_leaves_the_distro_nova(distro_venv):
    """fluidvim[nova] only asks for nova>=31: the distro's nova satisfies it and stays the one
    imported; nothing of nova lands in the venv but the shim sub-package."""
    got = _probe(distro_venv, "import json, importlib.metadata as m, nova, fluidvim; "
                              "print(json.dumps([nova.__file__, m.version('nova'), fluidvim.__file__]))")
    nova_file, nova_version, fluidvim_file = got
    assert nova_file.startswith(distro_venv["dist_packages"]), nova_file
    assert nova_version == distro_venv["nova_version"]
    assert fluidvim_file.startswith(distro_venv["site"]), fluidvim_file
    in_venv = os.listdir(distro_venv["site"])
    assert not [n for n in in_venv if n.lower().startswith("nova-")], in_venv   # no nova dist-info
    assert os.listdir(os.path.join(distro_venv["site"], "nova")) == ["virt"]
    assert os.listdir(os.path.join(distro_venv["site"], "nova", "virt")) == ["fluidvim"]


# nova-compute's loader as nova-compute calls it (compute_driver from nova.conf); prints the class
_LOAD = """
import json, sys
from nova import config
from nova.virt import driver
config.parse_args([sys.argv[0]], default_config_files=[], configure_db=False, init_rpc=False)
{extend}
d = driver.load_compute_driver(None, "fluidvim.UnikernelDriver")
print(json.dumps([type(d).__module__, type(d).__name__, sys.modules[type(d).__module__].__file__]))
"""


@pytest.mark.timeout(900)     # the distro venv: a venv, pip (and make dist when first)
def test_distro_nova_compute_finds_the_driver_through_fluidvim_nova_compute(distro_venv):
    """Plain nova-compute under the venv's interpreter cannot load the driver (nova.virt's
    __path__ is the distro's directory alone: load_compute_driver exits 1); with
    fluidvim-nova-compute's path extension the same loader returns fluidvim's UnikernelDriver
    from the venv, and the console script is nova-compute itself (its --version is the
    distro nova's)."""
    plain = _run(distro_venv, distro_venv["bin"] / "python", "-c", _LOAD.format(extend=""),
                 timeout=300)
    assert plain.returncode == 1, (plain.returncode, plain.stdout, plain.stderr[-2000:])
    assert "nova.virt.fluidvim" in plain.stderr, plain.stderr[-2000:]

    extend = ("from fluidvim.cmd import nova_compute; "
              "assert nova_compute.extend_nova_virt(), 'nothing added to nova.virt.__path__'")
    module, name, path = _probe(distro_venv, _LOAD.format(extend=extend))
    assert (module, name) == ("fluidvim.nova_driver.driver", "UnikernelDriver")
    assert path.startswith(distro_venv["site"]), path

    p = _run(distro_venv, distro_venv["bin"] / "fluidvim-nova-compute", "--version", timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == distro_venv["nova_version"], (p.stdout, p.stderr[-2000:])
