"""``Kairox``: the one object an application holds.

``Kairox.open(db_path_or_url, config)`` opens one storage backend (``kairox_register_storage``:
the built-in ``sqlite`` for a path, a plugin's for a URL such as ``postgresql://...``)
whose event log, memory store, proposals and retrieval index share one database (so an
approval's memory write and its events commit together). Everything is read from the database
each turn, never cached across processes: a second process on the same file sees the
same memories and history on its next turn (a session handle keeps only the recent end
of its history in memory and reads whatever was appended since, by anyone).

    from kairox_core import Kairox

    with Kairox.open("kairox.db", "kairox.toml") as kx:
        session = kx.session(workspace="docs", profile="default")
        turn = await session.begin_turn("What did we decide about the launch?")
        async with turn:                                   # cancelled: the turn aborts
            async for delta in model.stream(turn.messages):  # any chat model
                print(turn.feed(delta), end="")            # <memory> markup removed
            result = await turn.complete()                 # events, proposals, engines
        for p in kx.approvals.pending():                   # user/workspace memories
            kx.approvals.accept(p.id)

    # scripts and tests: session.run_turn_sync(prompt, reply_text), or
    # begin_turn_sync / feed / complete_sync; `kairox context SESSION` shows the layers.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from kairox_core.config import KairoxConfig, load_config, load_config_file
from kairox_core.engine_context import EngineContext
from kairox_core.engines import CompactionEngine, CompactionResult, Engine, SynopsisWriter
from kairox_core.errors import KairoxError, KairoxUserError, PluginError, UnknownSessionError
from kairox_core.events import Event, SessionStarted
from kairox_core.inputs import check_session_id, check_workspace_id
from kairox_core.longterm.packs import Packs
from kairox_core.longterm.service import LongTerm
from kairox_core.memory.approvals import ApprovalService
from kairox_core.memory.base import MemoryStore
from kairox_core.retrieval.composite import CompositeWorkspaceRetriever
from kairox_core.session import Session
from kairox_core.session_services import SessionServices
from kairox_core.store.event_store import SessionInfo
from kairox_core.store.protocol import EventLog, Storage
from kairox_core.sync import run_sync


class Kairox:
    """Sessions, memories, approvals and events over one Kairox database.

    The composition root: it opens the stores and builds the engines registered
    through ``kairox_register_engines`` (compaction and recall among them), which every
    session it hands out calls at fixed points (kairox_core/engines.py).
    """

    def __init__(self, storage: Storage, config: KairoxConfig) -> None:
        self.storage = storage
        self.config = config
        self.events_store: EventLog = storage.events
        self._own_memories = config.memory.store not in ("sqlite", storage.name)
        self.memories: MemoryStore = (
            self._open_memory_store() if self._own_memories else storage.memories
        )
        self.approvals = ApprovalService(
            self.events_store,
            self.memories,
            proposals=storage.proposals,
            shared=not self._own_memories,
            max_body_chars=config.memory.max_body_chars,
        )
        self._closed = False
        self.longterm = LongTerm(storage, config)  # kx.longterm: chunks recalled by similarity
        self.packs = Packs(storage, config, self.longterm)  # kx.packs: always injected
        # what the engines get, instead of this object: nothing below here names Kairox
        self.engine_context = EngineContext(
            storage, config, self.longterm, self.packs, is_closed=lambda: self._closed
        )
        self.engines: tuple[Engine, ...] = self._build_engines()
        self.compaction_engine: CompactionEngine | None = self._compaction_engine()
        self.synopsis_writer: SynopsisWriter | None = next(
            (e for e in self.engines if isinstance(e, SynopsisWriter)), None
        )
        self.session_services = SessionServices(
            self.engine_context,
            self.memories,
            self.approvals,
            self.engines,
            self.compaction_engine,
            self.synopsis_writer,
        )
        self._sessions: dict[str, Session] = {}

    @classmethod
    def open(
        cls,
        db_path: str | os.PathLike[str] | None = None,
        config: str | os.PathLike[str] | KairoxConfig | None = None,
    ) -> Kairox:
        """Open (creating if needed) the database at ``db_path``: a path (the ``sqlite``
        storage) or a storage URL (``postgresql://...``: the storage registered under the
        scheme). ``config`` is a kairox.toml path or a ``KairoxConfig`` (None: the usual
        search, then the default). ``db_path`` None uses the configured database."""
        if isinstance(config, KairoxConfig):
            cfg = config
        elif config is not None:
            cfg = load_config_file(config)
        else:
            cfg = load_config()
        return cls(open_storage(db_path if db_path is not None else cfg.database_path()), cfg)

    def _open_memory_store(self) -> MemoryStore:
        from kairox_core.memory.backends import open_memory_store

        return open_memory_store(self.config.memory.store, self.storage.location)

    # --- engines ---------------------------------------------------------------------

    def _build_engines(self) -> tuple[Engine, ...]:
        from kairox_core.engines import ENGINES
        from kairox_core.plugins import get_plugins

        self._engine_names: dict[str, Engine] = {}
        for name, registration in get_plugins().registry(ENGINES).items():
            engine = registration.factory(self.engine_context)
            if not isinstance(engine, Engine):
                raise PluginError(
                    f"engine '{name}' of plugin '{registration.plugin}' is a "
                    f"{type(engine).__name__}, not a kairox_core.engines.Engine"
                )
            self._engine_names[name] = engine
        return tuple(self._engine_names.values())

    def _compaction_engine(self) -> CompactionEngine | None:
        serving = [(n, e) for n, e in self._engine_names.items() if isinstance(e, CompactionEngine)]
        if len(serving) > 1:
            names = ", ".join(n for n, _ in serving)
            raise PluginError(
                f"more than one engine serves compaction ({names}); disable all but one "
                f"with KAIROX_DISABLE_PLUGINS"
            )
        return serving[0][1] if serving else None

    def engine(self, name: str) -> Engine:
        """The engine registered as ``name``; ``KeyError`` when none is."""
        return self._engine_names[name]

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
        A new session's id and workspace follow ``kairox_core.inputs``' rules.

        Resuming keeps the session's workspace; a different ``workspace`` is an error. A
        different ``profile`` switches the session to it (``ProfileSwitched``)."""
        self._check_open()
        if session_id is not None:
            info = self.events_store.get_session(session_id)
            if info is not None:
                return self._resume(info, workspace, profile, system_prompt)
            check_session_id(session_id)  # a new id: no '/', no '_memory:...' of our own
        if workspace is not None:
            check_workspace_id(workspace)
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
            self.session_services,
            sid,
            workspace_id=workspace_id,
            profile=profile,
            system_prompt=system_prompt,
        )
        self._sessions[sid] = session
        return session

    def get_session(self, session_id: str) -> Session:
        """An existing session; ``UnknownSessionError`` if there is none."""
        info = self.events_store.get_session(session_id)
        if info is None:
            raise UnknownSessionError(
                f"no session '{session_id}' in {self.storage.location}; "
                f"`kairox sessions` lists them"
            )
        return self.session(session_id=session_id)

    def sessions(self, *, workspace: str | None = None) -> list[SessionInfo]:
        """Every session in the database (``workspace``: that workspace's only)."""
        return self.events_store.sessions(workspace_id=workspace)

    def session_info(self, session_id: str) -> SessionInfo | None:
        """What the database knows of a session (workspace, profile), without opening a
        handle on it; None when there is no such session."""
        return self.events_store.get_session(session_id)

    def events(
        self,
        session_id: str,
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Event]:
        """The session's audit trail, in order: the whole of it, or the seqs from
        ``first_seq`` to ``last_seq`` (inclusive), of the event ``types`` named (class
        names such as ``"UserMessageAdded"``)."""
        return self.events_store.read(
            session_id, first_seq=first_seq, last_seq=last_seq, types=types
        )

    # --- compaction ------------------------------------------------------------------

    async def compact_async(
        self, session_id: str, first_seq: int | None = None, last_seq: int | None = None
    ) -> CompactionResult:
        """Compact a session now (a seq range, or the oldest stretch not yet compacted)."""
        return await self.get_session(session_id).compact(first_seq, last_seq)

    def compact(
        self, session_id: str, first_seq: int | None = None, last_seq: int | None = None
    ) -> CompactionResult:
        """``compact_async`` from synchronous code: always returns the result (also
        inside a running event loop, like every synchronous twin)."""
        return self.get_session(session_id).compact_sync(first_seq, last_seq)

    # --- retrieval -------------------------------------------------------------------

    def retriever_for(self, profile: str, workspace_id: str) -> CompositeWorkspaceRetriever:
        """The composite retriever (workspace index + the profile's knowledge bases)."""
        return self.engine_context.retriever_for(profile, workspace_id)

    # --- lifetime --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once ``close``/``aclose`` has run (the storage is closed)."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise KairoxError("this Kairox is closed")

    async def aclose(self) -> None:
        if self._closed:
            return
        for engine in self.engines:
            await engine.aclose()
        for session in self._sessions.values():
            retriever = session.detach_retriever()
            if retriever is not None:
                await retriever.close()
        self._close_stores()

    def close(self) -> None:
        if self._closed:
            return
        for engine in self.engines:
            if type(engine).aclose is Engine.aclose:
                continue  # nothing to release: no need to start the background loop
            with contextlib.suppress(KairoxError):  # on Kairox's own loop: not here
                run_sync(engine.aclose())
        for session in self._sessions.values():
            retriever = session.detach_retriever()
            if retriever is not None:
                # On Kairox's own loop run_sync refuses: the index then closes with the db.
                with contextlib.suppress(KairoxError):
                    run_sync(retriever.close())
        self._close_stores()

    def _close_stores(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.approvals.close()
        if self._own_memories:
            self.memories.close()
        self.storage.close()

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


def open_storage(target: str | os.PathLike[str]) -> Storage:
    """The storage for ``target``: a URL's scheme names the registered backend
    (``postgresql://`` -> ``postgresql``), anything else is a path for ``sqlite``."""
    from kairox_core.capabilities import verify
    from kairox_core.plugins import STORAGE, get_plugins

    text = os.fspath(target)
    scheme = text.split("://", 1)[0].lower() if "://" in text else "sqlite"
    name = {"postgres": "postgresql", "postgresql+psycopg": "postgresql"}.get(scheme, scheme)
    registration = get_plugins().get(STORAGE, name, context="database")
    storage: Storage = registration.factory(text if "://" in text else str(Path(text).expanduser()))
    what = f"storage backend '{name}'"
    verify(storage, what)
    if storage.capabilities.longterm:
        verify(storage.longterm, f"{what}'s long-term store")
    return storage


__all__ = ["Kairox", "UnknownSessionError", "open_storage"]
