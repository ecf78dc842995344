# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A server's user_data as the VNF's Click configuration (fluidvim.nova_driver.userdata), on the
formats Heat, Tacker, OSM and cloud-init's own tools produce."""

import base64
import gzip
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import pytest

from fluidvim.nova_driver import userdata

CLICK = "FromDevice(0) -> c :: Counter -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"


def b64(data) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def mime(*parts) -> str:
    """A multi-part as cloud-init's make-mime / Heat's MultipartMime build it."""
    msg = MIMEMultipart()
    for i, (subtype, text) in enumerate(parts):
        part = MIMEText(text, subtype, "utf-8")
        part.add_header("Content-Disposition", "attachment", filename=f"part-{i + 1:03d}")
        msg.attach(part)
    return msg.as_string()


@pytest.mark.parametrize("value", [None, "", b64(""), b64("  \n\n")])
def test_no_user_data(value):
    ud = userdata.parse(value)
    assert ud.config is None and ud.ignored == []


def test_plain_click_text_is_the_config():
    ud = userdata.parse(b64(CLICK))
    assert (ud.config, ud.source) == (CLICK, "user_data")


def test_crlf_and_bom_are_normalised():
    ud = userdata.parse(b64("\ufeff" + CLICK.replace("\n", "\r\n")))
    assert ud.config == CLICK


def test_click_config_header_becomes_a_comment_and_keeps_line_numbers():
    text = "#click-config\n" + CLICK
    ud = userdata.parse(b64(text))
    assert ud.config == "//click-config\n" + CLICK
    assert ud.config.split("\n")[1:] == text.split("\n")[1:]
    assert ud.source == "user_data (#click-config)"


@pytest.mark.parametrize("text", ["#cloud-config\npackages: [nginx]\n", "#!/bin/sh\necho hi\n",
                                  "#include\nhttp://example.org/x\n",
                                  "## template: jinja\n#cloud-config\n",
                                  "#click-configuration\nnot ours\n"])
def test_cloud_init_formats_are_ignored(text):
    ud = userdata.parse(b64(text))
    assert ud.config is None
    assert len(ud.ignored) == 1 and "cloud-init" in ud.ignored[0]


def test_binary_is_ignored():
    ud = userdata.parse(b64(b"\x00\xff\xfe binary"))
    assert ud.config is None and "not UTF-8" in ud.ignored[0]


def test_gzip():
    assert userdata.parse(b64(gzip.compress(CLICK.encode()))).config == CLICK


def test_mime_click_part_by_header_others_ignored():
    text = mime(("cloud-config", "#cloud-config\nruncmd: [ls]\n"),
                ("x-shellscript", "#!/bin/sh\necho hi\n"),
                ("plain", "#click-config\n" + CLICK))
    ud = userdata.parse(b64(text))
    assert ud.config == "//click-config\n" + CLICK
    assert ud.source == "user_data part 3 (text/plain, part-003)"
    assert [n.split(" starting")[0] for n in ud.ignored] == [
        "user_data part 1 (text/cloud-config, part-001)",
        "user_data part 2 (text/x-shellscript, part-002)"]


def test_mime_click_part_by_content_type():
    text = mime(("cloud-config", "#cloud-config\n{}\n"), ("x-click-config", CLICK))
    ud = userdata.parse(b64(text))
    assert ud.config == CLICK
    assert ud.source == "user_data part 2 (text/x-click-config, part-002)"


def test_mime_part_transfer_encodings():
    """Non-ASCII parts are base64 transfer-encoded by the email package: decoded here."""
    click = "// café\n" + CLICK
    ud = userdata.parse(b64(mime(("x-click-config", click))))
    assert ud.config == click


def test_mime_without_click_part():
    ud = userdata.parse(b64(mime(("cloud-config", "#cloud-config\n{}\n"))))
    assert ud.config is None and len(ud.ignored) == 1


def test_mime_with_two_click_parts_is_an_error():
    text = mime(("x-click-config", CLICK), ("plain", "#click-config\n" + CLICK))
    with pytest.raises(userdata.UserDataError, match="2 Click configuration parts"):
        userdata.parse(b64(text))


def test_not_base64_is_an_error():
    with pytest.raises(userdata.UserDataError, match="not base64"):
        userdata.parse("abc")
