# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A server's ``user_data`` as the VNF's day-0 Click configuration.

Heat, Tacker and OSM hand day-0 configuration to a server as Nova ``user_data`` (base64 in the API
and in ``instance.user_data``), usually in cloud-init's formats. A VNF has no cloud-init; the
driver takes its Click configuration from ``user_data`` when there is one:

* **plain text** that is not MIME and does not start with ``#`` is Click text as it is (Click
  comments are ``//``; every cloud-init format — ``#cloud-config``, ``#!`` scripts,
  ``#include``, ``## template: jinja``, … — starts with ``#``);
* text whose first line is ``#click-config`` is Click text (that line becomes the comment
  ``//click-config``, so line numbers in errors are those of the text as written);
* a **MIME multi-part** message (what Heat's ``MultipartMime``, Tacker and cloud-init's
  ``make-mime`` build) contributes its part of type ``text/x-click-config`` or whose content
  starts with ``#click-config``; its other parts (``text/cloud-config``, ``text/x-shellscript``,
  …) are ignored with a log line. More than one Click part is an error;
* gzip-compressed user_data (cloud-init accepts it) is decompressed first;
* anything else (``#cloud-config``, a shell script, binary data) is ignored with a log line: the
  configuration then comes from the flavor, the image or ``[fluidvim] default_click_config``.

No Nova import here: the parsing is tested on its own (tests/unit/test_nova_userdata.py).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import email
import email.policy
import gzip

CLICK_HEADER = "#click-config"
CLICK_CONTENT_TYPE = "text/x-click-config"
GZIP_MAGIC = b"\x1f\x8b"
MIME_STARTS = ("content-type:", "mime-version:")


class UserDataError(ValueError):
    """user_data that is meant as a Click configuration but cannot be used as one."""


@dataclasses.dataclass
class ClickUserData:
    """What user_data holds for the VNF: ``config`` (None: no Click configuration in it),
    ``source`` (where in user_data it is, for messages) and ``ignored`` (one note per part or
    format that was skipped, for the log)."""
    config: str | None
    source: str = "user_data"
    ignored: list[str] = dataclasses.field(default_factory=list)


def _click_text(text: str) -> str:
    """Click text with a ``#click-config`` first line turned into a Click comment (same line
    count, so the VNF's line numbers are those of the text as the user wrote it)."""
    text = text.replace("\r\n", "\n")
    if text.startswith(CLICK_HEADER):
        text = "//" + text[1:]
    return text


def _is_click_header(text: str) -> bool:
    first = text.split("\n", 1)[0].strip()
    return first == CLICK_HEADER or first.startswith(CLICK_HEADER + " ")


def _describe(text: str) -> str:
    first = text.lstrip().split("\n", 1)[0].strip()
    return repr(first[:40]) if first else "empty"


def parse(user_data: str | bytes | None) -> ClickUserData:
    """The Click configuration in a server's ``user_data`` (base64, as Nova keeps it).

    Raises :class:`UserDataError` when user_data is not base64, or holds more than one Click part.
    """
    if not user_data:
        return ClickUserData(None)
    try:
        raw = base64.b64decode(user_data)      # as lenient as nova-api's check and metadata
    except (binascii.Error, ValueError) as e:
        raise UserDataError(f"user_data is not base64: {e}") from None
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise UserDataError(f"user_data is not valid gzip: {e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ClickUserData(None, ignored=[f"user_data: {len(raw)} bytes that are not UTF-8 "
                                            "text (not a Click configuration)"])
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return ClickUserData(None)
    if text.lstrip().lower().startswith(MIME_STARTS):
        return _parse_mime(text)
    if _is_click_header(text):
        return ClickUserData(_click_text(text), "user_data (#click-config)")
    if text.startswith("#"):
        return ClickUserData(None, ignored=[f"user_data starting {_describe(text)}: a "
                                            "cloud-init format, not a Click configuration"])
    return ClickUserData(_click_text(text), "user_data")


def _parse_mime(text: str) -> ClickUserData:
    msg = email.message_from_string(text.lstrip(), policy=email.policy.compat32)
    found, ignored = [], []
    leaves = [p for p in msg.walk() if not p.is_multipart()]
    for i, part in enumerate(leaves, 1):
        ctype = part.get_content_type()
        name = part.get_filename()
        label = f"user_data part {i} ({ctype}{', ' + name if name else ''})"
        payload = part.get_payload(decode=True) or b""
        if payload[:2] == GZIP_MAGIC:
            try:
                payload = gzip.decompress(payload)
            except (OSError, EOFError) as e:
                raise UserDataError(f"{label} is not valid gzip: {e}") from None
        content = payload.decode(part.get_content_charset() or "utf-8", errors="replace")
        content = content.replace("\r\n", "\n")
        if ctype == CLICK_CONTENT_TYPE or _is_click_header(content):
            found.append((label, _click_text(content)))
        else:
            ignored.append(f"{label} starting {_describe(content)}: not a Click configuration")
    if len(found) > 1:
        raise UserDataError(f"user_data has {len(found)} Click configuration parts "
                            f"({', '.join(label for label, _ in found)}): give one")
    if not found:
        return ClickUserData(None, ignored=ignored)
    label, config = found[0]
    return ClickUserData(config, label, ignored)
