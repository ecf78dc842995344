# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim.orchestrator.power: sources, fallback chain, attribution, placement helpers.

RAPL and a BMC cannot exist on this machine: RAPL is a fake powercap sysfs tree whose counters
advance (and wrap) between samples, the BMC is a small Redfish HTTP service on localhost that
sushy talks to for real (basic auth, service root, Systems, Chassis, Power / EnvironmentMetrics).
"""

from __future__ import annotations

import base64
import csv
import http.server
import json
import math
import threading

import pytest
from oslo_config import cfg

from fluidvim.common.zonetypes import HostInfo
from fluidvim.evaluator.model import EnvironmentType
from fluidvim.orchestrator import power

# ---------------------------------------------------------------------------------------------
# fakes
# ---------------------------------------------------------------------------------------------

class FakeHost:
    """A powercap tree + proc tree whose counters advance when the code under test sleeps."""

    def __init__(self, tmp_path, packages=2, max_range=2 ** 32):
        self.sys = tmp_path / "powercap"
        self.proc = tmp_path / "proc"
        self.proc.mkdir()
        self.t = 100.0
        self.energy = {}
        self.max_range = max_range
        for n in range(packages):
            d = self.sys / f"intel-rapl:{n}"
            d.mkdir(parents=True)
            (d / "name").write_text(f"package-{n}\n")
            (d / "max_energy_range_uj").write_text(f"{max_range}\n")
            self.energy[d] = 1000
            sub = self.sys / f"intel-rapl:{n}:0"           # subzone: part of the package
            sub.mkdir()
            (sub / "name").write_text("core\n")
            (sub / "energy_uj").write_text("999999\n")
        # user nice system idle iowait irq softirq steal
        self.cpu = [1000, 0, 500, 8000, 100, 0, 0, 0]
        self.pids = {}
        self.write()
        self.watts_per_package = 50.0
        self.busy_frac = 0.25

    def write(self):
        for d, e in self.energy.items():
            (d / "energy_uj").write_text(f"{e}\n")
        (self.proc / "stat").write_text(
            "cpu  " + " ".join(map(str, self.cpu)) + "\ncpu0 1 2 3 4 5 6 7 8\nintr 1 2 3\n")
        for pid, (ut, st) in self.pids.items():
            (self.proc / str(pid)).mkdir(exist_ok=True)
            # comm with a space and a ')' to check the parser splits after the last ')'
            fields = ["S", "1", "1", "1", "0", "-1", "4194560", "0", "0", "0", "0", str(ut), str(st),
                      "0", "0", "20", "0", "1", "0", "123", "1000", "10"]
            (self.proc / str(pid) / "stat").write_text(f"{pid} (qemu sys) x) " + " ".join(fields) + "\n")

    def advance(self, dt, vnf_ticks=None):
        self.t += dt
        for d in self.energy:
            self.energy[d] = (self.energy[d] + int(self.watts_per_package * dt * 1e6)) % self.max_range
        ticks = int(100 * dt * 2)                          # 2 CPUs at 100 Hz
        busy = int(ticks * self.busy_frac)
        self.cpu[0] += busy * 2 // 3
        self.cpu[2] += busy - busy * 2 // 3
        self.cpu[3] += ticks - busy
        for pid, share in (vnf_ticks or {}).items():
            ut, st = self.pids[pid]
            self.pids[pid] = (ut + int(busy * share), st)
        self.write()

    def clock(self):
        return self.t


class FakeBMC:
    """A minimal Redfish service (DMTF schema shapes): basic auth and, unless ``sessions=False``,
    the SessionService (POST Sessions -> X-Auth-Token + Location, DELETE ends it); a changing
    power reading. ``auth_seen`` records how each authenticated GET was authorised."""

    def __init__(self, env_metrics=False, user="admin", password="secret", sessions=True):
        self.watts = 231.0
        self.env_metrics = env_metrics
        self.user, self.password, self.sessions = user, password, sessions
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.tokens: dict = {}                                  # token -> session id
        self.requests, self.auth_seen = [], []
        self.cleanup: list = []
        bmc = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, code, doc=None, headers=()):
                body = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                if doc is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("OData-Version", "4.0")
                self.end_headers()
                self.wfile.write(body)

            def authorised(self):
                if self.headers.get("X-Auth-Token") in bmc.tokens:
                    bmc.auth_seen.append("session")
                    return True
                if self.headers.get("Authorization") == bmc.auth:
                    bmc.auth_seen.append("basic")
                    return True
                self.reply(401, {"error": {"code": "Base.1.8.InsufficientPrivilege",
                                           "message": "authentication required"}},
                           [("WWW-Authenticate", 'Basic realm="bmc"')])
                return False

            def do_POST(self):
                path = self.path.rstrip("/")
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if not bmc.sessions or path != "/redfish/v1/SessionService/Sessions":
                    return self.reply(405, {"error": {"code": "Base.1.8.ActionNotSupported",
                                                      "message": f"POST {path} not allowed"}})
                if (body.get("UserName"), body.get("Password")) != (bmc.user, bmc.password):
                    return self.reply(401, {"error": {"code": "Base.1.8.NoValidSession",
                                                      "message": "bad credentials"}})
                sid = str(len(bmc.tokens) + 1)
                token = f"tok-{sid}-{threading.get_ident()}"
                bmc.tokens[token] = sid
                loc = f"/redfish/v1/SessionService/Sessions/{sid}"
                self.reply(201, {"@odata.id": loc, "@odata.type": "#Session.v1_3_0.Session", "Id": sid,
                                 "Name": "User Session", "UserName": bmc.user},
                           [("X-Auth-Token", token), ("Location", loc)])

            def do_DELETE(self):
                sid = self.path.rstrip("/").rsplit("/", 1)[-1]
                for t, s in list(bmc.tokens.items()):
                    if s == sid:
                        del bmc.tokens[t]
                self.reply(204)

            def do_GET(self):
                bmc.requests.append(self.path)
                path = self.path.split("?")[0].rstrip("/")
                if path != "/redfish/v1" and not self.authorised():
                    return
                doc = bmc.resource(path)
                if doc is None:
                    return self.reply(404, {"error": {"code": "Base.1.8.ResourceNotFound",
                                                      "message": f"{self.path} not found"}})
                self.reply(200, doc)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def resource(self, path):
        r = "/redfish/v1"
        chassis = {"@odata.id": f"{r}/Chassis/1U", "@odata.type": "#Chassis.v1_14_0.Chassis",
                   "Id": "1U", "Name": "Computer System Chassis", "ChassisType": "RackMount",
                   "PowerState": "On",
                   "Links": {"ComputerSystems": [{"@odata.id": f"{r}/Systems/437XR1138R2"}]}}
        if self.env_metrics:
            chassis["EnvironmentMetrics"] = {"@odata.id": f"{r}/Chassis/1U/EnvironmentMetrics"}
        else:
            chassis["Power"] = {"@odata.id": f"{r}/Chassis/1U/Power"}
        docs = {
            r: {"@odata.id": f"{r}/", "@odata.type": "#ServiceRoot.v1_11_0.ServiceRoot",
                "Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.15.0",
                "UUID": "92384634-2938-2342-8820-489239905423",
                "Systems": {"@odata.id": f"{r}/Systems"}, "Chassis": {"@odata.id": f"{r}/Chassis"},
                "SessionService": {"@odata.id": f"{r}/SessionService"},
                "Links": {"Sessions": {"@odata.id": f"{r}/SessionService/Sessions"}}},
            f"{r}/SessionService": {"@odata.id": f"{r}/SessionService",
                                    "@odata.type": "#SessionService.v1_1_8.SessionService",
                                    "Id": "SessionService", "Name": "Session Service",
                                    "ServiceEnabled": self.sessions,
                                    "Sessions": {"@odata.id": f"{r}/SessionService/Sessions"}},
            f"{r}/Systems": {"@odata.id": f"{r}/Systems",
                             "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
                             "Name": "Computer System Collection", "Members@odata.count": 1,
                             "Members": [{"@odata.id": f"{r}/Systems/437XR1138R2"}]},
            f"{r}/Systems/437XR1138R2": {
                "@odata.id": f"{r}/Systems/437XR1138R2",
                "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
                "Id": "437XR1138R2", "Name": "WebFrontEnd483", "SystemType": "Physical",
                "PowerState": "On", "Links": {"Chassis": [{"@odata.id": f"{r}/Chassis/1U"}]}},
            f"{r}/Chassis": {"@odata.id": f"{r}/Chassis",
                             "@odata.type": "#ChassisCollection.ChassisCollection",
                             "Name": "Chassis Collection", "Members@odata.count": 1,
                             "Members": [{"@odata.id": f"{r}/Chassis/1U"}]},
            f"{r}/Chassis/1U": chassis,
            f"{r}/Chassis/1U/Power": {
                "@odata.id": f"{r}/Chassis/1U/Power", "@odata.type": "#Power.v1_7_1.Power",
                "Id": "Power", "Name": "Power",
                "PowerControl": [{"@odata.id": f"{r}/Chassis/1U/Power#/PowerControl/0", "MemberId": "0",
                                  "Name": "System Input Power", "PowerConsumedWatts": self.watts,
                                  "PowerCapacityWatts": 800}],
                "PowerSupplies": [{"@odata.id": f"{r}/Chassis/1U/Power#/PowerSupplies/0",
                                   "MemberId": "0", "Name": "PSU 1", "PowerCapacityWatts": 800,
                                   "LastPowerOutputWatts": self.watts - 10}]},
            f"{r}/Chassis/1U/EnvironmentMetrics": {
                "@odata.id": f"{r}/Chassis/1U/EnvironmentMetrics",
                "@odata.type": "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics",
                "Id": "EnvironmentMetrics", "Name": "Chassis Environment Metrics",
                "PowerWatts": {"DataSourceUri": f"{r}/Chassis/1U/Sensors/PowerWatts",
                               "Reading": self.watts}},
        }
        if self.env_metrics:
            del docs[f"{r}/Chassis/1U/Power"]
        return docs.get(path)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        for fn in self.cleanup:                                 # clients log out first
            fn()
        assert not self.tokens, f"BMC sessions left open: {self.tokens}"
        self.server.shutdown()
        self.server.server_close()


def make_conf(**overrides):
    conf = cfg.ConfigOpts()
    power.register_opts(conf)
    conf([])
    for k, v in overrides.items():
        conf.set_override(k, v, group="power")
    return conf


CSV = power.default_csv_path()


# ---------------------------------------------------------------------------------------------
# curves
# ---------------------------------------------------------------------------------------------

def test_packaged_csv_has_every_system_with_11_points():
    lib = power.SpecpowerLibrary()
    with open(CSV) as f:
        rows = list(csv.DictReader(f))
    assert len(lib) == len(rows) == 499
    for r in rows[:20]:
        c = lib.curve(r["system_id"])
        assert c.points == tuple(float(r[f"w_{p}"]) for p in range(0, 101, 10))


def test_specpower_known_rows_and_interpolation():
    lib = power.SpecpowerLibrary()
    c = lib.curve("spec0120")             # Acer AT350 F1: 88.5, 107, 118, ..., 145 @50, 154 @60, 193
    assert c.info["model"] == "Acer AT350 F1"
    assert c.watts(0.0) == 88.5
    assert c.watts(0.5) == 145.0
    assert c.watts(1.0) == 193.0
    assert c.watts(0.55) == pytest.approx(149.5)          # halfway between 145 and 154
    assert c.watts(0.05) == pytest.approx((88.5 + 107.0) / 2)
    d = lib.curve("spec0122")             # Inspur NF5180M6: 156 idle, 680 at full load
    assert d.watts(0.0) == 156.0 and d.watts(1.0) == 680.0
    assert d.watts(0.75) == pytest.approx((410.0 + 514.0) / 2)


def test_specpower_bad_input_names_the_fix():
    lib = power.SpecpowerLibrary()
    with pytest.raises(power.PowerError, match="not in .*specpower_curves.csv"):
        lib.curve("nope")
    with pytest.raises(power.PowerError, match="need 11 points"):
        power.SpecpowerCurve([1, 2, 3])
    with pytest.raises(power.PowerError, match="u must be in 0..1"):
        lib.curve("spec0120").watts(1.5)
    with pytest.raises(power.PowerError, match="idle_watts and max_watts"):
        power.LinearModel(None, 200)


def test_csv_without_curve_columns_is_refused(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("system_id,w_0\na,1\n")
    with pytest.raises(power.PowerError, match="missing columns"):
        power.SpecpowerLibrary(str(p))


def test_linear():
    m = power.LinearModel(100, 300)
    assert m.watts(0) == 100 and m.watts(0.25) == 150 and m.watts(1) == 300


# ---------------------------------------------------------------------------------------------
# RAPL
# ---------------------------------------------------------------------------------------------

def test_rapl_sums_packages_not_subzones(tmp_path):
    fake = FakeHost(tmp_path, packages=2)
    src = power.RaplSource(str(fake.sys), interval_s=2.0, proc_root=str(fake.proc),
                           sleep=fake.advance, clock=fake.clock)
    assert [p.rsplit("/", 1)[1] for p in src.zones] == ["intel-rapl:0", "intel-rapl:1"]
    u, w = src.sample()
    assert w == pytest.approx(100.0)                       # 2 packages x 50 W
    assert u == pytest.approx(0.25)
    assert src.measured_watts() == pytest.approx(100.0)


def test_rapl_wraparound(tmp_path):
    fake = FakeHost(tmp_path, packages=1, max_range=262143328850)
    d = next(iter(fake.energy))
    fake.energy[d] = 262143328850 - 20_000_000            # 20 J before the counter wraps
    fake.write()
    src = power.RaplSource(str(fake.sys), interval_s=1.0, proc_root=str(fake.proc),
                           sleep=fake.advance, clock=fake.clock)
    u, w = src.sample()                                     # 50 J in 1 s crosses the wrap
    assert fake.energy[d] < 262143328850 - 20_000_000       # it did wrap
    assert w == pytest.approx(50.0)


def test_rapl_models_from_samples(tmp_path):
    fake = FakeHost(tmp_path, packages=1)
    prior = power.LinearModel(10, 110)
    src = power.RaplSource(str(fake.sys), interval_s=1.0, proc_root=str(fake.proc), prior=prior,
                           sleep=fake.advance, clock=fake.clock)
    assert src.watts(0.5) == 60.0                            # no sample yet: the prior
    fake.busy_frac, fake.watts_per_package = 0.25, 40.0
    src.sample()                                             # one sample: prior scaled through it
    assert src.watts(0.25) == pytest.approx(40.0)
    assert src.watts(0.5) == pytest.approx(60.0 * 40.0 / 35.0)
    fake.busy_frac, fake.watts_per_package = 0.75, 80.0
    src.sample()                                             # two utilisations: a fitted line
    assert src.watts(0.25) == pytest.approx(40.0, rel=0.02)
    assert src.watts(0.75) == pytest.approx(80.0, rel=0.02)
    assert src.watts(1.0) == pytest.approx(100.0, rel=0.03)


def test_rapl_absent_or_unreadable(tmp_path):
    with pytest.raises(power.PowerError, match="no RAPL zones"):
        power.RaplSource(str(tmp_path / "nothing"))
    # the real sysfs of this machine (no powercap here, see ARCHITECTURE.md): clear error, no crash
    try:
        power.RaplSource("/sys/class/powercap", interval_s=0.01)
    except power.PowerError as e:
        assert "RAPL" in str(e) or "powercap" in str(e)


# ---------------------------------------------------------------------------------------------
# Redfish through sushy against a fake BMC
# ---------------------------------------------------------------------------------------------

def test_redfish_power_control():
    with FakeBMC() as bmc:
        src = power.RedfishSource(bmc.url + "/redfish/v1", "admin", "secret",
                                  prior=power.LinearModel(100, 300))
        bmc.cleanup.append(src.close)
        assert src.measured_watts() == 231.0
        bmc.watts = 250.5
        assert src.measure_at(0.5) == 250.5                  # a fresh reading, not a cache
        assert src.watts(0.5) == pytest.approx(250.5)
        assert "/redfish/v1/Chassis/1U/Power" in bmc.requests
        assert "/redfish/v1/Systems/437XR1138R2" in bmc.requests


def test_redfish_session_auth_and_fallback():
    with FakeBMC() as bmc:
        src = power.RedfishSource(bmc.url, "admin", "secret", auth="session")
        assert src.measured_watts() == 231.0
        assert bmc.tokens and set(bmc.auth_seen) == {"session"}
        src.close()
        assert not bmc.tokens                                     # the session was ended
    with FakeBMC(sessions=False) as bmc:                         # a BMC without sessions
        src = power.RedfishSource(bmc.url, "admin", "secret", auth="auto")
        bmc.cleanup.append(src.close)
        assert src.measured_watts() == 231.0
        assert "basic" in bmc.auth_seen
        with pytest.raises(power.PowerError, match="redfish .*"):
            power.RedfishSource(bmc.url, "admin", "secret", auth="session")
    with pytest.raises(power.PowerError, match="auth must be one of"):
        power.RedfishSource("http://127.0.0.1:1", "a", "b", auth="kerberos")


def test_redfish_environment_metrics_and_system_id():
    with FakeBMC(env_metrics=True) as bmc:
        src = power.RedfishSource(bmc.url, "admin", "secret",
                                  system_id="/redfish/v1/Systems/437XR1138R2")
        bmc.cleanup.append(src.close)
        assert src.measured_watts() == 231.0
        assert "/redfish/v1/Chassis/1U/EnvironmentMetrics" in bmc.requests


def test_redfish_errors_are_clear():
    with FakeBMC() as bmc:
        with pytest.raises(power.PowerError, match="redfish .*(401|Unauthori|Access)"):
            power.RedfishSource(bmc.url, "admin", "wrong")
        with pytest.raises(power.PowerError, match="redfish .*"):
            power.RedfishSource(bmc.url, "admin", "secret", system_id="/redfish/v1/Systems/nope")
    with pytest.raises(power.PowerError, match="redfish_url"):
        power.RedfishSource("")


# ---------------------------------------------------------------------------------------------
# the chain
# ---------------------------------------------------------------------------------------------

def test_chain_falls_back_in_order_and_says_why(tmp_path):
    conf = make_conf(rapl_root=str(tmp_path / "none"), specpower_system_id="spec0120",
                     idle_watts=50, max_watts=150)
    res = power.build_chain(conf)
    assert res.source == "specpower"
    assert "no RAPL zones" in res.reasons["rapl"]
    assert "redfish_url" in res.reasons["redfish"]
    assert "linear" not in res.reasons                       # not tried: a better source won
    assert "rapl: no RAPL zones" in res.report()
    assert res.model.watts(0.5) == 145.0

    conf.set_override("specpower_system_id", None, group="power")
    res = power.build_chain(conf)
    assert res.source == "linear" and "specpower_system_id" in res.reasons["specpower"]
    assert res.model.watts(0.5) == 100.0

    conf.set_override("idle_watts", None, group="power")
    with pytest.raises(power.PowerError, match="no power source works: rapl: .*linear: .*idle_watts"):
        power.build_chain(conf)


def test_chain_prefers_measured_sources_with_model_prior(tmp_path):
    fake = FakeHost(tmp_path, packages=1)
    conf = make_conf(rapl_root=str(fake.sys), proc_root=str(fake.proc), rapl_interval_s=1.0,
                     specpower_system_id="spec0120")
    res = power.build_chain(conf, sleep=fake.advance)
    assert res.source == "rapl" and res.reasons == {"rapl": ""}
    assert isinstance(res.model.prior, power.SpecpowerCurve)
    assert res.model.samples                                 # it measured while being chosen

    with FakeBMC() as bmc:
        conf.set_override("rapl_root", str(tmp_path / "none"), group="power")
        conf.set_override("redfish_url", bmc.url, group="power")
        conf.set_override("redfish_username", "admin", group="power")
        conf.set_override("redfish_password", "secret", group="power")
        res = power.build_chain(conf)
        assert res.source == "redfish" and "no RAPL zones" in res.reasons["rapl"]
        bmc.cleanup.append(res.model.close)
        assert res.model.measured_watts() == 231.0
        # the operator's order wins over "measured is better"
        conf.set_override("sources", ["specpower", "redfish"], group="power")
        assert power.build_chain(conf).source == "specpower"


def test_chain_host_points_and_model_for_host():
    conf = make_conf(sources=["specpower", "linear"], idle_watts=1, max_watts=2)
    pts = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110]
    assert power.build_chain(conf, points=pts).model.watts(0.35) == 45.0
    env = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")
    h = HostInfo(name="h1", env=env, power_system_id="spec0122")
    assert power.model_for_host(h, conf).watts(1.0) == 680.0
    h2 = HostInfo(name="h2", env=env)
    assert power.model_for_host(h2, conf).watts(1.0) == 2.0


# ---------------------------------------------------------------------------------------------
# attribution
# ---------------------------------------------------------------------------------------------

def test_proc_reader_and_attribution(tmp_path):
    fake = FakeHost(tmp_path, packages=1)
    fake.pids = {4242: (100, 50), 4343: (7, 3)}
    fake.write()
    rd = power.ProcReader(str(fake.proc))
    assert rd.process_ticks(4242) == 150
    t = rd.host_ticks()
    assert t.total == sum(fake.cpu) and t.busy == t.total - fake.cpu[3] - fake.cpu[4]
    with pytest.raises(power.PowerError, match="process 99 does not exist"):
        rd.process_ticks(99)

    model = power.LinearModel(100, 300)

    def sleep(dt):
        fake.advance(dt, vnf_ticks={4242: 0.5, 4343: 0.1})

    out = power.sample_vnf_power(model, [4242, 4343], interval_s=10.0, proc_root=str(fake.proc),
                                 sleep=sleep)
    host_w = model.watts(0.25)                               # the fake runs at 25 % busy
    assert out[4242].host_util == pytest.approx(0.25)
    assert out[4242].share == pytest.approx(0.5)
    assert out[4242].watts == pytest.approx(host_w * 0.5)
    assert out[4343].watts == pytest.approx(host_w * 0.1)
    dyn = power.sample_vnf_power(model, [4242], interval_s=10.0, proc_root=str(fake.proc),
                                 idle_w=100.0, sleep=sleep)
    assert dyn[4242].watts == pytest.approx((host_w - 100.0) * 0.5)


def test_attribution_with_rapl_measures_the_same_interval(tmp_path):
    fake = FakeHost(tmp_path, packages=2)                       # 2 x 50 W, 25 % busy
    fake.pids = {4242: (0, 0)}
    fake.write()
    rapl = power.RaplSource(str(fake.sys), proc_root=str(fake.proc), prior=power.LinearModel(0, 1),
                            sleep=fake.advance, clock=fake.clock)
    out = power.sample_vnf_power(rapl, [4242], interval_s=4.0, proc_root=str(fake.proc),
                                 sleep=lambda dt: fake.advance(dt, vnf_ticks={4242: 0.5}))
    assert out[4242].host_watts == pytest.approx(100.0)         # measured, not the prior's 0.25 W
    assert out[4242].watts == pytest.approx(50.0)
    assert rapl.samples[-1] == (pytest.approx(0.25), pytest.approx(100.0))


def test_attribute_watts():
    assert power.attribute_watts(200, 30, 120) == 50.0
    assert power.attribute_watts(200, 0, 120) == 0.0
    assert power.attribute_watts(200, 10, 0) == 0.0
    assert power.attribute_watts(200, 30, 120, idle_w=100) == 25.0
    with pytest.raises(power.PowerError, match="non-negative"):
        power.attribute_watts(-1, 1, 1)


def test_attribution_of_a_real_process():
    """This test process's own CPU time against the real /proc (no power source needed)."""
    import os
    rd = power.ProcReader()
    assert rd.process_ticks(os.getpid()) >= 0
    assert rd.host_ticks().total > 0


# ---------------------------------------------------------------------------------------------
# placement helpers
# ---------------------------------------------------------------------------------------------

def fleet():
    lib = power.SpecpowerLibrary()
    return [
        power.FleetHost("old", lib.curve("spec0123"), capacity=8),      # 187 W idle, flat curve
        power.FleetHost("acer", lib.curve("spec0120"), capacity=16),
        power.FleetHost("inspur", lib.curve("spec0122"), capacity=128),
    ]


def test_marginal_watts():
    c = power.SpecpowerLibrary().curve("spec0120")
    assert power.marginal_watts(c, 0.5, 0.1) == pytest.approx(154.0 - 145.0)
    assert power.marginal_watts(c, 0.95, 0.1) == math.inf
    with pytest.raises(power.PowerError, match="u_added"):
        power.marginal_watts(c, 0.5, -0.1)


def test_pabfd_picks_least_power_increase():
    hosts = fleet()
    for h, load in zip(hosts, (4, 8, 64)):
        h.add("base", load)                                   # 50 % each
    demand = 1.0
    expect = {h.name: power.marginal_watts(h.model, h.u, demand / h.capacity) for h in hosts}
    # per unit of CPU the 128-thread Inspur adds least, the 8-thread 2007 Fujitsu most
    assert min(expect, key=expect.get) == "inspur"
    assert power.pabfd_choose(hosts, demand).name == "inspur"
    assert power.pabfd_choose(hosts, demand, exclude={"inspur"}).name == "acer"
    assert power.first_fit(hosts, demand).name == "old"
    assert power.worst_fit(hosts, demand).name == "inspur"
    assert power.pabfd_choose(hosts, 200.0) is None           # fits nowhere


def test_pabfd_counts_waking_a_sleeping_host():
    lib = power.SpecpowerLibrary()
    a = power.FleetHost("a", lib.curve("spec0120"), capacity=16)
    b = power.FleetHost("b", lib.curve("spec0120"), capacity=16, asleep=True)
    a.add("x", 8)
    assert power.host_marginal(b, 1.0) == pytest.approx(lib.curve("spec0120").watts(1 / 16))
    assert power.pabfd_choose([a, b], 1.0).name == "a"
    a.u_max = 0.5                                              # a is full at its threshold
    assert power.pabfd_choose([a, b], 1.0).name == "b"


def test_consolidation_plan():
    lib = power.SpecpowerLibrary()
    hosts = [power.FleetHost(f"h{i}", lib.curve("spec0120"), capacity=16, u_max=0.8) for i in range(3)]
    hosts[0].add("a", 2)
    hosts[1].add("b", 3)
    hosts[2].add("c", 6)
    before = power.fleet_watts(hosts)
    plan = power.consolidation_plan(hosts, u_low=0.5)
    assert plan.sleep == ["h0", "h1"]                          # least loaded first, both fit on h2
    assert {m.vnf for m in plan.migrations} == {"a", "b"}
    assert plan.watts_before == pytest.approx(before)
    assert plan.watts_after == pytest.approx(lib.curve("spec0120").watts(11 / 16))
    assert plan.saved_watts > 0
    assert power.fleet_watts(hosts) == pytest.approx(before)  # not applied
    power.consolidation_plan(hosts, u_low=0.5, apply=True)
    assert [h.asleep for h in hosts] == [True, True, False] and hosts[2].used == 11


def test_consolidation_plan_keeps_the_room_the_forecast_wants():
    lib = power.SpecpowerLibrary()

    def hosts():
        hs = [power.FleetHost(f"h{i}", lib.curve("spec0120"), capacity=16, u_max=0.8)
              for i in range(3)]
        for h, n in zip(hs, (2, 3, 6)):
            h.add(f"v{h.name}", n)
        return hs
    # free room by u_max: 10.8 + 9.8 + 6.8 = 27.4; emptying h0 leaves 14.6, then h1 1.8
    assert power.consolidation_plan(hosts(), u_low=0.5).sleep == ["h0", "h1"]
    assert power.consolidation_plan(hosts(), u_low=0.5, keep=1.8).sleep == ["h0", "h1"]
    assert power.consolidation_plan(hosts(), u_low=0.5, keep=5).sleep == ["h0"]
    kept = power.consolidation_plan(hosts(), u_low=0.5, keep=20)
    assert kept.sleep == [] and kept.migrations == [] and kept.saved_watts == 0


def test_consolidation_plan_does_not_pack_receivers_into_the_steep_top_of_their_curve():
    lib = power.SpecpowerLibrary()
    c = lib.curve("spec0598")              # 2x Xeon 8280, 112 threads: 283 W at 80 %, 422 at 100
    assert power.efficient_utilisation(c) == 0.8

    def hosts(small):
        hs = [power.FleetHost(f"h{i}", c, capacity=112) for i in range(2)]
        for k in range(80):
            hs[0].add(f"a{k}", 1.0)
        for k in range(small):
            hs[1].add(f"b{k}", 1.0)
        return hs
    # by u_max alone 30 VNFs go onto the host at 71 %, which ends at 98 %, for a few watts
    packed = power.consolidation_plan(hosts(30), u_low=0.3)
    assert packed.sleep == ["h1"] and 0 < packed.saved_watts < c.watts(0.0)
    # with its fill limit against the best host to wake (one like it, at 80 %) it takes 9
    limit = power.fill_limit(c, 112, power.unit_watts(c, 112))
    assert limit == 89
    capped = power.consolidation_plan(hosts(30), u_low=0.3, fill=1.0)
    assert capped.sleep == [] and capped.migrations == []
    small = power.consolidation_plan(hosts(9), u_low=0.3, fill=1.0)
    assert small.sleep == ["h1"] and len(small.migrations) == 9
    # the caps are the plan's: the hosts keep their own u_max
    hs = hosts(30)
    power.consolidation_plan(hs, u_low=0.3, fill=1.0)
    assert [h.u_max for h in hs] == [1.0, 1.0]


def test_consolidation_plan_priced_by_busy_threads_lets_idle_vnfs_fill_a_steep_top():
    # rx: most efficient at 50 % (3 W a thread), steep above; small: 30 W idle, 2 idle VNFs
    rx = power.SpecpowerCurve([10, 11, 12, 13, 14, 15, 20, 25, 30, 35, 40])      # 10 threads
    small = power.SpecpowerCurve([30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80])
    assert power.fill_limit(rx, 10, power.unit_watts(rx, 10)) == 5

    def hosts():
        hs = [power.FleetHost("rx", rx, capacity=10), power.FleetHost("small", small,
                                                                     capacity=10)]
        for k in range(4):
            hs[0].add(f"r{k}", 1.0)
        for k in range(2):
            hs[1].add(f"s{k}", 1.0)
        return hs
    busy = {"r0": 1.0, "r1": 1.0, "r2": 1.0, "r3": 0.5, "s0": 0.0, "s1": 0.0}
    # every VNF priced as a busy thread: rx takes one more VNF up to its fill limit (5 of 10),
    # small cannot be emptied
    held = power.consolidation_plan(hosts(), u_low=0.3, fill=power.Fill(1.0))
    assert held.sleep == [] and held.migrations == []
    # by busy threads: small's VNFs are idle, rx holds 3.5 busy threads, takes both (6 VNFs
    # of 10 threads, busy 3.5 <= 5) and small's 30 W go for ~nothing
    hs = hosts()
    plan = power.consolidation_plan(hs, u_low=0.3, fill=power.Fill(1.0, busy=busy))
    assert plan.sleep == ["small"] and len(plan.migrations) == 2
    assert {m.dst for m in plan.migrations} == {"rx"}
    assert plan.watts_before == pytest.approx(rx.watts(0.35) + small.watts(0.0))
    assert plan.watts_after == pytest.approx(rx.watts(0.35))
    assert [sorted(h.load) for h in hs] == [["r0", "r1", "r2", "r3"], ["s0", "s1"]]  # no apply
    # busy VNFs are held to the fill limit: with 1.0 busy each small's two do not fit in 1.5
    busy_s = {**busy, "s0": 1.0, "s1": 1.0}
    full = power.consolidation_plan(hosts(), u_low=0.3, fill=power.Fill(1.0, busy=busy_s))
    assert full.sleep == [] and full.migrations == []
    # a VNF not named is priced as its whole load; apply changes the fleet
    hs = hosts()
    done = power.consolidation_plan(hs, u_low=0.3, apply=True,
                                    fill=power.Fill(1.0, busy={"s0": 0.0, "s1": 0.0,
                                                               "r3": 0.0}))
    assert done.sleep == ["small"] and len(hs[0].load) == 6 and not hs[1].load


def test_consolidation_plan_priced_by_busy_threads_survives_float_drift():
    # an attempt undone (not worth its wake) takes back 0.3 + 0.2 + 0.1 from an idle receiver:
    # -2.8e-17 left, which the next attempt must read as 0 (a utilisation below 0 raised)
    lib = power.SpecpowerLibrary()
    c = lib.curve("spec0120")
    hs = [power.FleetHost(n, c, capacity=16) for n in ("rx", "a", "b")]
    for k in range(8):
        hs[0].add(f"r{k}", 1.0)
    for k in range(3):
        hs[1].add(f"a{k}", 1.0)
    hs[2].add("b0", 1.0)
    busy = {**{f"r{k}": 0.0 for k in range(8)}, "a0": 0.3, "a1": 0.2, "a2": 0.1, "b0": 0.0}
    plan = power.consolidation_plan(hs, u_low=0.5, horizon_s=1.0, wake_j=lambda h: 1e9,
                                    fill=power.Fill(1.0, busy=busy))
    assert plan.sleep == [] and plan.watts_after == pytest.approx(plan.watts_before)


def test_consolidation_plan_caps_receivers_against_the_host_to_wake_when_given():
    # a receiver most efficient at 50 % (3 W a thread), 5 W a step above; a full efficient
    # host; a small host to empty
    rx = power.SpecpowerCurve([10, 11, 12, 13, 14, 15, 20, 25, 30, 35, 40])      # 10 threads
    full = power.SpecpowerCurve([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110])
    small = power.SpecpowerCurve([30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80])
    assert power.efficient_utilisation(rx) == 0.5
    assert power.unit_watts(rx, 10) == pytest.approx(3.0)

    def hosts():
        hs = [power.FleetHost("full", full, capacity=10), power.FleetHost("rx", rx, capacity=10),
              power.FleetHost("small", small, capacity=10)]
        for name, n in (("full", 10), ("rx", 5), ("small", 2)):
            h = next(h for h in hs if h.name == name)
            for k in range(n):
                h.add(f"{name}{k}", 1.0)
        return hs
    # against the best host of the plan (rx itself, 3 W a thread) rx stays at 50 %: no room
    held = power.consolidation_plan(hosts(), u_low=0.3, fill=1.0)
    assert held.sleep == [] and held.migrations == []
    # the host out of service to wake instead costs 6 W a VNF: past 50 % rx's VNFs cost 5 W
    # each, so it takes the small host's two and the small host sleeps
    assert power.fill_limit(rx, 10, 6.0) == 10
    moved = power.consolidation_plan(hosts(), u_low=0.3, fill=power.Fill(1.0, 6.0))
    assert moved.sleep == ["small"] and {m.dst for m in moved.migrations} == {"rx"}
    assert moved.saved_watts == pytest.approx(small.watts(0.2) - (rx.watts(0.7) - rx.watts(0.5)))
    # nothing out of service (inf): against the best host of the plan, as without it
    assert power.consolidation_plan(hosts(), u_low=0.3,
                                    fill=power.Fill(1.0, math.inf)).sleep == []


def _plan_by_brute_force(hosts, u_low):
    """consolidation_plan as first written (whole-fleet PABFD per VNF, whole-fleet watts per
    attempt): the reference the incremental plan must match, decision for decision."""
    sleeping = {h.name for h in hosts if h.asleep and not h.load}
    emptied, migrations = [], []
    for src in sorted((h for h in hosts if h.load and h.u <= u_low), key=lambda h: (h.u, h.name)):
        if not src.load or src.u > u_low:
            continue
        snapshot = {h.name: dict(h.load) for h in hosts}
        w0 = power.fleet_watts(hosts)
        moves, ok = [], True
        for vnf, d in sorted(src.load.items(), key=lambda kv: -kv[1]):
            dst = power.pabfd_choose(hosts, d, exclude={src.name, *emptied, *sleeping})
            if dst is None:
                ok = False
                break
            dst.add(vnf, d)
            moves.append((vnf, src.name, dst.name))
        if ok:
            src.load.clear()
            src.asleep = True
            if power.fleet_watts(hosts) < w0:
                emptied.append(src.name)
                migrations.extend(moves)
                continue
        for h in hosts:
            h.load = snapshot[h.name]
        src.asleep = False
    return emptied, migrations


def _random_fleet(seed: int, n: int = 40):
    """``n`` hosts drawn from the SPECpower library (a tenth asleep), each up to half full of
    VNFs of 0.5-2 threads; the same fleet for the same seed."""
    import random
    lib = power.SpecpowerLibrary()
    ids = lib.ids()
    r = random.Random(seed)
    hosts = []
    for i in range(n):
        sid = r.choice(ids)
        cap = int(float(lib.rows[sid]["threads"]))
        h = power.FleetHost(f"h{i:02d}", lib.curve(sid), capacity=cap, u_max=0.9,
                            asleep=r.random() < 0.1)
        if not h.asleep:
            for k in range(r.randrange(0, max(1, cap // 2))):
                h.add(f"v{i}-{k}", r.choice((1.0, 1.0, 2.0, 0.5)))
        hosts.append(h)
    return hosts


@pytest.mark.parametrize("seed", range(8))
def test_consolidation_plan_matches_the_whole_fleet_search(seed):
    import random
    rng = random.Random(seed)
    u_low = rng.choice((0.3, 0.5, 0.7))
    plan = power.consolidation_plan(_random_fleet(seed), u_low=u_low)
    emptied, moves = _plan_by_brute_force(_random_fleet(seed), u_low)
    assert plan.sleep == emptied
    assert [(m.vnf, m.src, m.dst) for m in plan.migrations] == moves


@pytest.mark.parametrize("seed", range(6))
def test_consolidation_plan_by_busy_threads_matches_a_scan_of_every_host(seed, monkeypatch):
    """The busy-priced plan's receivers come from heaps (one per VNF size and busy share); a
    scan of every host for every VNF picks the same ones, on fleets whose VNFs share their
    host's busy share (as bench/energy's do) or each have their own."""
    import math
    import random

    from fluidvim.orchestrator.power import consolidate

    def scan(self, src, vnf, d, exclude):
        bv = self.busy.get(vnf, d)
        keys = [(self._marginal(h, d, bv), -h.u, h.name, h) for h in self.hosts
                if h.name not in exclude and h.name not in self.sleeping]
        keys = [k for k in keys if not math.isinf(k[0])]
        return min(keys, key=lambda k: k[:3])[3] if keys else None

    r = random.Random(seed)
    u_low = r.choice((0.3, 0.5, 0.7))
    busy: dict = {}
    for h in _random_fleet(seed):
        share = r.random()
        busy.update({v: (share if seed % 2 else r.random()) * d for v, d in h.load.items()})
    fill = power.Fill(1.0, busy=busy)
    plan = power.consolidation_plan(_random_fleet(seed), u_low=u_low, fill=fill)
    monkeypatch.setattr(consolidate._Busy, "receiver", scan)
    want = power.consolidation_plan(_random_fleet(seed), u_low=u_low, fill=fill)
    assert plan.sleep == want.sleep
    assert [(m.vnf, m.dst) for m in plan.migrations] == [(m.vnf, m.dst) for m in want.migrations]
    assert plan.watts_after == pytest.approx(want.watts_after)


def test_consolidation_plan_net_of_what_moving_and_waking_cost():
    lib = power.SpecpowerLibrary()
    c = lib.curve("spec0120")

    def hosts():
        hs = [power.FleetHost(f"h{i}", c, capacity=16, u_max=0.8) for i in range(2)]
        hs[0].add("a", 2)
        hs[1].add("b", 6)
        return hs
    free = power.consolidation_plan(hosts(), u_low=0.5)
    assert free.sleep == ["h0"] and free.cost_j == 0.0
    saved = free.saved_watts                                   # ~ the idle watts of h0
    # worth it when the saving over the horizon beats the move of "a" + a boot at peak power
    boot = lambda h: 260.0 * h.model.watts(1.0)                # noqa: E731
    long = power.consolidation_plan(hosts(), u_low=0.5, horizon_s=3600.0, move_j=5.0,
                                    wake_j=boot)
    assert long.sleep == ["h0"]
    assert long.cost_j == pytest.approx(5.0 + 260.0 * c.watts(1.0))
    short = power.consolidation_plan(hosts(), u_low=0.5, horizon_s=60.0, move_j=5.0,
                                     wake_j=boot)
    assert short.sleep == [] and short.migrations == []
    assert saved * 60.0 < 260.0 * c.watts(1.0)


def test_scale_in_order_takes_first_from_the_host_that_spends_the_most_watts_per_vnf():
    lib = power.SpecpowerLibrary()
    a = power.FleetHost("a", lib.curve("spec0120"), capacity=16)    # 88.5 W idle, 16 threads
    b = power.FleetHost("b", lib.curve("spec0122"), capacity=128)
    d = power.FleetHost("d", lib.curve("spec0120"), capacity=16)
    for h, n in ((a, 3), (b, 3), (d, 5)):
        for k in range(n):
            h.add(f"{h.name}{k}", 1.0)
    per_vnf = {h.name: h.watts() / h.used for h in (a, b, d)}
    # b: a big server awake for 3 VNFs; a and d: the same server, a with fewer VNFs
    assert per_vnf["b"] > per_vnf["a"] > per_vnf["d"]
    assert power.scale_in_order([d, b, a]) == ["b", "a", "d"]
    # at the same watts per VNF the least loaded goes first
    e = power.FleetHost("e", lib.curve("spec0120"), capacity=16)
    for k in range(3):
        e.add(f"e{k}", 1.0)
    assert power.scale_in_order([e, a]) == ["a", "e"]
    # a host loaded beyond its fill limit (u_max) keeps its place by watts per VNF: the fill
    # limit falls when an efficient host goes off, and taking from the hosts it lowered left
    # dear ones half full (bench/energy's evening ramp-down); over_fill says how much is beyond
    d.u_max = 4 / 16
    assert power.over_fill(d) == 1.0 and power.over_fill(a) == 0.0
    assert power.scale_in_order([d, b, a]) == ["b", "a", "d"]


def test_scale_in_pick_takes_the_emptiest_instances_of_the_dearest_host_first():
    lib = power.SpecpowerLibrary()
    a = power.FleetHost("a", lib.curve("spec0120"), capacity=16)    # 3 VNFs: dear per VNF
    d = power.FleetHost("d", lib.curve("spec0120"), capacity=16)    # 5 VNFs
    for h, n in ((a, 3), (d, 5)):
        for k in range(n):
            h.add(f"{h.name}{k}", 1.0)
    mine = {"a0", "a1", "a2", "d0", "d1", "d2", "d3", "d4"}
    sessions = {"a0": 9, "a1": 0, "a2": 4, "d0": 7, "d1": 0, "d2": 3, "d3": 8, "d4": 1}
    # host a first (power.scale_in_order), its idle and emptiest instances first, then d's
    assert power.scale_in_pick([d, a], 2, mine, sessions=sessions) == ["a1", "a2"]
    assert power.scale_in_pick([d, a], 5, mine, sessions=sessions) == \
        ["a1", "a2", "a0", "d1", "d4"]
    # without counts: by name, as before
    assert power.scale_in_pick([d, a], 2, mine) == ["a0", "a1"]
    # only the service's serving instances; those draining already stay out
    assert power.scale_in_pick([d, a], 2, mine - {"a1"}, sessions=sessions,
                               leaving={"a2"}) == ["a0", "d1"]
    # of a host beyond its fill only what is beyond it (less what drains there already)
    d.u_max = 3 / 16                                 # 2 VNFs beyond
    a.u_max = 1 / 16                                 # 2 VNFs beyond, one of them draining
    assert power.scale_in_pick([d, a], 8, mine, sessions=sessions, leaving={"a1"}) == \
        ["a2", "d1", "d4"]
    assert power.scale_in_pick([d, a], 0, mine) == []


def test_efficient_utilisation_is_where_a_host_spends_the_fewest_watts_per_unit():
    lib = power.SpecpowerLibrary()
    turbo = lib.curve("spec0127")          # 2019: 252 W at 70 %, 415 W at 100 %
    flat = lib.curve("spec0120")           # 2010: 193 W at 100 %, its best watts per unit
    assert power.efficient_utilisation(turbo) == 0.7
    assert power.efficient_utilisation(flat) == 1.0
    for c in (turbo, flat):
        u = power.efficient_utilisation(c)
        assert all(c.watts(u) / u <= c.watts(v / 100) / (v / 100) + 1e-9 for v in range(1, 101))


def test_wake_order_prefers_watts_per_thread_at_load_over_idle_watts():
    lib = power.SpecpowerLibrary()
    small = power.FleetHost("small", lib.curve("spec0128"), capacity=8)     # 11.6 W idle
    big = power.FleetHost("big", lib.curve("spec0127"), capacity=112)       # 49.9 W idle
    old = power.FleetHost("old", lib.curve("spec0120"), capacity=16)        # 88.5 W idle

    def per_thread(h, u):
        return h.model.watts(u) / (u * h.capacity)
    at_best = {h.name: per_thread(h, power.efficient_utilisation(h.model))
               for h in (small, big, old)}
    assert at_best["big"] < at_best["small"] < at_best["old"]
    assert power.wake_order([old, small, big]) == ["big", "small", "old"]
    # one load for all: at full load the order is by peak watts per thread
    assert power.wake_order([old, small, big], u=1.0)[0] == min(
        (small, big, old), key=lambda h: per_thread(h, 1.0)).name
    with pytest.raises(power.PowerError, match="u must be > 0"):
        power.wake_order([big], u=0.0)


def test_fill_limit_counts_what_the_whole_addition_costs_not_its_steepest_step():
    """A curve steep between 70 and 90 % and gentle after (spec0209: 5.3 W per thread from 90
    to 100 %, 9.7 and 9.4 before): filling it from its efficient 70 % to full costs 8.1 W a
    thread on average, less than waking a host at 8.18 W a thread - filled to 32, not stopped
    at 22 by its steepest step; above that price it stops at its efficient load."""
    lib = power.SpecpowerLibrary()
    c = lib.curve("spec0209")
    assert power.efficient_utilisation(c) == pytest.approx(0.7)
    avg = (c.watts(1.0) - c.watts(22 / 32)) / 10
    step = c.watts(23 / 32) - c.watts(22 / 32)
    assert step > 8.18 > avg
    assert power.fill_limit(c, 32, 8.18) == 32
    assert power.fill_limit(c, 32, avg - 0.01) < 32
    assert power.fill_limit(c, 32, 5.0) == 22
    # a curve that only gets steeper above its efficient load (the homogeneous fleet's
    # spec0598) stops where the step rule stopped, whatever waking costs
    h = lib.curve("spec0598")

    def by_step(wake_w):
        k = int(power.efficient_utilisation(h) * 112 + 1e-9)
        while k < 112 and h.watts((k + 1) / 112) - h.watts(k / 112) <= wake_w:
            k += 1
        return k

    for wake_w in (0.0, power.unit_watts(h, 112), 3.0, 4.0, 6.0, 9.0, math.inf):
        assert power.fill_limit(h, 112, wake_w) == by_step(wake_w)


def test_fill_limit_fills_a_host_while_it_is_cheaper_than_waking_the_best_other():
    lib = power.SpecpowerLibrary()
    turbo = lib.curve("spec0127")                          # 112 threads, best at 70 %
    own = power.unit_watts(turbo, 112)                     # 252 W / 78.4 threads
    assert own == pytest.approx(252.0 / (0.7 * 112))
    # another host like it to wake: stop at 70 %, where a VNF starts to cost more than there
    assert power.fill_limit(turbo, 112, own) == 78
    assert (turbo.watts(79 / 112) - turbo.watts(78 / 112)) > own
    # nothing left to wake: fill it up; only an old 12 W-per-thread server left: fill it up too
    assert power.fill_limit(turbo, 112, math.inf) == 112
    old = lib.curve("spec0120")
    assert power.fill_limit(turbo, 112, power.unit_watts(old, 16)) == 112
    # a host is filled to its efficient load whatever waking costs (it is awake to be used)
    assert power.fill_limit(turbo, 112, 0.0) == 78
    assert power.fill_limit(old, 16, 0.0) == 16            # the old one is best full
    with pytest.raises(power.PowerError, match="demand > 0"):
        power.fill_limit(turbo, 112, 1.0, demand=0)
    # a thread kept for the host's own work (launches): never filled, whatever waking costs
    assert power.fill_limit(old, 16, math.inf, reserve=1.0) == 15
    assert power.fill_limit(turbo, 112, math.inf, reserve=1.0) == 111
    assert power.fill_limit(turbo, 112, own, reserve=1.0) == 78   # below the reserve anyway
    with pytest.raises(power.PowerError, match="reserve must be >= 0"):
        power.fill_limit(old, 16, 1.0, reserve=16)


def test_forecast_instances_follows_the_slot_trend_one_boot_ahead():
    from fluidvim.orchestrator.demand import Sample
    # used slots grow 1 per second over the last 15 min (two samples a minute), 100 slots each
    hist = [Sample(t, 1000 - t, 1000) for t in range(0, 901, 30)]        # used = t
    now = 900.0
    # in 300 s: 900 + 300 used, + the free slots the scaler keeps (rate 1/s x 30 s lead)
    assert power.forecast_instances(hist, now, 300.0, 100, lead_s=30.0) == \
        math.ceil((900 + 300 + 30) / 100) + 1
    # a headroom above rate x lead is kept instead
    assert power.forecast_instances(hist, now, 300.0, 100, lead_s=30.0, headroom=250) == \
        math.ceil((900 + 300 + 250) / 100) + 1
    # no time ahead: what the scaler wants now
    assert power.forecast_instances(hist, now, 0.0, 100) == math.ceil(900 / 100) + 1
    # falling demand is not extrapolated down (sessions ending are not demand)
    down = [Sample(t, t, 1000) for t in range(0, 901, 30)]               # used = 1000 - t
    assert power.forecast_instances(down, now, 3600.0, 100) == math.ceil(100 / 100) + 1
    # the trend is the window's: a burst older than window_s does not count
    old_burst = [Sample(0, 0, 1000)] + [Sample(t, 500, 1000) for t in range(600, 901, 30)]
    assert power.forecast_instances(old_burst, now, 300.0, 100, window_s=300.0) == 5 + 1
    assert power.forecast_instances([], now, 300.0, 100) == 0
    assert power.forecast_instances([Sample(now, 10, 10)], now, 300.0, 100) == 0
    with pytest.raises(power.PowerError, match="slots must be > 0"):
        power.forecast_instances(hist, now, 300.0, 0)
    with pytest.raises(power.PowerError, match="ahead_s >= 0"):
        power.forecast_instances(hist, now, -1.0, 100)


def test_wake_ahead_wakes_in_wake_order_until_the_room_covers_the_forecast():
    lib = power.SpecpowerLibrary()
    small = power.FleetHost("small", lib.curve("spec0128"), capacity=8)
    big = power.FleetHost("big", lib.curve("spec0127"), capacity=112)
    old = power.FleetHost("old", lib.curve("spec0120"), capacity=16)
    off = [old, small, big]
    assert power.wake_order(off) == ["big", "small", "old"]
    # the room in service covers it: nothing to wake
    assert power.wake_ahead(10, 10, off) == []
    assert power.wake_ahead(0, 0, off) == []
    # short by 5: the best host to wake covers it alone
    assert power.wake_ahead(15, 10, off) == ["big"]
    # a fill per host (what the policy fills a woken host to): the next host covers the rest
    fill = {"big": 78, "small": 8, "old": 16}
    assert power.wake_ahead(10 + 80, 10, off, fill=lambda h: fill[h.name]) == ["big", "small"]
    # more than every host takes: all of them, in order
    assert power.wake_ahead(10_000, 0, off) == ["big", "small", "old"]
    assert power.wake_ahead(5, 0, []) == []
    # keep: the scaler's next step must still find room in service beyond the shortfall
    assert power.wake_ahead(10, 10, off, keep=0) == []
    assert power.wake_ahead(10, 10, off, keep=3) == ["big"]
    assert power.wake_ahead(10, 13, off, keep=3) == []


def test_list_opts_and_entry_point():
    from importlib.metadata import entry_points
    names = {o.name for _, opts in power.list_opts() for o in opts}
    assert {"sources", "rapl_root", "redfish_url", "specpower_system_id", "idle_watts"} <= names
    eps = {e.name: e.value for e in entry_points(group="oslo.config.opts")}
    assert eps.get("fluidvim.power") == "fluidvim.orchestrator.power:list_opts"


def test_cli_reports_the_chain_and_attributes(tmp_path, capsys):
    import os
    conf = tmp_path / "f.conf"
    conf.write_text(f"[power]\nrapl_root = {tmp_path / 'none'}\nsources = rapl,redfish,linear\n"
                    "idle_watts = 80\nmax_watts = 200\n")
    assert power.main(["--config-file", str(conf), "--at", "0", "0.5",
                       "--attribute", str(os.getpid()), "--interval", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "power source: linear (linear 80-200 W)"
    assert "rapl: no RAPL zones" in out and "redfish: set [power] redfish_url" in out
    assert "P(0) = 80.0 W" in out and "P(0.5) = 140.0 W" in out
    assert f"pid {os.getpid()}: " in out
    assert power.main(["--find", "AT350"]) == 0
    assert "spec0120  Acer Incorporated Acer AT350 F1" in capsys.readouterr().out
    conf.write_text("[power]\nsources = linear\n")
    assert power.main(["--config-file", str(conf)]) == 1
    assert "linear: linear power model needs [power] idle_watts" in capsys.readouterr().err


def test_host_marginal_power_for_the_orchestrator():
    env = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="x")
    mp = power.HostMarginalPower(make_conf(sources=["specpower", "linear"]), vnf_vcpus=2)
    acer = HostInfo(name="a", env=env, cpu_util=0.5, power_system_id="spec0120")   # 16 threads
    own = HostInfo(name="b", env=env, cpu_util=0.0,
                   labels={"cpus": 4, "power_points": [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]})
    c = power.SpecpowerLibrary().curve("spec0120")
    assert mp("z", acer) == pytest.approx(c.watts(0.5 + 2 / 16) - c.watts(0.5))
    assert mp("z", own) == pytest.approx(50.0)                  # 2 of 4 CPUs on a 0..100 W line
    assert mp("z", HostInfo(name="c", env=env)) is None          # no curve configured: None
    full = HostInfo(name="d", env=env, cpu_util=0.99, power_system_id="spec0120")
    assert mp("z", full) == pytest.approx(c.watts(1.0) - c.watts(0.99))


def test_keep_awake_keeps_the_empty_hosts_whose_room_the_forecast_needs():
    # room 100 in all, 30 of it on the hosts in service with VNFs: the shortfall of 50 needs
    # one of the two empty hosts (a: 30, b: 40); powering off a (least room) leaves 70 >= 50,
    # then b would leave 30 < 50: b is kept
    assert power.keep_awake(50, 100, [("b", 40), ("a", 30)]) == ["b"]
    assert power.keep_awake(0, 100, [("b", 40), ("a", 30)]) == []         # no shortfall
    assert power.keep_awake(95, 100, [("b", 40), ("a", 30)]) == ["a", "b"]
    assert power.keep_awake(30, 100, [("b", 40), ("a", 30)]) == []         # 30 left covers it


def test_keep_awake_keeps_the_scalers_next_step_as_wake_ahead_does():
    # no shortfall, but powering off "eff" takes the room from 65 to 0 (the others' fill limits
    # fall when it becomes the best host to wake): wake_ahead(keep=4) would wake it again
    assert power.keep_awake(0, 65, [("eff", 65)]) == []                    # without keep: off
    assert power.keep_awake(0, 65, [("eff", 65)], keep=4) == ["eff"]
    assert power.keep_awake(0, 65, [("eff", 61)], keep=4) == []            # 4 left: enough
    # the same boundary as wake_ahead: a host kept here is one wake_ahead would not wake
    off = [power.FleetHost("eff", power.SpecpowerLibrary().curve("spec0120"), capacity=65)]
    assert power.wake_ahead(0, 4, off, keep=4) == []
    assert power.wake_ahead(0, 3, off, keep=4) == ["eff"]
    assert power.keep_awake(2, 10, [("a", 5)], keep=4) == ["a"]            # 5 < 2 + 4
    with pytest.raises(power.PowerError, match="keep"):
        power.keep_awake(0, 10, [("a", 5)], keep=-1)


def test_consolidation_gate_and_hosts_to_keep_are_the_loops_and_the_benchs_rule():
    assert power.consolidation_gate() is None
    assert power.consolidation_gate(growing=True) == "demand grew over the trend window"
    assert power.consolidation_gate(3).startswith("the forecast wants 3 more")
    assert power.consolidation_gate(0, waking=True) == "a host is waking"
    # room 100 (in service and waking), 60 in service; b takes 40, a 30
    loses = [("b", 40), ("a", 30)]
    assert power.hosts_to_keep(0, 100, 100, loses) == []
    assert power.hosts_to_keep(50, 100, 100, loses) == ["b"]           # 60 left < 50 + 0? no: b
    assert power.hosts_to_keep(0, 100, 60, loses, keep=25) == ["b"]    # 20 left in service < 25
    assert power.hosts_to_keep(0, 100, 60, loses, [("b", 10), ("a", 5)], keep=25) == []
    assert power.hosts_to_keep(0, 100, 60, loses, [("b", 40), ("a", 36)], keep=25) == ["a", "b"]


def test_shortfall_peak_is_the_largest_of_the_last_window():
    peak = power.ShortfallPeak(260.0)
    assert peak.peak() == 0.0                                  # nothing noted
    assert peak.note(0.0, 40) == 40
    assert peak.note(30.0, 0) == 40                            # a flat minute: still 40
    assert peak.note(200.0, 12) == 40
    assert peak.peak(260.0) == 40                              # exactly a window later: kept
    assert peak.note(261.0, 5) == 12                           # 40 is older than the window
    assert peak.note(470.0, -3) == 5                           # a negative shortfall counts 0
    assert peak.peak(1000.0) == 0.0
    with pytest.raises(power.PowerError, match="window_s"):
        power.ShortfallPeak(-1.0)


def test_wake_unit_watts_shares_the_idle_watts_among_the_vnfs_it_wakes_for():
    lib = power.SpecpowerLibrary()
    turbo = power.FleetHost("turbo", lib.curve("spec0127"), capacity=112)
    small = power.FleetHost("small", lib.curve("spec0128"), capacity=8)
    # woken for a few VNFs, a host costs its idle watts and more per VNF: far above its
    # efficient-load unit watts, which assume it is filled
    for_two = power.wake_unit_watts([turbo], 2)
    assert for_two == pytest.approx(turbo.model.watts(2 / 112) / 2)
    assert for_two > 5 * power.unit_watts(turbo.model, 112)
    # the least over the hosts; a host takes no more than its capacity
    both = power.wake_unit_watts([turbo, small], 2)
    assert both == min(for_two, small.model.watts(2 / 8) / 2)
    assert power.wake_unit_watts([small], 100) == pytest.approx(small.model.watts(1.0) / 8)
    # the more VNFs, the cheaper each
    assert power.wake_unit_watts([turbo], 50) < for_two
    assert power.wake_unit_watts([turbo], 0) == math.inf
    assert power.wake_unit_watts([], 3) == math.inf
    # a host in service fills beyond its efficient load against a wake for a few VNFs
    own = power.unit_watts(turbo.model, 112)
    assert power.fill_limit(turbo.model, 112, for_two) > power.fill_limit(turbo.model, 112, own)


def test_wake_persist_wakes_only_a_shortfall_named_rounds_in_a_row():
    once = power.WakePersist()
    assert once.note(["a"]) == ["a"]                           # rounds=1: at once
    twice = power.WakePersist(2)
    assert twice.note(["a"]) == []                             # one round: the trend's noise
    assert twice.note([]) == []                                # gone: counting starts again
    assert twice.note(["a"]) == []
    assert twice.note(["a", "b"]) == ["a", "b"]                # two in a row: woken
    assert twice.note(["b"]) == ["b"]                          # and while it lasts
    for bad in (0, -1, 1.5):
        with pytest.raises(power.PowerError, match="rounds"):
            power.WakePersist(bad)
