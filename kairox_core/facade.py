"""``Kairox``: the one object an application holds.

``Kairox.open(db_path, config)`` opens the SQLite file once and shares its connection
between the event store, the memory store and the approval flow (so an approval's
memory write and its events commit together). Everything is read from the database
each turn, never cached across processes: a second process on the same file sees the
same memories and history on its next turn (a session handle keeps only the recent end
of its history in memory and reads whatever was appended since, by anyone).

    from kairox_core import Kairox

    with Kairox.open("kairox.db", "kairox.toml") as kx:
        session = kx.session(workspace="docs", profile="default")
        turn = await session.begin_turn("What did we decide about the launch?")
        async for delta in model.stream(turn.messages):   # any chat model
            print(turn.feed(delta), end="")                # <memory> markup removed
        result = await turn.complete()                     # events, proposals, hooks
        for p in kx.approvals.pending():                   # user/workspace memories
            kx.approvals.accept(p.id)

    # scripts and tests: session.run_turn_sync(prompt, reply_text), or
    # begin_turn_sync / feed / complete_sync; `kairox context SESSION` shows the layers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from kairox_core.compaction.compactor import install as install_compaction
from kairox_core.compaction.recall import install as install_recall
from kairox_core.config import KairoxConfig, load_config, load_config_file
from kairox_core.errors import KairoxError, KairoxUserError
from kairox_core.events import Event, SessionStarted
from kairox_core.longterm import LongTerm, LongTermEngine, Packs
from kairox_core.session import Session, run_sync
from kairox_core.store.database import Database
from kairox_core.store.event_store import EventStore, SessionInfo

SessionHook = Callable[[Session], None]


class UnknownSessionError(KairoxUserError):
    """No session with that id in this database."""


class Kairox:
    """Sessions, memories, approvals and events over one Kairox database.

    ``session_hooks`` run on every ``Session`` handle this object creates: the place
    where an engine (compaction) installs its ``after_turn_hooks`` and ``compactor``.
    """

    def __init__(self, db: Database, config: KairoxConfig) -> None:
        from kairox_core.memory.approvals import ApprovalService

        self.db = db
        self.config = config
        self.events_store = EventStore(db)
        self.memories: Any = self._open_memory_store(db)
        self.approvals = ApprovalService(
            self.events_store, self.memories, max_body_chars=config.memory.max_body_chars
        )
        self.session_hooks: list[SessionHook] = []
        self.compactor = install_compaction(self)  # kairox_core.compaction: on every session
        self.recall = install_recall(self)  # compacted turns indexed, recalled per prompt
        self.longterm = LongTerm(self)  # kx.longterm: chunks recalled by similarity
        self.packs = Packs(self)  # kx.packs: context packs, always injected when active
        self.longterm_engine = LongTermEngine(self)  # called before each assembly
        self._sessions: dict[str, Session] = {}
        self._closed = False

    @classmethod
    def open(
        cls,
        db_path: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | KairoxConfig | None = None,
    ) -> Kairox:
        """Open (creating if needed) the database at ``db_path``; ``config`` is a
        kairox.toml path or a ``KairoxConfig`` (None: the usual search, then the default).
        ``db_path`` None uses the configured database."""
        if isinstance(config, KairoxConfig):
            cfg = config
        elif config is not None:
            cfg = load_config_file(config)
        else:
            cfg = load_config()
        path = Path(db_path).expanduser() if db_path is not None else cfg.database_path()
        return cls(Database.open(path), cfg)

    def _open_memory_store(self, db: Database) -> Any:
        from kairox_core.memory.backends import open_memory_store

        return open_memory_store(self.config.memory.store, db)

    # --- sessions --------------------------------------------------------------------

    def session(
        self,
        workspace: str | None = None,
        profile: str | None = None,
        session_id: str | None = None,
        *,
        system_prompt: str | None = None,
    ) -> Session:
        """A new session (``SessionStarted`` is recorded), or an existing one resumed.

        Resuming keeps the session's workspace; a different ``workspace`` is an error. A
        different ``profile`` switches the session to it (``ProfileSwitched``)."""
        self._check_open()
        if session_id is not None:
            info = self.events_store.get_session(session_id)
            if info is not None:
                return self._resume(info, workspace, profile, system_prompt)
        workspace_id = workspace or self.config.kairox.default_workspace
        pname, _ = self.config.resolve_profile(profile)
        sid = session_id or f"s-{uuid.uuid4().hex[:12]}"
        self.events_store.append(
            SessionStarted(session_id=sid, workspace_id=workspace_id, profile=pname)
        )
        return self._handle(sid, workspace_id, pname, system_prompt)

    def _resume(
        self,
        info: SessionInfo,
        workspace: str | None,
        profile: str | None,
        system_prompt: str | None,
    ) -> Session:
        workspace_id = info.workspace_id or self.config.kairox.default_workspace
        if workspace is not None and workspace != workspace_id:
            raise KairoxUserError(
                f"session {info.session_id} belongs to workspace '{workspace_id}', not "
                f"'{workspace}'; open it without workspace= or start a new session"
            )
        current = info.profile or self.config.kairox.default_profile
        try:
            current, _ = self.config.resolve_profile(current)
        except KairoxUserError:
            if profile is None:
                raise KairoxUserError(
                    f"session {info.session_id} uses profile '{current}', which this "
                    f"configuration does not define; pass profile=... to switch"
                ) from None
        session = self._sessions.get(info.session_id)
        if session is None:
            session = self._handle(info.session_id, workspace_id, current, system_prompt)
        elif system_prompt is not None:
            session.system_prompt = system_prompt
        if profile is not None:
            session.switch_profile_sync(profile)
        return session

    def _handle(
        self, sid: str, workspace_id: str, profile: str, system_prompt: str | None
    ) -> Session:
        session = Session(
            self, sid, workspace_id=workspace_id, profile=profile, system_prompt=system_prompt
        )
        for hook in self.session_hooks:
            hook(session)
        self._sessions[sid] = session
        return session

    def get_session(self, session_id: str) -> Session:
        """An existing session; ``UnknownSessionError`` if there is none."""
        info = self.events_store.get_session(session_id)
        if info is None:
            raise UnknownSessionError(
                f"no session '{session_id}' in {self.db.path or 'this database'}; "
                f"`kairox sessions` lists them"
            )
        return self.session(session_id=session_id)

    def sessions(self, *, workspace: str | None = None) -> list[SessionInfo]:
        return self.events_store.sessions(workspace_id=workspace)

    def events(self, session_id: str) -> list[Event]:
        """The session's whole audit trail, in order."""
        return self.events_store.read(session_id)

    # --- compaction ------------------------------------------------------------------

    async def compact_async(
        self, session_id: str, first_seq: int | None = None, last_seq: int | None = None
    ) -> Any:
        return await self.get_session(session_id).compact(first_seq, last_seq)

    def compact(
        self, session_id: str, first_seq: int | None = None, last_seq: int | None = None
    ) -> Any:
        """Compact a session now (a seq range, or the oldest stretch not yet compacted).

        From synchronous code this runs and returns the result; called inside a running
        event loop it returns an awaitable instead (``await kx.compact(sid)``)."""
        coro = self.compact_async(session_id, first_seq, last_seq)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        return coro

    # --- retrieval -------------------------------------------------------------------

    def retriever_for(self, profile: str, workspace_id: str) -> Any:
        """The composite retriever (workspace index + the profile's knowledge bases)."""
        from kairox_core.retrieval.selection import retriever_for_profile

        return retriever_for_profile(self.config, profile, self.db.conn, workspace_id=workspace_id)

    # --- lifetime --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KairoxError("this Kairox is closed")

    async def aclose(self) -> None:
        for session in self._sessions.values():
            if session._retriever is not None:
                await session._retriever.close()
                session._retriever = None
        self._close_stores()

    def close(self) -> None:
        if self._closed:
            return
        for session in self._sessions.values():
            retriever = session._retriever
            if retriever is not None:
                session._retriever = None
                # Inside a running loop run_sync refuses: the index then closes with the db.
                with contextlib.suppress(KairoxError):
                    run_sync(retriever.close())
        self._close_stores()

    def _close_stores(self) -> None:
        if self._closed:
            return
        self._closed = True
        close = getattr(self.approvals, "close", None)
        if callable(close):
            close()
        self.memories.close()
        self.events_store.close()
        self.db.release()

    def __enter__(self) -> Kairox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Kairox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
