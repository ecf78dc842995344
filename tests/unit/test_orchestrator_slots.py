# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""FUSION's compressed slot updates, the rate limiter, the bandwidth model and the registry."""

import math

import pytest

from fluidvim.common import slotcodec
from fluidvim.orchestrator import slots as S
from fluidvim.orchestrator.exception import InvalidRequest


@pytest.mark.parametrize("n,code", [(0, 0), (1, 1), (2, 2), (3, 2), (4, 3), (7, 3), (8, 4),
                                    (15, 4), (16, 5), (1023, 10), (1024, 11),
                                    (2 ** 14 - 1, 14), (2 ** 14, 15), (10 ** 9, 15)])
def test_log2_buckets_at_the_boundaries(n, code):
    assert slotcodec.encode_log2(n) == code
    lo, hi = slotcodec.log2_range(code)
    assert lo <= n <= hi
    assert slotcodec.decode_log2(code) == lo          # decoding never promises more than there is


def test_log2_roundtrip_every_code():
    for code in range(16):
        assert slotcodec.encode_log2(slotcodec.decode_log2(code)) == code
    with pytest.raises(ValueError):
        slotcodec.decode_log2(16)
    with pytest.raises(ValueError):
        slotcodec.encode_log2(-1)


@pytest.mark.parametrize("n,code", [(0, 0), (1, 1), (9, 1), (10, 2), (99, 2), (100, 3),
                                    (10 ** 6, 3)])
def test_log10_magnitudes(n, code):
    assert slotcodec.encode_log10(n) == code
    assert slotcodec.encode_log10(slotcodec.decode_log10(code)) == code


@pytest.mark.parametrize("seconds,q", [(0.0, 0), (0.05, 0), (0.1, 0), (0.1001, 1), (0.2, 1),
                                       (0.21, 2), (0.4, 2), (1.0, 4), (1.6, 4), (1.61, 5),
                                       (1638.4, 14), (5000.0, 14)])
def test_delay_code_rounds_up_to_the_next_step(seconds, q):
    assert slotcodec.encode_delay(seconds) == q
    assert slotcodec.decode_delay(q) >= min(seconds, slotcodec.decode_delay(14))


def test_delay_infinite_is_none_both_ways():
    assert slotcodec.encode_delay(None) == 15 and slotcodec.encode_delay(math.inf) == 15
    assert slotcodec.decode_delay(15) is None
    for q in range(15):
        assert slotcodec.decode_delay(q) == pytest.approx(0.1 * 2 ** q)
        assert slotcodec.encode_delay(slotcodec.decode_delay(q)) == q


def test_exact_count_only_on_order_of_magnitude_change():
    enc = slotcodec.SlotEncoder()
    first = enc.encode("i", 50, 0.3)
    assert first == {"s": 6, "m": 2, "q": 2, "exact": 50}
    assert "exact" not in enc.encode("i", 60, 0.3)           # same magnitude: bucket only
    assert enc.encode("i", 9, 0.3)["exact"] == 9             # 10-99 -> 1-9
    assert enc.encode("j", 9, None)["exact"] == 9            # per key
    assert enc.encode("j", 9, None)["q"] == 15


def test_decode_slots_keeps_the_last_exact_count_within_its_bucket():
    assert slotcodec.decode_slots({"s": 6, "exact": 50}) == 50
    assert slotcodec.decode_slots({"s": 6}, last_exact=50) == 50      # 32-63 still holds 50
    assert slotcodec.decode_slots({"s": 5}, last_exact=50) == 16      # moved: bucket lower bound


def test_rate_limiter():
    now = [0.0]
    rl = slotcodec.RateLimiter(1.0, clock=lambda: now[0])
    assert rl.allow("a")
    assert not rl.allow("a")
    assert rl.allow("b")
    assert rl.allow("a", urgent=True)
    now[0] = 0.99
    assert not rl.allow("a")
    now[0] = 2.0
    assert rl.allow("a")


def test_bandwidth_model_reports_every_term():
    # R = M*U*Z*B: 1 resolver, 100 services at one update per second, 50 zones, 8 bits
    assert slotcodec.update_bandwidth(1, 100, 1.0, 50, 8) == {"M": 1, "U": 100.0, "Z": 50,
                                                             "B": 8, "R": 40_000}
    # every resolver receives every update
    assert slotcodec.update_bandwidth(3, 100, 1.0, 50, 8)["R"] == 120_000
    assert slotcodec.update_bandwidth(3, 10, 0.5, 4, 24)["U"] == 5.0      # updates/s per zone
    assert slotcodec.update_bandwidth(0, 100, 1.0, 50, 8)["R"] == 0
    assert slotcodec.update_bandwidth(1, 0, 1.0, 50, 8)["R"] == 0
    with pytest.raises(ValueError, match="zones"):
        slotcodec.update_bandwidth(1, 1, 1, -1, 8)
    with pytest.raises(ValueError, match="resolvers"):
        slotcodec.update_bandwidth(-1, 1, 1, 1, 8)
    with pytest.raises(ValueError, match="bits_per_update"):
        slotcodec.update_bandwidth(1, 1, 1, 1, float("nan"))


def test_compact_records_round_trip_every_code():
    recs = [(i, s, m, q, None, None) for i, (s, m, q) in enumerate(
        (s, m, q) for s in range(16) for m in range(4) for q in range(16))]
    data = slotcodec.pack_records([r[:5] for r in recs])      # 5-tuples: no opened
    assert slotcodec.unpack_records(data) == recs
    # small indices: 2 bytes per update (the header varint and the slot/delay byte)
    assert len(slotcodec.pack_records([(5, 6, 2, 3, None)])) == 2
    assert slotcodec.unpack_records(b"") == []


@pytest.mark.parametrize("opened", [0, 1, 127, 128, slotcodec.OPENED_MOD - 1,
                                    slotcodec.OPENED_MOD, 10 * slotcodec.OPENED_MOD + 5])
def test_compact_opened_rides_an_exact_update_modulo(opened):
    recs = [(3, 4, 1, 2, 9, opened), (4, 4, 1, 2, 9, None), (700, 1, 1, 0, 1, opened)]
    got = slotcodec.unpack_records(slotcodec.pack_records(recs))
    mod = opened % slotcodec.OPENED_MOD
    assert got == [(3, 4, 1, 2, 9, mod), (4, 4, 1, 2, 9, None), (700, 1, 1, 0, 1, mod)]
    # nearly full with the opened counter: header, slot/delay, exact, opened (1-2 bytes)
    assert len(slotcodec.pack_records([recs[0]])) == 3 + (1 if mod < 128 else 2)


def test_compact_opened_needs_an_exact_count():
    with pytest.raises(ValueError, match="opened=5 needs an exact count"):
        slotcodec.pack_records([(0, 3, 1, 0, None, 5)])
    with pytest.raises(ValueError, match="opened=-1"):
        slotcodec.pack_records([(0, 3, 1, 0, 4, -1)])
    with pytest.raises(ValueError, match="truncated"):
        slotcodec.unpack_records(bytes([0x09, 0x10]))     # has exact + opened, neither there


def test_opened_delta_across_the_modulus_and_a_restart():
    mod = slotcodec.OPENED_MOD
    assert slotcodec.opened_delta(10, 13) == 3
    assert slotcodec.opened_delta(5, 5) == 0
    assert slotcodec.opened_delta(mod - 2, 1) == 3                  # wrapped
    assert slotcodec.opened_delta(100_000, 100_007) == 7           # full values (JSON form)
    assert slotcodec.opened_delta(5000, 3) is None                 # the VNF restarted
    assert slotcodec.opened_delta(0, mod // 2) is None              # too far apart to tell
    assert slotcodec.opened_delta(0, mod // 2 - 1) == mod // 2 - 1


MAGNITUDES = {0: 0, 5: 1, 50: 2, 500: 3, 5000: 3}       # count -> its 2-bit log10 code


@pytest.mark.parametrize("old,new", [(a, b) for a in MAGNITUDES for b in MAGNITUDES
                                     if MAGNITUDES[a] != MAGNITUDES[b]])
def test_compact_every_magnitude_change_carries_the_exact_count(old, new):
    """From every magnitude to every other one: the update after the change carries the exact
    count, survives the compact wire, and decodes to that count."""
    import base64
    enc, keys, table = slotcodec.SlotEncoder(), slotcodec.KeyTable(), {}
    key = ("z", "h", "i", "svc", "r")
    last = None
    for n in (old, new):
        msg = enc.encode("i", n, 0.2)
        rec = (keys.index(key), msg["s"], msg["m"], msg["q"], msg.get("exact"))
        payload = {"e": "ep", "t": 1.5, "u": base64.b64encode(slotcodec.pack_records([rec])).decode(),
                   "k": keys.definitions([rec[0]])}
        (u,), unknown = slotcodec.decode_batch(payload, table)
        assert unknown == 0 and u["exact"] == n and u["m"] == slotcodec.encode_log10(n)
        assert slotcodec.decode_slots(u, last) == n
        last = u["exact"]
    assert len(slotcodec.pack_records([(0, 15, 3, 15, 5000)])) == 4      # the largest here


def test_compact_same_magnitude_is_the_bucket_and_keeps_the_exact_count_within_it():
    import base64
    enc, keys, table = slotcodec.SlotEncoder(), slotcodec.KeyTable(), {}
    idx = keys.index(("z", "h", "i", "svc", "r"))
    out = []
    for n in (50, 40, 20):
        m = enc.encode("i", n, None)
        b = slotcodec.pack_records([(idx, m["s"], m["m"], m["q"], m.get("exact"))])
        out.append(slotcodec.decode_batch({"e": "x", "t": 2, "u": base64.b64encode(b).decode(),
                                           "k": keys.definitions([idx])}, table)[0][0])
    assert [u.get("exact") for u in out] == [50, None, None]
    assert slotcodec.decode_slots(out[1], 50) == 50          # 40 is in 50's bucket 32-63
    assert slotcodec.decode_slots(out[2], 50) == 16          # 20: bucket 16-31, lower bound
    assert out[2]["q"] == 15 and slotcodec.decode_delay(out[2]["q"]) is None


def test_compact_keys_defined_once_then_every_heartbeat_unknown_ones_dropped():
    import base64
    now = [0.0]
    keys = slotcodec.KeyTable(heartbeat=30.0, clock=lambda: now[0])
    a, b = keys.index(("z", "h", "a", "s", "r")), keys.index(("z", "h", "b", "s", "r"))
    assert keys.index(("z", "h", "a", "s", "r")) == a != b
    assert keys.definitions([a, b]) == {"0": ["z", "h", "a", "s", "r"],
                                        "1": ["z", "h", "b", "s", "r"]}
    assert keys.definitions([a]) == {}
    now[0] = 30.0
    assert list(keys.definitions([a])) == ["0"]
    # a receiver that missed the definitions drops those records until the next heartbeat
    u = base64.b64encode(slotcodec.pack_records([(a, 3, 1, 0, None), (b, 3, 1, 0, 4)])).decode()
    table = {}
    got, unknown = slotcodec.decode_batch({"e": "x", "t": 3, "u": u,
                                           "k": {"1": ["z", "h", "b", "s", "r"]}}, table)
    assert unknown == 1 and [g["instance"] for g in got] == ["b"]


def test_compact_bad_input_names_what_is_wrong():
    with pytest.raises(ValueError, match="truncated"):
        slotcodec.unpack_records(bytes([0x80]))
    with pytest.raises(ValueError, match="slot/delay byte"):
        slotcodec.unpack_records(bytes([0x01]))
    with pytest.raises(ValueError, match="out of range"):
        slotcodec.pack_records([(0, 16, 0, 0, None)])
    with pytest.raises(ValueError, match="key 3"):
        slotcodec.decode_batch({"e": "x", "t": 1, "u": "", "k": {"3": ["z"]}}, {})


def rep(instance, service, slots, zone="z1", host="h1", region="r1", at=100.0, **kw):
    return S.SlotReport(zone=zone, host=host, instance=instance, service=service, slots=slots,
                        delay_s=0.2, region=region, at=at, **kw)


def test_registry_aggregates_instance_host_zone_region_with_aliases():
    reg = S.SlotRegistry(ttl=1000, clock=lambda: 150.0)
    reg.set_aliases("basic", {"premium": 3})
    reg.apply(rep("a", "basic", 10))
    reg.apply(rep("b", "basic", 5, host="h2"))
    reg.apply(rep("c", "basic", 7, zone="z2", host="h9", region="r2"))
    reg.apply(rep("d", "premium", 2, zone="z2", host="h9", region="r2"))
    assert reg.aggregate("basic", "zone") == {"z1": 15, "z2": 7}
    assert reg.aggregate("basic", "host") == {"z1/h1": 10, "z1/h2": 5, "z2/h9": 7}
    assert reg.aggregate("basic", "region") == {"r1": 15, "r2": 7}
    # premium: 10//3 + 5//3 from z1, 7//3 + 2 native in z2
    assert reg.aggregate("premium", "zone") == {"z1": 4, "z2": 4}
    assert reg.aggregate("premium", "instance") == {"a": 3, "b": 1, "c": 2, "d": 2}
    with pytest.raises(InvalidRequest, match="level"):
        reg.aggregate("basic", "galaxy")


def test_registry_ttl_order_reservations_and_forget():
    now = [150.0]
    reg = S.SlotRegistry(ttl=100, reservation_ttl=5, clock=lambda: now[0])
    reg.apply(rep("a", "basic", 2, at=100.0))
    reg.apply(rep("a", "basic", 9, at=90.0))                 # older: ignored
    assert reg.aggregate("basic", "instance") == {"a": 2}
    reg.reserve("a", "basic")
    assert reg.aggregate("basic", "instance") == {"a": 1}
    now[0] = 156.0          # TTL over, but no report since the reservation: still counted
    assert reg.aggregate("basic", "instance") == {"a": 1}
    reg.apply(rep("a", "basic", 2, at=155.0))                # a newer report: it ends
    assert reg.aggregate("basic", "instance") == {"a": 2}
    reg.reserve("a", "basic", 2)
    assert reg.aggregate("basic", "instance") == {"a": 0}
    reg.apply(rep("a", "basic", 2, at=157.0))      # within the TTL a report does not end it
    assert reg.aggregate("basic", "instance") == {"a": 0}
    now[0] = 162.0
    assert reg.aggregate("basic", "instance") == {"a": 2}
    now[0] = 300.0                                           # report too old
    assert reg.aggregate("basic", "instance") == {}
    now[0] = 158.0
    reg.forget("a")
    assert reg.aggregate("basic", "instance") == {}


def test_apply_message_decodes_a_publisher_payload():
    reg = S.SlotRegistry(ttl=1e12)
    enc = slotcodec.SlotEncoder()
    base = {"zone": "z", "host": "h", "instance": "i", "service": "s", "region": "r"}
    reg.apply_message({**base, "at": 1.0, **enc.encode("k", 40, 0.5)})
    assert reg.reports()[0].slots == 40 and reg.reports()[0].delay_s == pytest.approx(0.8)
    reg.apply_message({**base, "at": 2.0, **enc.encode("k", 35, 0.5)})   # same bucket 32-63
    assert reg.reports()[0].slots == 40
    reg.apply_message({**base, "at": 3.0, **enc.encode("k", 20, None)})   # bucket 16-31
    assert reg.reports()[0].slots == 16 and reg.reports()[0].delay_s is None


def test_apply_message_counts_the_slots_handed_out_since_the_last_report():
    """A bucket without an exact count: the previous report minus the slots reserved since, when
    the VNF's bucket confirms it - not the bucket's lower bound (8 for a count of 15)."""
    now = [10.0]
    reg = S.SlotRegistry(ttl=1e12, reservation_ttl=1.0, clock=lambda: now[0])
    enc = slotcodec.SlotEncoder()
    base = {"zone": "z", "host": "h", "instance": "i", "service": "s", "region": "r"}
    reg.apply_message({**base, "at": 10.0, **enc.encode("k", 16, 0.5)})       # exact 16
    now[0] = 10.5
    reg.reserve("i", "s")
    reg.apply_message({**base, "at": 11.0, **enc.encode("k", 15, 0.5)})       # bucket 8-15
    assert reg.reports()[0].slots == 15
    now[0] = 12.5                                          # the reservation is reflected
    assert reg.aggregate("s", "instance") == {"i": 15}
    for t in (12.6, 12.7, 12.8):
        now[0] = t
        reg.reserve("i", "s")
    # a heartbeat in the same bucket: 15 - 3, not 15 (the last exact count, 16, is older)
    reg.apply_message({**base, "at": 13.0, **enc.encode("k", 12, 0.5)})
    assert reg.reports()[0].slots == 12
    # those three are in the estimate: not counted again, although younger than the ttl
    assert reg.aggregate("s", "instance") == {"i": 12}
    now[0] = 13.1
    reg.reserve("i", "s")                                  # a new one counts
    assert reg.aggregate("s", "instance") == {"i": 11}
    # the count fell without reservations (sessions that did not ask the resolver): the bucket
    # does not confirm 12, so its lower bound
    reg.apply_message({**base, "at": 14.0, **enc.encode("k", 3, 0.5)})        # exact: 1-9
    reg.apply_message({**base, "at": 15.0, **enc.encode("k", 3, 0.5)})
    assert reg.reports()[0].slots == 3
    bucket_only = {k: v for k, v in enc.encode("k", 2, 0.5).items() if k != "exact"}
    reg.apply_message({**base, "at": 16.0, **bucket_only, "s": 1})              # bucket 1
    assert reg.reports()[0].slots == 1


@pytest.mark.parametrize("aliases,field", [({"premium": 0}, "aliases.premium"),
                                           ({"premium": -2}, "aliases.premium"),
                                           ({"premium": "three"}, "aliases.premium"),
                                           ({"premium": float("nan")}, "aliases.premium"),
                                           (["premium"], "aliases")])
def test_bad_alias_ratio_names_the_field(aliases, field):
    with pytest.raises(InvalidRequest) as e:
        S.validate_aliases(aliases)
    assert e.value.field == field
    assert e.value.message.startswith(field)


def test_counts_below_exact_below_always_travel_exact_and_round_trip():
    """Nearly full (below EXACT_BELOW): every count is sent with its exact value, through the
    compact wire, and decodes to itself - not to its bucket's lower bound (8 for 15, 1 for 1)."""
    import base64
    enc, keys, table = slotcodec.SlotEncoder(), slotcodec.KeyTable(), {}
    idx = keys.index(("z", "h", "i", "svc", "r"))
    for n in [*range(slotcodec.EXACT_BELOW), *range(slotcodec.EXACT_BELOW - 1, -1, -1)]:
        m = enc.encode("i", n, 0.1)
        assert m.get("exact") == n
        b = slotcodec.pack_records([(idx, m["s"], m["m"], m["q"], m.get("exact"))])
        assert len(b) == 3                                    # header, slot/delay, the count
        (u,), _ = slotcodec.decode_batch({"e": "x", "t": 1, "u": base64.b64encode(b).decode(),
                                          "k": keys.definitions([idx])}, table)
        assert slotcodec.decode_slots(u) == n
    enc.encode("j", 40, 0.1)
    assert "exact" not in enc.encode("j", slotcodec.EXACT_BELOW, 0.1)   # same magnitude, not small


def test_slot_code_changes_with_every_small_count_and_only_the_bucket_above():
    small = [slotcodec.slot_code(n) for n in range(slotcodec.EXACT_BELOW)]
    assert len(set(small)) == slotcodec.EXACT_BELOW                 # each small count differs
    assert slotcodec.slot_code(40) == slotcodec.slot_code(50) == (6, None)   # bucket 32-63
    assert slotcodec.slot_code(31) != slotcodec.slot_code(32)


@pytest.mark.parametrize("old,new,hurry", [
    (None, 40, True),                   # never sent
    (40, 35, False), (40, 20, False),   # same magnitude, still room: the rate limit applies
    (20, 15, True), (15, 20, True),     # into / out of nearly full
    (15, 9, True),                      # a new order of magnitude
    (5, 3, False),                      # nearly full but neither 0 nor a new magnitude
    (1, 0, True), (0, 1, True),         # full / room again
    (120, 80, True), (500, 100, False),
])
def test_urgent_changes_pass_the_rate_limit(old, new, hurry):
    assert slotcodec.urgent(old, new) is hurry


def test_exact_count_ends_the_reservations_it_shows():
    """An exact count no higher than the registry's own view (report - slots handed out since)
    shows every one of those slots: they no longer count, although younger than the ttl."""
    now = [10.0]
    reg = S.SlotRegistry(ttl=1e12, reservation_ttl=5.0, clock=lambda: now[0])
    enc = slotcodec.SlotEncoder()
    base = {"zone": "z", "host": "h", "instance": "i", "service": "s", "region": "r"}
    reg.apply_message({**base, "at": 10.0, **enc.encode("k", 12, 0.5)})
    for t in (10.1, 10.2, 10.3, 10.4):
        now[0] = t
        reg.reserve("i", "s")
    assert reg.aggregate("s", "instance") == {"i": 8}
    now[0] = 11.0
    reg.reserve("i", "s")                           # after the next reading: still counts
    reg.apply_message({**base, "at": 10.9, **enc.encode("k", 8, 0.5)})   # 12 - 4: all shown
    assert reg.aggregate("s", "instance") == {"i": 7}
    # the count rose by 2 instead (sessions ended): at most 2 of 4 can be still unconnected
    reg2 = S.SlotRegistry(ttl=1e12, reservation_ttl=5.0, clock=lambda: now[0])
    now[0] = 10.0
    reg2.apply_message({**base, "at": 10.0, **enc.encode("k", 12, 0.5)})
    for t in (10.1, 10.2, 10.3, 10.4):
        now[0] = t
        reg2.reserve("i", "s")
    reg2.apply_message({**base, "at": 10.9, **enc.encode("k", 10, 0.5)})   # view 8, count 10
    assert reg2.aggregate("s", "instance") == {"i": 8}        # the 2 newest still count
    now[0] = 15.45                                             # the ttl ends them too
    assert reg2.aggregate("s", "instance") == {"i": 10}
    # no evidence (the count went up past everything handed out): all keep counting
    reg3 = S.SlotRegistry(ttl=1e12, reservation_ttl=5.0, clock=lambda: now[0])
    now[0] = 10.0
    reg3.apply_message({**base, "at": 10.0, **enc.encode("k", 12, 0.5)})
    reg3.reserve("i", "s")
    reg3.apply_message({**base, "at": 10.5, **enc.encode("k", 14, 0.5)})
    assert reg3.aggregate("s", "instance") == {"i": 13}


def _opened_registry(now):
    reg = S.SlotRegistry(ttl=1e12, reservation_ttl=5.0, clock=lambda: now[0])
    base = {"zone": "z", "host": "h", "instance": "i", "service": "s", "region": "r"}

    def report(at, free, opened):
        m = {"s": slotcodec.encode_log2(free), "m": slotcodec.encode_log10(free), "q": 0,
             "exact": free, "opened": opened}
        return reg.apply_message({**base, "at": at, **m})
    return reg, report


def test_opened_releases_the_slots_that_connected_although_sessions_ended():
    """Count 12, 4 slots handed out, then count 14 (all 4 connected, 6 others ended): the
    count alone cannot tell them from clients still to come (they keep counting for the
    ttl: 10 free); opened 100 -> 104 says all 4 are in the count (14 free)."""
    now = [10.0]
    reg, report = _opened_registry(now)
    report(10.0, 12, 100)
    for t in (10.1, 10.2, 10.3, 10.4):
        now[0] = t
        reg.reserve("i", "s")
    now[0] = 11.0
    reg.reserve("i", "s")                                    # after the next reading
    assert report(10.9, 14, 104).opened == 104
    assert reg.aggregate("s", "instance") == {"i": 13}      # only the one at 11.0 counts
    # only 2 of them opened: the 2 oldest are in the count, the others still count
    now[0] = 10.0
    reg, report = _opened_registry(now)
    report(10.0, 12, 100)
    for t in (10.1, 10.2, 10.3, 10.4):
        now[0] = t
        reg.reserve("i", "s")
    report(10.9, 14, 102)
    assert reg.aggregate("s", "instance") == {"i": 12}
    assert sorted(reg._reserved[("i", "s")]) == [10.3, 10.4]
    now[0] = 15.45                                           # their time to connect ends
    assert reg.aggregate("s", "instance") == {"i": 14}


def test_opened_without_a_baseline_a_restart_or_out_of_order_releases_nothing():
    now = [10.0]
    reg, report = _opened_registry(now)
    reg.reserve("i", "s")
    report(10.5, 12, 7)                     # the first opened: a baseline only
    assert reg.aggregate("s", "instance") == {"i": 11}
    now[0] = 11.0
    reg.reserve("i", "s")
    report(11.5, 12, 3)                     # the VNF restarted (3 < 7): a new baseline
    assert reg.aggregate("s", "instance") == {"i": 10}
    report(11.2, 12, 9)                     # older than the last report: ignored
    assert reg.aggregate("s", "instance") == {"i": 10}
    report(11.8, 12, 5)                     # 2 opened since the restart's baseline
    assert reg.aggregate("s", "instance") == {"i": 12}
    # more opened than slots handed out (sessions not through this resolver): all released,
    # none handed out after the reading
    now[0] = 12.0
    reg.reserve("i", "s")
    report(11.9, 11, 50)
    assert reg.aggregate("s", "instance") == {"i": 10}
    # a bucket update (no exact count) carries no opened: nothing to match
    assert reg.apply_message({"zone": "z", "host": "h", "instance": "i", "service": "s",
                              "region": "r", "at": 12.5, "s": 5, "m": 2, "q": 0}).opened is None
    reg.forget("i")
    assert ("i", "s") not in reg._opened


@pytest.mark.parametrize("wire", ["compact", "json"])
def test_agent_carries_opened_to_the_registry(wire):
    """A slot agent's source reads the VNF's opened: it rides the exact updates (compact:
    modulo OPENED_MOD in the record; JSON: the full value) through the real notifier and
    listener (in-process transport) and releases the registry's handed-out slots; a change
    of opened alone (same count) is sent too."""
    import time
    import uuid

    import oslo_messaging as messaging
    from oslo_config import cfg

    from fluidvim.common.slotnotify import SlotAgent, SlotPublisher
    from fluidvim.orchestrator.notify import SlotListener

    conf = cfg.ConfigOpts()
    conf([])
    transport = messaging.get_notification_transport(conf, url="fake:/")
    topic = f"slots_opened_{uuid.uuid4().hex[:8]}"
    reg = S.SlotRegistry(ttl=3600, reservation_ttl=3600)
    listener = SlotListener(transport, topic, reg)
    listener.start()
    pub = SlotPublisher(transport, "fvo.test", topic, min_interval=0.0, wire=wire)

    class Source:
        name, region, host_name = "z", "r", "h"
        slots = {"i1": {"service": "svc", "free": 10, "opened": slotcodec.OPENED_MOD + 5}}

        def instance_slots(self):
            return self.slots

    def wait_for(pred, what):
        end = time.monotonic() + 10
        while not pred():
            assert time.monotonic() < end, f"timed out waiting for {what}"
            time.sleep(0.01)

    try:
        agent = SlotAgent(Source(), pub)
        assert agent.tick() == 1
        wait_for(lambda: reg.reports(), "the first update")
        assert reg.reports()[0].opened == (slotcodec.OPENED_MOD + 5 if wire == "json" else 5)
        for _ in range(3):
            reg.reserve("i1", "svc")
        time.sleep(0.01)
        Source.slots["i1"] = {"service": "svc", "free": 10, "opened": slotcodec.OPENED_MOD + 7}
        assert agent.tick() == 1                        # opened moved, the count did not
        wait_for(lambda: reg.aggregate("svc", "instance") == {"i1": 9}, "2 released")
        assert agent.tick() == 0                        # nothing new
    finally:
        listener.stop()
        transport.cleanup()
