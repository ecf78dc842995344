# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""End to end: a real Nomad agent (dev mode) with the fluidvim `unikernel` task driver plugin.

Needs root, /dev/kvm or TCG, the VNF kernel (`make -C vnf/kernel`), Go (builds the plugin) and a
Nomad agent built by ``tools/build-nomad.sh`` (``$FLUIDVIM_NOMAD``, default
``/var/cache/fluidvim/nomad-v1.11.3/nomad``); skipped otherwise.

It starts ``nomad agent -dev`` on 127.0.0.1:14646-14648 with a client config adapted from
``etc/nomad/client.hcl``, checks the driver's fingerprint, runs ``etc/nomad/vnf-firewall.nomad.hcl``
with ``nomad job run`` between two TestNet bridges and sends traffic through the VNF, places a
second job constrained on ``driver.unikernel.session_slots.free``, submits a third through
python-nomad (JSON job API), then purges all of them and checks no QEMU or tap is left.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from fluidvim.vnf import conf as vnfconf, netdev, spec, testnet

REPO = Path(__file__).resolve().parents[2]
NOMAD = os.environ.get("FLUIDVIM_NOMAD", "/var/cache/fluidvim/nomad-v1.11.3/nomad")
HTTP, RPC, SERF = 14646, 14647, 14648
ADDR = f"http://127.0.0.1:{HTTP}"
PRE = "driver.unikernel."

if os.environ.get("CI") and not os.path.exists(NOMAD):
    # `make test` builds the agent first: in CI a missing agent is a failure, not a skip
    raise RuntimeError(f"CI: no Nomad agent at {NOMAD} (tools/build-nomad.sh failed?)")

pytestmark = [
    pytest.mark.nomad,
    pytest.mark.skipif(not os.path.exists(NOMAD),
                       reason=f"no Nomad agent at {NOMAD}: run tools/build-nomad.sh "
                              "(or set FLUIDVIM_NOMAD)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (taps, bridges, namespaces)"),
    pytest.mark.skipif(not os.path.exists(vnfconf.default_kernel()),
                       reason="the VNF kernel is not built: run `make -C vnf/kernel`"),
    pytest.mark.skipif(shutil.which("go") is None, reason="Go is needed to build the plugin"),
]


def api(path: str, body=None, method=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(ADDR + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def wait_for(what: str, fn, timeout: float, interval: float = 0.1):
    """Polls fn() until it returns something truthy; fails naming what after timeout."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
            last = v
        except (urllib.error.URLError, ConnectionError, KeyError, IndexError) as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def client_config(tmp: Path, plugin_dir: Path, run_dir: str) -> str:
    """etc/nomad/client.hcl with private dirs, loopback ports and a fast fingerprint."""
    text = (REPO / "etc/nomad/client.hcl").read_text()
    text = re.sub(r'(?m)^data_dir\s*=.*$', f'data_dir   = "{tmp / "data"}"', text)
    text = re.sub(r'(?m)^plugin_dir\s*=.*$', f'plugin_dir = "{plugin_dir}"', text)
    text = re.sub(r'(?ms)^client \{.*?^\}',
                  'client {\n  enabled = true\n  options = {\n'
                  '    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"\n'
                  '  }\n}', text)
    text = re.sub(r'(?m)^(\s*)kernel\s*=.*$', rf'\1kernel = "{vnfconf.default_kernel()}"', text)
    text = re.sub(r'(?m)^(\s*)run_dir\s*=.*$', rf'\1run_dir = "{run_dir}"', text)
    text = re.sub(r'(?m)^(\s*)fingerprint_period\s*=.*$', r'\1fingerprint_period = "1s"', text)
    for want in (f'"{plugin_dir}"', f'"{run_dir}"', "fingerprint.denylist", '"1s"'):
        assert want in text, f"client.hcl changed: cannot set {want}"
    text += ('\nbind_addr = "127.0.0.1"\n'
             f'ports {{\n  http = {HTTP}\n  rpc  = {RPC}\n  serf = {SERF}\n}}\n'
             'advertise {\n  http = "127.0.0.1"\n  rpc = "127.0.0.1"\n  serf = "127.0.0.1"\n}\n'
             'log_level = "DEBUG"\n')
    return text


def firewall_job(name: str, bridges: list[str]) -> str:
    """etc/nomad/vnf-firewall.nomad.hcl on the TestNet bridges, ICMP allowed too (for ping)."""
    text = (REPO / "etc/nomad/vnf-firewall.nomad.hcl").read_text()
    text = text.replace('job "vnf-firewall"', f'job "{name}"')
    text = text.replace('nics          = ["br0", "br1"]', f'nics = {json.dumps(bridges)}')
    text = text.replace("IPFilter(allow tcp dst port 80,", "IPFilter(allow icmp, allow tcp dst port 80,")
    assert name in text and bridges[0] in text and "allow icmp" in text
    return text


def slots_job(name: str) -> str:
    """A one-NIC (unplugged) VNF, placed only where a VNF already offers free session slots."""
    return f'''
job "{name}" {{
  datacenters = ["dc1"]
  constraint {{
    attribute = "${{attr.{PRE}session_slots.free}}"
    operator  = ">="
    value     = "1"
  }}
  group "g" {{
    task "vnf" {{
      driver = "unikernel"
      config {{
        memory_mb     = 32
        session_slots = 256
        nics          = [""]
      }}
      resources {{
        cpu    = 100
        memory = 64
      }}
    }}
  }}
}}
'''


def nomad_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    r = subprocess.run([NOMAD, *args], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "NOMAD_ADDR": ADDR})
    assert r.returncode == 0, f"nomad {' '.join(args)}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def running_alloc(job: str):
    """The job's allocation once its client status is running (fails fast on failed)."""
    allocs = api(f"/v1/job/{job}/allocations")
    for a in allocs:
        if a["ClientStatus"] == "failed":
            detail = api(f"/v1/allocation/{a['ID']}")
            raise AssertionError(f"{job}: allocation failed: "
                                 f"{json.dumps(detail.get('TaskStates'), indent=1)}")
        if a["ClientStatus"] == "running":
            return a
    return None


def qemu_pids(*dirs: str) -> list[int]:
    """QEMU processes whose command line names a path under one of ``dirs`` (their sockets)."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmd and any(d.rstrip("/") + "/" in cmd for d in dirs):
            pids.append(int(p.name))
    return pids


def vnf_ids(run_dir: str) -> set[str]:
    d = Path(run_dir)
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def node_attrs(node_id: str) -> dict:
    return api(f"/v1/node/{node_id}")["Attributes"]


@pytest.fixture
def agent(tmp_path):
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    subprocess.run(["go", "build", "-o", str(plugin_dir / "fluidvim-unikernel"), "."],
                   cwd=REPO / "nomad_driver", check=True, timeout=600)
    run_dir = f"/run/fvn-e2e-{uuid.uuid4().hex[:8]}"
    cfg = tmp_path / "client.hcl"
    cfg.write_text(client_config(tmp_path, plugin_dir, run_dir))
    log = open(tmp_path / "nomad.log", "w")
    proc = subprocess.Popen([NOMAD, "agent", "-dev", "-config", str(cfg),
                             "-plugin-dir", str(plugin_dir)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc, run_dir, tmp_path / "nomad.log"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        log.close()
        for pid in qemu_pids(run_dir):   # only if the test failed before purging
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(run_dir, ignore_errors=True)


def test_nomad_agent_runs_vnfs(agent):
    proc, run_dir, log_path = agent
    timings = {}

    def log_tail():
        return log_path.read_text()[-4000:]

    # -- the node comes up with the driver healthy and fingerprinted
    t0 = time.monotonic()

    def ready_node():
        assert proc.poll() is None, f"agent exited rc={proc.returncode}\n{log_tail()}"
        nodes = api("/v1/nodes")
        for n in nodes:
            if n["Status"] == "ready" and n.get("Drivers", {}).get("unikernel", {}).get("Healthy"):
                return n
        return None

    node = wait_for("the node with a healthy unikernel driver", ready_node, 45, 0.25)
    timings["agent start -> node ready (s)"] = round(time.monotonic() - t0, 2)
    attrs = node_attrs(node["ID"])
    assert attrs[PRE + "accel"] in ("kvm", "tcg"), attrs
    assert attrs[PRE + "kernel"] == vnfconf.default_kernel()
    assert attrs[PRE + "kernel_present"] in ("true", "1")
    assert attrs[PRE + "vnfs"] == "0"
    assert attrs[PRE + "session_slots.total"] == "0"
    assert attrs[PRE + "session_slots.free"] == "0"
    assert PRE + "version" in attrs and PRE + "proto" in attrs

    jobs = ["fvn-e2e-fw", "fvn-e2e-slots", "fvn-e2e-api"]
    seen_vnfs: set[str] = set()
    with testnet.TestNet("fvn", 95) as net:
        try:
            # -- 1: the firewall job through the CLI, between the two bridges
            jobfile = log_path.parent / "fw.nomad.hcl"
            jobfile.write_text(firewall_job(jobs[0], net.bridges))
            t1 = time.monotonic()
            nomad_cli("job", "run", "-detach", str(jobfile))
            alloc = wait_for(f"{jobs[0]} running", lambda: running_alloc(jobs[0]), 60)
            timings["job run -> alloc running, cold (s)"] = round(time.monotonic() - t1, 2)
            seen_vnfs |= vnf_ids(run_dir)
            assert len(seen_vnfs) == 1 and len(qemu_pids(run_dir)) == 1
            events = api(f"/v1/allocation/{alloc['ID']}")["TaskStates"]["fw"]["Events"]
            times = {e["Type"]: e["Time"] for e in events}
            if "Received" in times and "Started" in times:
                timings["task Received -> Started (ms)"] = round(
                    (times["Started"] - times["Received"]) / 1e6, 1)

            # traffic crosses the VNF: ICMP and tcp/80 pass, other TCP ports are filtered
            assert wait_for("ping a -> b through the VNF", lambda: net.ping(count=3) > 0, 20,
                            0.5)
            server = net.serve_tcp(80, 81)
            try:
                assert net.tcp_connect(80), "tcp/80 should pass the firewall"
                assert not net.tcp_connect(81, timeout_s=1.0), "tcp/81 should be denied"
            finally:
                server.terminate()
                server.wait(5)

            # -- 2: free session slots are fingerprinted; a job constrained on them is placed
            free = wait_for("session_slots.free >= 1",
                            lambda: int(node_attrs(node["ID"])[PRE + "session_slots.free"]) >= 1,
                            20, 0.25)
            assert free
            attrs = node_attrs(node["ID"])
            assert attrs[PRE + "vnfs"] == "1" and attrs[PRE + "session_slots.total"] == "1024"
            jobfile2 = log_path.parent / "slots.nomad.hcl"
            jobfile2.write_text(slots_job(jobs[1]))
            t2 = time.monotonic()
            nomad_cli("job", "run", "-detach", str(jobfile2))
            wait_for(f"{jobs[1]} running", lambda: running_alloc(jobs[1]), 60)
            timings["job run -> alloc running, 2nd job (s)"] = round(time.monotonic() - t2, 2)
            seen_vnfs |= vnf_ids(run_dir)

            # -- 3: a job submitted as JSON through python-nomad
            import nomad as pynomad
            n = pynomad.Nomad(host="127.0.0.1", port=HTTP, timeout=10)
            job = {"ID": jobs[2], "Name": jobs[2], "Type": "service", "Datacenters": ["dc1"],
                   "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
                       "Name": "vnf", "Driver": "unikernel",
                       "Config": {"memory_mb": 32, "session_slots": 128, "nics": [""],
                                  "name": "api-vnf"},
                       "Resources": {"CPU": 100, "MemoryMB": 64}}]}]}
            t3 = time.monotonic()
            resp = n.job.register_job(jobs[2], {"Job": job})
            assert resp.get("EvalID"), resp
            wait_for(f"{jobs[2]} running", lambda: running_alloc(jobs[2]), 60)
            timings["python-nomad register -> alloc running (s)"] = round(time.monotonic() - t3, 2)
            assert n.job.get_job(jobs[2])["Status"] == "running"
            seen_vnfs |= vnf_ids(run_dir)
            assert len(seen_vnfs) == 3 and len(qemu_pids(run_dir)) == 3, (seen_vnfs,
                                                                          qemu_pids(run_dir))
        finally:
            # -- purge everything: no QEMU, no tap of these VNFs is left
            for j in jobs:
                subprocess.run([NOMAD, "job", "stop", "-purge", "-detach", j],
                               capture_output=True, timeout=30,
                               env={**os.environ, "NOMAD_ADDR": ADDR})
            seen_vnfs |= vnf_ids(run_dir)

        t4 = time.monotonic()
        wait_for("no QEMU left", lambda: not qemu_pids(run_dir), 30, 0.2)
        timings["job stop -purge -> no QEMU (s)"] = round(time.monotonic() - t4, 2)
        taps = [spec.tap_for(v, i) for v in seen_vnfs for i in range(spec.MAX_NICS)]
        wait_for("the VNFs' taps gone", lambda: not [t for t in taps if netdev.exists(t)], 10)
        assert api("/v1/jobs") == []

    proc.send_signal(signal.SIGINT)
    assert proc.wait(20) is not None
    print("\nnomad e2e timings:", json.dumps(timings, indent=1))
