# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim: a VIM extension for unikernel network functions (Nova, Nomad, NFV MANO)."""

import os
import re
import shutil
import subprocess
import sysconfig

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

# The source tree follows the project layout (vnf/, orchestrator/, ...); installed, each directory
# is a sub-package of `fluidvim` so nothing claims a generic top-level name like `vnf`.
PACKAGE_DIRS = {
    "fluidvim": "fluidvim",
    "fluidvim.common": "fluidvim/common",     # the neutral leaves every layer may import
    "fluidvim.cmd": "fluidvim/cmd",           # the entry points (console scripts)
    "fluidvim.vnf": "vnf",
    "fluidvim.orchestrator": "orchestrator",
    "fluidvim.orchestrator.zones": "orchestrator/zones",
    "fluidvim.orchestrator.mano": "orchestrator/mano",
    "fluidvim.orchestrator.osm": "orchestrator/osm",
    "fluidvim.orchestrator.power": "orchestrator/power",
    "fluidvim.orchestrator.api": "orchestrator/api",
    "fluidvim.orchestrator.osc": "orchestrator/osc",   # the `openstack fluidvim` plugin
    "fluidvim.evaluator": "evaluator",
    "fluidvim.nova_driver": "nova_driver",
    # the alembic environments (fluidvim-manage db sync; the launch core checks its schema)
    "fluidvim.vnf.migrations": "vnf/migrations",
    "fluidvim.orchestrator.migrations": "orchestrator/migrations",
    "fluidvim.evaluator.migrations": "evaluator/migrations",
}
# `[DEFAULT] compute_driver = fluidvim.UnikernelDriver`: Nova imports nova.virt.<compute_driver>,
# so ship that one sub-package (and nothing else under nova/: nova itself owns nova/__init__.py).
SHIM_DIRS = {"nova.virt.fluidvim": "nova_shim/nova/virt/fluidvim"}

# The one version source: fluidvim/__init__.py (read, not imported: nothing is installed yet).
with open("fluidvim/__init__.py", encoding="utf-8") as _f:
    VERSION = re.search(r'^__version__ = "([^"]+)"', _f.read(), re.M).group(1)

# The VNF images a wheel carries as package data of fluidvim.vnf (vnf/conf.py: PACKAGED_DIR, the
# default before a source-tree build and /usr/share): built from the C sources by make while the
# wheel is built (from the tree or from the sdist, which carries the sources: MANIFEST.in), so
# a wheel's install needs no gcc, make or checkout. (source dir, make output, installed name)
IMAGES = [("unikernel", "build/fluidvim-vnf.elf"),      # the VNF kernel (PVH ELF)
          ("unikernel", "build/fluidvim-pvh.bin"),      # its microvm firmware, found beside it
          ("vhost", "build/fluidvim-vhost-net")]        # the net_backend = vhost-user backend
IMAGES_DIR = "images"


class BuildPyWithImages(build_py):
    """build_py that also runs `make` in unikernel/ and vhost/ and copies the images into the
    package. Skipped for editable installs: there the launch core finds the source-tree build."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        here = os.path.dirname(os.path.abspath(__file__))
        dest = os.path.join(self.build_lib, "fluidvim", "vnf", IMAGES_DIR)
        os.makedirs(dest, exist_ok=True)
        for src in sorted({d for d, _ in IMAGES}):
            if shutil.which("make") is None:
                raise SystemExit("building the fluidvim wheel needs make and gcc (the VNF kernel "
                                 "is built from unikernel/): install them, or install the wheel")
            subprocess.run(["make", "-C", os.path.join(here, src)], check=True)
        for src, out in IMAGES:
            self.copy_file(os.path.join(here, src, out),
                           os.path.join(dest, os.path.basename(out)), preserve_mode=True)


class PlatformWheel(bdist_wheel):
    """The images are x86-64 machine code (kernel, firmware, an ELF host binary): the wheel is
    py3-none-<platform>, not pure Python; no Python ABI is involved."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")


# Ranges here; the exact set CI and `make` install is constraints.txt
# (pip install -c constraints.txt -e .[...]).
# The core: the VNF launch core and the `fluidvim vnf` CLI (and what the Nova driver needs
# beyond Nova itself). A nova-compute installs `fluidvim[nova]`, an OSM RO container
# `fluidvim[osm]`, the orchestrator's host `fluidvim[orchestrator]`.
CORE = [
    "oslo.config>=9.0",
    "oslo.log>=5.0",
    "pyroute2>=0.9.7,<0.10",
    "qemu.qmp>=0.0.6,<0.1",
    "SQLAlchemy>=2.0,<2.2",
    "alembic>=1.13",                # schema migrations (fluidvim-manage db sync)
]
# the OSM RO VIM-connector plugin: RPC to the orchestrator, YAML descriptors
OSM = ["oslo.messaging>=14.0", "PyYAML>=6.0", "keystoneauth1>=5.0"]
# fluidvim-api: the orchestrator's REST API (WSGI, Keystone auth, policy) and the keystoneauth1
# client the CLI and the OSM RO plugin use to call it (cliff: the CLI's -f/-c formatters)
API_CLIENT = ["keystoneauth1>=5.0", "cliff>=4.0"]
# the `openstack fluidvim ...` commands: python-openstackclient's plugin (osc-lib/cliff), the
# API found in the Keystone catalog through openstacksdk's config (clouds.yaml)
OSC = API_CLIENT + ["python-openstackclient>=10.5.0", "osc-lib>=4.7.0", "openstacksdk>=4.22.0"]
ORCHESTRATOR = OSM + [
    "jsonschema>=4.0",              # MANO descriptors
    # SOL006 descriptors checked against ETSI's YANG modules (pure Python); 1.7.5+ needs
    # elementpath 5, which pysaml2's xmlschema 2.x (keystone, [e2e]) does not allow
    "yangson>=1.7.4,<1.7.5",
    "simpleeval>=1.0.8",            # evaluator formulas
    "openstacksdk>=4.0",            # Nova zones
    "python-nomad>=2.1.0",          # Nomad zones (with requests, used directly)
    "requests>=2.28",
    "sushy>=5.0",                   # Redfish power readings
    "prometheus_client>=0.17",      # fluidvim metrics serve: per-host /metrics
    # hierarchical placement: SNDlib / Topology Zoo graphs shipped inside the wheel (offline)
    "topohub>=1.5,<2",
]
API = ORCHESTRATOR + API_CLIENT + [
    "WebOb>=1.8", "Routes>=2.5", "PasteDeploy>=3.0", "keystonemiddleware>=10.0",
    "oslo.context>=5.0", "oslo.policy>=4.0", "oslo.middleware>=5.0",
]
# `fluidvim demo` (orchestrator, plots, progress bars) and bench/ (highspy: the MILP lower
# bound of bench/energy, HiGHS)
DEMO = ORCHESTRATOR + ["matplotlib>=3.7", "tqdm>=4.66", "highspy>=1.7"]
# libvirt-python must match the host's libvirt (Debian bookworm: 9.0; constraints.txt pins it)
LIBVIRT = ["libvirt-python>=9.0"]
EXTRAS = {
    "libvirt": LIBVIRT,
    # a PostgreSQL server for the orchestrator's database (postgresql+psycopg2://...)
    "postgresql": ["psycopg2-binary>=2.9"],
    # the compute driver, the extra-spec validators (nova-api) and the weighers (scheduler);
    # on a Nova host nova is there already: the supported releases are 31 (2025.1) to 34
    # (docs/nova-releases.md). Only a floor, so installing this extra never upgrades the nova
    # a compute host runs (tools/constraints/novaNN.txt pin each release's set for the tests)
    "nova": ["nova>=31.0.0"],
    "osm": OSM,
    "orchestrator": ORCHESTRATOR,
    "api": API,
    "osc": OSC,
    "demo": DEMO,
    "bench": DEMO,
    # what Nova's own test fixtures need (nova_driver/tests)
    "nova-test": ["openstack-placement>=13.0.0", "testtools>=2.9", "oslotest>=6.1",
                  "requests-mock>=1.12", "ddt>=1.7", "wsgi_intercept>=1.13", "osprofiler>=4.4"],
    # the end-to-end Nova script: real services and the unmodified `openstack` CLI
    # (neutron: ML2/OVS server and OVS agent for the e2e cloud's networks)
    "e2e": ["python-openstackclient>=10.5.0", "glance>=33.0.0", "keystone>=30.0.0",
            "neutron>=29.0.0"],
    # tests/unit, tests/integration and the benchmarks: every runtime dependency
    # (import-linter: the import contracts of ARCHITECTURE.md, tools/lint-imports.sh; mypy: the
    # type check of tools/lint.sh)
    # (pytest-xdist: tools/test.sh runs the suite on PYTEST_WORKERS workers, tests/conftest.py)
    "test": ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.6", "ruff>=0.6",
             "import-linter>=2.1", "mypy>=2.4",
             "oslo.db>=15.0",
             "psycopg2-binary>=2.9", "schemathesis>=3.39",
             # a real Redfish BMC per host for host power control (tests/bmcserver.py)
             "sushy-tools>=2.0",
             # `make dist`: the sdist and the wheel (PEP 517 build frontend)
             "build>=1.2",
             # tox.ini's environments (CI's stages one by one, nova31..nova34); 4.67: `constraints`
             "tox>=4.67",
             # the installer of tools/bootstrap.sh and tools/nova-venv.sh
             "uv>=0.13"] + DEMO + API + OSC + LIBVIRT,
}

setup(
    name="fluidvim",
    version=VERSION,
    description="Unikernel VNFs for OpenStack Nova and HashiCorp Nomad, with a slot-aware "
                "orchestrator",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=list(PACKAGE_DIRS) + list(SHIM_DIRS),
    package_dir={**PACKAGE_DIRS, **SHIM_DIRS},
    package_data={"fluidvim.orchestrator": ["data/*.csv", "data/README.md"],
                  "fluidvim.orchestrator.mano": ["schemas/*.json", "yang/README.md",
                                                 "yang/etsi/*.yang", "yang/etsi/LICENSE",
                                                 "yang/etsi/ABOUT.md", "yang/ietf/*.yang"],
                  "fluidvim.orchestrator.osm": ["README.md"],
                  "fluidvim.orchestrator.api": ["api-paste.ini", "openapi.json"],
                  # alembic migrations ship with their packages (fluidvim-manage db sync)
                  **{f"fluidvim.{p}.migrations": ["script.py.mako", "versions/*.py"]
                     for p in ("vnf", "orchestrator", "evaluator")}},
    cmdclass={"build_py": BuildPyWithImages, "bdist_wheel": PlatformWheel},
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={
        "console_scripts": ["fluidvim = fluidvim.cmd.cli:console_main",
                            "fluidvim-orchestrator = fluidvim.orchestrator.service:main",
                            "fluidvim-manage = fluidvim.cmd.manage:main",
                            "fluidvim-api = fluidvim.orchestrator.api.server:main",
                            # nova-compute with the shim found beside a distro nova
                            "fluidvim-nova-compute = fluidvim.cmd.nova_compute:main"],
        "oslo.config.opts": ["fluidvim.vnf = fluidvim.vnf.conf:list_opts",
                             "fluidvim.orchestrator = fluidvim.orchestrator.conf:list_opts",
                             "fluidvim.power = fluidvim.orchestrator.power:list_opts",
                             "fluidvim.metrics = fluidvim.orchestrator.power.exporter:list_opts",
                             "fluidvim.hostpower = fluidvim.orchestrator.hostpower:list_opts",
                             "fluidvim.hierarchy = fluidvim.orchestrator.hierarchy:list_opts",
                             "fluidvim.evaluator = fluidvim.evaluator.conf:list_opts",
                             "fluidvim.osm = fluidvim.orchestrator.osm.conf:list_opts",
                             "fluidvim.nova_driver = fluidvim.nova_driver.conf:list_opts",
                             "fluidvim.api = fluidvim.orchestrator.api.conf:list_opts"],
        # fluidvim-api's policy defaults (oslopolicy-sample-generator --namespace fluidvim)
        "oslo.policy.policies": ["fluidvim = fluidvim.orchestrator.api.policies:list_rules"],
        "oslo.policy.enforcer": ["fluidvim = fluidvim.orchestrator.api.policies:get_enforcer"],
        # nova-api validates flavor extra specs of the fluidvim: namespace (microversion 2.86+)
        "nova.api.extra_spec_validators": ["fluidvim = fluidvim.nova_driver.extra_specs"],
        # OSM RO finds VIM type X as entry point "rovim_X" of this group
        "osm_rovim.plugins": ["rovim_fluidvim = "
                              "fluidvim.orchestrator.osm.vimconn_fluidvim:vimconnector"],
        # `openstack fluidvim ...` (python-openstackclient plugin; docs/api.md)
        "openstack.cli.extension": ["fluidvim = fluidvim.orchestrator.osc.plugin"],
        "openstack.fluidvim.v1": [
            f"fluidvim_{cmd.replace(' ', '_')} = fluidvim.orchestrator.osc.v1:{cls}"
            for cmd, cls in (
                ("service list", "ListService"), ("service show", "ShowService"),
                ("placement create", "CreatePlacement"), ("placement explain", "ExplainPlacement"),
                ("placement list", "ListPlacement"), ("slots list", "ListSlots"),
                ("zone list", "ListZone"), ("instance list", "ListInstance"),
                ("instance show", "ShowInstance"), ("instance delete", "DeleteInstance"),
                ("ns list", "ListNS"), ("ns show", "ShowNS"), ("ns create", "CreateNS"),
                ("ns scale", "ScaleNS"), ("ns heal", "HealNS"), ("ns delete", "DeleteNS"),
                ("ns operation list", "ListNSOperation"))],
    },
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
        "Topic :: System :: Networking",
    ],
)
