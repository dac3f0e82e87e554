"""``/v1`` content parts as attachments (kairox_core/web/openai_parts.py): a known part
becomes an attachment, anything else a ``PartError`` naming where it is."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.testing.files import PNG
from kairox_core.web.openai_parts import PartError, attachments_of, check_types, part_text

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
PART = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image_url", "file", "x"])},
        optional={"image_url": JSON, "file": JSON, "text": JSON},
    ),
    JSON,
)


@given(st.lists(PART, max_size=4))
def test_any_parts_give_attachments_or_a_part_error(parts: list[Any]) -> None:
    try:
        check_types(parts, "messages[0]")
        attachments_of(parts, "messages[0]")
    except PartError as exc:
        assert exc.param.startswith("messages[0].content[")


def test_a_data_url_image_and_an_ignored_refusal() -> None:
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    parts: list[Any] = [
        {"type": "refusal", "refusal": "no"},
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    check_types(parts, "messages[1]")
    assert part_text(parts) == "look"
    (image,) = attachments_of(parts, "messages[1]")
    assert (image["kind"], image["filename"]) == ("image", "image-1.png")
    with pytest.raises(PartError, match=r"not a base64 data: URL") as bad:
        attachments_of([{"type": "image_url", "image_url": {"url": "data:image/png,abc"}}], "m")
    assert bad.value.param == "m.content[0].image_url.url"
