# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The API's error body, shared by the application (:mod:`.app`) and the middleware in front of
it (:mod:`.auth`). A leaf of the api package, so both import it one way (no app <-> auth cycle).

The shape is the OpenStack API-SIG's (``errors`` guideline)::

    {"errors": [{"request_id": "req-...", "code": "fluidvim.not-found", "status": 404,
                 "title": "Not Found", "detail": "name: no service 'fw'", "field": "name"}]}

``request_id`` is oslo.middleware's (also in the ``x-openstack-request-id`` header); ``field``,
when there is one, names the part of the request that is wrong.
"""

from __future__ import annotations

import uuid

import webob
import webob.exc
from oslo_middleware import request_id as oslo_request_id


def request_id(environ) -> str:
    """oslo.middleware's request id of this request (one is made if it has none yet)."""
    rid = environ.get(oslo_request_id.ENV_REQUEST_ID)
    if not rid:
        rid = environ[oslo_request_id.ENV_REQUEST_ID] = f"req-{uuid.uuid4()}"
    return rid


def error_response(code: int, message: str, field: str = "", environ=None) -> webob.Response:
    title = webob.exc.status_map[code].title if code in webob.exc.status_map else "Error"
    err = {"request_id": request_id(environ if environ is not None else {}),
           "code": "fluidvim." + title.lower().replace(" ", "-"), "status": code,
           "title": title, "detail": message}
    if field:
        err["field"] = field
    res = webob.Response(status=code, json_body={"errors": [err]}, charset="utf-8")
    res.headers[oslo_request_id.HTTP_RESP_HEADER_REQUEST_ID] = err["request_id"]
    return res


class HTTPError(Exception):
    """An answer other than 2xx from a handler: the status, the message, the field at fault and,
    for a 405, the methods the path allows (:func:`error_response` shapes it)."""

    def __init__(self, code: int, message: str, field: str = "", allow=()):
        super().__init__(message)
        self.code, self.message, self.field, self.allow = code, message, field, tuple(allow)
