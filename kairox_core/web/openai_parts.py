"""OpenAI content parts of ``/v1/chat/completions`` as a turn's text and attachments.

A user message's ``content`` may be a list of parts: ``text``; ``image_url`` whose
``url`` is a ``data:`` URL (base64), which becomes an image attachment; ``file`` with
``file_data`` (a ``data:`` URL or bare base64) and ``filename``, read like an upload
(``attachments.from_bytes``: a PDF's text through pypdf, a text file, an image). Kairox
downloads nothing, so a remote ``http(s)`` image URL and a ``file_id`` (OpenAI's Files
API) are refused, as is a part type it does not read: each a ``PartError`` naming the
part (``param``, OpenAI's field path) and what to send instead, never a silent drop.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from kairox_core.attachments import MAX_BYTES, AttachmentError, from_bytes
from kairox_core.errors import KairoxUserError

PART_TYPES = ("text", "image_url", "file")
# read as nothing: an earlier assistant message a chat UI resends may hold a refusal
IGNORED_TYPES = ("refusal",)


class PartError(KairoxUserError):
    """A content part Kairox cannot take; ``param`` is where it is in the request."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def part_text(parts: Sequence[Mapping[str, Any]]) -> str:
    """The text of a message's parts, joined as sent."""
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def check_types(parts: Sequence[Any], where: str) -> None:
    """Every part is a known type; ``where`` is the message's path (``messages[2]``)."""
    for j, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in PART_TYPES and kind not in IGNORED_TYPES:
            raise PartError(
                f"{where}.content[{j}] has type {kind!r}, which Kairox does not read; "
                f"send {', '.join(PART_TYPES)} parts (images and files as base64 data)",
                f"{where}.content[{j}].type",
            )


def attachments_of(parts: Sequence[Mapping[str, Any]], where: str) -> list[dict[str, Any]]:
    """The attachments a user message's parts carry (images and files), in order."""
    out: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        here = f"{where}.content[{j}]"
        if part.get("type") == "image_url":
            out.append(_image(part.get("image_url"), here, len(out)))
        elif part.get("type") == "file":
            out.append(_file(part.get("file"), here, len(out)))
    return out


def _image(spec: Any, here: str, n: int) -> dict[str, Any]:
    url = spec.get("url") if isinstance(spec, Mapping) else None
    if not isinstance(url, str) or not url:
        raise PartError(f"{here}.image_url has no url", f"{here}.image_url.url")
    if not url.startswith("data:"):
        raise PartError(
            f"{here}.image_url.url is a remote URL ({url[:60]}); Kairox never downloads: "
            "send the image itself as a data: URL (data:image/png;base64,...)",
            f"{here}.image_url.url",
        )
    data = _data_url_bytes(url, f"{here}.image_url.url")
    attachment = _read(f"image-{n + 1}{_EXT.get(_media_type(url), '')}", data, here)
    if attachment["kind"] != "image":
        raise PartError(
            f"{here}.image_url holds no PNG, JPEG, GIF or WebP image; send a file part "
            "for other files",
            f"{here}.image_url.url",
        )
    return attachment


def _file(spec: Any, here: str, n: int) -> dict[str, Any]:
    if not isinstance(spec, Mapping):
        raise PartError(f"{here}.file is missing", f"{here}.file")
    if spec.get("file_id") and not spec.get("file_data"):
        raise PartError(
            f"{here}.file names file_id {spec['file_id']!r}; Kairox has no Files API: "
            "send the file's bytes as file_data (base64) with its filename",
            f"{here}.file.file_id",
        )
    raw = spec.get("file_data")
    if not isinstance(raw, str) or not raw:
        raise PartError(
            f"{here}.file has no file_data: send the file's bytes, base64", f"{here}.file"
        )
    name = str(spec.get("filename") or f"file-{n + 1}")
    if raw.startswith("data:"):
        data = _data_url_bytes(raw, f"{here}.file.file_data")
    else:
        data = _b64(raw, f"{here}.file.file_data")
    return _read(name, data, here)


def _read(name: str, data: bytes, here: str) -> dict[str, Any]:
    if len(data) > MAX_BYTES:
        raise PartError(
            f"cannot attach {name}: {len(data):,} bytes is over the limit of {MAX_BYTES:,}",
            here,
        )
    try:
        return from_bytes(name, data)
    except AttachmentError as exc:
        raise PartError(str(exc), here) from None


def _media_type(url: str) -> str:
    return url[5:].split(";", 1)[0].split(",", 1)[0].strip().lower()


_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}


def _data_url_bytes(url: str, param: str) -> bytes:
    header, comma, payload = url.partition(",")
    if not comma or not header.endswith(";base64"):
        raise PartError(f"{param} is not a base64 data: URL (data:<type>;base64,<data>)", param)
    return _b64(payload, param)


def _b64(text: str, param: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise PartError(f"{param} is not valid base64", param) from None
