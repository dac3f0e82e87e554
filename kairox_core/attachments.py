"""Attachments from files: ``from_path(path) -> dict``, the shape every front end sends.

A turn's attachments (``begin_turn(prompt, attachments)``, ``UserMessageAdded``) are
plain dicts: ``{"kind": "image", "filename", "media_type", "data"}`` (the bytes, base64)
or ``{"kind": "document", "filename", "media_type", "text"}`` (a PDF's text, read with
pypdf, with ``"pages"`` and the original file as ``"data"``; a text file's text). Older
turns and summaries carry an image as ``[Image dropped — was: <file>]`` and a long
document as its synopsis, written when the turn attaches it (compaction/synopsis.py).
Bad input is a ``KairoxUserError`` saying what and how to fix it: a missing or
unreadable file, one over the size limit, an encrypted or broken PDF, a type Kairox
does not read.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from kairox_core.errors import KairoxUserError

MAX_BYTES = 20 * 1024 * 1024  # a screenshot or a report, not a data set (index those)

IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
SUPPORTED = "images (PNG, JPEG, GIF, WebP), PDF and UTF-8 text files"


class AttachmentError(KairoxUserError):
    """A file that cannot become an attachment; the message says why and what to do."""


def from_path(path: str | Path, *, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """The attachment for the file at ``path``: an image, a PDF or a text file."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise AttachmentError(f"cannot attach {file}: no such file")
    size = file.stat().st_size
    if size > max_bytes:
        raise AttachmentError(
            f"cannot attach {file}: {size:,} bytes is over the limit of {max_bytes:,}; "
            "attach a smaller file, or index a large document (`kairox index`) instead"
        )
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise AttachmentError(f"cannot attach {file}: {exc.strerror or exc}") from None
    return from_bytes(file.name, data)


def from_bytes(filename: str, data: bytes) -> dict[str, Any]:
    """The attachment for ``data`` named ``filename`` (a web upload), by its content."""
    media_type = _image_type(data)
    if media_type is not None:
        return {
            "kind": "image",
            "filename": filename,
            "media_type": media_type,
            "data": base64.b64encode(data).decode("ascii"),
        }
    if data.startswith(b"%PDF-"):
        text, pages = _pdf_text(filename, data)
        return {
            "kind": "document",
            "filename": filename,
            "media_type": "application/pdf",
            "text": text,
            "pages": pages,
            "data": base64.b64encode(data).decode("ascii"),  # the original, for downloads
        }
    if b"\x00" not in data:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
        else:
            return {
                "kind": "document",
                "filename": filename,
                "media_type": "text/plain",
                "text": text,
            }
    raise AttachmentError(f"cannot attach {filename}: not a type Kairox reads ({SUPPORTED})")


def _image_type(data: bytes) -> str | None:
    for magic, media_type in IMAGE_MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _pdf_text(filename: str, data: bytes) -> tuple[str, int]:
    """Every page's text, pages apart by a blank line, and the page count."""
    from pypdf import PdfReader  # imported here: most turns attach nothing

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise AttachmentError(
                f"cannot attach {filename}: the PDF is encrypted; save a copy without "
                "a password (e.g. `qpdf --decrypt in.pdf out.pdf`) and attach that"
            )
        pages = [page.extract_text() or "" for page in reader.pages]
    except AttachmentError:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged file: all unreadable
        raise AttachmentError(
            f"cannot attach {filename}: the PDF cannot be read ({exc}); "
            "open and save it again, or export its text and attach that"
        ) from None
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise AttachmentError(
            f"cannot attach {filename}: its {len(pages)} page(s) hold no text (a scan?); "
            "run it through OCR first, or attach the pages as images"
        )
    return text, len(pages)
