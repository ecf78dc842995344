#!/usr/bin/env python3
"""Boot the VNF and time its control channel (the numbers in ../README.md).

  scripts/ctl-bench.py [--machine microvm|pc] [--accel kvm|tcg] [--ctl virtio|com2] [--nics 2]
                       [--boots 11] [-n 25] [--tsc-khz N]

Launcher style: the script creates the control socket, listens, connects to it, and passes the
listening fd to QEMU (`-chardev socket,id=ctl,fd=N,server=on,wait=off`), so `ready` cannot be
lost. It boots --boots times (QEMU exec -> `ready` on the socket; `boot_us` from `ready`), then on
the last VNF times request -> reply round trips (-n each, median): `ping`, an 80-byte `configure`,
`stats`, a ~6.5 KB `configure` line, `stats` again; first with 20 ms between requests (the guest
is asleep in hlt when a request arrives, like a CLI call), then back to back.
NIC i uses the tap tvt<i> (ip tuntap add tvt0 mode tap). Needs root (taps) and python3 only.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CFG80 = "FromDevice(0) -> Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"


def qemu_argv(o, kernel, fd, conlog):
    if o.machine == "microvm":
        a = ["-M", "microvm,x-option-roms=off,pit=off,pic=off,rtc=off,isa-serial=on,acpi=off"]
        serdev, netdev = "virtio-serial-device", "virtio-net-device"
    else:
        a = ["-M", "pc", "-bios", "/usr/share/qemu/qboot.rom"]
        serdev, netdev = "virtio-serial-pci", "virtio-net-pci"
    append = "slots=64 name=bench" + (f" tsc_khz={o.tsc_khz}" if o.tsc_khz else "")
    a = ["qemu-system-x86_64"] + a + [
        "-accel", o.accel, "-cpu", "max,-arch-capabilities" if o.accel == "kvm" else "max",
        "-m", "32", "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-kernel", kernel, "-append", append,
        "-chardev", f"file,id=con,path={conlog}", "-serial", "chardev:con",
        "-chardev", f"socket,id=ctl,fd={fd},server=on,wait=off"]
    if o.ctl == "virtio":
        a += ["-device", f"{serdev},max_ports=1", "-device", "virtconsole,chardev=ctl,nr=0"]
    else:
        a += ["-device", "isa-serial,chardev=ctl,iobase=0x2f8,irq=3"]
    for i in range(o.nics):
        a += ["-netdev", f"tap,id=net{i},ifname=tvt{i},script=no,downscript=no",
              "-device", f"{netdev},netdev=net{i},mac=52:54:00:00:00:{i + 1:02x}"]
    return a


class Client:
    def __init__(self, sock):
        self.s, self.buf = sock, b""

    def line(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            self.s.settimeout(max(0.001, deadline - time.monotonic()))
            d = self.s.recv(65536)
            if not d:
                raise EOFError("control socket closed")
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, req):
        data = (json.dumps(req, separators=(",", ":")) + "\n").encode()
        t0 = time.perf_counter()
        self.s.sendall(data)
        while True:
            m = self.line()
            if m.get("id") == req["id"]:
                return m, time.perf_counter() - t0


def boot(o, kernel, tmp):
    path = os.path.join(tmp, "ctl.sock")
    if os.path.exists(path):
        os.unlink(path)
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(1)
    cs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cs.connect(path)  # pending until QEMU accepts: `ready` cannot be lost
    argv = qemu_argv(o, kernel, ls.fileno(), os.path.join(tmp, "console.log"))
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, pass_fds=[ls.fileno()], stdin=subprocess.DEVNULL)
    ls.close()
    c = Client(cs)
    while True:
        m = c.line()
        if m.get("ev") == "ready":
            return p, c, m, time.perf_counter() - t0


def big_config(limit=7000):
    """IPFilters of 10 rules each, chained, as long as the request line stays <= limit bytes."""
    parts, best = [], None
    while True:
        k = len(parts)
        rules = [f"allow tcp src net 10.{k}.{r}.0/24 and dst port {1000 + r}-{2000 + r}" for r in range(10)]
        cand = parts + [f"f{k} :: IPFilter({', '.join(rules + ['allow arp', 'deny all'])});"]
        chain = " -> ".join(f"f{i}" for i in range(len(cand)))
        text = "\n".join(cand) + f"\nFromDevice(0) -> {chain} -> Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
        if len(json.dumps({"id": 1000, "op": "configure", "config": text}, separators=(",", ":"))) > limit:
            return best
        parts, best = cand, text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", choices=("microvm", "pc"), default="microvm")
    ap.add_argument("--accel", choices=("kvm", "tcg"), default="kvm")
    ap.add_argument("--ctl", choices=("virtio", "com2"), default="virtio")
    ap.add_argument("--nics", type=int, default=2)
    ap.add_argument("--boots", type=int, default=11)
    ap.add_argument("-n", type=int, default=25)
    ap.add_argument("--tsc-khz", type=int, default=0, help="pass tsc_khz= (for TCG: the host TSC rate)")
    ap.add_argument("--kernel", default=os.path.join(HERE, "build", "fluidvim-vnf.elf"))
    o = ap.parse_args()
    med = statistics.median
    with tempfile.TemporaryDirectory(prefix="tvt-bench-") as tmp:
        execs, boots = [], []
        for i in range(o.boots):
            p, c, ready, t = boot(o, o.kernel, tmp)
            execs.append(t * 1e3)
            boots.append(ready["boot_us"] / 1e3)
            if i < o.boots - 1:
                p.kill()
                p.wait()
        print(f"{o.machine}/{o.accel}/ctl={ready.get('ctl', '?')}: QEMU exec -> ready median {med(execs):.1f} ms "
              f"({min(execs):.1f}..{max(execs):.1f}), boot_us median {med(boots):.1f} ms "
              f"({min(boots):.1f}..{max(boots):.1f}), clock {ready['clock']}, {o.boots} boots")
        big = big_config()
        bigline = len(json.dumps({"id": 1000, "op": "configure", "config": big}, separators=(",", ":"))) + 1
        cases = [("ping", lambda i: {"id": i, "op": "ping"}),
                 ("configure (80 B config)", lambda i: {"id": i, "op": "configure", "config": CFG80}),
                 ("stats", lambda i: {"id": i, "op": "stats"}),
                 (f"configure ({bigline} B line)", lambda i: {"id": i, "op": "configure", "config": big}),
                 ("stats (after it)", lambda i: {"id": i, "op": "stats"})]
        try:
            for gap in (0.02, 0.0):
                for name, make in cases:
                    ts, size = [], 0
                    for i in range(o.n):
                        r, dt = c.request(make(1000 + i))
                        if not r.get("ok"):
                            raise SystemExit(f"{name}: {r}")
                        ts.append(dt * 1e3)
                        size = len(json.dumps(r, separators=(",", ":")))
                        time.sleep(gap)
                    print(f"  {'asleep' if gap else 'back to back':12} {name:26} median {med(ts):7.2f} ms "
                          f"(min {min(ts):.2f}, max {max(ts):.2f}, n={o.n}), reply {size} B")
        finally:
            time.sleep(0.2)
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
