# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A load probe's traffic from a generator VNF (``LoadProbe(traffic="vnf")``, issue 23 item 2).

Where this machine cannot put packets on the zone's hosts, the zone itself runs the traffic: two
networks of the zone, the probe VNF with its NICs on them, and per step a generator VNF on the
same host and networks (the unikernel's ``FastUDPFlows`` -> the probe VNF -> ``TimestampDiff``,
contract/PROTOCOL.md section 5), which is also the far end: what reaches its NIC 1 goes back
(``EtherMirror``), so like the netns probe's echo every frame crosses the probe VNF both ways::

    network <p>a: [generator nic0] <-> [probe nic0]
    network <p>b: [probe nic1]     <-> [generator nic1: EtherMirror]

Everything goes through the zone adapter (``create_network``, ``launch`` with ``host`` pinned,
``stats``, ``terminate``, ``delete_network``), so a zone that offers those runs the same stage-1
measurement as the local zone. A step is one generator launch whose configuration is the step
(:func:`fluidvim.evaluator.loadgen.generator_config`: the sessions, their rate, the duration),
read with ``stats`` once its frames are back, then terminated: zones have no ``configure``.

What differs from the netns client: the latency is the generator VNF's round trip (its engine's
receive time, so its own vCPU's scheduling delay is in it, where the client has the kernel's
receive timestamp); the echo is the generator's own NIC 1; no warm-up (a step's first frames
open its sessions); one window per step.
"""

from __future__ import annotations

import secrets
import time

from fluidvim.common.zonetypes import LaunchRequest, NicRequest, ZoneAdapter, ZoneError

from . import loadgen

GENERATOR_SERVICE = "fluidvim-loadgen"
SRC_IP, DST_IP = "10.93.0.1", "10.93.0.2"     # only inside the probe's two networks
READ_EVERY_S = 0.1
END_SLACK_S = 10.0                            # a starved generator's schedule ends at most this late


def can_generate(zone) -> tuple[bool, str]:
    """Whether ``zone`` can run a generator VNF beside a probe VNF and show its figures."""
    missing = [m for m in ("create_network", "delete_network")
               if getattr(type(zone), m, None) is getattr(ZoneAdapter, m)]
    if not callable(getattr(zone, "stats", None)):
        missing.append("stats")
    if missing:
        return False, (f"zone {getattr(zone, 'name', '?')!r} ({getattr(zone, 'kind', '?')}) has "
                       f"no {', '.join(missing)}: a generator VNF cannot be wired to the probe VNF "
                       "or its measurement read there")
    return True, ""


class GeneratorTraffic:
    """The probe VNF, its two networks and one generator VNF per step, in ``zone`` on ``host``.

    ``probe`` is the :class:`~fluidvim.evaluator.probes.LoadProbe` (its session rate, step and
    drain times, frame size, probe VNF configuration, flow table and kernel)."""

    def __init__(self, probe, zone, host: str | None):
        self.probe, self.zone, self.host = probe, zone, host
        self.tag = probe.prefix + secrets.token_hex(3)
        self.nets: list = []
        self.dst_mac = None
        self.src_mac = "02:" + ":".join(secrets.token_hex(1) for _ in range(5))
        self.generators = 0

    def networks(self) -> tuple:
        """Create the two networks; their ids, for the probe VNF's NICs."""
        for side in ("a", "b"):
            self.nets.append(self.zone.create_network(f"{self.tag}-{side}"))
        return tuple(n.id for n in self.nets)

    def check(self, probe_inst) -> None:
        """Learn the probe VNF's MAC (the first step shows that frames come back through it:
        no generator launch of its own, which costs seconds in a Nova zone)."""
        self.dst_mac = self.zone.stats(probe_inst.id)["nics"][0]["mac"]

    def load_step(self, sessions: int) -> dict:
        """One step: ``sessions`` sessions at the probe's rate for its step time (RuntimeError
        if none of the first step's frames came back: the networks do not reach the probe)."""
        step = self._run(sessions, self.probe.session_pps, self.probe.step_s)
        if self.generators == 1 and not step["received"]:
            raise RuntimeError(f"none of {step['sent']} generator frames came back through the "
                               f"probe VNF between networks {self.nets[0].id} and "
                               f"{self.nets[1].id}")
        return step

    def _run(self, sessions: int, pps: float, duration: float) -> dict:
        config = loadgen.generator_config(
            sessions=sessions, pps=pps, duration=duration, src_mac=self.src_mac,
            dst_mac=self.dst_mac, src_ip=SRC_IP, dst_ip=DST_IP, rx_nic=0, mirror_nic=1,
            frame=max(loadgen.GEN_MIN_FRAME, min(loadgen.GEN_MAX_FRAME, 42 + self.probe.payload)))
        self.generators += 1
        req = LaunchRequest(service=GENERATOR_SERVICE, click_config=config,
                            name=f"{self.tag}-gen{self.generators}",
                            slots=self.probe.probe_slots, vcpus=1, kernel=self.probe.kernel,
                            nics=(NicRequest(self.nets[0].id, mac=self.src_mac),
                                  NicRequest(self.nets[1].id)), host=self.host)
        inst = self.zone.launch(req)
        try:
            stats = self._wait(inst.id, round(sessions * pps * duration), duration)
        finally:
            self.zone.terminate(inst.id)
        return dict(loadgen.vnf_result(stats, sessions=sessions, pps=pps, duration=duration),
                    generator=inst.id)

    def _wait(self, instance_id: str, frames: int, duration: float) -> dict:
        """The generator's stats once it went through its schedule (every frame sent or
        missed) and its meter stopped moving, at most the probe's drain time after that; a
        generator that never gets through (its vCPU starved) is read ``END_SLACK_S`` after its
        schedule's end. A read may take a while (a Nomad zone waits for a fresh
        vnf-stats.json), so the deadlines count from what was read, not from the step's end."""
        time.sleep(duration)
        hard = time.monotonic() + END_SLACK_S
        settle = last = None
        while True:
            stats = self.zone.stats(instance_id)
            src, meter = loadgen.generator_elements(stats)
            now, t = (src["sent"] + src["missed"], meter["count"]), time.monotonic()
            if now[0] >= frames:
                settle = settle or t + self.probe.drain_s + 5 * READ_EVERY_S
                if now == last or t >= settle:
                    return stats
            if t >= hard:
                return stats
            last = now
            time.sleep(READ_EVERY_S)

    def down(self) -> str | None:
        """Delete the networks (the probe VNF is terminated first, by the caller); the first
        problem, or None."""
        error = None
        for net in self.nets:
            try:
                self.zone.delete_network(net.id)
            except ZoneError as e:
                error = error or f"could not delete network {net.id}: {e}"
        return error
