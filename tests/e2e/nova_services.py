# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Real OpenStack services around the fluidvim Nova driver, for the end-to-end test and by hand.

Starts, as separate processes from the installed PyPI packages: Keystone, Placement, Glance,
nova-api (WSGI apps served by Werkzeug's threaded server, see ``serve``), nova-conductor,
nova-scheduler and nova-compute with ``compute_driver = fluidvim.UnikernelDriver``, on
127.0.0.1:18700-18704 (the pytest cloud: five free ports), with SQLite databases under a work
directory and the shared RabbitMQ (a vhost ``fvn-<tag>`` of its own). Then the unmodified
``openstack`` CLI can boot VNFs::

    sudo tools/nova-e2e.sh                 # the user-level scenario, then everything is removed
    sudo tools/nova-e2e.sh --keep          # leave the services up and print the OS_* exports
    sudo .venv/bin/python -m tests.e2e.nova_services stop --workdir /tmp/fvn-nova-e2e

Authentication is real Keystone (keystone-manage bootstrap on SQLite, Fernet tokens): the CLI
needs a service catalog to find compute, image and placement, and the services validate tokens with
keystonemiddleware. Every service uses the bootstrap admin as its service user (one test cloud).

Neutron is real when it is installed (``pip install -e .[e2e]``) and Open vSwitch is
(openvswitch-switch): the neutron API (``neutron.wsgi.api``, served like the others),
``neutron-rpc-server`` and ``neutron-openvswitch-agent`` (ML2/OVS, networks of type ``local``, the
``openvswitch`` firewall) for the compute host, on an Open vSwitch of the cloud's own
(:class:`fluidvim.vnf.ovs.OvsServer` under ``<workdir>/ovs``, userspace ``netdev`` datapath: no
kernel module here) with an integration bridge named per run; its database is SQLite, created
from Neutron's models (``neutron-db-manage upgrade`` needs MySQL or PostgreSQL: its migrations
alter tables in ways SQLite cannot) and stamped at the migration head. nova-compute plugs the
servers' ``ovs`` ports through os-vif into that bridge and Neutron notifies Nova of
``network-vif-plugged``. Without Neutron, ``neutron-standin`` answers the read-only queries
nova makes for ``--nic none`` servers (on delete, on network info refresh) as Neutron does for a
server without ports (empty lists, 404 for anything it does not model, 401 without a token).

SQLite: the databases are switched to WAL, and the Nova services (several processes sharing
nova_api and cell1) start with ``tests/e2e/nova_sqlite`` on their PYTHONPATH (BEGIN IMMEDIATE, 30 s
busy timeout; see its sitecustomize.py). Each run starts from a fresh work dir, a fresh vhost and
a fresh launch-core run dir (``/run/fluidvim-fvn-e2e-<tag>``), the tag new per run and kept in
``<workdir>/stack.json`` for ``stop``; logs stay in ``<workdir>/logs`` after the run. The pytest
cloud has a work dir and ports of its own too, so two runs (or a killed run's leftover services)
do not meet.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from tests import clirun

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
BIN = VENV / "bin"
HOST = "127.0.0.1"
BASE_PORT = 18700
SERVICES = ("keystone", "placement", "glance", "neutron", "nova-api")     # the HTTP ones
PORTS = {svc: BASE_PORT + i for i, svc in enumerate(SERVICES)}          # `up`/`run` by hand
WSGI_APPS = {"keystone": "keystone.wsgi.api:application",
             "placement": "placement.wsgi.api:application",
             "glance": "glance.wsgi.api:application",
             "nova-api": "nova.wsgi.osapi_compute:application",
             "neutron": "tests.e2e.nova_services:neutron_standin"}
NEUTRON_APP = "neutron.wsgi.api:application"
PREFIX = "fvn"
RABBIT = "guest:guest@127.0.0.1:5672"
ADMIN_PASSWORD = "fvn-admin-secret"
REGION = "RegionOne"
COMPUTE_HOST = "fvn-e2e-compute"
DEFAULT_WORKDIR = "/tmp/fvn-nova-e2e"


def real_neutron_missing() -> str | None:
    """Why this machine cannot run the real Neutron of the cloud, or None."""
    if importlib.util.find_spec("neutron") is None:
        return "neutron is not installed (pip install -e .[e2e])"
    for tool in ("ovs-vswitchd", "ovsdb-server", "ovs-vsctl", "ovs-ofctl"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (apt-get install openvswitch-switch)"
    return None


# --- database templates -----------------------------------------------------------------------
# what a service's database set-up leaves in a work dir (relative paths), kept per machine
TEMPLATE_FILES = {
    "keystone": ("db/keystone.db", "etc/keystone/fernet-keys", "etc/keystone/credential-keys"),
    "placement": ("db/placement.db",),
    "glance": ("db/glance.db",),
    "nova": ("db/nova_api.db", "db/nova_cell0.db", "db/nova_cell1.db"),
    "neutron": ("db/neutron.db",),
}
# the distributions whose migrations (and their machinery) make the databases
TEMPLATE_PACKAGES = ("keystone", "openstack-placement", "glance", "nova", "neutron",
                     "SQLAlchemy", "alembic", "oslo.db")


def template_versions() -> dict:
    """What a template was made from: the installed versions of :data:`TEMPLATE_PACKAGES`."""
    out = {}
    for dist in TEMPLATE_PACKAGES:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def db_template(name: str) -> Path | None:
    """Where this machine keeps service ``name``'s migrated databases: under ``$NOVA_DB_CACHE``
    (default ``$NOVA_VENV_CACHE``, default ``/var/cache/fluidvim``, like tools/nova-venv.sh's
    venvs; ``off``: none, every cloud runs the ``*-manage`` commands), keyed on the installed
    package versions and the code of the set-up commands, so an upgrade or a changed command
    makes a new one. tools/fresh-machine-ci.sh's empty Nova venv cache is an empty template
    cache: the run's first cloud builds them."""
    base = os.environ.get("NOVA_DB_CACHE") or os.environ.get("NOVA_VENV_CACHE") or \
        "/var/cache/fluidvim"
    if base == "off":
        return None
    code = "".join(inspect.getsource(f) for f in (
        Stack._databases, Stack._keystone_setup, Stack._nova_databases,
        Stack._neutron_database))
    key = hashlib.sha256(json.dumps([template_versions(), sys.version, code]).encode())
    return Path(base) / f"nova-e2e-db-{key.hexdigest()[:12]}" / name


class ServiceError(RuntimeError):
    """A service did not come up (or a set-up command failed); the message names it."""


def free_ports(services=SERVICES) -> dict:
    """A currently free loopback port per service (the kernel's choice), for a cloud that must
    not depend on 18700-18704 being free."""
    socks = []
    try:
        for _ in services:
            sock = socket.socket()
            sock.bind((HOST, 0))
            socks.append(sock)
        return {svc: sock.getsockname()[1] for svc, sock in zip(services, socks)}
    finally:
        for sock in socks:
            sock.close()


# --- the Neutron stand-in -------------------------------------------------------------------
def neutron_standin(environ, start_response):
    """What Neutron's API answers about a deployment with no networks and no ports."""
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD", "GET")

    def reply(status, body):
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"),
                                ("Content-Length", str(len(data)))])
        return [data]

    if path in ("", "/"):
        here = f"http://{environ.get('HTTP_HOST') or environ['SERVER_NAME']}"
        return reply("200 OK", {"versions": [{"id": "v2.0", "status": "CURRENT", "links": [
            {"href": f"{here}/v2.0/", "rel": "self"}]}]})
    if not environ.get("HTTP_X_AUTH_TOKEN"):
        return reply("401 Unauthorized", {"error": {"message": "authentication required"}})
    if method == "GET":
        for name in ("ports", "networks", "subnets", "floatingips", "security_groups",
                     "extensions", "trunks", "qos_policies"):
            if path.rstrip("/") in (f"/v2.0/{name}", f"/v2.0/{name}.json"):
                return reply("200 OK", {name: []})
    return reply("404 Not Found", {"NeutronError": {
        "type": "HTTPNotFound", "detail": "",
        "message": f"{method} {path}: the fluidvim e2e Neutron stand-in has no networks or ports"}})


# --- serving a WSGI app ---------------------------------------------------------------------
def serve(app_spec: str, port: int) -> None:
    """Serve ``module:attribute`` on HOST:port with Werkzeug's threaded HTTP/1.1 server (it
    decodes chunked uploads, which Glance image uploads from openstacksdk use)."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    WSGIRequestHandler.protocol_version = "HTTP/1.1"
    module, attr = app_spec.split(":")
    sys.argv = [module]             # the services' WSGI modules parse sys.argv with oslo.config
    app = getattr(importlib.import_module(module), attr)
    server = make_server(HOST, port, app, threaded=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print(f"serving {app_spec} on http://{HOST}:{port}", flush=True)
    server.serve_forever()


# --- configuration ----------------------------------------------------------------------------
def _auth_section(name: str, keystone: str) -> str:
    return textwrap.dedent(f"""\
        [{name}]
        auth_type = password
        auth_url = {keystone}/v3
        username = admin
        password = {ADMIN_PASSWORD}
        project_name = admin
        user_domain_name = Default
        project_domain_name = Default
        region_name = {REGION}
        """)


def _authtoken(keystone: str) -> str:
    return _auth_section("keystone_authtoken", keystone) + f"www_authenticate_uri = {keystone}\n"


class Stack:
    """The services of one test cloud, their configs, logs and databases under ``workdir``."""

    def __init__(self, workdir: str | os.PathLike, kernel: str | None = None,
                 slot_capacity: int = 4, accel: str = "auto", verbose: bool = False,
                 pool_size: int = 0, ports: dict | None = None, neutron: bool | None = None):
        """``ports``: service -> port (default :data:`PORTS`, 18700-18704; see
        :func:`free_ports`; ``openflow`` is the OVS agent's OpenFlow listener, default 18710).
        ``neutron``: run the real Neutron (default: when :func:`real_neutron_missing` says
        nothing is missing), else the stand-in."""
        self.work = Path(workdir).resolve()
        self.logs = self.work / "logs"
        self.etc = self.work / "etc"
        self.ports = dict(ports or PORTS)
        tag = uuid.uuid4().hex[:8]
        self.vhost = f"{PREFIX}-{tag}"                       # RabbitMQ, this cloud's alone
        self.run_dir = f"/run/fluidvim-{PREFIX}-e2e-{tag}"   # [vnf] run_dir of nova-compute
        self.kernel = kernel
        self.slot_capacity = slot_capacity
        self.accel = accel
        self.verbose = verbose
        self.pool_size = pool_size
        self.procs: dict[str, subprocess.Popen] = {}
        self._session = None                                # see api()
        self.neutron = real_neutron_missing() is None if neutron is None else neutron
        self.of_port = self.ports.setdefault("openflow", BASE_PORT + 10)
        self.int_br = f"{PREFIX}br{tag[:6]}"                 # the integration bridge
        self.ovs = None
        if self.neutron:
            from fluidvim.vnf import ovs as ovsmod
            self.ovs = ovsmod.OvsServer(str(self.work / "ovs"))

    def url(self, svc: str) -> str:
        return f"http://{HOST}:{self.ports[svc]}"

    # paths
    def db(self, name: str) -> str:
        return f"sqlite:///{self.work / 'db' / name}.db"

    def log(self, svc: str) -> Path:
        return self.logs / f"{svc}.log"

    @property
    def nova_conf(self) -> Path:
        return self.etc / "nova" / "nova.conf"

    @property
    def compute_conf(self) -> Path:
        return self.etc / "nova" / "nova-compute.conf"

    def env(self) -> dict:
        """The OS_* environment of the admin user of this cloud (what the CLI needs)."""
        return {"OS_AUTH_URL": f"{self.url('keystone')}/v3", "OS_USERNAME": "admin",
                "OS_PASSWORD": ADMIN_PASSWORD, "OS_PROJECT_NAME": "admin",
                "OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default",
                "OS_REGION_NAME": REGION, "OS_IDENTITY_API_VERSION": "3",
                "OS_INTERFACE": "public"}

    def _say(self, msg: str) -> None:
        print(f"[nova-e2e {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def write_configs(self) -> None:
        for d in ("logs", "db", "etc/keystone/fernet-keys", "etc/keystone/credential-keys",
                  "etc/placement", "etc/glance", "etc/nova", "glance/images",
                  "glance/staging", "glance/tasks", "nova", "vnf", "locks"):
            (self.work / d).mkdir(parents=True, exist_ok=True)
        # what `stop --workdir` needs to find this cloud's host objects again
        (self.work / "stack.json").write_text(json.dumps(
            {"run_dir": self.run_dir, "vhost": self.vhost, "ports": self.ports,
             "ovs": self.ovs.run_dir if self.ovs else None}))
        keystone = self.url("keystone")
        (self.etc / "keystone" / "keystone.conf").write_text(textwrap.dedent(f"""\
            [DEFAULT]
            debug = {self.verbose}
            [database]
            connection = {self.db('keystone')}
            [token]
            provider = fernet
            [fernet_tokens]
            key_repository = {self.etc}/keystone/fernet-keys
            [fernet_receipts]
            key_repository = {self.etc}/keystone/fernet-keys
            [credential]
            key_repository = {self.etc}/keystone/credential-keys
            """))
        (self.etc / "placement" / "placement.conf").write_text(textwrap.dedent(f"""\
            [DEFAULT]
            debug = {self.verbose}
            [api]
            auth_strategy = keystone
            [placement_database]
            connection = {self.db('placement')}
            """) + _authtoken(keystone))
        paste = VENV / "etc" / "glance" / "glance-api-paste.ini"
        (self.etc / "glance" / "glance-api.conf").write_text(textwrap.dedent(f"""\
            [DEFAULT]
            debug = {self.verbose}
            enabled_backends = fs:file
            [database]
            connection = {self.db('glance')}
            [glance_store]
            default_backend = fs
            [fs]
            filesystem_store_datadir = {self.work}/glance/images
            [os_glance_staging_store]
            filesystem_store_datadir = {self.work}/glance/staging
            [os_glance_tasks_store]
            filesystem_store_datadir = {self.work}/glance/tasks
            [paste_deploy]
            flavor = keystone
            config_file = {paste}
            [oslo_concurrency]
            lock_path = {self.work}/locks
            """) + _authtoken(keystone))
        common = textwrap.dedent(f"""\
            [DEFAULT]
            debug = {self.verbose}
            host = {COMPUTE_HOST}
            my_ip = {HOST}
            state_path = {self.work}/nova
            transport_url = rabbit://{RABBIT}/{self.vhost}
            [oslo_concurrency]
            lock_path = {self.work}/locks
            [oslo_messaging_notifications]
            driver = noop
            """) + _authtoken(keystone) + "\n" + _auth_section("placement", keystone) + "\n" + \
            _auth_section("glance", keystone) + "\n" + _auth_section("neutron", keystone) + "\n"
        # the controller services (api, conductor, scheduler) reach the databases ...
        self.nova_conf.write_text(common + textwrap.dedent(f"""\
            [api]
            auth_strategy = keystone
            [wsgi]
            api_paste_config = {VENV}/etc/nova/api-paste.ini
            [api_database]
            connection = {self.db('nova_api')}
            [database]
            connection = {self.db('nova_cell1')}
            [scheduler]
            discover_hosts_in_cells_interval = -1
            """))
        # ... nova-compute does not (it goes through the conductor), like a real deployment
        kernel = f"kernel = {self.kernel}" if self.kernel else ""
        self.compute_conf.write_text(common + textwrap.dedent(f"""\
            [DEFAULT]
            compute_driver = fluidvim.UnikernelDriver
            heal_instance_info_cache_interval = -1
            [vnf]
            state_dir = {self.work}/vnf
            run_dir = {self.run_dir}
            accel = {self.accel}
            pool_size = {self.pool_size}
            [fluidvim]
            session_slot_capacity = {self.slot_capacity}
            image_cache_dir = {self.work}/nova/fluidvim-images
            """).replace("[fluidvim]", f"{kernel}\n[fluidvim]"))
        if self.neutron:
            self._neutron_configs(keystone)

    @property
    def neutron_conf(self) -> Path:
        return self.etc / "neutron" / "neutron.conf"

    @property
    def ovs_agent_conf(self) -> Path:
        return self.etc / "neutron" / "openvswitch_agent.ini"

    def _neutron_configs(self, keystone: str) -> None:
        (self.etc / "neutron").mkdir(parents=True, exist_ok=True)
        (self.work / "neutron").mkdir(exist_ok=True)
        self.neutron_conf.write_text(textwrap.dedent(f"""\
            [DEFAULT]
            debug = {self.verbose}
            core_plugin = ml2
            service_plugins =
            auth_strategy = keystone
            api_paste_config = {VENV}/etc/neutron/api-paste.ini
            transport_url = rabbit://{RABBIT}/{self.vhost}
            state_path = {self.work}/neutron
            notify_nova_on_port_status_changes = true
            notify_nova_on_port_data_changes = true
            rpc_workers = 1
            rpc_state_report_workers = 0
            [database]
            connection = {self.db('neutron')}
            [oslo_concurrency]
            lock_path = {self.work}/locks
            [ml2]
            type_drivers = local,flat,vlan
            project_network_types = local
            mechanism_drivers = openvswitch
            extension_drivers = port_security
            [securitygroup]
            firewall_driver = openvswitch
            [agent]
            root_helper = /usr/bin/env
            [ovs]
            datapath_type = netdev
            integration_bridge = {self.int_br}
            ovsdb_connection = {self.ovs.connection}
            of_listen_port = {self.of_port}
            bridge_mappings =
            """) + _authtoken(keystone) + "\n" + _auth_section("nova", keystone) + "\n")
        # the agent is the compute host's: its host name is nova-compute's
        self.ovs_agent_conf.write_text(textwrap.dedent(f"""\
            [DEFAULT]
            host = {COMPUTE_HOST}
            """))
        # os-vif's privileged helpers (MTU, qbr/veths): nova-compute runs as root here, so the
        # venv's privsep-helper directly instead of the default `sudo privsep-helper`
        with open(self.compute_conf, "a") as f:
            f.write(textwrap.dedent(f"""\
                [os_vif_ovs]
                ovsdb_connection = {self.ovs.connection}
                [vif_plug_ovs_privileged]
                helper_command = {BIN}/privsep-helper --config-file {self.compute_conf}
                """))

    # processes
    @staticmethod
    def _env(extra=None, service: bool = False) -> dict:
        """Environment of the processes of the cloud: the repo (for ``serve``) and, for the
        services (several processes writing nova_api and cell1; Keystone, Placement and Glance
        one process each, but threaded: two first logins at once ended in a 500 from Keystone,
        two computes' first reports in one from Placement) and the ``nova-manage`` commands that
        write beside them (not the *-manage migrations, which run alone and manage their own
        transactions), the SQLite transaction mode of ``tests/e2e/nova_sqlite/sitecustomize.py``."""
        env = dict(os.environ, **(extra or {}))
        paths = [str(REPO / "tests" / "e2e" / "nova_sqlite")] if service else []
        env["PYTHONPATH"] = os.pathsep.join(
            paths + [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        return env

    def _run(self, what: str, cmd: list[str], env=None, timeout=600, service=False) -> str:
        """Run a command to its end (``timeout``: a guard against a hang, not a deadline: a
        ``keystone-manage db_sync`` beside another cloud's database commands took over 120 s at
        load 20 on 2 cores); ``service``: it runs beside the Nova services and writes
        their databases (``nova-manage cell_v2 discover_hosts``), so it takes their SQLite
        transaction mode and busy timeout, not "database is locked" at once."""
        p = subprocess.run(cmd, capture_output=True, text=True,
                           env=self._env(env, service=service), timeout=timeout)
        if p.returncode:
            raise ServiceError(f"{what} failed ({' '.join(cmd)}):\n{p.stdout[-2000:]}"
                               f"{p.stderr[-4000:]}")
        return p.stdout

    def _start(self, svc: str, cmd: list[str], env=None) -> None:
        logf = open(self.log(svc), "ab")
        self.procs[svc] = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                           env=self._env(env, service=True),
                                           cwd=self.work,
                                           start_new_session=True)
        logf.close()
        (self.work / "pids").mkdir(exist_ok=True)
        (self.work / "pids" / svc).write_text(str(self.procs[svc].pid))

    def _serve(self, svc: str, env: dict) -> None:
        self._start(svc, [sys.executable, "-m", "tests.e2e.nova_services", "serve",
                          WSGI_APPS[svc], "--port", str(self.ports[svc])], env=env)

    def tail(self, svc: str, n: int = 40) -> str:
        try:
            lines = self.log(svc).read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def _fail(self, svc: str, why: str):
        raise ServiceError(f"{svc}: {why}\n--- last lines of {self.log(svc)} ---\n"
                           f"{self.tail(svc)}")

    def wait_http(self, svc: str, path: str = "/", timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            p = self.procs.get(svc)
            if p is not None and p.poll() is not None:
                self._fail(svc, f"exited with status {p.returncode} while starting")
            try:
                with urllib.request.urlopen(self.url(svc) + path, timeout=5) as r:
                    if r.status < 500:
                        return
            except urllib.error.HTTPError as e:
                if e.code < 500:
                    return          # up (e.g. 300 Multiple Choices or 401)
                last = e
            except (urllib.error.URLError, ConnectionError, OSError) as e:
                last = e
            time.sleep(0.2)
        self._fail(svc, f"not answering on {self.url(svc)}{path} after {timeout:.0f}s ({last})")

    def wait_log(self, svc: str, needle: str, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = self.procs.get(svc)
            if p is not None and p.poll() is not None:
                self._fail(svc, f"exited with status {p.returncode} while starting")
            try:
                if needle in self.log(svc).read_text(errors="replace"):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self._fail(svc, f"did not log {needle!r} within {timeout:.0f}s")

    # the whole cloud
    def start(self) -> None:
        t0 = time.monotonic()
        if self.work.exists():
            stop_workdir(self.work, quiet=True)
            shutil.rmtree(self.work)
        self._check_ports()
        self.write_configs()
        self._rabbit_vhost()
        kconf = self._databases()
        if self.neutron:
            self.ovs.start()
        self._wal()

        self._say("starting the services")
        self._serve("keystone", {"OS_KEYSTONE_CONFIG_FILES": kconf})
        self._start_controllers()           # beside Keystone's start: they need it per request
        self.wait_http("keystone", "/v3")
        self._catalog()
        self.wait_http("placement")         # nova-compute reports to it as it starts
        self._start_computes()
        if self.neutron:
            self._start_ovs_agent()
        for svc in ("glance", "neutron", "nova-api"):
            self.wait_http(svc)
        self.wait_log("nova-conductor", "Starting conductor node")
        self.wait_log("nova-scheduler", "Starting scheduler node")
        if self.neutron:
            self.wait_log("neutron-ovs-agent", "Agent initialized successfully")
        self._say("waiting for the compute node to report to Placement, then discover_hosts")
        self._wait_computes()
        nm = [str(BIN / "nova-manage"), "--config-file", str(self.nova_conf)]
        deadline = time.monotonic() + 60
        while True:
            out = self._run("nova-manage cell_v2 discover_hosts",
                            nm + ["cell_v2", "discover_hosts", "--verbose"], service=True)
            if COMPUTE_HOST in out or "Found 0 unmapped computes" not in out:
                break
            if time.monotonic() > deadline:
                self._fail("nova-compute", "never became discoverable in cell1")
            time.sleep(1)
        self._say(f"cloud up in {time.monotonic() - t0:.1f} s (logs: {self.logs})")

    def _start_ovs_agent(self) -> None:
        """neutron-openvswitch-agent, once neutron-rpc-server consumes its state-report queue:
        the agent's first call (``has_alive_neutron_server``) sent before that queue exists is
        dropped by RabbitMQ, and the agent waits out the call's 60 s timeout and a random
        back-off of up to a minute more (measured: "Agent initialized" 110 s after it started,
        nova-compute up for 108 s of them)."""
        self._wait_consumer("neutron-rpc", "q-reports-plugin")
        # privsep-helper from the venv (the agent's privileged daemons); OVS_RUNDIR: the
        # cloud's ovs-vswitchd for ovs-ofctl/ovs-appctl
        self._start("neutron-ovs-agent", [
            str(BIN / "neutron-openvswitch-agent"), "--config-file", str(self.neutron_conf),
            "--config-file", str(self.ovs_agent_conf)],
            env={"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
                 "OVS_RUNDIR": self.ovs.run_dir})

    def _wait_consumer(self, svc: str, queue: str, timeout: float = 300.0) -> None:
        """Until ``queue`` of this cloud's vhost has a consumer (``svc``'s, which must not exit
        meanwhile): a passive declare per try, over one AMQP connection."""
        import amqp

        user, rest = RABBIT.split(":", 1)
        password, host = rest.split("@", 1)
        deadline = time.monotonic() + timeout
        with amqp.Connection(host=host, userid=user, password=password,
                             virtual_host=self.vhost) as conn:
            conn.connect()
            while True:
                p = self.procs.get(svc)
                if p is not None and p.poll() is not None:
                    self._fail(svc, f"exited with status {p.returncode} while starting")
                ch = conn.channel()
                try:
                    if ch.queue_declare(queue, passive=True).consumer_count:
                        ch.close()
                        return
                    ch.close()
                except amqp.exceptions.NotFound:
                    pass                            # the broker closed that channel
                if time.monotonic() > deadline:
                    self._fail(svc, f"no consumer on queue {queue} within {timeout:.0f}s")
                time.sleep(0.2)

    def _start_controllers(self) -> None:
        """Placement, Glance, Neutron (its API and RPC server, or the stand-in), nova-api,
        -conductor and -scheduler: none needs Keystone or another service to start."""
        self._serve("placement", {"OS_PLACEMENT_CONFIG_DIR": str(self.etc / "placement")})
        self._serve("glance", {"OS_GLANCE_CONFIG_DIR": str(self.etc / "glance")})
        if self.neutron:
            nenv = {"OS_NEUTRON_CONFIG_DIR": str(self.etc / "neutron"),
                    "OS_NEUTRON_CONFIG_FILES": "neutron.conf"}
            self._start("neutron", [sys.executable, "-m", "tests.e2e.nova_services", "serve",
                                    NEUTRON_APP, "--port", str(self.ports["neutron"])], env=nenv)
            self._start("neutron-rpc", [str(BIN / "neutron-rpc-server"), "--config-file",
                                        str(self.neutron_conf)])
        else:
            self._serve("neutron", {})
        self._serve("nova-api", {"OS_NOVA_CONFIG_DIR": str(self.etc / "nova")})
        for svc in ("nova-conductor", "nova-scheduler"):
            self._start(svc, [str(BIN / svc), "--config-file", str(self.nova_conf)])

    def _wait_computes(self) -> None:
        """Until nova-compute has its compute node record (a cloud with more computes waits
        for each, so that one ``discover_hosts`` maps them all)."""
        self.wait_log("nova-compute", "Starting compute node")
        self.wait_log("nova-compute", "Compute node record created")

    def _start_computes(self) -> None:
        """nova-compute (a cloud with more computes starts them all here, at once)."""
        self._start("nova-compute", [str(BIN / "nova-compute"), "--config-file",
                                     str(self.compute_conf)])

    def _databases(self) -> str:
        """Every service's database, each service's chain of commands in a thread of its own:
        separate SQLite files and processes, so Keystone's, Placement's, Glance's, Nova's and
        Neutron's migrations overlap instead of running one after the other; each from its
        template when the machine has one (:meth:`_from_template`). Returns Keystone's config
        file."""
        pconf = str(self.etc / "placement" / "placement.conf")
        gconf = str(self.etc / "glance" / "glance-api.conf")
        chains = {
            "keystone": self._keystone_setup,
            "placement": lambda: self._run("placement-manage db sync", [
                str(BIN / "placement-manage"), "--config-file", pconf, "db", "sync"]),
            "glance": lambda: self._run("glance-manage db_sync", [
                str(BIN / "glance-manage"), "--config-file", gconf, "db_sync"]),
            "nova": self._nova_databases,
        }
        if self.neutron:
            chains["neutron"] = self._neutron_database
        self._say(f"databases: {', '.join(chains)} at once")
        with concurrent.futures.ThreadPoolExecutor(len(chains)) as pool:
            futures = {name: pool.submit(self._from_template, name, chain)
                       for name, chain in chains.items()}
        for f in futures.values():
            f.result()
        # nova's WSGI app reads <dir>/api-paste.ini and <dir>/nova.conf
        shutil.copy(VENV / "etc" / "nova" / "api-paste.ini", self.etc / "nova")
        return str(self.etc / "keystone" / "keystone.conf")

    def _from_template(self, name: str, build) -> None:
        """Service ``name``'s databases (and Keystone's key repositories) copied from this
        machine's template (:func:`db_template`), or made by ``build`` (its ``*-manage``
        commands: ~6 CPU-s of imports each, ~75 CPU-s and most of a cloud's start for all of
        them) and then kept as the template. One cloud builds a template at a time (a lock
        file): a second cloud starting beside it waits and copies. What names this cloud
        (Keystone's endpoint URL, Nova's cell mappings: database paths, the RabbitMQ vhost)
        is rewritten in the copy (:meth:`_adopt`)."""
        tdir = db_template(name)
        try:
            if tdir is not None:
                tdir.parent.mkdir(parents=True, exist_ok=True)
                lock = open(f"{tdir}.lock", "w")
        except OSError as e:             # e.g. not root: no cache, the commands every time
            self._say(f"{name}: no database template ({e})")
            tdir = None
        if tdir is None:
            build()
            return
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)         # released when the file closes
            if (tdir / ".complete").exists():
                for rel in TEMPLATE_FILES[name]:
                    src, dst = tdir / rel, self.work / rel
                    if src.is_dir():
                        shutil.rmtree(dst, ignore_errors=True)
                        shutil.copytree(src, dst)
                    else:
                        shutil.copy2(src, dst)
                self._adopt(name)
                self._say(f"{name}: databases copied from {tdir}")
                return
            build()
            tmp = tdir.with_name(tdir.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            for rel in TEMPLATE_FILES[name]:
                src, dst = self.work / rel, tmp / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                if src.is_dir():
                    shutil.copytree(src, dst)
                else:
                    shutil.copy2(src, dst)
            (tmp / ".complete").write_text(json.dumps(template_versions()))
            shutil.rmtree(tdir, ignore_errors=True)
            tmp.rename(tdir)
            self._say(f"{name}: databases kept as the template {tdir}")

    def _adopt(self, name: str) -> None:
        """Make a template's copy this cloud's: what ``keystone-manage bootstrap`` and ``nova-manage
        cell_v2`` wrote of the cloud that built it, as they would have written it here."""
        import sqlite3

        if name == "keystone":
            sql = [("UPDATE endpoint SET url = ?", (f"{self.url('keystone')}/v3",))]
        elif name == "nova":
            sql = [("UPDATE cell_mappings SET database_connection = ? WHERE name = 'cell0'",
                    (self.db("nova_cell0"),)),
                   ("UPDATE cell_mappings SET database_connection = ?, transport_url = ? "
                    "WHERE name = 'cell1'", (self.db("nova_cell1"),
                                             f"rabbit://{RABBIT}/{self.vhost}"))]
        else:
            return
        db = self.work / "db" / ("keystone.db" if name == "keystone" else "nova_api.db")
        with contextlib.closing(sqlite3.connect(db)) as c, c:
            for stmt, args in sql:
                if c.execute(stmt, args).rowcount < 1:
                    raise ServiceError(f"{db}: template adoption changed nothing: {stmt}")

    def _nova_databases(self) -> None:
        nm = [str(BIN / "nova-manage"), "--config-file", str(self.nova_conf)]
        self._run("nova-manage api_db sync", nm + ["api_db", "sync"])
        self._run("nova-manage cell_v2 map_cell0", nm + [
            "cell_v2", "map_cell0", "--database_connection", self.db("nova_cell0")])
        self._run("nova-manage cell_v2 create_cell", nm + [
            "cell_v2", "create_cell", "--name", "cell1", "--verbose"])
        self._run("nova-manage db sync", nm + ["db", "sync"])

    def _neutron_database(self) -> None:
        """Neutron's schema from its models, stamped at the migration heads."""
        self._run("neutron schema", [sys.executable, "-c", (
            "import sqlalchemy, sys; from neutron.db.migration.models import head; "
            "head.get_metadata().create_all(sqlalchemy.create_engine(sys.argv[1]))"),
            self.db("neutron")])
        self._run("neutron-db-manage stamp", [str(BIN / "neutron-db-manage"), "--config-file",
                                              str(self.neutron_conf), "stamp", "heads"])

    def _keystone_setup(self) -> str:
        """db_sync, Fernet and credential keys, bootstrap (admin, the identity endpoint)."""
        kconf = str(self.etc / "keystone" / "keystone.conf")
        km = [str(BIN / "keystone-manage"), "--config-file", kconf]
        self._say("keystone: db_sync, fernet keys, bootstrap")
        self._run("keystone-manage db_sync", km + ["db_sync"])
        self._run("keystone-manage fernet_setup", km + ["fernet_setup", "--keystone-user",
                                                        "root", "--keystone-group", "root"])
        self._run("keystone-manage credential_setup",
                  km + ["credential_setup", "--keystone-user", "root", "--keystone-group",
                        "root"])
        self._run("keystone-manage bootstrap", km + [
            "bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
            "--bootstrap-admin-url", f"{self.url('keystone')}/v3",
            "--bootstrap-internal-url", f"{self.url('keystone')}/v3",
            "--bootstrap-public-url", f"{self.url('keystone')}/v3",
            "--bootstrap-region-id", REGION])
        return kconf

    def start_keystone(self) -> None:
        """Keystone alone (the bootstrap admin, Fernet tokens, SQLite), for the tests of a
        service that needs identity only (fluidvim-api). ``stop()`` stops it."""
        if self.work.exists():
            stop_workdir(self.work, quiet=True)
            shutil.rmtree(self.work)
        self._check_ports(("keystone",))
        self.write_configs()
        self._from_template("keystone", self._keystone_setup)
        kconf = str(self.etc / "keystone" / "keystone.conf")
        self._serve("keystone", {"OS_KEYSTONE_CONFIG_FILES": kconf})
        self.wait_http("keystone", "/v3")

    def _wal(self) -> None:
        """Write-ahead logging for every SQLite database: several processes write the same
        databases (nova-api, -conductor, -scheduler share nova_api and cell1); with the default
        rollback journal a reader blocks writers and they fail with "database is locked"."""
        import sqlite3

        for db in (self.work / "db").glob("*.db"):
            with contextlib.closing(sqlite3.connect(db)) as c:
                mode = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise ServiceError(f"{db}: could not switch to WAL (journal_mode {mode})")

    def _check_ports(self, services=None) -> None:
        for svc, port in self.ports.items():
            if services is not None and svc not in services:
                continue
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind((HOST, port))
                except OSError as e:
                    raise ServiceError(
                        f"{svc}: port {port} is in use ({e.strerror}): another nova-e2e cloud? "
                        f"stop it with `{BIN}/python -m tests.e2e.nova_services stop --workdir "
                        "<its work dir>`") from None

    def _rabbit_vhost(self) -> None:
        """A fresh vhost of this cloud's own (a new tag per Stack): no queue or message of an
        earlier run reaches this one's services, and no other cloud's vhost is touched."""
        self._run("rabbitmqctl add_vhost", ["rabbitmqctl", "-q", "add_vhost", self.vhost])
        self._run("rabbitmqctl set_permissions", ["rabbitmqctl", "-q", "set_permissions",
                                                  "-p", self.vhost, "guest", ".*", ".*", ".*"])

    def session(self):
        from keystoneauth1 import session as ks_session
        from keystoneauth1.identity import v3

        auth = v3.Password(auth_url=f"{self.url('keystone')}/v3", username="admin",
                           password=ADMIN_PASSWORD, project_name="admin",
                           user_domain_name="Default", project_domain_name="Default")
        return ks_session.Session(auth=auth, timeout=60)

    def api(self, service_type: str, method: str, path: str, microversion: str | None = None,
            **kw):
        """One request of the admin to a service of this cloud from this process (one
        keystoneauth session per Stack: its token is fetched once). For the set-up and polling
        steps around the ``openstack`` commands a test proves (each CLI run costs ~2 s of CPU
        for its imports, a poll every second of them starved the 2-core CI host); errors
        raise (``raise_exc=False`` to get the response)."""
        if self._session is None:
            self._session = self.session()
        return self._session.request(path, method, endpoint_filter={
            "service_type": service_type, "interface": "public"}, microversion=microversion,
            **kw)

    def server(self, name: str) -> dict:
        """What ``openstack server show NAME`` shows, from the compute API (microversion
        2.47: the flavor embedded, the extended status and host attributes, ``fault`` of an
        ERROR server; the power state as Nova's number, 1 running)."""
        found = [srv for srv in self.api("compute", "GET", "/servers/detail",
                                         microversion="2.47").json()["servers"]
                 if srv["name"] == name]
        _check(len(found) == 1, f"servers named {name}: {found}")
        return found[0]

    def names(self, service_type: str, path: str, key: str) -> set:
        """The names of a collection (``/v2/images`` ``images``, ``/flavors`` ``flavors``)."""
        return {x["name"] for x in self.api(service_type, "GET", path).json()[key]}

    def _catalog(self) -> None:
        """Services and endpoints (what `openstack service/endpoint create` would do)."""
        s = self.session()
        kw = dict(endpoint_filter={"service_type": "identity", "interface": "public"})
        entries = [("nova", "compute", f"{self.url('nova-api')}/v2.1"),
                   ("placement", "placement", self.url("placement")),
                   ("glance", "image", self.url("glance")),
                   ("neutron", "network", self.url("neutron"))]
        # the admin is every service's service user: nova sends its token to Neutron as a
        # service token (X-Service-Token), which keystonemiddleware accepts only with the
        # ``service`` role (service_token_roles)
        roles = s.get("/roles?name=service", **kw).json()["roles"]
        role = roles[0] if roles else s.post("/roles", json={"role": {"name": "service"}},
                                             **kw).json()["role"]
        admin = s.get("/users?name=admin", **kw).json()["users"][0]["id"]
        project = s.get("/projects?name=admin", **kw).json()["projects"][0]["id"]
        s.put(f"/projects/{project}/users/{admin}/roles/{role['id']}", **kw)
        for name, stype, url in entries:
            svc = s.post("/services", json={"service": {"name": name, "type": stype}},
                         **kw).json()["service"]
            for iface in ("public", "internal", "admin"):
                s.post("/endpoints", json={"endpoint": {
                    "service_id": svc["id"], "interface": iface, "url": url,
                    "region_id": REGION}}, **kw)

    def stop(self) -> None:
        stop_workdir(self.work, procs=self.procs)


def _destroy_vnfs(workdir: Path) -> list[str]:
    """Destroy every VNF (and its taps) the compute service left in its state dir."""
    conf = workdir / "etc" / "nova" / "nova-compute.conf"
    if not (workdir / "vnf").exists() or not conf.exists():
        return []
    from oslo_config import cfg

    from fluidvim.vnf import conf as vnfconf
    from fluidvim.vnf.manager import VNFManager

    c = cfg.ConfigOpts()
    vnfconf.register_opts(c)
    c([], default_config_files=[str(conf)])
    mgr = VNFManager(c)
    gone = []
    try:
        for rec in mgr.store.list():
            try:
                mgr.destroy(rec.id)
                gone.append(rec.id)
            except KeyError:
                pass
    finally:
        mgr.close()
    return gone


def stop_workdir(workdir: Path, procs: dict | None = None, quiet: bool = False) -> None:
    """Stop the services of a work dir (SIGTERM, then SIGKILL), then destroy leftover VNFs and
    remove the cloud's vhost and (empty) run dir (named in ``<workdir>/stack.json``)."""
    pids = {}
    for svc, p in (procs or {}).items():
        pids[svc] = p.pid
    piddir = Path(workdir) / "pids"
    if piddir.is_dir():
        for f in piddir.iterdir():
            try:
                pids.setdefault(f.name, int(f.read_text()))
            except ValueError:
                pass
    for pid in pids.values():
        try:
            os.killpg(pid, signal.SIGTERM)      # each service is its own session/group
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    for svc, pid in pids.items():
        while time.monotonic() < deadline and _alive(pid, procs and procs.get(svc)):
            time.sleep(0.1)
        if _alive(pid, procs and procs.get(svc)):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if piddir.is_dir():
            (piddir / svc).unlink(missing_ok=True)
    try:
        gone = _destroy_vnfs(Path(workdir))
    except Exception as e:  # noqa: BLE001 - report, and let the caller's error through
        print(f"[nova-e2e] could not destroy leftover VNFs of {workdir}: {e}", file=sys.stderr)
        return
    try:
        own = json.loads((Path(workdir) / "stack.json").read_text())
    except (OSError, ValueError):
        own = {}
    if own.get("ovs"):
        from fluidvim.vnf import ovs as ovsmod
        ovsmod.OvsServer(own["ovs"]).stop()        # deletes its bridges first
    run_dir = own.get("run_dir")
    if run_dir and os.path.isdir(run_dir) and not os.listdir(run_dir):
        os.rmdir(run_dir)                  # the launch core's run dir, empty once its VNFs went
    if own.get("vhost") and shutil.which("rabbitmqctl"):
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", own["vhost"]], capture_output=True,
                       timeout=60)
    if gone and not quiet:
        print(f"[nova-e2e] destroyed {len(gone)} VNF(s) nova-compute left running (servers "
              f"not deleted, warm-pool shells): {gone}", flush=True)


def _alive(pid: int, proc=None) -> bool:
    if proc is not None:
        return proc.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                     # a zombie child of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- the user's scenario -----------------------------------------------------------------
class OpenStackCLI:
    """The unmodified `openstack` CLI of the venv, as the admin user of a Stack. The first
    command of a process runs the console script; the others its entry point in this
    process (:func:`tests.clirun.run`: same argv and environment; each
    ``openstack`` process loads every client plugin, ~1.6-3 CPU-s, and the Nova e2e modules
    ran ~60 of them). The tests that need a process of their own (in flight beside a
    kill -9, an expected failure's exit status) still run the console script."""

    def __init__(self, stack: Stack):
        self.env = dict(os.environ, **stack.env())
        for k in list(self.env):
            if k.startswith("OS_") and k not in stack.env():
                del self.env[k]
        self.stack = stack

    def __call__(self, *args: str, json_out: bool = True, timeout: float = 180):
        cmd = [str(BIN / "openstack"), *args] + (["-f", "json"] if json_out else [])
        self.stack._say("$ " + " ".join(a if " " not in a else repr(a) for a in cmd[1:]))
        p = clirun.run("openstack", cmd[1:], self.env, timeout=timeout)
        if p.returncode:
            raise ServiceError(f"`openstack {' '.join(args)}` failed ({p.returncode}):\n"
                               f"{p.stdout}{p.stderr}\n--- nova-compute ---\n"
                               f"{self.stack.tail('nova-compute', 30)}")
        return json.loads(p.stdout) if json_out and p.stdout.strip() else p.stdout


FW_CONFIG = "FromDevice(0) -> fw :: Counter -> ToDevice(1); FromDevice(1) -> ToDevice(0);"


def _check(cond, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def _fluidvim(stack: Stack, *args: str):
    """The fluidvim CLI against nova-compute's launch-core state (its [vnf] section)."""
    return fluidvim_json(stack.compute_conf, *args)


def fluidvim_json(conf, *args: str):
    """``fluidvim --config-file CONF vnf ARGS --json``, parsed (the first run of a process the
    console script, the others in process: :func:`tests.clirun.run`)."""
    argv = ["--config-file", str(conf), "vnf", *args, "--json"]
    p = clirun.run("fluidvim", argv, timeout=60)
    if p.returncode:
        raise AssertionError(f"fluidvim {' '.join(argv)} failed: {p.stdout}{p.stderr}")
    return json.loads(p.stdout)


def _usages(stack: Stack) -> dict:
    rps = stack.api("placement", "GET", f"/resource_providers?name={COMPUTE_HOST}").json()
    _check(len(rps["resource_providers"]) == 1, f"placement: no provider {COMPUTE_HOST}: {rps}")
    rp = rps["resource_providers"][0]["uuid"]
    inv = stack.api("placement", "GET", f"/resource_providers/{rp}/inventories").json()
    use = stack.api("placement", "GET", f"/resource_providers/{rp}/usages").json()
    return {"inventories": inv["inventories"], "usages": use["usages"]}


def scenario(stack: Stack, kernel: str, keep_server: bool = False) -> dict:
    """What a user does with the unmodified `openstack` CLI, with checks after every step.

    Returns the wall-clock seconds of each CLI step (including the CLI's own ~1 s start-up)."""
    from fluidvim.vnf import netdev

    os_ = OpenStackCLI(stack)
    times = {}

    def timed(name, *args, **kw):
        t = time.monotonic()
        out = os_(*args, **kw)
        times[name] = round(time.monotonic() - t, 2)
        return out

    img = timed("image create", "image", "create", "--file", kernel, "--disk-format", "aki",
                "--container-format", "aki", "--property", f"fluidvim_click_config={FW_CONFIG}",
                "vnf-firewall")
    _check(img["status"] == "active", f"image not active: {img}")
    timed("flavor create", "flavor", "create", "--ram", "32", "--vcpus", "1", "--disk", "0",
          "--property", "resources:CUSTOM_VNF_SESSION_SLOT=1", "vnf.small")
    timed("flavor create (4 slots)", "flavor", "create", "--ram", "32", "--vcpus", "1",
          "--disk", "0", "--property", f"resources:CUSTOM_VNF_SESSION_SLOT={stack.slot_capacity}",
          "vnf.all-slots")
    srv = timed("server create --wait", "server", "create", "--image", "vnf-firewall",
                "--flavor", "vnf.small", "--nic", "none", "--wait", "fw1")
    _check(srv["status"] == "ACTIVE", f"server fw1 is {srv['status']}, not ACTIVE: "
           f"{srv.get('fault')}")
    shown = timed("server show", "server", "show", "fw1")
    _check(shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] == COMPUTE_HOST,
           f"server show: {shown}")
    uuid = shown["id"]

    vnfs = [v for v in _fluidvim(stack, "list") if v["name"] == uuid]
    _check(len(vnfs) == 1 and vnfs[0]["status"] == "running",
           f"fluidvim vnf list has no running VNF for server {uuid}: {vnfs}")
    vnf = vnfs[0]
    stats = _fluidvim(stack, "stats", uuid)      # a control-channel round trip to the VNF
    _check(stats["configured"] and stats["slots"]["total"] == 1,
           f"VNF stats over the control channel: {stats}")
    _check(any(e["class"] == "Counter" for e in stats["elements"]),
           f"the VNF does not run the image's Click configuration: {stats['elements']}")
    taps = [n["tap"] for n in vnf["nics"]]
    _check(taps and all(netdev.exists(t) for t in taps), f"taps of the VNF missing: {taps}")
    _check(_alive(vnf['pid']), f"QEMU {vnf['pid']} not running")

    console = timed("console log show", "console", "log", "show", "fw1", json_out=False)
    _check("fluidvim-vnf" in console and "ready in" in console and uuid in console,
           f"console log lacks the VNF's boot lines:\n{console}")

    use = _usages(stack)
    slots = use["inventories"].get("CUSTOM_VNF_SESSION_SLOT", {})
    _check(slots.get("total") == stack.slot_capacity, f"slot inventory: {use['inventories']}")
    _check(use["usages"].get("CUSTOM_VNF_SESSION_SLOT") == 1, f"slot usage: {use['usages']}")

    # the host has slot_capacity slots and fw1 holds one: a flavor needing all of them fails
    # (`server create --wait` exits non-zero when the server goes to ERROR: that is expected)
    p = subprocess.run([str(BIN / "openstack"), "server", "create", "--image", "vnf-firewall",
                        "--flavor", "vnf.all-slots", "--nic", "none", "--wait", "fw-too-big",
                        "-f", "json"], capture_output=True, text=True, env=os_.env,
                       timeout=180)
    big = os_("server", "show", "fw-too-big")
    _check(big["status"] == "ERROR" and "No valid host" in json.dumps(big.get("fault")),
           f"a server needing {stack.slot_capacity} slots on a host with "
           f"{stack.slot_capacity - 1} free should fail with NoValidHost: {big} {p.stderr}")
    os_("server", "delete", "--wait", "fw-too-big", json_out=False)

    if keep_server:
        return times
    timed("server delete --wait", "server", "delete", "--wait", "fw1", json_out=False)
    left = os_("server", "list")
    _check(left == [], f"servers left after delete: {left}")
    _check(not [v for v in _fluidvim(stack, "list", "--all")], "VNFs left after delete")
    # killed: gone, or a zombie its parent has yet to reap (after a compute restart the parent
    # is the host's init, which may reap late)
    _check(not _alive(vnf['pid']), f"QEMU {vnf['pid']} still running")
    _check(not [t for t in taps if netdev.exists(t)], f"taps left after delete: {taps}")
    use = _usages(stack)
    _check(not any(use["usages"].values()), f"placement usage after delete: {use['usages']}")
    return times


OVS_SUBNET = "10.96.0.0/24"
# one allocation pool per network, so that the two networks' (same) subnet never hands out
# the same address twice: the two probe hosts sit in one IP subnet, bridged only by the VNF
OVS_POOLS = {"a": ("10.96.0.10", "10.96.0.99"), "b": ("10.96.0.100", "10.96.0.199")}


def _ensure_firewall_image(os_, kernel: str) -> None:
    """Image vnf-firewall and flavor vnf.small (made by :func:`scenario`, or here; the
    lists from the APIs, the creation with the CLI)."""
    if "vnf-firewall" not in os_.stack.names("image", "/v2/images", "images"):
        os_("image", "create", "--file", kernel, "--disk-format", "aki", "--container-format",
            "aki", "--property", f"fluidvim_click_config={FW_CONFIG}", "vnf-firewall")
    if "vnf.small" not in os_.stack.names("compute", "/flavors", "flavors"):
        os_("flavor", "create", "--ram", "32", "--vcpus", "1", "--disk", "0", "--property",
            "resources:CUSTOM_VNF_SESSION_SLOT=1", "vnf.small")


def _wait_port_active(stack: Stack, port_id: str, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        port = stack.api("network", "GET", f"/v2.0/ports/{port_id}").json()["port"]
        if port["status"] == "ACTIVE":
            return port
        _check(time.monotonic() < deadline, f"port {port_id} not ACTIVE after {timeout:.0f}s: "
               f"{port['status']} (binding {port.get('binding:vif_type')})")
        time.sleep(0.5)


class ProbeHost:
    """A host on a Neutron network: a network namespace whose veth has a Neutron port's MAC and
    IP, the veth's other end an OVS port of the integration bridge with that port's ``iface-id``
    (what os-vif/libvirt do for a VM), so the OVS agent binds it to the network's local VLAN."""

    def __init__(self, stack: Stack, port: dict):
        from fluidvim.vnf import testnet

        self.stack, self.port = stack, port
        p = testnet.unique_name(f"{PREFIX}p", room=1)
        self.ns, self.host, self.peer = p, f"{p}h", f"{p}p"
        self.ip = port["fixed_ips"][0]["ip_address"]

    def up(self) -> "ProbeHost":
        from fluidvim.vnf import ovs as ovsmod

        ip = ["ip"]
        for cmd in (["netns", "add", self.ns],
                    ["link", "add", self.host, "type", "veth", "peer", "name", self.peer],
                    ["link", "set", self.peer, "netns", self.ns],
                    ["-n", self.ns, "link", "set", self.peer, "address",
                     self.port["mac_address"]],
                    ["-n", self.ns, "addr", "add", f"{self.ip}/24", "dev", self.peer],
                    ["-n", self.ns, "link", "set", self.peer, "up"],
                    ["link", "set", self.host, "up"]):
            self.stack._run("ip " + " ".join(cmd), ip + cmd)
        ovsmod.add_port(self.stack.int_br, self.host,
                        ovsmod.external_ids({"iface-id": self.port["id"]},
                                            self.port["mac_address"]),
                        db=self.stack.ovs.connection)
        return self

    def down(self) -> None:
        from fluidvim.vnf import ovs as ovsmod

        ovsmod.del_port(None, self.host, db=self.stack.ovs.connection)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.host], capture_output=True)

    def ping(self, ip: str, count: int = 5) -> int:
        p = subprocess.run(["ip", "netns", "exec", self.ns, "ping", "-n", "-c", str(count),
                            "-i", "0.2", "-W", "2", ip], capture_output=True, text=True,
                           timeout=count * 3 + 10)
        for line in p.stdout.splitlines():
            if "received" in line:
                return int(line.split(",")[1].split()[0])
        return 0


def scenario_ovs(stack: Stack, kernel: str) -> dict:
    """Neutron (ML2/OVS) networking with the unmodified CLI: two networks and subnets, a server
    with a port on each (``--nic net-id=…`` twice) → ACTIVE; a host on each network (a Neutron
    port bound by the OVS agent) pings the other: the only path is through the VNF, whose
    counters move; ``server delete`` leaves no port of the VNF on the integration bridge."""
    from fluidvim.vnf import netdev, ovs as ovsmod

    _check(stack.neutron, "scenario_ovs needs the real Neutron")
    os_ = OpenStackCLI(stack)
    db = stack.ovs.connection
    times = {}

    def timed(name, *args, **kw):
        t = time.monotonic()
        out = os_(*args, **kw)
        times[name] = round(time.monotonic() - t, 2)
        return out

    _ensure_firewall_image(os_, kernel)
    agents = stack.api("network", "GET", f"/v2.0/agents?host={COMPUTE_HOST}").json()["agents"]
    _check([a["agent_type"] for a in agents if a["alive"]] == ["Open vSwitch agent"],
           f"no live OVS agent on {COMPUTE_HOST}: {agents}")
    nets, probes, hosts = {}, {}, []
    try:
        for side in "ab":
            # port security off: the VNF forwards the other host's frames (a bump in the wire)
            nets[side] = timed(f"network create {side}", "network", "create",
                               "--disable-port-security", f"net-{side}")
            start, end = OVS_POOLS[side]
            timed(f"subnet create {side}", "subnet", "create", "--network", f"net-{side}",
                  "--subnet-range", OVS_SUBNET, "--no-dhcp", "--gateway", "none",
                  "--allocation-pool", f"start={start},end={end}", f"sub-{side}")
            probes[side] = stack.api("network", "POST", "/v2.0/ports", json={"port": {
                "network_id": nets[side]["id"], "binding:host_id": COMPUTE_HOST,
                "device_owner": "fluidvim:probe", "name": f"probe-{side}"}}).json()["port"]
            hosts.append(ProbeHost(stack, probes[side]).up())
        for side in "ab":
            _wait_port_active(stack, probes[side]["id"])
        a, b = hosts
        _check(a.ping(b.ip, 2) == 0, "the two networks are connected without a VNF")

        srv = timed("server create --nic net-id x2 --wait", "server", "create", "--image",
                    "vnf-firewall", "--flavor", "vnf.small", "--nic",
                    f"net-id={nets['a']['id']}", "--nic", f"net-id={nets['b']['id']}",
                    "--wait", "fw-ovs", timeout=420)
        _check(srv["status"] == "ACTIVE", f"fw-ovs is {srv['status']}: {srv.get('fault')}")
        uuid = srv["id"]
        ports = stack.api("network", "GET", f"/v2.0/ports?device_id={uuid}").json()["ports"]
        _check(len(ports) == 2 and all(p["status"] == "ACTIVE" for p in ports),
               f"the server's ports: {ports}")
        (vnf,) = [v for v in _fluidvim(stack, "list") if v["name"] == uuid]
        taps = [n["tap"] for n in vnf["nics"]]
        on_br = ovsmod.list_ports(stack.int_br, db=db)
        _check(set(taps) <= set(on_br), f"taps {taps} not on {stack.int_br}: {on_br}")
        by_port = {}
        for tap in taps:
            iface = ovsmod.interface(tap, db=db)
            by_port[iface["external_ids"]["iface-id"]] = iface["external_ids"]
        _check(set(by_port) == {p["id"] for p in ports}, f"iface-ids {by_port} vs {ports}")
        _check(all(ids["vm-uuid"] == uuid for ids in by_port.values()), f"vm-uuid: {by_port}")

        before = _fluidvim(stack, "stats", uuid)
        received = a.ping(b.ip, 5)
        after = _fluidvim(stack, "stats", uuid)
        _check(received == 5, f"{received}/5 pings from net-a to net-b through the VNF")
        moved = [{k: after["nics"][i][k] - before["nics"][i][k] for k in ("rx", "tx")}
                 for i in (0, 1)]
        _check(all(m["rx"] >= 5 and m["tx"] >= 5 for m in moved), f"VNF NIC counters: {moved}")
        times["vnf_nic_counter_delta"] = moved

        timed("server delete --wait (ovs)", "server", "delete", "--wait", "fw-ovs",
              json_out=False)
        left = sorted(set(ovsmod.list_ports(stack.int_br, db=db)) - {h.host for h in hosts})
        _check(left == [], f"OVS ports left on {stack.int_br} after delete: {left}")
        _check(not [t for t in taps if netdev.exists(t)], f"taps left: {taps}")
        _check(a.ping(b.ip, 2) == 0, "net-a and net-b still connected after the delete")
    finally:
        for h in hosts:
            h.down()
        for side in "ab":
            if side in probes:
                stack.api("network", "DELETE", f"/v2.0/ports/{probes[side]['id']}")
            if side in nets:
                stack.api("network", "DELETE", f"/v2.0/networks/{nets[side]['id']}")
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.e2e.nova_services",
        description="Real Keystone/Placement/Glance/Nova services with the fluidvim driver.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent("""\
            examples:
              sudo .venv/bin/python -m tests.e2e.nova_services up      # start, print exports
              sudo .venv/bin/python -m tests.e2e.nova_services stop    # stop, destroy VNFs
              sudo tools/nova-e2e.sh [--keep]                          # the scenario
            """))
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start the services and print the OS_* exports")
    up.add_argument("--workdir", default=DEFAULT_WORKDIR)
    up.add_argument("--kernel", help="VNF kernel for [vnf] kernel (default: the built one)")
    up.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"])
    up.add_argument("-v", "--verbose", action="store_true", help="debug logs in services")
    rn = sub.add_parser("run", help="start the services, run the CLI scenario, stop (unless "
                        "--keep)")
    rn.add_argument("--keep", action="store_true",
                    help="leave the services (and the server fw1) running; print the exports")
    rn.add_argument("--workdir", default=DEFAULT_WORKDIR)
    rn.add_argument("--kernel", help="the VNF kernel to upload (default: the built one)")
    rn.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"])
    rn.add_argument("-v", "--verbose", action="store_true", help="debug logs in services")
    st = sub.add_parser("stop", help="stop the services of a work dir and destroy its VNFs")
    st.add_argument("--workdir", default=DEFAULT_WORKDIR)
    sv = sub.add_parser("serve", help="(internal) serve one WSGI app")
    sv.add_argument("app", help="module:attribute")
    sv.add_argument("--port", type=int, required=True)
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        serve(args.app, args.port)
        return 0
    if args.cmd == "stop":
        stop_workdir(Path(args.workdir))
        return 0
    from fluidvim.vnf import conf as vnfconf

    kernel = args.kernel or vnfconf.default_kernel()
    if not os.path.exists(kernel):
        raise ServiceError(f"no VNF kernel at {kernel}: run `make -C unikernel` (or --kernel)")
    if os.geteuid() != 0:
        raise ServiceError("needs root (nova-compute makes taps and runs QEMU/KVM)")
    stack = Stack(args.workdir, kernel=kernel, accel=args.accel, verbose=args.verbose)
    keep = args.cmd == "up" or args.keep
    try:
        stack.start()
        if args.cmd == "run":
            times = scenario(stack, kernel, keep_server=args.keep)
            if stack.neutron:
                times.update(scenario_ovs(stack, kernel))
            print(json.dumps({"cli_seconds": times}, indent=1))
            stack._say("scenario passed")
    except BaseException:
        keep = False
        raise
    finally:
        if not keep:
            stack.stop()
    if keep:
        print_exports(stack)
    return 0


def print_exports(stack: Stack) -> None:
    print("\n# the cloud is up; for the openstack CLI:")
    for k, v in stack.env().items():
        print(f"export {k}={v}")
    print(f"# logs: {stack.logs}\n# stop: sudo {BIN}/python -m tests.e2e.nova_services stop "
          f"--workdir {stack.work}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ServiceError, AssertionError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        sys.exit(1)
