# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""End to end: a job cannot make the Nomad client read host files for it (issue 26, item 1).

A real ``nomad agent -dev`` with the unikernel plugin (as tests/e2e/test_nomad.py, whose agent
and prerequisites it reuses), the plugin config's ``image_paths`` set to one temporary directory
and a warm pool of one shell. A secret marker is written to files outside the allocation
directory; then jobs are submitted with ``nomad job run`` that name, as a job submitter who is
not a host administrator could:

* ``kernel = "/etc/shadow"``;
* ``click_file = "../../../../../../../../../../etc/shadow"`` (a ``..`` escape from the task dir);
* ``click_file`` = the marker file's absolute path;
* ``click_file = "local/link.click"``, a symlink to the marker file that a prestart task put into
  the task directory;

each fails with the plugin's error naming the field, the path as given and the fix, before any
VNF is started or the shell claimed. ``click_file`` naming the marker file under ``image_paths``
is read and sent to the shell, which rejects it: the error gives the class, line and column only.
The control: a file the job supplies itself (a template into ``local/``) is rejected with the
VNF's message quoting it (events, ``nomad alloc status``, stderr), so the places searched do carry
such messages. A third job then takes the same shell and runs: its console (the alloc's stdout,
from the shell's boot) shows both earlier rejections with their messages withheld. Everywhere a
job submitter can look (the task events of ``/v1/allocation`` and ``nomad alloc status``, the
alloc logs) and in the client's own log, the marker never appears.
"""

from __future__ import annotations

import os
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from tests.e2e import test_nomad as tn

pytestmark = tn.pytestmark

SECRET = "AKIAIOSFODNN7EXAMPLE"           # in host files the jobs must not read
OWN = "FVMJOBSOWNTOKEN" + uuid.uuid4().hex[:8].upper()   # in the control job's own template


@pytest.fixture
def confined(tmp_path, monkeypatch):
    """The dev agent with image_paths = [<tmp>/images]; the marker files outside the alloc dir."""
    images, outside = tmp_path / "images", tmp_path / "outside"
    images.mkdir()
    outside.mkdir()
    (outside / "secret.click").write_text(SECRET + " -> Discard;\n")
    (images / "secret.click").write_text(SECRET + " -> Discard;\n")
    base = tn.client_config

    def client_config(*args, **kw):
        text, n = re.subn(r'(?m)^(\s*)image_paths\s*=.*$', rf'\1image_paths = ["{images}"]',
                          base(*args, **kw))
        assert n == 1, "etc/nomad/client.hcl changed: no image_paths line"
        # the prestart task that plants a symlink runs under raw_exec
        return text + '\nplugin "raw_exec" {\n  config {\n    enabled = true\n  }\n}\n'

    monkeypatch.setattr(tn, "client_config", client_config)
    agents = tn.Agents(tmp_path)
    try:
        proc = agents.start(warm_pool=tn.warm_pool_block(1, 1))
        tn.wait_for("the node with a healthy unikernel driver",
                    lambda: tn.ready_node(proc, agents.log_path), 45, 0.25)
        yield agents, images, outside
    finally:
        agents.close()
        # the agent stops without destroying the allocations: their secrets/ and private/
        # tmpfs mounts would keep the temporary directory from being removed
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f]
        for m in reversed(mounts):
            if m.startswith(str(tmp_path) + "/"):
                subprocess.run(["umount", m], capture_output=True, timeout=10)


def job_hcl(name: str, config: str, extra: str = "", group_extra: str = "") -> str:
    return f'''
job "{name}" {{
  datacenters = ["dc1"]
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts  = 0
      unlimited = false
    }}
{group_extra}
    task "vnf" {{
      driver = "unikernel"
      config {{
        {config}
        memory_mb = 32
        nics      = [""]
      }}
{extra}
      resources {{
        cpu    = 100
        memory = 64
      }}
    }}
  }}
}}
'''


def failed_alloc(job: str):
    """The job's allocation once it has failed, None before (fails if its vnf task runs)."""
    for a in tn.api(f"/v1/job/{job}/allocations"):
        vnf = (a.get("TaskStates") or {}).get("vnf") or {}
        assert vnf.get("State") != "running", f"{job}: the task runs, it should have been refused"
        if a["ClientStatus"] == "failed":
            return a
    return None


def alloc_log(alloc_id: str, kind: str) -> str:
    """The task's whole stdout or stderr as `nomad alloc logs` reads it (the client fs API); ""
    when the task never wrote to it (Nomad answers 404: no log file)."""
    q = urllib.parse.urlencode({"task": "vnf", "type": kind, "origin": "start", "offset": 0,
                                "plain": "true"})
    try:
        with urllib.request.urlopen(f"{tn.ADDR}/v1/client/fs/logs/{alloc_id}?{q}", timeout=10) as r:
            return r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return ""
        raise


def run_failing(agents, name: str, hcl: str) -> dict:
    """Runs the job, waits for its allocation to fail; its driver error, events, logs, status."""
    path = agents.tmp / f"{name}.nomad.hcl"
    path.write_text(hcl)
    tn.nomad_cli("job", "run", "-detach", str(path))
    alloc = tn.wait_for(f"{name} failed", lambda: failed_alloc(name), 90, 0.25)
    aid = alloc["ID"]
    events = tn.wait_for(f"{name}: the driver failure event", lambda: [
        e for e in tn.api(f"/v1/allocation/{aid}")["TaskStates"]["vnf"]["Events"]
        if e["Type"] == "Driver Failure"], 20, 0.2)
    status = tn.nomad_cli("alloc", "status", "-verbose", aid).stdout
    # (the driver's copy of a start error on the task's stderr is best effort: Nomad's log
    # collector may not have opened its FIFO yet; whatever is there is searched too)
    return {"alloc": aid, "error": events[0]["DriverError"], "display": events[0]["DisplayMessage"],
            "events": repr(tn.api(f"/v1/allocation/{aid}")["TaskStates"]),
            "status": status, "stdout": alloc_log(aid, "stdout"), "stderr": alloc_log(aid, "stderr")}


def good_alloc(job: str):
    for a in tn.api(f"/v1/job/{job}/allocations"):
        if a["ClientStatus"] == "running":
            return a
    return None


def test_job_cannot_read_host_files(confined):
    agents, images, outside = confined
    run_dir = agents.run_dir
    node = tn.wait_for("the node", lambda: tn.ready_node(agents.procs[-1], agents.log_path), 45, 0.25)
    tn.wait_for("one warm shell", lambda: tn.node_attrs(node["ID"])[tn.PRE + "warm_pool.ready"] == "1",
                30, 0.25)
    shell = tn.vnf_ids(run_dir)
    assert len(shell) == 1, shell
    secret = outside / "secret.click"
    link = "$NOMAD_ALLOC_DIR/../vnf/local/link.click"
    fix = "copy it into the task dir with an artifact or template block, or have the operator add"
    plant = f'''
    task "plant" {{
      lifecycle {{
        hook = "prestart"
      }}
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "mkdir -p $NOMAD_ALLOC_DIR/../vnf/local && ln -sf {secret} {link}"]
      }}
    }}
'''
    refused = {
        # name: (task config line, field, path as given, group extra)
        "fvm-conf-kernel": ('kernel = "/etc/shadow"', "kernel", "/etc/shadow", ""),
        "fvm-conf-dotdot": ('click_file = "../../../../../../../../../../etc/shadow"', "click_file",
                            "../../../../../../../../../../etc/shadow", ""),
        "fvm-conf-host-file": (f'click_file = "{secret}"', "click_file", str(secret), ""),
        "fvm-conf-symlink": ('click_file = "local/link.click"', "click_file", "local/link.click",
                             plant),
    }
    names = [*refused, "fvm-conf-allowlisted", "fvm-conf-own-file", "fvm-conf-next"]
    seen = {}
    try:
        for name, (line, field, given, group) in refused.items():
            r = seen[name] = run_failing(agents, name, job_hcl(name, line, group_extra=group))
            for where in ("error", "display", "status"):
                text = r[where]
                want = f'{field}: "{given}" is not a file inside the task directory'
                assert want in text, (name, where, text)
                assert fix in text, (name, where, text)
            # refused before anything was created or claimed: the shell is still the only VNF
            assert tn.vnf_ids(run_dir) == shell and len(tn.qemu_pids(run_dir)) == 1, name
        # the symlink was really there when the task was refused
        r = seen["fvm-conf-symlink"]
        link = agents.tmp / "data" / "alloc" / r["alloc"] / "vnf" / "local" / "link.click"
        assert link.is_symlink() and link.resolve() == secret.resolve(), link

        # allowlisted: read and sent to the shell; the VNF rejects it; only class and position
        name = "fvm-conf-allowlisted"
        r = seen[name] = run_failing(agents, name, job_hcl(
            name, f'click_file = "{images / "secret.click"}"'))
        for where in ("error", "display", "status"):
            assert ("click_file: the VNF rejected the configuration: config error at line 1, "
                    "column 1 (the VNF's message is withheld") in r[where], (where, r[where])

        # control: the job's own file (a template into local/) is quoted back to it
        name = "fvm-conf-own-file"
        template = ('      template {\n        data        = "' + OWN + ' -> Discard;\\n"\n'
                    '        destination = "local/own.click"\n      }\n')
        r = seen[name] = run_failing(agents, name, job_hcl(
            name, 'click_file = "local/own.click"', extra=template))
        for where in ("error", "display", "status"):
            assert f"unknown element class '{OWN}'" in r[where], (where, r[where])

        # the next job takes the same shell (both rejections gave it back): its console, from the
        # shell's boot on, shows the two rejections with their messages withheld
        name = "fvm-conf-next"
        path = agents.tmp / f"{name}.nomad.hcl"
        path.write_text(job_hcl(name, 'click_config = "FromDevice(0) -> Discard;"'))
        tn.nomad_cli("job", "run", "-detach", str(path))
        alloc = tn.wait_for(f"{name} running", lambda: good_alloc(name), 60, 0.25)
        ev = tn.wait_for("the driver's launch event", lambda: [
            e for e in tn.driver_events(alloc["ID"], "vnf") if e["Details"].get("launch")], 10, 0.2)
        assert ev[0]["Details"]["launch"] == "warm" and {ev[0]["Details"]["vnf_uuid"]} == shell, ev
        stdout = tn.wait_for("the VNF's configure line in the alloc's stdout", lambda: (
            lambda t: t if "configure: ok" in t else None)(alloc_log(alloc["ID"], "stdout")), 20, 0.25)
        assert stdout.count("configure: error at line 1 col 1 (the VNF's message is withheld") == 2, stdout
        assert OWN not in stdout, stdout      # another job's own configuration
        seen[name] = {"stdout": stdout, "stderr": alloc_log(alloc["ID"], "stderr"),
                      "events": repr(tn.api(f"/v1/allocation/{alloc['ID']}")["TaskStates"]),
                      "status": tn.nomad_cli("alloc", "status", "-verbose", alloc["ID"]).stdout}

        for name, r in seen.items():
            for where, text in r.items():
                assert SECRET not in text, f"{name}: the secret appears in {where}:\n{text}"
        log = agents.log_path.read_text()
        assert SECRET not in log, "the secret appears in the client's log"
        assert OWN in log and all(n in log for n in names)   # the client's log has these jobs
    finally:
        for name in names:
            subprocess.run([tn.NOMAD, "job", "stop", "-purge", "-detach", name],
                           capture_output=True, timeout=30,
                           env={**os.environ, "NOMAD_ADDR": tn.ADDR})
