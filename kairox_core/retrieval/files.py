"""Walking the files to index: ``.gitignore`` honoured, binary and huge files skipped.

The walk never leaves a root through a symbolic link: a linked file or folder whose
target lies outside the root is skipped and listed in ``FileScan.skipped_outside``
(otherwise a link in a shared folder could pull ``~/.ssh`` into the index). A link
within the root is followed for a file; a linked folder is not descended (its files
are reached by their real path). Only regular files are read (no FIFO or device).

Shared by ``kairox index`` and any ``IndexableRetriever`` (``kairox kb index``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

DEFAULT_MAX_BYTES = 2_000_000
ALWAYS_SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "node_modules",
        ".nox",
        ".tox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
    }
)
_SNIFF = 8192


@dataclass
class FileScan:
    """The files worth indexing under some roots, and what was skipped."""

    files: list[Path] = field(default_factory=list)
    skipped_binary: list[Path] = field(default_factory=list)
    skipped_large: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    roots: list[Path] = field(default_factory=list)
    skipped_outside: list[str] = field(default_factory=list)  # "link: -> target, outside"


def is_binary(path: Path) -> bool:
    with path.open("rb") as handle:
        head = handle.read(_SNIFF)
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a multi-byte char cut at the sniff edge is fine
    return False


def _gitignore(directory: Path) -> pathspec.PathSpec[Any] | None:
    path = directory / ".gitignore"
    if not path.is_file():
        return None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _outside(link: Path, root: Path) -> str | None:
    """Why the symbolic link ``link`` is not followed (None: its target is in ``root``)."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"{link}: a symbolic link that leads nowhere (missing target or a loop)"
    if target == root or target.is_relative_to(root):
        return None
    return f"{link}: a symbolic link to {target}, outside {root}"


def _walk(root: Path, scan: FileScan) -> Iterator[Path]:
    """Files under ``root``, each ``.gitignore`` applied to the tree below its folder;
    symbolic links leading out of ``root`` are listed in ``scan`` instead."""
    specs: list[tuple[Path, pathspec.PathSpec[Any]]] = []
    for dirpath, dirnames, filenames in os.walk(root):  # never descends a linked folder
        here = Path(dirpath)
        specs = [(base, spec) for base, spec in specs if here == base or base in here.parents]
        spec = _gitignore(here)
        if spec is not None:
            specs.append((here, spec))
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in ALWAYS_SKIPPED_DIRS and not _ignored(specs, here / d, True)
        )
        for d in dirnames:
            if (here / d).is_symlink() and (why := _outside(here / d, root)) is not None:
                scan.skipped_outside.append(why)
        for name in sorted(filenames):
            p = here / name
            if name == ".gitignore" or _ignored(specs, p, False):
                continue
            if p.is_symlink() and (why := _outside(p, root)) is not None:
                scan.skipped_outside.append(why)
                continue
            yield p


def _ignored(specs: list[tuple[Path, pathspec.PathSpec[Any]]], p: Path, is_dir: bool) -> bool:
    for base, spec in specs:
        rel = p.relative_to(base).as_posix() + ("/" if is_dir else "")
        if spec.match_file(rel):
            return True
    return False


def scan_files(
    paths: Sequence[str | os.PathLike[str]], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> FileScan:
    scan = FileScan()
    seen: set[Path] = set()
    for raw in paths:
        root = Path(raw).expanduser().resolve()
        scan.roots.append(root)
        if not root.exists():
            scan.errors.append(f"{raw}: no such file or directory")
            continue
        candidates = [root] if root.is_file() else _walk(root, scan)
        for path in candidates:
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            try:
                if path.stat().st_size > max_bytes:
                    scan.skipped_large.append(path)
                elif is_binary(path):
                    scan.skipped_binary.append(path)
                else:
                    scan.files.append(path)
            except OSError as exc:
                scan.errors.append(f"{path}: {exc.strerror or exc}")
    return scan
