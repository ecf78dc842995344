# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim: a VIM extension for unikernel network functions (Nova, Nomad, NFV MANO)."""

from setuptools import setup

# The source tree follows the project layout (vnf/, orchestrator/, ...); installed, each directory
# is a sub-package of `fluidvim` so nothing claims a generic top-level name like `vnf`.
PACKAGE_DIRS = {
    "fluidvim": "fluidvim",
    "fluidvim.vnf": "vnf",
    "fluidvim.orchestrator": "orchestrator",
    "fluidvim.orchestrator.zones": "orchestrator/zones",
    "fluidvim.orchestrator.mano": "orchestrator/mano",
    "fluidvim.orchestrator.osm": "orchestrator/osm",
    "fluidvim.evaluator": "evaluator",
    "fluidvim.nova_driver": "nova_driver",
}
# `[DEFAULT] compute_driver = fluidvim.UnikernelDriver`: Nova imports nova.virt.<compute_driver>,
# so ship that one sub-package (and nothing else under nova/: nova itself owns nova/__init__.py).
SHIM_DIRS = {"nova.virt.fluidvim": "nova_shim/nova/virt/fluidvim"}

setup(
    name="fluidvim",
    version="0.1.0",
    description="Unikernel VNFs for OpenStack Nova and HashiCorp Nomad, with a slot-aware "
                "orchestrator",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=list(PACKAGE_DIRS) + list(SHIM_DIRS),
    package_dir={**PACKAGE_DIRS, **SHIM_DIRS},
    package_data={"fluidvim.vnf": ["vectors/*.json", "PROTOCOL.md"],
                  "fluidvim.orchestrator": ["data/*.csv", "data/README.md"],
                  "fluidvim.orchestrator.mano": ["schemas/*.json"],
                  "fluidvim.orchestrator.osm": ["README.md"]},
    install_requires=[
        "oslo.config>=9.0",
        "oslo.log>=5.0",
        "pyroute2==0.9.7",
        "qemu.qmp==0.0.6",
        "SQLAlchemy>=2.0,<2.2",
        "matplotlib>=3.7",
        "tqdm>=4.66",
        # orchestrator / evaluator / MANO
        "oslo.messaging>=14.0",
        "openstacksdk>=4.0",
        "python-nomad==2.1.0",
        "PyYAML>=6.0",
        "jsonschema>=4.0",
        "simpleeval==1.0.8",
        "sushy>=5.0",
        "topohub==1.5.1",
    ],
    extras_require={
        # libvirt-python must match the host's libvirt (Debian bookworm: 9.0)
        "libvirt": ["libvirt-python==9.0.0"],
        "nova": ["nova==34.0.0", "openstack-placement==16.0.0"],
        # what Nova's own test fixtures need (nova_driver/tests)
        "nova-test": ["testtools==2.9.1", "oslotest==6.1.1", "requests-mock==1.12.1",
                      "ddt==1.7.2", "wsgi_intercept==1.13.1", "osprofiler==4.4.0"],
        # the end-to-end Nova script: real services and the unmodified `openstack` CLI
        "e2e": ["python-openstackclient==10.5.0", "glance==33.0.0", "keystone==30.0.0"],
        "test": ["pytest>=8", "pytest-timeout>=2.3", "ruff>=0.6", "libvirt-python==9.0.0",
                 "python-nomad==2.1.0"],
    },
    entry_points={
        "console_scripts": ["fluidvim = fluidvim.cli:console_main",
                            "fluidvim-orchestrator = fluidvim.orchestrator.service:main"],
        "oslo.config.opts": ["fluidvim.vnf = fluidvim.vnf.conf:list_opts",
                             "fluidvim.orchestrator = fluidvim.orchestrator.conf:list_opts",
                             "fluidvim.power = fluidvim.orchestrator.power:list_opts",
                             "fluidvim.evaluator = fluidvim.evaluator.conf:list_opts",
                             "fluidvim.osm = fluidvim.orchestrator.osm.conf:list_opts"],
        # OSM RO finds VIM type X as entry point "rovim_X" of this group
        "osm_rovim.plugins": ["rovim_fluidvim = "
                              "fluidvim.orchestrator.osm.vimconn_fluidvim:vimconnector"],
    },
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
        "Topic :: System :: Networking",
    ],
)
