"""``kx.packs``: context packs, named text always in the prompt (never retrieved).

Levels: ``personal`` packs live in the database (the storage's ``longterm`` store,
store.py: table ``packs_personal`` on SQLite and PostgreSQL); ``team`` and
``org`` packs live as Markdown files in the shared pack directory (``[packs] dir``; see
packfiles.py), so a team keeps them in git and every member's Kairox reads the same
text. ``publish`` moves a pack up (personal -> team -> org), recording who did it.

A pack is injected only while it is *active*: named in ``[packs] active``, in
``[packs.workspaces]`` for the session's workspace or ``[packs.profiles]`` for its
profile, or activated with ``activate`` (stored as activations beside). ``promote``
creates *draft* packs: a draft is never injected, even when named in kairox.toml,
until it is activated (which ends the draft) or published.
"""

from __future__ import annotations

import builtins
import datetime as dt
import getpass
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox_core.errors import KairoxUserError
from kairox_core.inputs import check_text
from kairox_core.longterm.db import has_store, longterm_store
from kairox_core.longterm.events import (
    PACKS_SESSION,
    PackActivated,
    PackCreated,
    PackDeleted,
    PackEdited,
    PackPromoted,
    PackPublished,
)
from kairox_core.longterm.packfiles import (
    MAX_PACK_BYTES,
    PackDirectory,
    PackFile,
    PackProblem,
    check_name,
)
from kairox_core.longterm.store import LongTermStore, PackRow

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig
    from kairox_core.events import Event
    from kairox_core.longterm.service import LongTerm
    from kairox_core.store.protocol import Storage

LEVELS = ("personal", "team", "org")


class PackNotFoundError(KairoxUserError):
    """No context pack with that name."""


@dataclass(frozen=True)
class Pack:
    """A context pack. ``draft``: made by ``promote``, not injected until activated or
    published. ``published_by``: who published a team/org pack."""

    name: str
    level: str
    text: str
    draft: bool = False
    published_by: str | None = None
    published_at: str | None = None
    path: str | None = None  # the file of a team/org pack

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level,
            "text": self.text,
            "draft": self.draft,
            "published_by": self.published_by,
            "published_at": self.published_at,
            "path": self.path,
        }


def current_user() -> str:
    """Who publishes: ``$KAIROX_USER``, else the login name."""
    try:
        return os.environ.get("KAIROX_USER") or getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return "unknown"


class Packs:
    """Context packs over one storage: personal ones in its database, team and org
    ones in the shared directory; ``longterm`` supplies the chunks ``promote`` reads."""

    def __init__(self, storage: Storage, config: KairoxConfig, longterm: LongTerm) -> None:
        self.storage = storage
        self.config = config
        self.longterm = longterm
        location = storage.location
        local = has_store(storage) and "://" not in location and location != ":memory:"
        db_path = Path(location) if local else Path.cwd() / "kairox.db"  # a URL: the cwd
        self.directory = PackDirectory(config.packs.directory(config.source, db_path))

    @property
    def rows(self) -> LongTermStore:
        """Personal packs and activations (raises, naming the storage, if it has none)."""
        return longterm_store(self.storage)

    # --- reading -----------------------------------------------------------------------

    def find(self, name: str) -> Pack | None:
        row = self.rows.get_pack(name)
        if row is not None:
            return Pack(name=row.name, level="personal", text=row.text, draft=row.draft)
        found = self.directory.read(name)
        return _from_file(found, self.directory) if found is not None else None

    def get(self, name: str) -> Pack:
        pack = self.find(check_name(name))
        if pack is None:
            raise PackNotFoundError(
                f"no context pack '{name}' (personal packs: the database; team/org: "
                f"{self.directory.path}); `kairox pack list` shows them"
            )
        return pack

    def list(self) -> builtins.list[Pack]:
        """Personal packs, then team and org packs, each by name (files that are not
        usable packs are skipped: ``scan`` reports them)."""
        return self.scan()[0]

    def scan(self) -> tuple[builtins.list[Pack], builtins.list[PackProblem]]:
        """``list()``, and a ``PackProblem`` for each file of the pack directory that
        could not be loaded (bad front matter, not UTF-8, too large, not a regular file)."""
        personal = [
            Pack(name=r.name, level="personal", text=r.text, draft=r.draft)
            for r in self.rows.list_packs()
        ]
        found, problems = self.directory.scan()
        files = sorted(
            (_from_file(f, self.directory) for f in found),
            key=lambda p: (LEVELS.index(p.level), p.name),
        )
        return personal + files, problems

    # --- writing -----------------------------------------------------------------------

    def create(self, name: str, *, level: str = "personal", text: str = "") -> Pack:
        check_name(name)
        _check_level(level)
        _check_text(text)
        if self.find(name) is not None:
            raise KairoxUserError(
                f"a context pack named '{name}' exists; `kairox pack edit {name}` changes it"
            )
        with self.storage.atomic():
            if level == "personal":
                self._write_personal(name, text, draft=False, new=True)
                pack = Pack(name=name, level=level, text=text)
            else:
                pack = self._write_file(name, level, text, by=current_user())
            self._event(PackCreated(session_id=PACKS_SESSION, name=name, level=level, text=text))
        return pack

    def edit(self, name: str, text: str) -> Pack:
        _check_text(text)
        before = self.get(name)
        if before.text == text:
            return before
        with self.storage.atomic():
            if before.level == "personal":
                self._write_personal(name, text, draft=before.draft, new=False)
                after = replace(before, text=text)
            else:
                after = self._write_file(
                    name, before.level, text, by=before.published_by, at=before.published_at
                )
            self._event(
                PackEdited(
                    session_id=PACKS_SESSION,
                    name=name,
                    level=before.level,
                    text=text,
                    previous_text=before.text,
                )
            )
        return after

    def delete(self, name: str) -> Pack:
        """Remove a pack (and its activations); ``PackDeleted`` keeps its text."""
        before = self.get(name)
        with self.storage.atomic():
            self.rows.delete_pack(name)
            self.rows.delete_activations(name)
            self._event(
                PackDeleted(
                    session_id=PACKS_SESSION, name=name, level=before.level, text=before.text
                )
            )
        if before.level != "personal":
            self.directory.remove(name)
        return before

    def promote(self, chunk_ids: Sequence[str], *, pack: str | None = None) -> Pack:
        """Copy chunks' text into a draft personal pack (new when ``pack`` is None or
        does not exist yet; else appended to that personal pack). The chunks stay."""
        if not chunk_ids:
            raise KairoxUserError("promote needs at least one long-term chunk id")
        chunks = [self.longterm.get(cid) for cid in chunk_ids]
        added = "\n".join(c.text for c in chunks)
        name = pack or _promoted_name()
        check_name(name)
        existing = self.find(name)
        if existing is not None and existing.level != "personal":
            raise KairoxUserError(
                f"pack '{name}' is a {existing.level} pack; promote into a personal pack "
                f"(then `kairox pack publish`), or edit it with `kairox pack edit {name}`"
            )
        with self.storage.atomic():
            if existing is None:
                text = added
                self._write_personal(name, text, draft=True, new=True)
                result = Pack(name=name, level="personal", text=text, draft=True)
                self._event(
                    PackCreated(
                        session_id=PACKS_SESSION, name=name, level="personal", text="", draft=True
                    )
                )
            else:
                text = f"{existing.text.rstrip()}\n{added}" if existing.text.strip() else added
                self._write_personal(name, text, draft=existing.draft, new=False)
                result = replace(existing, text=text)
            self._event(
                PackPromoted(
                    session_id=PACKS_SESSION,
                    name=name,
                    chunk_ids=tuple(c.id for c in chunks),
                    text=text,
                )
            )
        return result

    def publish(self, name: str, *, level: str, by: str | None = None) -> Pack:
        """Elevate a pack: personal -> team -> org (a file in the shared directory,
        recording ``by``, default ``$KAIROX_USER`` or the login name). Ends a draft."""
        _check_level(level)
        before = self.get(name)
        if LEVELS.index(level) <= LEVELS.index(before.level):
            raise KairoxUserError(
                f"pack '{name}' is already {before.level}; publish only moves up "
                f"(personal -> team -> org)"
            )
        who = by or current_user()
        with self.storage.atomic():
            after = self._write_file(name, level, before.text, by=who)
            self.rows.delete_pack(name)
            self._event(
                PackPublished(
                    session_id=PACKS_SESSION,
                    name=name,
                    level=level,
                    previous_level=before.level,
                    published_by=who,
                )
            )
        return after

    def activate(self, name: str, *, workspace_id: str | None = None, active: bool = True) -> Pack:
        """Make a pack part of every later turn of ``workspace_id`` (None: of every
        workspace); ``active=False`` undoes it. Activating a draft ends the draft."""
        pack = self.get(name)
        with self.storage.atomic():
            if active:
                self.rows.activate_pack(workspace_id or "", name, time.time())
                row = self.rows.get_pack(name) if pack.draft else None
                if row is not None:  # ends the draft (its text and times stay)
                    self.rows.update_pack(name, row.text, False, row.updated_at)
                    pack = replace(pack, draft=False)
            else:
                self.rows.deactivate_pack(workspace_id or "", name)
            self._event(
                PackActivated(
                    session_id=PACKS_SESSION, name=name, workspace_id=workspace_id, active=active
                )
            )
        return pack

    def deactivate(self, name: str, *, workspace_id: str | None = None) -> Pack:
        return self.activate(name, workspace_id=workspace_id, active=False)

    # --- what a turn injects -----------------------------------------------------------

    def active_names(self, workspace_id: str | None, profile: str | None) -> builtins.list[str]:
        """Active pack names, config first ([packs] active, workspaces, profiles), then
        activations; each once."""
        cfg = self.config.packs
        names: builtins.list[str] = [*cfg.active]
        if workspace_id is not None:
            names += cfg.workspaces.get(workspace_id, ())
        if profile is not None:
            names += cfg.profiles.get(profile, ())
        names += [a.name for a in self.rows.activations(workspace_id or "")]
        return list(dict.fromkeys(names))

    def active_for(
        self, workspace_id: str | None, profile: str | None
    ) -> tuple[builtins.list[Pack], builtins.list[str]]:
        """The packs a turn must carry, and notes on active names it cannot (missing,
        still a draft) for the trace."""
        packs: builtins.list[Pack] = []
        notes: builtins.list[str] = []
        for name in self.active_names(workspace_id, profile):
            try:
                pack = self.find(name)
            except KairoxUserError as exc:  # a malformed file: say so, do not crash the turn
                notes.append(f"pack '{name}' is active but unreadable: {exc}")
                continue
            if pack is None:
                notes.append(f"pack '{name}' is active but does not exist")
            elif pack.draft:
                notes.append(
                    f"pack '{name}' is a draft: not injected until "
                    f"`kairox pack activate {name}` or publish"
                )
            else:
                packs.append(pack)
        return packs, notes

    # --- storage -----------------------------------------------------------------------

    def _write_personal(self, name: str, text: str, *, draft: bool, new: bool) -> None:
        now = time.time()
        if new:
            self.rows.insert_pack(PackRow(name, text, draft, now, now))
        else:
            self.rows.update_pack(name, text, draft, now)

    def _write_file(
        self, name: str, level: str, text: str, *, by: str | None, at: str | None = None
    ) -> Pack:
        when = at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        file = PackFile(name=name, level=level, text=text, published_by=by, published_at=when)
        self.directory.write(file)
        return _from_file(file, self.directory)

    def _event(self, event: Event) -> None:
        self.storage.events.append(event)


def _from_file(file: PackFile, directory: PackDirectory) -> Pack:
    return Pack(
        name=file.name,
        level=file.level,
        text=file.text,
        published_by=file.published_by,
        published_at=file.published_at,
        path=str(directory.file(file.name)),
    )


def _check_text(text: str) -> None:
    check_text(text, "the pack's text")
    size = len(text.encode("utf-8"))
    if size > MAX_PACK_BYTES:
        raise KairoxUserError(
            f"a pack's text may have at most {MAX_PACK_BYTES} bytes (this one has {size}): "
            f"a pack is in every prompt; put long documents in the workspace index instead"
        )


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise KairoxUserError(f"level must be one of {', '.join(LEVELS)}, not '{level}'")


def _promoted_name() -> str:
    return f"promoted-{dt.date.today().isoformat()}-{uuid.uuid4().hex[:6]}"
