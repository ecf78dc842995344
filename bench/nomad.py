# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/nomad: Nomad job register -> "VNF configured and forwarding", in one run, two paths on
the same kernel and the same agent (`nomad agent -dev`, 127.0.0.1:15646-15648):

(a) Nomad's built-in `qemu` task driver, stock path: `-machine type=pc,accel=kvm` with SeaBIOS
    (the driver's default machine; it always adds `-drive file=<image_path>`, so a tiny dummy
    qcow2 image is attached as an IDE disk), `-m 128M` (the driver's minimum), the kernel given
    through `args` (`-kernel`, `-append`, a virtio-serial control console on a unix socket, one
    virtio-net-pci NIC on an unplugged tap, `-nic none`). The driver returns as soon as QEMU is
    spawned, so after the allocation is `running` the bench connects to the control socket, pings
    until the VNF answers (`configured: false`), then sends `configure` — "ready" is its reply;
(b) our `unikernel` task driver, cold: microvm, no firmware, 32 MiB, one unplugged NIC and
    `click_config`; its StartTask returns only after the VNF's `ready` event and the reply to
    `configure`, so "ready" is the allocation being observed `running`.

Both configure the same graph (`FromDevice(0) -> Discard;`) on one NIC. Per job: POST /v1/jobs
(JSON, no CLI) -> poll /v1/job/<id>/allocations every 10 ms -> ready; then the job is stopped and
purged and its QEMU gone before the next one. Paths alternate job by job (one unmeasured warm-up
job each first). Phases from the allocation (same host clock): schedule (register -> alloc
CreateTime), to client (CreateTime -> task event Received), client/driver (Received -> Started),
started -> running seen (the 10 ms poll), running -> ready (a: ping + configure; b: 0).

    sudo .venv/bin/python -m bench.nomad --jobs 30
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from tqdm import tqdm

import tests.e2e.test_nomad as e2e
from fluidvim.vnf import conf as vnfconf, netdev
from fluidvim.vnf.control import ControlChannel, ControlError

REPO = Path(__file__).resolve().parents[1]
HTTP, RPC, SERF = 15646, 15647, 15648
ADDR = f"http://127.0.0.1:{HTTP}"
GRAPH = "FromDevice(0) -> Discard;"
PHASES = ["schedule", "to client", "client/driver", "started->running seen", "running->ready"]
PATHS = {"a": "(a) nomad qemu driver (pc+SeaBIOS)", "b": "(b) unikernel driver, cold"}
QEMU_ARGS_ALLOW = ["-kernel", "-append", "-cpu", "-nic", "-device", "-chardev", "-netdev"]


def api(path: str, body=None, method=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(ADDR + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def pct(values, q):
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(q / 100.0 * (len(values) - 1))))
    return values[k]


def agent_config(tmp: Path, plugin_dir: Path, run_dir: str, image_dir: Path) -> str:
    """tests/e2e's adaptation of etc/nomad/client.hcl on our ports, plus the qemu driver block."""
    e2e.HTTP, e2e.RPC, e2e.SERF = HTTP, RPC, SERF       # client_config reads these globals
    text = e2e.client_config(tmp, plugin_dir, run_dir)
    assert f"http = {HTTP}" in text
    text += ('\nplugin "qemu" {\n  config {\n'
             f'    image_paths    = [{json.dumps(str(image_dir))}]\n'
             f'    args_allowlist = {json.dumps(QEMU_ARGS_ALLOW)}\n'
             '  }\n}\n')
    return text.replace('log_level = "DEBUG"', 'log_level = "INFO"')


def qemu_job(job: str, image: str, sock: str, tap: str, kernel: str) -> dict:
    args = ["-kernel", kernel, "-append", f"slots=1024 name={job}",
            "-cpu", "max,-arch-capabilities", "-nic", "none",
            "-device", "virtio-serial-pci,max_ports=1",
            "-chardev", f"socket,id=ctl,path={sock},server=on,wait=off",
            "-device", "virtconsole,chardev=ctl,nr=0",
            "-netdev", f"tap,id=net0,ifname={tap},script=no,downscript=no",
            "-device", "virtio-net-pci,netdev=net0"]
    return {"ID": job, "Name": job, "Type": "service", "Datacenters": ["dc1"],
            "TaskGroups": [{"Name": "g", "Count": 1,
                            "RestartPolicy": {"Attempts": 0, "Mode": "fail"},
                            "Tasks": [{"Name": "vnf", "Driver": "qemu",
                                       "Config": {"image_path": image, "accelerator": "kvm",
                                                  "args": args},
                                       "Resources": {"CPU": 100, "MemoryMB": 128}}]}]}


def unikernel_job(job: str) -> dict:
    return {"ID": job, "Name": job, "Type": "service", "Datacenters": ["dc1"],
            "TaskGroups": [{"Name": "g", "Count": 1,
                            "RestartPolicy": {"Attempts": 0, "Mode": "fail"},
                            "Tasks": [{"Name": "vnf", "Driver": "unikernel",
                                       "Config": {"memory_mb": 32, "session_slots": 1024,
                                                  "nics": [""], "click_config": GRAPH,
                                                  "name": job},
                                       "Resources": {"CPU": 100, "MemoryMB": 64}}]}]}


def wait_running(job: str, timeout=60.0):
    """Polls the job's allocations every 10 ms; returns (alloc id, wall ns when seen running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for a in api(f"/v1/job/{job}/allocations"):
            if a["ClientStatus"] == "running":
                return a["ID"], time.time_ns()
            if a["ClientStatus"] in ("failed", "lost"):
                d = api(f"/v1/allocation/{a['ID']}")
                raise RuntimeError(f"{job}: allocation {a['ClientStatus']}: "
                                   f"{json.dumps(d.get('TaskStates'), indent=1)[-3000:]}")
        time.sleep(0.01)
    raise RuntimeError(f"{job}: not running after {timeout}s")


def ping_configure(sock: str, timeout=30.0):
    """(a): first `ping` reply (configured false), then `configure`; wall ns of both replies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not os.path.exists(sock):
            time.sleep(0.001)
            continue
        try:
            ch = ControlChannel(sock).connect()
        except OSError:
            time.sleep(0.001)
            continue
        with ch:
            while time.monotonic() < deadline:
                try:
                    pong = ch.ping(timeout=1.0)
                except ControlError as e:
                    if e.code == "timeout":
                        continue
                    raise
                t_ping = time.time_ns()
                assert pong.get("configured") is False, pong
                res = ch.configure(GRAPH)
                assert res.get("forwarding") is True, res
                return t_ping, time.time_ns(), pong
    raise RuntimeError(f"no ping reply on {sock} within {timeout}s")


def stop_purge(job: str, markers, timeout=30.0):
    api(f"/v1/job/{job}?purge=true", method="DELETE")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not e2e.qemu_pids(*markers) and not any(j["ID"] == job for j in api("/v1/jobs")):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{job}: QEMU or job still there {timeout}s after stop -purge")


def run_job(path: str, i: int, ctx: dict) -> dict:
    job = f"fvnb-{path}-{i}-{uuid.uuid4().hex[:6]}"
    if path == "a":
        sock = os.path.join(ctx["sock_dir"], f"{i}.sock")
        tap = f"fvnba{i}"
        body = qemu_job(job, ctx["image"], sock, tap, ctx["kernel"])
    else:
        body = unikernel_job(job)
    t_reg = time.time_ns()
    resp = api("/v1/jobs", {"Job": body}, method="PUT")
    assert resp.get("EvalID"), resp
    try:
        alloc_id, t_run = wait_running(job)
        extra = {}
        if path == "a":
            t_ping, t_ready, pong = ping_configure(sock)
            extra = {"running->first ping_ms": (t_ping - t_run) / 1e6,
                     "guest boot_us": pong.get("boot_us")}
        else:
            t_ready = t_run
        alloc = api(f"/v1/allocation/{alloc_id}")
    finally:
        stop_purge(job, ctx["markers"])
        if path == "a" and netdev.exists(tap):
            netdev.delete_link(tap)
    ev = {}
    for e in alloc["TaskStates"]["vnf"]["Events"]:
        ev.setdefault(e["Type"], e["Time"])
    created = alloc["CreateTime"]
    phases = {"schedule": (created - t_reg) / 1e6,
              "to client": (ev["Received"] - created) / 1e6,
              "client/driver": (ev["Started"] - ev["Received"]) / 1e6,
              "started->running seen": (t_run - ev["Started"]) / 1e6,
              "running->ready": (t_ready - t_run) / 1e6}
    return {"job": job, "total_ms": (t_ready - t_reg) / 1e6,
            "register->running_ms": (t_run - t_reg) / 1e6, "phases_ms": phases,
            "task_events_ms_after_register": {k: (v - t_reg) / 1e6 for k, v in ev.items()},
            **extra}


def summarize(name, runs):
    tot = [r["total_ms"] for r in runs]
    return {"path": name, "n": len(runs), "p50_ms": statistics.median(tot),
            "p90_ms": pct(tot, 90), "min_ms": min(tot),
            "register->running_p50_ms": statistics.median(r["register->running_ms"]
                                                          for r in runs),
            "phases_p50_ms": {ph: statistics.median(r["phases_ms"][ph] for r in runs)
                              for ph in PHASES},
            "phases_p90_ms": {ph: pct([r["phases_ms"][ph] for r in runs], 90)
                              for ph in PHASES}}


def plot(summary, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    names = [s["path"] for s in summary]
    left = [0.0] * len(summary)
    for ph in PHASES:
        w = [s["phases_p50_ms"][ph] for s in summary]
        ax.barh(names, w, left=left, label=ph)
        left = [a + b for a, b in zip(left, w)]
    for i, s in enumerate(summary):
        ax.text(left[i], i, f"  p50 {s['p50_ms']:.0f} ms (p90 {s['p90_ms']:.0f})",
                va="center", fontsize=9)
    ax.set_xlim(0, max(left) * 1.35)
    ax.invert_yaxis()
    ax.set_xlabel("ms, job register → VNF configured (median of each phase)")
    ax.set_title("bench/nomad: one Nomad dev agent, same kernel, same run")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def start_agent(tmp: Path, run_dir: str, image_dir: Path):
    plugin_dir = tmp / "plugins"
    plugin_dir.mkdir()
    subprocess.run(["go", "build", "-o", str(plugin_dir / "fluidvim-unikernel"), "."],
                   cwd=REPO / "nomad_driver", check=True, timeout=600)
    cfg = tmp / "agent.hcl"
    cfg.write_text(agent_config(tmp, plugin_dir, run_dir, image_dir))
    log = open(tmp / "nomad.log", "w")
    proc = subprocess.Popen([e2e.NOMAD, "agent", "-dev", "-config", str(cfg),
                             "-plugin-dir", str(plugin_dir)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"agent exited rc={proc.returncode}: "
                               f"{(tmp / 'nomad.log').read_text()[-3000:]}")
        try:
            for n in api("/v1/nodes"):
                if n["Status"] != "ready":
                    continue
                drv = api(f"/v1/node/{n['ID']}")["Drivers"]
                if all(drv.get(d, {}).get("Healthy") for d in ("unikernel", "qemu")):
                    return proc, log
        except (urllib.error.URLError, ConnectionError, KeyError):
            pass
        time.sleep(0.25)
    raise RuntimeError("node with healthy unikernel and qemu drivers not ready in 60 s: "
                       f"{(tmp / 'nomad.log').read_text()[-3000:]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=30, help="measured jobs per path (default 30)")
    ap.add_argument("--out", default="bench/results", help="directory for nomad.json/.png")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench/nomad needs root (taps, /dev/kvm, the Nomad client)")
    kernel = vnfconf.default_kernel()
    for f in (e2e.NOMAD, kernel):
        if not os.path.exists(f):
            sys.exit(f"missing {f}")
    os.makedirs(args.out, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="fvnb-nomad-"))
    run_dir = f"/run/fvnb-{uuid.uuid4().hex[:8]}"
    image_dir, sock_dir = tmp / "img", tmp / "s"
    image_dir.mkdir()
    sock_dir.mkdir()
    image = str(image_dir / "dummy.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", image, "1M"], check=True)
    ctx = {"image": image, "sock_dir": str(sock_dir), "kernel": kernel,
           "markers": [str(sock_dir) + "/", run_dir + "/"]}
    proc = log = None
    results = {"a": [], "b": []}
    try:
        t0 = time.monotonic()
        proc, log = start_agent(tmp, run_dir, image_dir)
        print(f"agent ready in {time.monotonic() - t0:.1f} s (incl. plugin build)")
        for p in ("a", "b"):
            run_job(p, 0, ctx)                   # warm-up, not measured
        for i in tqdm(range(1, args.jobs + 1), desc="jobs (a,b alternating)", unit="pair"):
            for p in ("a", "b"):
                results[p].append(run_job(p, i, ctx))
    finally:
        if proc is not None and proc.poll() is None:
            for j in api("/v1/jobs"):
                try:
                    api(f"/v1/job/{j['ID']}?purge=true", method="DELETE")
                except urllib.error.URLError:
                    pass
            time.sleep(1)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if log:
            log.close()
        for pid in e2e.qemu_pids(*ctx["markers"]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(run_dir, ignore_errors=True)
        if not results["b"]:
            print(f"agent log kept: {tmp}/nomad.log")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = [summarize(PATHS[p], results[p]) for p in ("a", "b")]
    a, b = summary
    n = args.jobs
    print(f"\nbench/nomad: {n} jobs per path (after 1 warm-up each), Nomad "
          f"{os.path.basename(os.path.dirname(e2e.NOMAD))}, accel kvm, "
          f"kernel {os.path.getsize(kernel)} bytes")
    print("| path | register→ready p50 ms | p90 ms | min ms | register→running p50 ms | "
          "(a)/(b) p50 |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in summary:
        print(f"| {s['path']} | {s['p50_ms']:.1f} | {s['p90_ms']:.1f} | {s['min_ms']:.1f} | "
              f"{s['register->running_p50_ms']:.1f} | {a['p50_ms'] / s['p50_ms']:.2f} |")
    print(f"\n(a)/(b) register→ready: p50 {a['p50_ms'] / b['p50_ms']:.2f}x, "
          f"p90 {a['p90_ms'] / b['p90_ms']:.2f}x")
    print("\nphases, p50 ms (p90):")
    print("| path | " + " | ".join(PHASES) + " |")
    print("|---|" + "---:|" * len(PHASES))
    for s in summary:
        print(f"| {s['path']} | " + " | ".join(
            f"{s['phases_p50_ms'][ph]:.1f} ({s['phases_p90_ms'][ph]:.1f})" for ph in PHASES)
            + " |")
    fp = [r["running->first ping_ms"] for r in results["a"]]
    print(f"\n(a) running → first ping reply: p50 {statistics.median(fp):.1f} ms; "
          f"guest boot_us p50 {statistics.median(r['guest boot_us'] for r in results['a'])}")
    with open(os.path.join(args.out, "nomad.json"), "w") as f:
        json.dump({"accel": "kvm", "jobs_per_path": n, "graph": GRAPH,
                   "ready": {"a": "reply to `configure` on the control socket, sent after the "
                                  "allocation is running and a first `ping` reply",
                             "b": "allocation observed running (StartTask returns after the "
                                  "VNF's ready event and the configure reply)"},
                   "summary": summary, "runs": {PATHS[p]: results[p] for p in ("a", "b")}},
                  f, indent=2)
    plot(summary, os.path.join(args.out, "nomad.png"))
    print(f"wrote {args.out}/nomad.json and nomad.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
