# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The VIM-connector base class and exceptions RO plugins build on.

Inside an OSM RO, :data:`vimconn` is OSM's own ``osm_ro_plugin.vimconn`` (RO catches its exception
classes, so the plugin must raise those). Elsewhere (osm_ro_plugin is not on PyPI) this module
provides a stand-in with the same documented interface: the constructor arguments RO passes, the
exception classes with their HTTP codes, and every connector method raising "not implemented"
until a plugin overrides it. Exceptions exist under both spellings RO has used
(``VimConnException`` since RO 8, ``vimconnException`` before).
"""

from __future__ import annotations

import logging
from http import HTTPStatus

try:                                                # pragma: no cover - only inside an OSM RO
    from osm_ro_plugin import vimconn  # type: ignore[import-not-found]
    REAL_OSM = True
except ImportError:
    vimconn = None
    REAL_OSM = False


class _StandIn:
    """What ``osm_ro_plugin.vimconn`` provides that a connector uses."""

    class VimConnException(Exception):
        """Base of every connector error; ``http_code`` is what RO reports upwards."""

        def __init__(self, message, http_code=HTTPStatus.BAD_REQUEST.value):
            super().__init__(message)
            self.http_code = http_code

    class VimConnConnectionException(VimConnException):
        """The VIM cannot be reached."""

        def __init__(self, message, http_code=HTTPStatus.SERVICE_UNAVAILABLE.value):
            super().__init__(message, http_code)

    class VimConnUnexpectedResponse(VimConnException):
        """The VIM answered something the connector does not understand."""

        def __init__(self, message, http_code=HTTPStatus.SERVICE_UNAVAILABLE.value):
            super().__init__(message, http_code)

    class VimConnAuthException(VimConnException):
        """Credentials refused."""

        def __init__(self, message, http_code=HTTPStatus.UNAUTHORIZED.value):
            super().__init__(message, http_code)

    class VimConnNotFoundException(VimConnException):
        """The named item does not exist in the VIM."""

        def __init__(self, message, http_code=HTTPStatus.NOT_FOUND.value):
            super().__init__(message, http_code)

    class VimConnConflictException(VimConnException):
        """The request conflicts with the VIM's state (in use, ambiguous, ...)."""

        def __init__(self, message, http_code=HTTPStatus.CONFLICT.value):
            super().__init__(message, http_code)

    class VimConnNotSupportedException(VimConnException):
        """The VIM cannot do this at all."""

        def __init__(self, message, http_code=HTTPStatus.SERVICE_UNAVAILABLE.value):
            super().__init__(message, http_code)

    class VimConnNotImplemented(VimConnException):
        """The connector does not implement this method."""

        def __init__(self, message, http_code=HTTPStatus.NOT_IMPLEMENTED.value):
            super().__init__(message, http_code)

    class VimConnector:
        """Base of a connector. RO builds one per VIM account with keyword arguments and must not
        trigger any traffic to the VIM from the constructor."""

        def __init__(self, uuid, name, tenant_id, tenant_name, url, url_admin=None, user=None,
                     passwd=None, log_level=None, config=None, persistent_info=None):
            self.id = uuid
            self.name = name
            self.tenant_id, self.tenant_name = tenant_id, tenant_name
            self.url = url
            self.url_admin = url_admin or url
            self.user, self.passwd = user, passwd
            self.config = dict(config or {})
            self.persistent_info = persistent_info if persistent_info is not None else {}
            self.availability_zone = None
            self.logger = logging.getLogger("ro.vim")
            if log_level:
                self.logger.setLevel(getattr(logging, log_level))

        def __getitem__(self, key):
            fields = {"id": "id", "name": "name", "tenant_id": "tenant_id",
                      "tenant_name": "tenant_name", "url": "url", "url_admin": "url_admin",
                      "user": "user", "passwd": "passwd", "config": "config"}
            if key not in fields:
                raise KeyError(f"invalid key {key!r}")
            return getattr(self, fields[key])

        def _missing(self, method):
            raise _StandIn.VimConnNotImplemented(f"{type(self).__name__}.{method} is not "
                                                 "implemented")

        def check_vim_connectivity(self):
            return None

        # every method RO may call; a connector overrides what it supports
        def get_tenant_list(self, filter_dict=None):
            self._missing("get_tenant_list")

        def new_tenant(self, tenant_name, tenant_description):
            self._missing("new_tenant")

        def delete_tenant(self, tenant_id):
            self._missing("delete_tenant")

        def new_network(self, net_name, net_type, ip_profile=None, shared=False,
                        provider_network_profile=None):
            self._missing("new_network")

        def get_network_list(self, filter_dict=None):
            self._missing("get_network_list")

        def get_network(self, net_id):
            self._missing("get_network")

        def delete_network(self, net_id, created_items=None):
            self._missing("delete_network")

        def refresh_nets_status(self, net_list):
            self._missing("refresh_nets_status")

        def get_flavor(self, flavor_id):
            self._missing("get_flavor")

        def get_flavor_id_from_data(self, flavor_dict):
            self._missing("get_flavor_id_from_data")

        def new_flavor(self, flavor_data):
            self._missing("new_flavor")

        def delete_flavor(self, flavor_id):
            self._missing("delete_flavor")

        def new_image(self, image_dict):
            self._missing("new_image")

        def delete_image(self, image_id):
            self._missing("delete_image")

        def get_image_id_from_path(self, path):
            self._missing("get_image_id_from_path")

        def get_image_list(self, filter_dict=None):
            self._missing("get_image_list")

        def new_vminstance(self, name, description, start, image_id, flavor_id,
                           affinity_group_list, net_list, cloud_config=None, disk_list=None,
                           availability_zone_index=None, availability_zone_list=None):
            self._missing("new_vminstance")

        def get_vminstance(self, vm_id):
            self._missing("get_vminstance")

        def delete_vminstance(self, vm_id, created_items=None, volumes_to_hold=None):
            self._missing("delete_vminstance")

        def refresh_vms_status(self, vm_list):
            self._missing("refresh_vms_status")

        def action_vminstance(self, vm_id, action_dict, created_items=None):
            self._missing("action_vminstance")

        def get_vminstance_console(self, vm_id, console_type="vnc"):
            self._missing("get_vminstance_console")


if vimconn is None:
    vimconn = _StandIn

def _resolve(name):
    """``name`` from the active vimconn, or its pre-RO-8 lower-case spelling."""
    cls = getattr(vimconn, name, None) or getattr(vimconn, "v" + name[1:].replace("Conn", "conn"),
                                                   None)
    return cls or getattr(_StandIn, name)


VimConnector = vimconn.VimConnector
VimConnException = _resolve("VimConnException")
VimConnConnectionException = _resolve("VimConnConnectionException")
VimConnUnexpectedResponse = _resolve("VimConnUnexpectedResponse")
VimConnAuthException = _resolve("VimConnAuthException")
VimConnNotFoundException = _resolve("VimConnNotFoundException")
VimConnConflictException = _resolve("VimConnConflictException")
VimConnNotSupportedException = _resolve("VimConnNotSupportedException")
VimConnNotImplemented = _resolve("VimConnNotImplemented")

# the spellings of RO releases before 8 (what older plugins and docs use)
vimconnException = VimConnException
vimconnConnectionException = VimConnConnectionException
vimconnUnexpectedResponse = VimConnUnexpectedResponse
vimconnAuthException = VimConnAuthException
vimconnNotFoundException = VimConnNotFoundException
vimconnConflictException = VimConnConflictException
vimconnNotSupportedException = VimConnNotSupportedException
vimconnNotImplemented = VimConnNotImplemented
