# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``limit``/``marker`` pages of every list of ``fluidvim-api`` (the API-SIG's collection shape)."""

from __future__ import annotations

import urllib.parse

from ..operations import HTTP
from .faults import HTTPError

#: list operationId -> (the collection's key in a page, the item field a marker names)
PAGED = {o.op_id: (o.page, o.marker) for o in HTTP if o.page is not None}


def paginate(req, op_id: str, rows: list, limit, marker) -> dict:
    """The API-SIG page of ``rows`` after ``marker`` (the key of the previous page's last item),
    at most ``limit`` of them: ``{<collection>: [...], "links": [{"rel": "next", ...}]}``."""
    key, field = PAGED[op_id]
    if marker is not None:
        ids = [str(r.get(field)) for r in rows]
        if marker not in ids:
            raise HTTPError(400, f"marker: no {key} item with {field} {marker!r} (give the {field} "
                            "of the last item of the previous page, or no marker for the first)",
                            "marker")
        rows = rows[ids.index(marker) + 1:]
    if limit is None:
        limit = len(rows) or 1
    page = rows[:limit]
    links = []
    if len(rows) > limit:
        q = [(k, v) for k, v in req.GET.items() if k not in ("limit", "marker")]
        q += [("limit", str(limit)), ("marker", str(page[-1].get(field)))]
        links.append({"rel": "next", "href": req.path_url + "?" + urllib.parse.urlencode(q)})
    return {key: page, "links": links}
