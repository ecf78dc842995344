# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""python-openstackclient's plugin contract for fluidvim (``openstack.cli.extension`` entry point
``fluidvim``): the API name, its version option, the client factory and the global options.

The command namespace is ``openstack fluidvim ...``: python-openstackclient's own commands and
tacker's plugin (``openstack vnf ...``, ``openstack vnf package ...``) leave it free. The client
is :class:`fluidvim.orchestrator.apiclient.APIClient` on osc's keystoneauth session (clouds.yaml,
``OS_CLOUD``, application credentials, ``--os-*``), pointed at the ``nfv-placement`` endpoint of
the Keystone catalog, or at ``nfv_placement_endpoint_override`` of the cloud's config.
"""

from __future__ import annotations

import os

API_NAME = "fluidvim"
API_VERSION_OPTION = "os_fluidvim_api_version"
DEFAULT_API_VERSION = "1"
API_VERSIONS = ("1",)


def make_client(instance):
    """The fluidvim-api client of osc's ClientManager ``instance`` (made on first use)."""
    from keystoneauth1 import exceptions as ks_exc

    from fluidvim.orchestrator.apiclient import SERVICE_TYPE, APIClient

    try:
        url = instance.get_endpoint_for_service_type(
            SERVICE_TYPE, region_name=instance.region_name, interface=instance.interface)
    except ks_exc.EndpointNotFound:          # from_session says what to register
        url = None
    return APIClient.from_session(instance.session, url=url, interface=instance.interface,
                                  region_name=instance.region_name)


def build_option_parser(parser):
    """osc's global options gain ``--os-fluidvim-api-version``."""
    parser.add_argument(
        "--os-fluidvim-api-version", metavar="<fluidvim-api-version>",
        default=os.environ.get("OS_FLUIDVIM_API_VERSION"),
        help=f"fluidvim API version, default {DEFAULT_API_VERSION} "
             "(env OS_FLUIDVIM_API_VERSION)")
    return parser
