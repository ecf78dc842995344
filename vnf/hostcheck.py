# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Is this host ready to run VNFs through libvirt at speed?  ``python -m fluidvim.vnf.hostcheck``

A host whose ``/dev/kvm`` is ``root:root 0600`` (no udev rule ran: a container, a fresh VM, a CI
machine without systemd) looks fine to root but not to ``libvirt-qemu``, the user libvirt runs
QEMU as. libvirt then decides at every domain start that "KVM was enabled when probing, but it is
not available now", throws its QEMU capabilities cache away and probes the binary again (~14 QEMU
runs, ~56 s per domain start on the project's machines) — tests time out 20 minutes later with no
hint why. This check finds that in seconds: it starts and destroys a tiny VNF domain twice and
fails, naming the cause and the fix, when libvirt rewrote its capabilities cache during the second
start (the symptom) or the start was slow.
"""

from __future__ import annotations

import argparse
import glob
import grp
import os
import pwd
import stat
import sys
import tempfile
import time
import uuid

from . import backends, conf as vnfconf, spec as specmod

CAPS_CACHE = "/var/cache/libvirt/qemu/capabilities"
QEMU_USER = "libvirt-qemu"       # Debian's libvirt runs QEMU as this user (qemu.conf `user`)
KVM_GROUP = "kvm"
# A warm libvirt start of a pc+qboot domain takes ~0.5 s here; a re-probe takes ~56 s.
SLOW_START_S = 10.0
# libvirt polls a killed QEMU every 200 ms; a zombie that nobody reaps makes it poll for seconds.
SLOW_DESTROY_S = 1.0


def kvm_problem(dev: str = "/dev/kvm", user: str = QEMU_USER, group: str = KVM_GROUP) -> str | None:
    """Why ``user`` cannot open ``dev`` read-write (None when it can, or there is no KVM at all)."""
    try:
        st = os.stat(dev)
    except FileNotFoundError:
        return None                      # no KVM: libvirt and fluidvim use TCG, consistently
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        return None                      # libvirt not installed / runs QEMU as someone else
    groups = {g.gr_gid for g in grp.getgrall() if user in g.gr_mem} | {pw.pw_gid}
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == pw.pw_uid and mode & 0o600 == 0o600:
        return None
    if st.st_gid in groups and mode & 0o060 == 0o060:
        return None
    if mode & 0o006 == 0o006:
        return None
    try:
        owner = f"{pwd.getpwuid(st.st_uid).pw_name}:{grp.getgrgid(st.st_gid).gr_name}"
    except KeyError:
        owner = f"{st.st_uid}:{st.st_gid}"
    return (f"{dev} is {owner} {mode:04o}: {user} (libvirt's QEMU user) cannot open it, so "
            f"libvirt re-probes QEMU on every domain start. Fix: chgrp {group} {dev}; "
            f"chmod 0660 {dev} (what udev does on a normal host; tools/bootstrap.sh does it)")


def caps_cache_stamp(cache_dir: str = CAPS_CACHE) -> dict[str, int]:
    """mtime of each file of libvirt's QEMU capabilities cache (rewritten by every re-probe)."""
    out = {}
    for path in glob.glob(os.path.join(cache_dir, "*.xml")):
        try:
            out[path] = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            pass
    return out


def timed_start(be: backends.LibvirtBackend, kernel: str, accel: str) -> tuple[float, float]:
    """Start one VNF domain (paused, control channel connected, resumed), destroy it; seconds
    from createXML to resume, and of the destroy."""
    vid = str(uuid.uuid4())
    paths = be.paths(vid)
    spec = specmod.VNFSpec(uuid=vid, name="hostcheck", kernel=kernel, machine="pc", accel=accel,
                           control_socket=paths["control_socket"],
                           console_log=paths["console_log"], memory_mb=16)
    be.prepare(spec)
    t0 = time.monotonic()
    try:
        ch, _ = be.spawn(spec)
        took = time.monotonic() - t0
        ch.close()
    finally:
        t1 = time.monotonic()
        be.kill(spec, None)
        killed = time.monotonic() - t1
        be.cleanup(spec)
    return took, killed


def check_libvirt(uri: str = "qemu:///system", kernel: str | None = None) -> tuple[bool, str]:
    """(ok, message) for two timed domain starts through libvirt at ``uri``."""
    accel, _ = backends.detect_accel("auto")
    kernel = kernel or vnfconf.default_kernel()
    if not os.path.exists(kernel):
        return False, f"VNF kernel {kernel} not built: run `make -C unikernel`"
    run_dir = tempfile.mkdtemp(prefix="fluidvim-hostcheck-", dir="/run")
    be = backends.LibvirtBackend(run_dir, uri=uri)
    try:
        first, _ = timed_start(be, kernel, accel)
        if first > SLOW_START_S and kvm_problem():
            return False, (f"libvirt domain start took {first:.1f} s (expected < "
                           f"{SLOW_START_S:.0f} s). {kvm_problem()}")
        before = caps_cache_stamp()
        second, destroy = timed_start(be, kernel, accel)
        after = caps_cache_stamp()
    finally:
        be.close()
        os.rmdir(run_dir)
    rewritten = sorted(p for p in after if before.get(p) != after[p])
    if rewritten or second > SLOW_START_S:
        why = kvm_problem() or ("see libvirtd's log for 'capabilities' (a QEMU binary or "
                                "/dev/kvm that changes between starts makes libvirt re-probe)")
        symptom = (f"libvirt rewrote its QEMU capabilities cache ({', '.join(rewritten)}) "
                   "during a domain start" if rewritten else "libvirt domain start was slow")
        return False, (f"{symptom}: starts took {first:.1f} s then {second:.1f} s "
                       f"(expected < {SLOW_START_S:.0f} s). {why}")
    msg = (f"libvirt ({accel}): domain start {first * 1000:.0f} ms, then {second * 1000:.0f} ms; "
           f"capabilities cache stable; destroy {destroy * 1000:.0f} ms")
    if destroy > SLOW_DESTROY_S:
        msg += (" (slow: an exited QEMU is reaped late; start libvirtd under a subreaper such as "
                "`tini -s -- libvirtd`, as tools/bootstrap.sh does)")
    return True, msg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m fluidvim.vnf.hostcheck",
        description="Check that this host runs VNFs through libvirt at speed: /dev/kvm usable by "
                    "libvirt's QEMU user, and no QEMU re-probe on domain start.",
        epilog="example: sudo .venv/bin/python -m fluidvim.vnf.hostcheck --uri qemu:///system")
    p.add_argument("--uri", default="qemu:///system", help="libvirt URI (default %(default)s)")
    p.add_argument("--kernel", help="VNF kernel (default: the built unikernel image)")
    args = p.parse_args(argv)
    problem = kvm_problem()
    if problem:
        print(f"hostcheck: warning: {problem}", file=sys.stderr)
    ok, msg = check_libvirt(args.uri, args.kernel)
    print(f"hostcheck: {msg}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
