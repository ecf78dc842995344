# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots: session slots at the service's QoE, and what their updates cost on the wire.

Three measurements (issue 23), each writing its part of bench/results/slots.json:

``wire`` - slot updates JSON vs compact, on the real RabbitMQ. Z zones, each with one slot agent
(:class:`fluidvim.common.slotnotify.SlotAgent`, the orchestrator's tick and rate limits) over
its instances (K per service and zone, C slots each, M services), publish to one resolver (the
orchestrator's listener and registry, :class:`fluidvim.orchestrator.notify.SlotListener`; its
choice is :class:`fluidvim.orchestrator.resolver.Resolver`'s). Sessions arrive at a rate that
ramps from 0 to ``--peak`` per second over ``--duration`` s (the bench/scale ramp, made to cross
the capacity), pick a service at random, hold an exponential time of mean ``--hold`` s. The
instances themselves are counters (the truth); what is measured is the wire and the resolver:

* bytes per second on RabbitMQ: the message bodies the broker carries on the notification topic,
  counted by a second queue bound like the listener's (AMQP frame headers not counted);
* updates per second per zone and bytes per update;
* mis-resolutions: a session sent to an instance that is full, or refused while an instance had
  room (of all resolutions); a refusal with room is also classed by whether the room was already
  in a reading a slot agent took (``refused_room_seen``: its update in flight or rate limited, or
  the registry still counting slots it handed out) or
  came from sessions that ended after every such reading (``refused_room_unseen``: no update of
  any encoding sent at the agents' tick could have carried it - the ramp's overload end);
* FUSION's model R = M*U*Z*B (:func:`fluidvim.common.slotcodec.update_bandwidth`) with the
  measured U and B, next to the measured rate.

When the registry says every instance of the service is full, the resolver reads the zones
again before it refuses (``--confirm on``, the default: :meth:`Resolver.free_slot`, each zone's
own ``instance_slots`` - what its slot agent reads - applied as exact updates; no message on the
broker; ``--confirm off``: refuse at once, as before). The truth a decision is checked against
is taken at its end (sessions that ended while the zones were read count as room).

Each instance also counts the sessions it ever opened (the VNF's ``slots.opened``), which rides
the exact updates to the registry and releases the slots it handed out that have connected
(``--opened off``: instances without it, as a VNF before that counter).

The same ramp (same seed) runs once per wire.

``qoe`` - free slots from QoE on a real VNF with real traffic (bench/slotsqoe.py): the
measuring path's own floor (no VNF), the stage-1 load probe of this machine's environment and
the VNF's ``qoe`` parameters from it, the per-session reference in the same run (its runs
alternating with the probe's confirm runs, ``--interleave on``), then sessions arriving over
time admitted until the VNF says full; the fraction of admitted sessions over the deadline
(with the share expected from the pooled late fraction alone) and the capacity against that
reference; then (``--unconfirmed on``) the same admission at
what the default deployment announces before its background confirm lands (the fast reading x
``[evaluator] load_probe_unconfirmed_share``).

``nomad`` - Nomad job register -> first session served through the orchestrator, warm, in a real
multi-client Nomad cluster, and the queuing delay the orchestrator predicted for each launch
against the one observed (bench/nomadsession.py).

Examples::

    .venv/bin/python -m bench.slots wire                  # ~2.5 min; RabbitMQ from the config
    sudo .venv/bin/python -m bench.slots qoe              # ~9 min; needs root and the VNF kernel
    sudo .venv/bin/python -m bench.slots qoe --admit-at-reference 1.0   # + admission at the
                                                          # reference itself (~40 s more)
    sudo .venv/bin/python -m bench.slots nomad            # ~1.5 min; a Nomad cluster (item 4)

Not a test: no thresholds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
import uuid

from bench import unwind_on_sigterm
from fluidvim.evaluator.confirm import CONFIRM_MARGIN, CONFIRM_REPEATS, CONFIRM_RUNS
from fluidvim.vnf.limits import VCPU_NICE_DEFAULT

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "bench", "results", "slots.json")


# -- wire --
class Instances:
    """The truth: sessions each instance carries (a counter per instance)."""

    def __init__(self, zones: int, services: int, per_zone: int, capacity: int):
        self.lock = threading.Lock()
        self.capacity = capacity
        self.used: dict[str, int] = {}
        self.read: dict[str, int] = {}        # free slots at the agent's last reading
        self.since: dict[str, int] = {}       # sessions admitted since that reading
        self.where: dict[str, tuple[str, str]] = {}      # instance -> (zone, service)
        self.opened: dict[str, int] = {}      # sessions ever opened (the VNF's slots.opened)
        self.departures: list[tuple[float, str]] = []    # (when, instance) of live sessions
        for z in range(zones):
            for s in range(services):
                for k in range(per_zone):
                    vid = f"z{z}-s{s}-i{k}"
                    self.used[vid] = self.opened[vid] = 0
                    self.where[vid] = (f"z{z}", f"svc{s}")

    def free(self, vid: str) -> int:
        return self.capacity - self.used[vid]

    def end_due(self, now: float) -> None:
        """End the sessions due by ``now`` (under ``lock``)."""
        for d in [d for d in self.departures if d[0] <= now]:
            self.departures.remove(d)
            self.used[d[1]] -= 1

    def admit(self, vid: str, until: float) -> None:
        """A session opens on ``vid`` until ``until`` (under ``lock``)."""
        self.used[vid] += 1
        self.opened[vid] += 1
        self.since[vid] = self.since.get(vid, 0) + 1
        self.departures.append((until, vid))

    def room(self, service: str) -> bool:
        return any(self.free(v) > 0 for v, (_, s) in self.where.items() if s == service)

    def room_seen(self, service: str) -> bool:
        """Room that some agent's last reading already showed (minus the sessions admitted
        since): a registry fed every reading without loss would know of it."""
        return any(self.read.get(v, 0) - self.since.get(v, 0) > 0
                   for v, (_, s) in self.where.items() if s == service and self.free(v) > 0)


class Outcomes:
    """Each resolution judged against the truth: admitted, sent to a full instance, refused
    (with room an agent's reading had seen, or not)."""

    def __init__(self, per_service: int):
        self.per_service = per_service
        self.counts = {"resolutions": 0, "admitted": 0, "to_full": 0, "refused": 0,
                       "refused_with_room": 0, "refused_room_seen": 0, "refused_room_unseen": 0}
        # the same, for resolutions made while the service carried < 80 % of its slots (the
        # ramp below saturation, where a refusal is never necessary)
        self.light = {"resolutions": 0, "to_full": 0, "refused_with_room": 0}

    def record(self, inst: Instances, svc: str, hit) -> str | None:
        """Judge one resolution (under ``inst.lock``); the instance to admit on, if any."""
        counts, light = self.counts, self.light
        counts["resolutions"] += 1
        carried = sum(u for v, u in inst.used.items() if inst.where[v][1] == svc)
        is_light = carried < 0.8 * self.per_service
        light["resolutions"] += is_light
        if hit is None:
            room = inst.room(svc)
            counts["refused"] += 1
            counts["refused_with_room"] += room
            if room:
                counts["refused_room_seen" if inst.room_seen(svc) else "refused_room_unseen"] += 1
            light["refused_with_room"] += is_light and room
            return None
        vid = hit[1].instance
        if inst.free(vid) <= 0:
            counts["to_full"] += 1
            light["to_full"] += is_light
            return None
        counts["admitted"] += 1
        return vid


class ZoneSource:
    """What a SlotAgent reads: one zone's instances (the launch core's instance_slots shape)."""

    def __init__(self, name: str, inst: Instances, opened: bool = True):
        self.name, self.region, self.host_name, self.inst = name, "bench", f"{name}-host", inst
        self.opened = opened

    def instance_slots(self) -> dict:
        with self.inst.lock:
            out = {v: {"service": s, "free": self.inst.free(v), "delay_s": 0.05,
                       **({"opened": self.inst.opened[v]} if self.opened else {})}
                   for v, (z, s) in self.inst.where.items() if z == self.name}
            for v, e in out.items():
                self.inst.read[v], self.inst.since[v] = e["free"], 0
            return out


class WireCounter:
    """A second queue bound like the listener's: counts the message bodies of the topic."""

    def __init__(self, url: str, exchange: str, topic: str):
        import kombu

        # oslo.messaging's rabbit:// is AMQP 0-9-1 (first host of the URL)
        self.conn = kombu.Connection("amqp://" + url.split("://", 1)[1].split(",")[0])
        ex = kombu.Exchange(exchange, type="topic", durable=False)
        self.queue = kombu.Queue(f"bench-wire-{uuid.uuid4().hex[:8]}", ex,
                                 routing_key=f"{topic}.info", auto_delete=True, durable=False)
        self.messages = self.bytes = 0
        self.sample: dict[str, str] = {}
        self._stop = threading.Event()
        self._consumer = self.conn.Consumer([self.queue], callbacks=[self._on], accept=None)
        self._consumer.consume()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _on(self, body, message):
        raw = message.body
        n = len(raw if isinstance(raw, bytes) else raw.encode())
        self.messages += 1
        self.bytes += n
        text = raw.decode() if isinstance(raw, bytes) else raw
        for ev in ("fluidvim.slots.batch", "fluidvim.slots.update"):
            if ev in text and ev not in self.sample:
                self.sample[ev] = text
        message.ack()

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.conn.drain_events(timeout=0.2)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                raise

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self._consumer.cancel()
        self.conn.release()


def run_wire(wire: str, a, conf, transport, seed: int) -> dict:
    from fluidvim.common.slotcodec import update_bandwidth
    from fluidvim.common.slotnotify import SlotAgent, SlotPublisher
    from fluidvim.orchestrator.notify import SlotListener
    from fluidvim.orchestrator.resolver import Resolver
    from fluidvim.orchestrator.slots import SlotRegistry

    o = conf.orchestrator
    topic = f"bench_slots_{wire}_{uuid.uuid4().hex[:6]}"
    inst = Instances(a.zones, a.services, a.per_zone, a.capacity)
    rttl = o.reservation_ttl if a.reservation_ttl is None else a.reservation_ttl
    reg = SlotRegistry(ttl=3600, reservation_ttl=rttl)
    listener = SlotListener(transport, topic, reg)
    counter = WireCounter(o.transport_url, conf.control_exchange, topic)
    listener.start()
    agents, zones = [], {}
    tick = a.compact_interval if wire == "compact" and a.compact_interval else a.agent_interval
    for z in range(a.zones):
        pub = SlotPublisher(transport, f"fluidvim.bench.z{z}", topic,
                            min_interval=o.slot_update_min_interval,
                            heartbeat=o.slot_heartbeat_interval, wire=wire)
        zones[f"z{z}"] = ZoneSource(f"z{z}", inst, a.opened == "on")
        agents.append(SlotAgent(zones[f"z{z}"], pub, None, tick))
    # its choice among free slots; with --confirm on, a view of "full" is read again from the
    # zones first (Resolver.free_slot: the zone's own instance_slots, as the local and Nomad
    # zones' agents read it)
    resolver = Resolver(None, reg, zones if a.confirm == "on" else {}, None)
    confirm_s: list[float] = []
    rnd = random.Random(seed)
    out = Outcomes(a.zones * a.per_zone * a.capacity)
    try:
        for ag in agents:
            ag.tick(force=True)
            ag.start()
        time.sleep(2.0)                                  # the first updates arrive
        b0, m0, r0 = counter.bytes, counter.messages, listener.endpoint.received
        t0 = time.monotonic()
        next_at = t0
        while True:
            now = time.monotonic()
            el = now - t0
            if el >= a.duration:
                break
            with inst.lock:
                inst.end_due(now)
            if now < next_at:
                time.sleep(min(0.01, next_at - now))
                continue
            rate = max(0.5, a.peak * el / a.duration)    # the ramp: 0 -> peak arrivals/s
            next_at += rnd.expovariate(rate)
            svc = f"svc{rnd.randrange(a.services)}"
            loc = f"z{rnd.randrange(a.zones)}"
            with reg.decision():
                n, c0 = resolver.confirms, time.perf_counter()
                hit = resolver.free_slot(svc, loc)
                if resolver.confirms > n:
                    confirm_s.append(time.perf_counter() - c0)
                if hit is not None:
                    reg.reserve(hit[1].instance, svc)
            with inst.lock:
                # the truth at the end of the decision: sessions that ended while it read count
                inst.end_due(time.monotonic())
                vid = out.record(inst, svc, hit)
                if vid is not None:
                    inst.admit(vid, now + rnd.expovariate(1.0 / a.hold))
        secs = time.monotonic() - t0
        time.sleep(1.0)                                  # the last messages reach the counter
        body = counter.bytes - b0
        msgs = counter.messages - m0
        updates = listener.endpoint.received - r0
    finally:
        for ag in agents:
            ag.stop()
        listener.stop()
        counter.close()
    per_zone_u = updates / secs / a.zones
    b_bits = 8.0 * body / max(1, updates)
    counts, light = out.counts, out.light
    mis = counts["to_full"] + counts["refused_with_room"]
    confirm_s.sort()
    model = update_bandwidth(1, a.services, per_zone_u / a.services, a.zones, b_bits)
    return {
        "wire": wire, "agent_interval_s": tick, "seconds": round(secs, 2), "messages": msgs,
        "body_bytes": body,
        "updates": updates, "bytes_per_s": round(body / secs, 1),
        "messages_per_s": round(msgs / secs, 2),
        "updates_per_s_per_zone": round(per_zone_u, 2),
        "bytes_per_update": round(body / max(1, updates), 1),
        "bytes_per_message": round(body / max(1, msgs), 1),
        "resolutions": counts, "misresolution_pct": round(100.0 * mis / max(1, counts["resolutions"]), 3),
        # what the wire and the registry lost: without the refusals whose room no reading had
        "misresolution_seen_pct": round(100.0 * (mis - counts["refused_room_unseen"])
                                        / max(1, counts["resolutions"]), 3),
        "below_80pct_load": dict(light, misresolution_pct=round(
            100.0 * (light["to_full"] + light["refused_with_room"]) / max(1, light["resolutions"]),
            3)),
        "model": {"M_resolvers": model["M"], "U_updates_per_s_per_zone": round(model["U"], 2),
                  "Z_zones": model["Z"], "B_bits_per_update": round(model["B"], 1),
                  "R_bits_per_s": round(model["R"], 1),
                  "measured_bits_per_s": round(8.0 * body / secs, 1)},
        "confirm": {"on": a.confirm == "on", "how": "the zones' own reading (instance_slots), "
                    "no message on the broker", "confirms": resolver.confirms,
                    "found_room": resolver.confirmed_room,
                    "per_s": round(resolver.confirms / secs, 2),
                    "ms_p50": _ms(confirm_s, 0.5), "ms_p99": _ms(confirm_s, 0.99),
                    "ms_max": _ms(confirm_s, 1.0)},
        "sample_message": counter.sample,
    }


def _ms(sorted_s: list[float], q: float) -> float | None:
    """The q-quantile of sorted durations in seconds, in ms (None when there are none)."""
    if not sorted_s:
        return None
    return round(1000.0 * sorted_s[min(len(sorted_s) - 1, int(q * len(sorted_s)))], 3)


def cmd_wire(a) -> dict:
    import oslo_messaging as messaging

    from fluidvim.orchestrator import conf as orchconf

    conf = orchconf.make_conf()
    orchconf.disable_rabbit_heartbeat(conf)
    transport = messaging.get_notification_transport(conf, url=conf.orchestrator.transport_url)
    if a.agent_interval is None:
        a.agent_interval = conf.orchestrator.agent_interval
    runs = {}
    try:
        for wire in a.wires.split(","):
            print(f"wire {wire}: {a.duration:g} s ramp to {a.peak:g} sessions/s ...", flush=True)
            runs[wire] = run_wire(wire, a, conf, transport, a.seed)
            r = runs[wire]
            print(f"  {r['bytes_per_s']:.0f} B/s, {r['messages_per_s']:.1f} msg/s, "
                  f"{r['updates_per_s_per_zone']:.2f} updates/s/zone, {r['bytes_per_update']:.1f} "
                  f"B/update, mis-resolutions {r['misresolution_pct']:.2f} % "
                  f"{r['resolutions']}, confirms {r['confirm']['confirms']} "
                  f"(room {r['confirm']['found_room']}, p50 {r['confirm']['ms_p50']} ms)",
                  flush=True)
    finally:
        transport.cleanup()
    o = conf.orchestrator
    return {
        "command": "python -m bench.slots wire " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in sorted(vars(a).items())
            if k not in ("cmd", "out", "part") and v is not None),
        "setup": {"zones": a.zones, "services": a.services, "instances_per_service_zone": a.per_zone,
                  "slots_per_instance": a.capacity, "ramp_peak_per_s": a.peak,
                  "duration_s": a.duration, "hold_mean_s": a.hold, "seed": a.seed,
                  "agent_interval_s": a.agent_interval, "vnf_opened_counter": a.opened == "on",
                  "compact_agent_interval_s": a.compact_interval or a.agent_interval,
                  "resolver_confirm": a.confirm == "on",
                  "reservation_ttl_s": (o.reservation_ttl if a.reservation_ttl is None
                                        else a.reservation_ttl),
                  "slot_update_min_interval_s": o.slot_update_min_interval,
                  "slot_heartbeat_interval_s": o.slot_heartbeat_interval},
        **runs,
        "bytes_ratio_json_over_compact": (round(runs["json"]["bytes_per_s"]
                                                / max(1e-9, runs["compact"]["bytes_per_s"]), 2)
                                          if {"json", "compact"} <= set(runs) else None),
    }


def write(part: str, data: dict, path: str) -> None:
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        doc = {}
    doc[part] = dict(data, when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     loadavg=os.getloadavg())
    keys = {}
    if {"json", "compact"} <= set(doc.get("wire", {})):
        keys["wire_bytes_per_s_json"] = doc["wire"]["json"]["bytes_per_s"]
        keys["wire_bytes_per_s_compact"] = doc["wire"]["compact"]["bytes_per_s"]
        keys["misresolution_pct"] = doc["wire"]["compact"]["misresolution_pct"]
        keys["misresolution_pct_json"] = doc["wire"]["json"]["misresolution_pct"]
    if "qoe" in doc:
        keys["admitted_over_deadline_pct"] = doc["qoe"]["admitted_over_deadline_pct"]
        keys["capacity_error_pct"] = doc["qoe"]["capacity_error_pct"]
    if "nomad" in doc:
        keys["nomad_register_to_session_ms_p50"] = doc["nomad"]["nomad_register_to_session_ms_p50"]
    doc.update(keys)
    doc.pop("not_measured", None)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.slots", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wire", help="slot updates JSON vs compact on RabbitMQ")
    w.add_argument("--zones", type=int, default=4)
    w.add_argument("--services", type=int, default=3)
    w.add_argument("--per-zone", type=int, default=2, help="instances per service and zone")
    w.add_argument("--capacity", type=int, default=16, help="slots per instance")
    w.add_argument("--peak", type=float, default=60.0, help="arrivals/s at the end of the ramp")
    w.add_argument("--duration", type=float, default=60.0)
    w.add_argument("--hold", type=float, default=10.0, help="mean session time, s")
    w.add_argument("--seed", type=int, default=23)
    w.add_argument("--agent-interval", type=float, default=None,
                   help="seconds between a slot agent's ticks (default: [orchestrator] "
                        "agent_interval)")
    w.add_argument("--reservation-ttl", type=float, default=None,
                   help="the registry's reservation_ttl: how long a handed-out slot may take to "
                        "show in its instance's count (default: [orchestrator] reservation_ttl; "
                        "this bench's sessions show at once)")
    w.add_argument("--opened", choices=("on", "off"), default="on",
                   help="whether the instances report their sessions opened (the VNF's "
                        "slots.opened): off = a VNF without it, as before issue 23's counter")
    w.add_argument("--confirm", choices=("on", "off"), default="on",
                   help="whether the resolver reads the zones again when its view says every "
                        "instance is full (Resolver.confirm_full): off = refuse at once, as "
                        "before")
    w.add_argument("--compact-interval", type=float, default=None,
                   help="the compact wire's agent tick, s (default: --agent-interval): the "
                        "JSON wire keeps --agent-interval")
    w.add_argument("--wires", default="json,compact", help="which wires to run, in order")
    w.add_argument("--part", default="wire",
                   help="key of slots.json to write (the headline figures come from 'wire')")
    w.add_argument("--out", default=OUT)
    q = sub.add_parser("qoe", help="free slots from QoE on a real VNF with real traffic")
    q.add_argument("--deadline-ms", type=float, default=10.0)
    q.add_argument("--quantile", type=float, default=0.99)
    q.add_argument("--session-pps", type=float, default=100.0)
    q.add_argument("--run-s", type=float, default=16.0,
                   help="seconds the admitted sessions (and each per-session reference run) run; "
                        "long enough for the VNF's 1 s correction windows to show")
    q.add_argument("--proto", choices=("icmp", "udp"), default="icmp",
                   help="the sessions' transport, for the probe, the reference and the admitted "
                        "sessions alike: icmp = one echo identifier per session answered by the "
                        "far kernel (the probe's default); udp = one socket per session and a "
                        "user-space echo in the far namespace, whose own scheduling then adds "
                        "to every round trip")
    q.add_argument("--pooled", action="store_true",
                   help="tell the VNF the capacity at the pooled quantile (every packet of a "
                        "probe step) instead of the one keeping 99 %% of sessions of --run-s x "
                        "--session-pps packets within their own quantile")
    q.add_argument("--vcpu-nice", type=int, default=None,
                   help="[vnf] vcpu_nice of the VNFs (default: the configuration's, "
                        f"{VCPU_NICE_DEFAULT})")
    q.add_argument("--kernel", default=None,
                   help="[vnf] kernel of the VNFs (default: the built one), e.g. an older build "
                        "for an A/B on the same host")
    q.add_argument("--probe-step", type=float, default=2.0,
                   help="seconds per stage-1 probe step ([evaluator] load_probe_step, 2): the "
                        "probe reads a tail over this long, the sessions live --run-s")
    q.add_argument("--client-nice", type=int, default=0,
                   help="nice value of the traffic client (probe, reference and admission)")
    q.add_argument("--confirm-runs", type=int, default=CONFIRM_RUNS,
                   help="the probe's confirm phase: at most this many runs of --run-s s sessions "
                        "on the probe VNF, judged per session, from the fast steps' estimate, "
                        "bracketed and bisected (evaluator/confirm.py next_confirm); the "
                        "capacity announced is the largest count held in every run of it "
                        f"({CONFIRM_REPEATS} when the search finished) at most (1 - "
                        "--confirm-margin) x the smallest count that failed (confirm_reading; "
                        "0: the fast steps alone)")
    q.add_argument("--confirm-margin", type=float, default=CONFIRM_MARGIN,
                   help="the confirm phase's margin under the smallest count that failed "
                        "([evaluator] load_probe_confirm_margin)")
    q.add_argument("--unconfirmed", choices=("on", "off"), default="on",
                   help="also admit at what the default announces before its confirm lands "
                        "(the fast reading x [evaluator] load_probe_unconfirmed_share, "
                        "bench/slotsqoe.py admit_unconfirmed; ~35 s more)")
    q.add_argument("--admit-over-s", type=float, default=None,
                   help="the admission's sessions arrive evenly over this long, each admitted "
                        "while the VNF says it has a free slot (bench/slotsadmit.py; default: "
                        "--run-s, the arrival rate that keeps the VNF full of --run-s s "
                        "sessions); 0: all the free slots at once, the admission before")
    q.add_argument("--session-points", type=int, default=5,
                   help="session counts of the per-session reference (0: none), each run like "
                        "the admission and judged per session (bench/slotsqoe.py "
                        "session_sweep); the capacity error is against it")
    q.add_argument("--session-refine", type=int, default=2,
                   help="bisections of the per-session reference's bracket")
    q.add_argument("--session-repeats", type=int, default=2,
                   help="runs of each count of the per-session reference, pooled (one burst of "
                        "the host flips a whole run here: bench/results/slots.md)")
    q.add_argument("--interleave", choices=("on", "off"), default="on",
                   help="run the per-session reference's runs alternately with the confirm "
                        "phase's (one after each), on a VNF of its own, its counts from half to "
                        "the whole fast estimate, so the host's drift over minutes hits both "
                        "alike (bench/slotsqoe.py ReferenceSweep); off: the reference after the "
                        "confirm, around the capacity announced (the runs before 2026-11-29 03:00)")
    q.add_argument("--admit-at-reference", default="",
                   help="comma-separated multiples of the per-session reference (e.g. 1.0,1.1): "
                        "an admission more per multiple, the VNF told that capacity (~40 s "
                        "each): what the VNF's run-time correction keeps at the knee and over it")
    q.add_argument("--reference-passes", type=int, default=0,
                   help="passes of bench/evaluator's pooled-quantile sweep in this run, "
                        "reported next to the per-session reference (0: none)")
    q.add_argument("--points", type=int, default=12, help="session counts in the sweep")
    q.add_argument("--sweep-step", type=float, default=4.0, help="seconds per sweep step")
    q.add_argument("--session-step-sweep", choices=("on", "off"), default="off",
                   help="with --reference-passes: also sweep with steps of --run-s s (a "
                        "session's length), the passes interleaved with the --sweep-step ones "
                        "(reference_swept_session_step, reference_by_step_length)")
    q.add_argument("--part", default="qoe",
                   help="key of slots.json to write (the headline figures come from 'qoe'; "
                        "e.g. qoe_loaded for a run on a busy host)")
    q.add_argument("--reference", default=os.path.join(REPO, "bench", "results", "evaluator.json"),
                   help="bench/evaluator's result, reported next to the swept one")
    q.add_argument("--out", default=OUT)
    n = sub.add_parser("nomad", help="Nomad register -> first session served through the "
                                     "orchestrator, warm (bench/nomadsession.py)")
    n.add_argument("--launches", type=int, default=12, help="measured warm launches")
    n.add_argument("--clients", type=int, default=2, help="Nomad client agents")
    n.add_argument("--out", default=OUT)
    a = p.parse_args(argv)
    unwind_on_sigterm()
    if a.cmd == "wire":
        write(a.part, cmd_wire(a), a.out)
    elif a.cmd == "nomad":
        from bench.nomadsession import cmd_nomad
        write("nomad", cmd_nomad(a), a.out)
    else:
        from bench.slotsqoe import cmd_qoe
        if a.admit_over_s is None:
            a.admit_over_s = a.run_s
        write(a.part, cmd_qoe(a), a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
