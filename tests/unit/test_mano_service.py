# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NS deploy/delete in the orchestrator, in-process: validation before anything is created,
networks + services + placement-deployed instances with NICs on the virtual links, the record in
the database (survives a restart), and complete rollback when a launch fails midway.

The zone is an in-memory fake that behaves like the local zone where it matters (NICs need an
existing network, a network with NICs cannot be deleted, a VNF can reject its configuration):
the real local zone with QEMU is tests/integration/test_mano.py.
"""

import itertools
from types import SimpleNamespace

import pytest

from fluidvim.common.zonetypes import InstanceInfo, LaunchRequest, NetworkInfo, ZoneError
from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.exception import InvalidRequest, NotFound, Refused
from fluidvim.orchestrator.mano import descriptors as d
from fluidvim.orchestrator.osm import conf as osmconf
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.zones.synthetic import SyntheticZone, make_fleet, seed_cache

from .test_mano_descriptors import pkg  # noqa: F401 - the descriptor package fixture


class MemoryZone(SyntheticZone):
    """Networks and VNFs in memory, with the local zone's rules."""

    kind = "local"
    kernel_source = "file"          # zonetypes.KERNEL_FILE
    in_process = True               # the orchestrator's default zone, as the local one
    _ids = itertools.count(1)

    def __init__(self, name, hosts, **kw):
        super().__init__(name, hosts, launch_ms=[50.0], **kw)
        # the launch core's [vnf] kernel, as the local zone has it (offered as image
        # "fluidvim-vnf" when the file exists; tests set it)
        self.mgr = SimpleNamespace(kernel="/nonexistent/fluidvim-vnf.elf")
        self.nets: dict[str, NetworkInfo] = {}
        self.vnfs: dict[str, LaunchRequest] = {}
        self.statuses: dict[str, str] = {}      # instance id -> status other than "running"
        self.launches = []

    def networks(self):
        return list(self.nets.values())

    def create_network(self, name):
        net = self.nets.setdefault(f"br-{name}", NetworkInfo(id=f"br-{name}", name=name,
                                                             zone=self.name))
        return net

    def delete_network(self, network_id):
        net = self.nets.get(network_id)
        if net is None:
            return
        if net.ports:
            raise ZoneError(f"network: {net.name!r} still has NICs attached")
        del self.nets[network_id]

    def launch(self, req):
        self.launches.append(req)
        for br in req.bridges:
            if br is not None and br not in self.nets:
                raise ZoneError(f"bridge {br!r} does not exist")
        if "Reject" in req.click_config:
            raise ZoneError(f"zone {self.name}: launch of {req.service} failed: configure: "
                            "unknown element class 'Reject'")
        vid = f"vnf{next(self._ids)}"
        self.vnfs[vid] = req
        for i, br in enumerate(req.bridges):
            if br is not None:
                self.nets[br].ports.append(f"{vid}-{i}")
        return InstanceInfo(id=vid, name=f"{req.service}.{vid}", service=req.service,
                            host=self._hosts[0].name, status="running",
                            slots_total=req.slots or 1024, launch_ms=1.0)

    def terminate(self, instance_id):
        req = self.vnfs.pop(instance_id, None)
        for net in self.nets.values():
            net.ports = [p for p in net.ports if not p.startswith(f"{instance_id}-")]
        return req

    def instances(self):
        return [InstanceInfo(id=k, name=k, service=v.service, host="h",
                             status=self.statuses.get(k, "running"))
                for k, v in self.vnfs.items()]


@pytest.fixture
def orch_factory(db_url):
    """Orchestrators on one database: SQLite, then PostgreSQL (conftest ``db_url``)."""
    zones, types, labels = make_fleet(1, 1, n_env_types=1)
    zone = MemoryZone("mem", zones[0].hosts())
    made = []

    def make():
        conf = orchconf.make_conf(connection=db_url, local_zone=False)
        o = Orchestrator(conf, zones=[zone], power=lambda z, h: 1.0)
        seed_cache(o.placement.stage1.cache, [zone], types)
        made.append(o)
        return o

    make.zone = zone
    yield make
    for o in made:
        o.close()


def bundle(pkg, nsd, *vnfds):  # noqa: F811
    """What a client sends: the documents with the files they refer to (read client-side)."""
    docs = [d.Document(v, f"vnfd{i}.yaml", str(pkg.dir)) for i, v in enumerate(vnfds)]
    n = d.Document(nsd, "nsd.yaml", str(pkg.dir))
    try:
        d.build_plan(n, docs)
    except d.DescriptorError:
        pass                           # sent anyway: the orchestrator must refuse it too
    return n.to_dict(), [x.to_dict() for x in docs]


def nothing_created(orch, zone):
    assert orch.store.services() == []
    assert orch.store.network_services() == []
    assert orch.store.instances(statuses=None) == []
    assert zone.nets == {} and zone.vnfs == {} and zone.launches == []


def test_image_by_name_from_images_dir_and_the_launch_cores_kernel(orch_factory, pkg,  # noqa: F811
                                                                     tmp_path):
    """A VNFD naming its image (OSM's rule) gets the kernel file of that name in the zone:
    [osm_vim] images_dir/<name>.elf, or the launch core's kernel for default_image_name."""
    orch = orch_factory()
    zone = orch_factory.zone
    images = tmp_path / "images"
    images.mkdir()
    (images / "vnf-firewall.elf").write_bytes(b"\x7fELF firewall kernel")
    osmconf.register_opts(orch.conf)                  # as the VIM API does (idempotent)
    orch.conf.set_override("images_dir", str(images), group="osm_vim")
    zone.mgr.kernel = pkg.kernel_path
    nsd, fw, fwd = pkg.docs()
    fw["vnfd"]["sw-image-desc"][0]["image"] = "vnf-firewall"
    fwd["vnfd"]["sw-image-desc"][0]["image"] = "fluidvim-vnf"
    try:
        r = orch.ns.deploy(*bundle(pkg, nsd, fw, fwd), name="named")
        kernels = {req.service: req.kernel for req in zone.vnfs.values()}
        assert kernels == {"named-fw": str(images / "vnf-firewall.elf"),
                           "named-fwd": pkg.kernel_path}
        svc = {s["name"]: s for s in orch.list_services()}["named-fw"]       # scale/heal use it
        assert svc["kernel"] == str(images / "vnf-firewall.elf")
        orch.ns.delete(r["name"])
        fw["vnfd"]["sw-image-desc"][0]["image"] = "vnf-router"
        with pytest.raises(InvalidRequest, match=r"no image named 'vnf-router' \(it has "
                           r"fluidvim-vnf, vnf-firewall\); put vnf-router.elf into \[osm_vim\] "
                           r"images_dir") as e:
            orch.ns.deploy(*bundle(pkg, nsd, fw, fwd), name="named2")
        assert e.value.field == "kernel"
    finally:
        zone.mgr.kernel = "/nonexistent/fluidvim-vnf.elf"


def test_deploy_show_restart_delete(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    nsd, vnfds = bundle(pkg, *pkg.docs())
    r = orch.ns.deploy(nsd, vnfds, name="chain1")
    assert r["status"] == "running" and r["zone"] == "mem" and r["error"] is None
    assert sorted(r["services"]) == ["chain1-fw", "chain1-fwd"]
    assert {n["link"]: n["name"] for n in r["networks"]} == {
        "left": "chain1-left", "middle": "chain1-middle", "right": "chain1-right"}
    assert all(n["exists"] for n in r["networks"])
    # NICs in cpd order on the right networks, through placement (one decision per instance)
    by_service = {req.service: req for req in zone.vnfs.values()}
    assert by_service["chain1-fw"].bridges == ("br-chain1-left", "br-chain1-middle")
    assert by_service["chain1-fwd"].bridges == ("br-chain1-middle", "br-chain1-right")
    assert by_service["chain1-fw"].memory_mb == 32 and by_service["chain1-fw"].slots == 64
    assert by_service["chain1-fw"].kernel == pkg.kernel_path
    ports = {n["link"]: len(n["ports"]) for n in r["networks"]}
    assert ports == {"left": 1, "middle": 2, "right": 1}
    for i in r["instances"]:
        assert i["status"] == "running"
        assert orch.explain(i["decision_id"])["status"] == "deployed"
    svc = {s["name"]: s for s in orch.list_services()}["chain1-fw"]
    assert svc["requirements"] == {"zones": ["mem"]} and svc["deadline_ms"] == 100.0
    assert svc["max_queuing_delay_s"] == 5.0
    assert [s["step"].split(":")[0] for s in r["steps"]][:4] == [
        "validated 2 VNF(s), 3 virtual link(s) for zone mem", "network left", "network middle",
        "network right"]
    assert [x["name"] for x in orch.ns.list()] == ["chain1"]
    # a second NS of the same name is refused; another name is fine
    with pytest.raises(InvalidRequest) as e:
        orch.ns.deploy(nsd, vnfds, name="chain1")
    assert e.value.field == "name"
    # the record survives a restart of the orchestrator
    orch.close()
    orch2 = orch_factory()
    again = orch2.ns.show("chain1")
    assert again["status"] == "running" and again["instances"] == r["instances"]
    assert orch2.ns.show(r["id"][:8])["name"] == "chain1"
    out = orch2.ns.delete("chain1")
    assert out == {"deleted": "chain1", "id": r["id"]}
    assert zone.vnfs == {} and zone.nets == {} and orch2.store.services() == []
    assert orch2.store.instances() == []
    assert orch2.ns.list() == [] and orch2.ns.list(deleted=True)[0]["status"] == "deleted"
    with pytest.raises(NotFound):
        orch2.ns.delete("chain1")
    # the name is free again
    assert orch2.ns.deploy(nsd, vnfds, name="chain1")["status"] == "running"
    orch2.ns.delete("chain1")


def test_launch_failure_midway_rolls_everything_back(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    nsd, fw, fwd = pkg.docs()
    fwd["vnfd"]["vdu"][0].pop("cloud-init-file")
    fwd["vnfd"]["vdu"][0]["cloud-init"] = "FromDevice(0) -> Reject -> ToDevice(1);"
    with pytest.raises(Refused) as e:
        orch.ns.deploy(*bundle(pkg, nsd, fw, fwd), name="bad")
    msg = e.value.message
    assert "instance 1/1 of bad-fwd failed" in msg and "unknown element class 'Reject'" in msg
    assert "rolled back" in msg
    assert len(zone.launches) == 2                  # fw launched, then fwd failed
    assert zone.vnfs == {} and zone.nets == {}
    assert orch.store.services() == [] and orch.store.instances() == []
    (rec,) = orch.ns.list()
    assert rec["status"] == "failed" and "Reject" in rec["error"]
    assert orch.ns.delete("bad")["deleted"] == "bad"        # nothing left to remove
    assert orch.ns.list() == []


def test_bad_input_creates_nothing(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    nsd, fw, fwd = pkg.docs()
    bad = [("sw-image-desc", lambda: fw["vnfd"]["vdu"][0].update({"sw-image-desc": "fwimg"}),
            "vnfd.vdu[0].sw-image-desc")]
    for _, mutate, path in bad:
        mutate()
        with pytest.raises(InvalidRequest) as e:
            orch.ns.deploy(*bundle(pkg, nsd, fw, fwd))
        assert e.value.field == path and "vnfd0.yaml: " + path in e.value.message
        nothing_created(orch, zone)
    cases = []
    nsd, fw, fwd = pkg.docs()
    fw["vnfd"]["sw-image-desc"][0]["image"] = "vnf-firewall"          # a Glance name
    cases.append(((nsd, fw, fwd), {}, InvalidRequest, "kernel"))
    nsd, fw, fwd = pkg.docs()
    fw["vnfd"]["vdu"][0]["configurable-properties"][0]["value"] = 10 ** 6   # schema-valid
    cases.append(((nsd, fw, fwd), {}, InvalidRequest,
                  "vnfd.vdu[0].configurable-properties[0].value"))
    cases.append((pkg.docs(), {"zone": "atlantis"}, NotFound, "zone"))
    cases.append((pkg.docs(), {"name": "x" * 41}, InvalidRequest, "name"))
    for docs, kw, exc, field in cases:
        with pytest.raises(exc) as e:
            orch.ns.deploy(*bundle(pkg, *docs), **kw)
        assert field in (getattr(e.value, "field", "") or e.value.message), e.value.message
        nothing_created(orch, zone)
    with pytest.raises(InvalidRequest) as e:
        orch.ns.deploy({"doc": {}}, "not a list")
    assert e.value.field == "vnfds"
    # a service of that name exists already: refused before anything is created
    orch.register_service("fw-chain-fwd", "FromDevice(0) -> Discard;")
    with pytest.raises(InvalidRequest) as e:
        orch.ns.deploy(*bundle(pkg, *pkg.docs()))
    assert e.value.field == "name" and "service 'fw-chain-fwd'" in e.value.message
    assert [s.name for s in orch.store.services()] == ["fw-chain-fwd"]
    assert zone.nets == {} and zone.launches == [] and orch.store.network_services() == []
    orch.remove_service("fw-chain-fwd")
    # a network of one of its names exists (not the NS's: it must not adopt and later delete it)
    zone.create_network("fw-chain-middle")
    with pytest.raises(InvalidRequest) as e:
        orch.ns.deploy(*bundle(pkg, *pkg.docs()))
    assert e.value.field == "name" and "fw-chain-middle already exist" in e.value.message
    assert list(zone.nets) == ["br-fw-chain-middle"] and zone.launches == []
    assert orch.store.services() == [] and orch.store.network_services() == []


def test_zone_without_networks_is_refused_up_front(tmp_path, pkg):  # noqa: F811
    zones, types, _ = make_fleet(1, 1, n_env_types=1)
    conf = orchconf.make_conf(connection=f"sqlite:///{tmp_path}/o.sqlite", local_zone=False)
    orch = Orchestrator(conf, zones=zones, power=lambda z, h: 1.0)
    try:
        with pytest.raises(InvalidRequest) as e:
            orch.ns.deploy(*bundle(pkg, *pkg.docs()))
        assert e.value.field == "zone" and "cannot create the NS's virtual links" in \
            e.value.message
        assert orch.store.network_services() == [] and orch.store.services() == []
    finally:
        orch.close()


def test_restart_during_deploy_without_its_operation_rolls_it_back(orch_factory,  # noqa: F811
                                                                     pkg):  # noqa: F811
    # a deploy recorded without its operation (an older orchestrator's) cannot be resumed: the
    # restarted orchestrator rolls it back as a survivor does a dead peer's (mano/resume.py)
    orch = orch_factory()
    row = orch.store.add_ns(name="half", nsd_id="x", zone="mem", status="deploying",
                            networks={"left": {"id": "br-half-left", "name": "half-left"}})
    orch_factory.zone.create_network("half-left")
    orch.close()
    orch2 = orch_factory()
    assert orch2.ns.list() == []
    assert orch_factory.zone.nets == {}                  # what it had created is gone
    assert orch2.store.network_service(row.id).status == "deleted"
