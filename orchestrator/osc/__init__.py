# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``openstack fluidvim ...`` commands: an osc-lib/cliff plugin of python-openstackclient
(entry point group ``openstack.cli.extension``, module :mod:`.plugin`; the commands in
:mod:`.v1`, group ``openstack.fluidvim.v1``). A client of fluidvim-api, found in the Keystone
catalog (service type ``nfv-placement``); docs/api.md has the commands and the registration."""
