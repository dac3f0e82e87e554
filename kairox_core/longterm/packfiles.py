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
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tomllib

from kairox_core.errors import KairoxUserError

FENCE = "+++"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


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
    level = meta.get("level")
    if level not in ("team", "org"):
        raise KairoxUserError(
            f'{path}: level must be "team" or "org" (personal packs live in the database)'
        )
    body = "\n".join(lines[end + 1 :])
    return PackFile(
        name=str(meta.get("name") or path.stem),
        level=str(level),
        text=body[:-1] if body.endswith("\n") else body,
        published_by=_opt(meta.get("published_by")),
        published_at=_opt(meta.get("published_at")),
    )


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


class PackDirectory:
    """The shared pack directory; missing until the first pack is published."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def file(self, name: str) -> Path:
        return self.path / f"{check_name(name)}.md"

    def read(self, name: str) -> PackFile | None:
        path = self.file(name)
        try:
            content = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return parse(content, path)

    def all(self) -> list[PackFile]:
        if not self.path.is_dir():
            return []
        out = []
        for path in sorted(self.path.glob("*.md")):
            if NAME_RE.match(path.stem):
                out.append(parse(path.read_text(encoding="utf-8"), path))
        return out

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
