"""``kairox_core.attachments.from_path``: images, PDFs (pypdf) and text files become the
attachment dicts a turn takes; bad input is a clear ``KairoxUserError``."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.attachments import AttachmentError, from_bytes, from_path
from kairox_core.errors import KairoxUserError
from kairox_core.testing.files import PNG, encrypted_pdf, pdf_with


def test_an_image_a_pdf_and_a_text_file(tmp_path: Path) -> None:
    (tmp_path / "login.png").write_bytes(PNG)
    image = from_path(tmp_path / "login.png")
    assert image == {
        "kind": "image",
        "filename": "login.png",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
    }
    (tmp_path / "report.pdf").write_bytes(pdf_with(["Revenue rose 12 percent", "Costs fell"]))
    pdf = from_path(tmp_path / "report.pdf")
    assert (pdf["kind"], pdf["media_type"], pdf["pages"]) == ("document", "application/pdf", 2)
    assert pdf["text"] == "Revenue rose 12 percent\n\nCosts fell"
    assert base64.b64decode(pdf["data"]) == (tmp_path / "report.pdf").read_bytes()  # the original
    (tmp_path / "notes.md").write_text("# Notes\nwe ship on Fridays — café\n", encoding="utf-8")
    text = from_path(tmp_path / "notes.md")
    assert text == {
        "kind": "document",
        "filename": "notes.md",
        "media_type": "text/plain",
        "text": "# Notes\nwe ship on Fridays — café\n",
    }


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    with pytest.raises(KairoxUserError, match="no such file"):
        from_path(tmp_path / "missing.png")
    (tmp_path / "big.txt").write_text("x" * 101)
    with pytest.raises(AttachmentError, match="101 bytes is over the limit of 100"):
        from_path(tmp_path / "big.txt", max_bytes=100)
    with pytest.raises(AttachmentError, match=r"encrypted.*qpdf --decrypt"):
        from_bytes("locked.pdf", encrypted_pdf())
    with pytest.raises(AttachmentError, match="cannot be read"):
        from_bytes("broken.pdf", b"%PDF-1.4\nnot a pdf at all")
    blank = io.BytesIO()
    w = PdfWriter()
    w.add_blank_page(100, 100)
    w.write(blank)
    with pytest.raises(AttachmentError, match="hold no text"):
        from_bytes("scan.pdf", blank.getvalue())
    with pytest.raises(AttachmentError, match="not a type Kairox reads"):
        from_bytes("archive.zip", b"PK\x03\x04\x00\x00binary")


@given(st.binary(max_size=300) | st.binary(max_size=300).map(lambda b: b"%PDF-1.4\n" + b))
def test_any_bytes_give_an_attachment_or_a_clear_error(data: bytes) -> None:
    try:
        attachment = from_bytes("f", data)
    except AttachmentError as exc:
        assert "cannot attach f:" in str(exc)
    else:
        assert attachment["kind"] in ("image", "document") and attachment["filename"] == "f"
