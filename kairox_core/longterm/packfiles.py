"""Team and org packs as files a team can keep in git: ``<dir>/<name>.md``.

Each file is Markdown with TOML front matter between ``+++`` lines::

    +++
    name = "style-guide"
    level = "team"
    published_by = "ada"
    published_at = "2026-12-01T11:40:00+00:00"
    +++
    Use British spelling. Cite the ticket id in every commit message.

Writes are atomic (a temporary file in the same directory, then ``os.replace``), so a
reader (another process, a ``git pull``) never sees half a pack.

The directory is shared, so a file in it may be anything: one that is not a regular
file (a FIFO, a device, a directory named ``x.md``, a symlink loop), over
``MAX_PACK_BYTES``, not UTF-8, or with bad front matter is a ``PackProblem``, reported
and skipped; the other packs still load. Files are opened with ``O_NONBLOCK`` and
checked with ``fstat`` before any read, so a FIFO never blocks.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tomllib

from kairox_core.errors import KairoxUserError

FENCE = "+++"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_PACK_BYTES = 1_048_576  # a pack is in every prompt: 1 MiB is far past any useful one


@dataclass(frozen=True)
class PackProblem:
    """A file in the pack directory that is not a usable pack, and why."""

    path: str
    problem: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "problem": self.problem}


@dataclass(frozen=True)
class PackFile:
    name: str
    level: str
    text: str
    published_by: str | None = None
    published_at: str | None = None


def check_name(name: str) -> str:
    """Pack names double as file names: letters, digits, ``_ . -``, at most 64."""
    if not NAME_RE.match(name):
        raise KairoxUserError(
            f"pack name '{name}' is not valid: use letters, digits and _ . - "
            f"(at most 64, starting with a letter or digit)"
        )
    return name


def _toml_string(value: str) -> str:
    """A TOML basic string (JSON escapes are TOML escapes; DEL must be escaped too)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def render(pack: PackFile) -> str:
    fields = {"name": pack.name, "level": pack.level}
    if pack.published_by is not None:
        fields["published_by"] = pack.published_by
    if pack.published_at is not None:
        fields["published_at"] = pack.published_at
    head = "".join(f"{k} = {_toml_string(v)}\n" for k, v in fields.items())
    body = pack.text + "\n" if pack.text else ""  # parse drops exactly this newline
    return f"{FENCE}\n{head}{FENCE}\n{body}"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_text_file(path: Path | str, *, limit: int = MAX_PACK_BYTES, what: str = "") -> str:
    """A regular file's UTF-8 text, at most ``limit`` bytes; ``KairoxUserError`` naming
    the file otherwise. Opened with ``O_NONBLOCK`` and checked with ``fstat`` first, so a
    FIFO or a device is refused without a read that could block or never end."""
    label = what or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise KairoxUserError(f"{label}: cannot open: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KairoxUserError(f"{label}: is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise KairoxUserError(f"{label}: {info.st_size} bytes, over the limit of {limit} bytes")
        chunks, seen = [], 0
        while chunk := os.read(fd, 65536):
            seen += len(chunk)
            if seen > limit:  # grew while we read
                raise KairoxUserError(f"{label}: over the limit of {limit} bytes")
            chunks.append(chunk)
    except OSError as exc:
        raise KairoxUserError(f"{label}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KairoxUserError(
            f"{label}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None


def parse(content: str, path: Path) -> PackFile:
    """A pack file's fields; ``KairoxUserError`` naming the file when it is malformed."""
    lines = content.split("\n")
    if not lines or lines[0].strip() != FENCE:
        raise KairoxUserError(f"{path}: a pack file starts with a '+++' line (TOML front matter)")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == FENCE)
    except StopIteration:
        raise KairoxUserError(f"{path}: the front matter has no closing '+++' line") from None
    try:
        meta = tomllib.loads("\n".join(lines[1:end]))
    except tomllib.TOMLDecodeError as exc:
        raise KairoxUserError(f"{path}: front matter is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nesting level
        raise KairoxUserError(f"{path}: front matter is nested too deeply") from None
    level = meta.get("level")
    if level not in ("team", "org"):
        raise KairoxUserError(
            f'{path}: level must be "team" or "org" (personal packs live in the database)'
        )
    name = meta.get("name", path.stem)
    if name != path.stem:
        raise KairoxUserError(
            f"{path}: name = {_short(name)} differs from the file's name; a pack "
            f"named '{path.stem}' has name = \"{path.stem}\" (or no name line)"
        )
    body = "\n".join(lines[end + 1 :])
    return PackFile(
        name=path.stem,
        level=str(level),
        text=body[:-1] if body.endswith("\n") else body,
        published_by=_opt(meta.get("published_by")),
        published_at=_opt(meta.get("published_at")),
    )


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


class PackDirectory:
    """The shared pack directory; missing until the first pack is published."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def file(self, name: str) -> Path:
        return self.path / f"{check_name(name)}.md"

    def read(self, name: str) -> PackFile | None:
        """Pack ``name``'s file, None when there is none; ``KairoxUserError`` naming
        the file when it is not a usable pack."""
        path = self.file(name)
        if not os.path.lexists(path):
            return None
        return parse(read_text_file(path), path)

    def all(self) -> list[PackFile]:
        """The usable packs (``scan`` says what was skipped and why)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[PackFile], list[PackProblem]]:
        """Every ``*.md`` in the directory: the packs that load, and a problem for each
        file that does not (hidden files are not packs and are passed over)."""
        try:
            entries = sorted(e for e in os.listdir(self.path) if e.endswith(".md"))
        except FileNotFoundError:
            return [], []
        except OSError as exc:
            return [], [PackProblem(str(self.path), f"cannot list: {exc.strerror or exc}")]
        packs: list[PackFile] = []
        problems: list[PackProblem] = []
        for entry in entries:
            path = self.path / entry
            stem = entry[: -len(".md")]
            if entry.startswith("."):
                continue
            if not NAME_RE.match(stem):
                problems.append(
                    PackProblem(
                        str(path),
                        "not a valid pack name (letters, digits and _ . -, at most 64, "
                        "starting with a letter or digit); rename it",
                    )
                )
                continue
            try:
                packs.append(parse(read_text_file(path), path))
            except KairoxUserError as exc:
                message = str(exc).removeprefix(f"{path}: ")
                problems.append(PackProblem(str(path), message))
        return packs, problems

    def write(self, pack: PackFile) -> Path:
        """Atomically (re)write ``<dir>/<name>.md``."""
        target = self.file(pack.name)
        self.path.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{pack.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(render(pack))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def remove(self, name: str) -> bool:
        try:
            self.file(name).unlink()
        except FileNotFoundError:
            return False
        return True
