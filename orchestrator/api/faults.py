# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The API's error body, shared by the application (:mod:`.app`) and the middleware in front of
it (:mod:`.auth`): ``{"error": {"code", "title", "message", "field"}}``. A leaf of the api
package, so both import it one way (no app <-> auth cycle)."""

from __future__ import annotations

import webob
import webob.exc


def error_response(code: int, message: str, field: str = "") -> webob.Response:
    title = webob.exc.status_map[code].title if code in webob.exc.status_map else "Error"
    body = {"error": {"code": code, "title": title, "message": message}}
    if field:
        body["error"]["field"] = field
    return webob.Response(status=code, json_body=body, charset="utf-8")
