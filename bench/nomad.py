# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/nomad: Nomad job register -> "VNF configured and forwarding", in one run, three paths on
the same kernel and the same agent (`nomad agent -dev`, 127.0.0.1:15646-15648):

(a) Nomad's built-in `qemu` task driver, stock path: `-machine type=pc,accel=kvm` with SeaBIOS
    (the driver's default machine; it always adds `-drive file=<image_path>`, so a tiny dummy
    qcow2 image is attached as an IDE disk), `-m 128M` (the driver's minimum), the kernel given
    through `args` (`-kernel`, `-append`, a virtio-serial control console on a unix socket, one
    virtio-net-pci NIC on an unplugged tap, `-nic none`). The driver returns as soon as QEMU is
    spawned, so the bench itself connects to the control socket (from the moment the job is
    registered), pings until the VNF answers (`configured: false`), then sends `configure`; "ready"
    is the later of that reply and the allocation being observed `running`;
(b) our `unikernel` task driver, cold (`warm = false`): microvm, no firmware, 32 MiB, one
    unplugged NIC and `click_config`; its StartTask returns only after the VNF's `ready` event and
    the reply to `configure`, so "ready" is the allocation being observed `running`;
(c) the same driver, warm: the client config has a `warm_pool { size = 2 nics = 1 }` block, the
    job takes a pre-booted shell (attach tap + `configure`); the bench waits for a ready shell
    before registering a (c) job and checks the driver's task event says `launch = warm`.

All configure the same graph (`FromDevice(0) -> Discard;`) on one NIC. Per job: PUT /v1/jobs
(JSON, no CLI) -> poll /v1/job/<id>/allocations every 10 ms -> ready; then the job is stopped and
purged and its QEMU gone before the next one. Each round runs one job per path in a shuffled
order (one unmeasured warm-up job each first). Phases (the Superfluidity study's: scheduling;
driver: artifact, init, spawn, ready; client -> server notification), from the allocation's
timestamps and task events (same host clock):
  schedule        register -> alloc CreateTime (evaluation, placement)
  to client       CreateTime -> task event Received
  artifact        "Downloading Artifacts" -> next event (0: no path fetches an artifact)
  init            Received -> the driver starts the VNF (task dir, hooks, logmon; b/c: the
                  driver's task event time minus its launch_ms; a: the QEMU process's start time
                  from /proc, 10 ms resolution)
  spawn           b: spec + QEMU spawn; c: claim + attach tap; a: QEMU exec -> Started
  ready           b: boot + attach + configure -> Started; c: configure -> Started;
                  a: running seen -> the VNF's reply to configure (the guest boots via SeaBIOS
                  meanwhile; 0 if it was configured before Nomad reported running)
  client->server  Started -> the API shows the allocation running (client status update; incl.
                  up to 10 ms of polling)
The phases of one job add up to its register -> ready total.

    sudo .venv/bin/python -m bench.nomad --jobs 30
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
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
from bench.launch import pct
from fluidvim.vnf import conf as vnfconf, netdev
from fluidvim.vnf.control import ControlChannel, ControlError

REPO = Path(__file__).resolve().parents[1]
HTTP, RPC, SERF = 15646, 15647, 15648
ADDR = f"http://127.0.0.1:{HTTP}"
GRAPH = "FromDevice(0) -> Discard;"
PHASES = ["schedule", "to client", "artifact", "init", "spawn", "ready", "client->server"]
PATHS = {"a": "(a) nomad qemu driver (pc+SeaBIOS)", "b": "(b) unikernel driver, cold",
         "c": "(c) unikernel driver, warm pool"}
POOL_SIZE = 2
QEMU_ARGS_ALLOW = ["-kernel", "-append", "-cpu", "-nic", "-device", "-chardev", "-netdev"]


def api(path: str, body=None, method=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(ADDR + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)



def agent_config(tmp: Path, plugin_dir: Path, run_dir: str, image_dir: Path) -> str:
    """tests/e2e's adaptation of etc/nomad/client.hcl on our ports, plus the qemu driver block."""
    e2e.HTTP, e2e.RPC, e2e.SERF = HTTP, RPC, SERF       # client_config reads these globals
    text = e2e.client_config(tmp, plugin_dir, run_dir, e2e.warm_pool_block(POOL_SIZE, 1))
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


def unikernel_job(job: str, warm: bool) -> dict:
    return {"ID": job, "Name": job, "Type": "service", "Datacenters": ["dc1"],
            "TaskGroups": [{"Name": "g", "Count": 1,
                            "RestartPolicy": {"Attempts": 0, "Mode": "fail"},
                            "Tasks": [{"Name": "vnf", "Driver": "unikernel",
                                       "Config": {"memory_mb": 32, "session_slots": 1024,
                                                  "nics": [""], "click_config": GRAPH,
                                                  "name": job, "warm": warm},
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


def process_start_ns(pid: int) -> int:
    """Wall-clock start of a process, from /proc (clock-tick resolution, 10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])           # field 22: starttime, in ticks after boot
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    now = time.time_ns()
    return now - int((uptime - start_ticks / os.sysconf("SC_CLK_TCK")) * 1e9)


def pool_ready(run_dir: str) -> int:
    """Shells ready in the warm pool (their pool.json marker)."""
    try:
        return sum(os.path.exists(os.path.join(run_dir, d, "pool.json"))
                   for d in os.listdir(run_dir))
    except FileNotFoundError:
        return 0


def run_job(path: str, i: int, ctx: dict) -> dict:
    job = f"fvmb-{path}-{i}-{uuid.uuid4().hex[:6]}"
    if path == "a":
        sock = os.path.join(ctx["sock_dir"], f"{i}.sock")
        tap = f"fvmba{i}"
        body = qemu_job(job, ctx["image"], sock, tap, ctx["kernel"])
        markers = [ctx["sock_dir"]]
    else:
        if path == "c":
            deadline = time.monotonic() + 60
            while pool_ready(ctx["run_dir"]) < 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("no warm shell ready after 60 s")
                time.sleep(0.01)
        body = unikernel_job(job, warm=path == "c")
        markers = []
    t_reg = time.time_ns()
    if path == "a":
        fut = ctx["executor"].submit(ping_configure, sock, 60.0)
    resp = api("/v1/jobs", {"Job": body}, method="PUT")
    assert resp.get("EvalID"), resp
    try:
        alloc_id, t_run = wait_running(job)
        extra = {}
        if path == "a":
            t_qemu = process_start_ns(e2e.qemu_pids(ctx["sock_dir"])[0])
            t_ping, t_conf, pong = fut.result()
            t_ready = max(t_run, t_conf)
            extra = {"register->first ping_ms": (t_ping - t_reg) / 1e6,
                     "register->configured_ms": (t_conf - t_reg) / 1e6,
                     "guest boot_us": pong.get("boot_us")}
        else:
            t_ready = t_run
        alloc = api(f"/v1/allocation/{alloc_id}")
        if path != "a":
            drv = [e for e in alloc["TaskStates"]["vnf"]["Events"]
                   if e["Type"] == "Driver" and e["Details"].get("launch")][0]
            markers = [os.path.join(ctx["run_dir"], drv["Details"]["vnf_uuid"]) + "/"]
            extra["register->configured_ms"] = (drv["Time"] - t_reg) / 1e6
    finally:
        stop_purge(job, markers)
        if path == "a" and netdev.exists(tap):
            netdev.delete_link(tap)
    ev = {}
    for e in alloc["TaskStates"]["vnf"]["Events"]:
        ev.setdefault(e["Type"], e["Time"])
    created, rec, started = alloc["CreateTime"], ev["Received"], ev["Started"]
    artifact = 0.0
    if "Downloading Artifacts" in ev:
        later = sorted(t for t in ev.values() if t > ev["Downloading Artifacts"])
        artifact = (later[0] - ev["Downloading Artifacts"]) / 1e6 if later else 0.0
    if path == "a":
        t_spawn = min(max(t_qemu, rec), started)
        init = (t_spawn - rec) / 1e6 - artifact
        spawn = (started - t_spawn) / 1e6
        ready = (t_ready - t_run) / 1e6
        extra["qemu process start_ms after Received"] = (t_qemu - rec) / 1e6
    else:
        d = drv["Details"]
        if d["launch"] != ("warm" if path == "c" else "cold"):
            raise RuntimeError(f"{job}: path {path} but the driver made a {d['launch']} launch")
        launch = float(d["launch_ms"])
        t_start = drv["Time"] - launch * 1e6
        spawn = sum(float(d.get(k + "_ms", 0)) for k in (("spec", "spawn") if path == "b"
                                                          else ("claim", "net")))
        init = (t_start - rec) / 1e6 - artifact
        ready = (started - t_start) / 1e6 - spawn
        extra["driver"] = {k: float(v) for k, v in d.items() if k.endswith("_ms")}
    phases = {"schedule": (created - t_reg) / 1e6,
              "to client": (rec - created) / 1e6,
              "artifact": artifact, "init": init, "spawn": spawn, "ready": ready,
              "client->server": (t_run - started) / 1e6}
    total = (t_ready - t_reg) / 1e6
    assert abs(sum(phases.values()) - total) < 0.5, (phases, total)
    return {"job": job, "total_ms": total,
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
    ap.add_argument("--seed", type=int, default=1, help="seed of the per-round path order")
    ap.add_argument("--out", default="bench/results", help="directory for nomad.json/.png")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench/nomad needs root (taps, /dev/kvm, the Nomad client)")
    kernel = vnfconf.default_kernel()
    for f in (e2e.NOMAD, kernel):
        if not os.path.exists(f):
            sys.exit(f"missing {f}")
    os.makedirs(args.out, exist_ok=True)
    load_before = round(os.getloadavg()[0], 2)
    tmp = Path(tempfile.mkdtemp(prefix="fvm-bench-nomad-"))
    run_dir = f"/run/fluidvim-fvm-bench-{uuid.uuid4().hex[:8]}"
    image_dir, sock_dir = tmp / "img", tmp / "s"
    image_dir.mkdir()
    sock_dir.mkdir()
    image = str(image_dir / "dummy.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", image, "1M"], check=True)
    ctx = {"executor": concurrent.futures.ThreadPoolExecutor(1), "image": image,
           "sock_dir": str(sock_dir), "kernel": kernel, "run_dir": run_dir,
           "markers": [str(sock_dir) + "/", run_dir + "/"]}
    proc = log = None
    results = {"a": [], "b": [], "c": []}
    try:
        t0 = time.monotonic()
        proc, log = start_agent(tmp, run_dir, image_dir)
        print(f"agent ready in {time.monotonic() - t0:.1f} s (incl. plugin build)")
        for p in PATHS:
            run_job(p, 0, ctx)                   # warm-up, not measured
        rng = random.Random(args.seed)
        for i in tqdm(range(1, args.jobs + 1), desc="rounds (a,b,c; shuffled)", unit="round"):
            # the order changes every round: Nomad's client reports alloc updates in 200 ms
            # ticks (non-urgent ones every 5th tick), so a fixed order would give each path a
            # fixed phase against that clock
            for p in rng.sample(sorted(PATHS), len(PATHS)):
                results[p].append(run_job(p, i, ctx))
    finally:
        if proc is not None and proc.poll() is None:
            for j in api("/v1/jobs"):
                try:
                    api(f"/v1/job/{j['ID']}?purge=true", method="DELETE")
                except urllib.error.URLError:
                    pass
            time.sleep(1)
            e2e.Agents.stop(proc)
        if log:
            log.close()
        for pid in e2e.qemu_pids(*ctx["markers"]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(run_dir, ignore_errors=True)
        if not results["c"]:
            print(f"agent log kept: {tmp}/nomad.log")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = [summarize(PATHS[p], results[p]) for p in PATHS]
    a, b, c = summary
    n = args.jobs
    print(f"\nbench/nomad: {n} jobs per path (after 1 warm-up each), Nomad "
          f"{os.path.basename(os.path.dirname(e2e.NOMAD))}, accel kvm, "
          f"kernel {os.path.getsize(kernel)} bytes, load average before "
          f"{load_before}, after {os.getloadavg()[0]:.2f}")
    print("| path | register→ready p50 ms | p90 ms | min ms | register→running p50 ms | "
          "(a)/path p50 |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in summary:
        print(f"| {s['path']} | {s['p50_ms']:.1f} | {s['p90_ms']:.1f} | {s['min_ms']:.1f} | "
              f"{s['register->running_p50_ms']:.1f} | {a['p50_ms'] / s['p50_ms']:.2f} |")
    ratios = {"a/b": (a["p50_ms"] / b["p50_ms"], a["p90_ms"] / b["p90_ms"]),
              "a/c": (a["p50_ms"] / c["p50_ms"], a["p90_ms"] / c["p90_ms"]),
              "b/c": (b["p50_ms"] / c["p50_ms"], b["p90_ms"] / c["p90_ms"])}
    for k, (r50, r90) in ratios.items():
        print(f"{k} register→ready: p50 {r50:.2f}x, p90 {r90:.2f}x")
    drv = {p: statistics.median(r["driver"]["launch_ms"] for r in results[p]) for p in "bc"}
    print(f"driver StartTask (launch_ms) p50: cold {drv['b']:.2f} ms, warm {drv['c']:.2f} ms")
    print("\nphases, p50 ms (p90):")
    print("| path | " + " | ".join(PHASES) + " |")
    print("|---|" + "---:|" * len(PHASES))
    for s in summary:
        print(f"| {s['path']} | " + " | ".join(
            f"{s['phases_p50_ms'][ph]:.1f} ({s['phases_p90_ms'][ph]:.1f})" for ph in PHASES)
            + " |")
    conf = {p: statistics.median(r["register->configured_ms"] for r in results[p]) for p in PATHS}
    print("\nregister → VNF configured on the host (before Nomad's client → server report), "
          "p50 ms: " + ", ".join(f"{p} {v:.1f}" for p, v in conf.items())
          + f"; a/b {conf['a'] / conf['b']:.2f}x, a/c {conf['a'] / conf['c']:.2f}x, "
          f"b/c {conf['b'] / conf['c']:.2f}x")
    print(f"(a) guest boot_us p50 {statistics.median(r['guest boot_us'] for r in results['a'])}")
    with open(os.path.join(args.out, "nomad.json"), "w") as f:
        json.dump({"accel": "kvm", "jobs_per_path": n, "graph": GRAPH,
                   "load_average": {"before": load_before, "after": os.getloadavg()[0]},
                   "ratios_p50_p90": ratios, "driver_launch_ms_p50": drv,
                   "register_to_configured_on_host_p50_ms": conf,
                   "ready": {"a": "reply to `configure` on the control socket, sent after the "
                                  "allocation is running and a first `ping` reply",
                             "b": "allocation observed running (StartTask returns after the "
                                  "VNF's ready event and the configure reply)",
                             "c": "as b, on a warm shell (StartTask returns after configure)"},
                   "phases": PHASES,
                   "summary": summary, "runs": {PATHS[p]: results[p] for p in PATHS}},
                  f, indent=2)
    plot(summary, os.path.join(args.out, "nomad.png"))
    print(f"wrote {args.out}/nomad.json and nomad.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
