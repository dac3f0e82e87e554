"""``kx.longterm``: add, list, search, edit and delete long-term chunks, with events.

Each change is one transaction: the row, its vector and its event commit together.
Chunks are written by a person (``/remember``, ``kairox longterm add``, a pinned summary
line), so their text is stored as given: it is not run through redaction.
"""

from __future__ import annotations

import builtins
import time
import uuid
from typing import TYPE_CHECKING

from kairox_core.errors import KairoxUserError, UnknownSessionError
from kairox_core.inputs import check_text, check_workspace_id
from kairox_core.longterm.chunks import Chunk, ChunkHit, ChunkStore, owner_of, visible_owners
from kairox_core.longterm.db import longterm_store
from kairox_core.longterm.events import (
    LongTermChunkAdded,
    LongTermChunkDeleted,
    LongTermChunkEdited,
    chunk_home_session,
)
from kairox_core.summary_lines import line_of

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig
    from kairox_core.store.protocol import Storage

MAX_CHUNK_CHARS = 4000  # a chunk is a fact or a note, not a document (index those)
MAX_SEARCH_K = 1000  # chunks one search may return


class LongTerm:
    """Long-term memory over one storage: chunks in its ``longterm`` store, embedded
    with the configured ``[retrieval]`` backend, each change an event in its log."""

    def __init__(self, storage: Storage, config: KairoxConfig) -> None:
        self.storage = storage
        self.config = config
        self._store: ChunkStore | None = None

    @property
    def store(self) -> ChunkStore:
        """Built on first use: loading an embedding backend may be slow (MiniLM)."""
        if self._store is None:
            from kairox_core.retrieval.embeddings import load_embedding_backend

            backend = load_embedding_backend(self.config.retrieval)
            rows = longterm_store(self.storage)  # raises, naming the storage, if it has none
            self._store = ChunkStore(rows, backend, location=self.storage.location)
        return self._store

    # --- writing -----------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        scope: str = "session",
        session_id: str | None = None,
        workspace_id: str | None = None,
        source_seq: int | None = None,
    ) -> Chunk:
        """Keep ``text``: visible to ``session_id`` only (scope ``session``), to every
        session of ``workspace_id`` (``project``) or to every session (``global``).
        ``session_id`` on a project/global chunk records where it was written."""
        text = _checked(text)
        if workspace_id is not None:
            check_workspace_id(workspace_id)
        if scope == "project" and not workspace_id and session_id:
            workspace_id = self._workspace_of(session_id)
        if scope == "session" and session_id and not workspace_id:
            workspace_id = self._workspace_of(session_id)
        owner = owner_of(scope, session_id, workspace_id)
        now = time.time()
        chunk = Chunk(
            id=f"lt-{uuid.uuid4().hex[:12]}",
            scope=scope,
            text=text,
            session_id=session_id,
            workspace_id=workspace_id if scope != "global" else None,
            created_at=now,
            updated_at=now,
            source_seq=source_seq,
        )
        with self.storage.atomic():
            self.store.insert(chunk, owner)
            self.storage.events.append(
                LongTermChunkAdded(
                    session_id=chunk_home_session(scope, session_id, chunk.workspace_id),
                    chunk_id=chunk.id,
                    scope=scope,
                    text=text,
                    workspace_id=chunk.workspace_id,
                    origin_session_id=session_id,
                    source_seq=source_seq,
                )
            )
        return chunk

    def edit(self, chunk_id: str, text: str) -> Chunk:
        """Replace a chunk's text (re-embedded; ``LongTermChunkEdited``)."""
        text = _checked(text)
        with self.storage.atomic():
            before = self.store.get(chunk_id)
            if before.text == text:
                return before
            after = self.store.update_text(chunk_id, text)
            self.storage.events.append(
                LongTermChunkEdited(
                    session_id=_home(before),
                    chunk_id=chunk_id,
                    scope=before.scope,
                    text=text,
                    previous_text=before.text,
                )
            )
        return after

    def delete(self, chunk_id: str) -> Chunk:
        """Forget a chunk (``LongTermChunkDeleted`` keeps its last text); returns it."""
        with self.storage.atomic():
            before = self.store.get(chunk_id)
            self.store.remove(chunk_id)
            self.storage.events.append(
                LongTermChunkDeleted(
                    session_id=_home(before),
                    chunk_id=chunk_id,
                    scope=before.scope,
                    text=before.text,
                    workspace_id=before.workspace_id,
                )
            )
        return before

    def pin_summary_line(
        self, session_id: str, summary_seq: int, line: int, *, scope: str = "session"
    ) -> Chunk:
        """Keep line ``line`` (numbered as ``kairox summary show`` prints it: from 0,
        blank lines counted) of the active summary at ``summary_seq``, as it reads now
        (edits and dropped chunks applied), as a chunk: a summary's sentence worth more
        than this conversation."""
        if self.storage.events.get_session(session_id) is None:
            raise UnknownSessionError(
                f"no session '{session_id}' in {self.storage.location}; "
                f"`kairox sessions` lists them"
            )
        from kairox_core.context import CompactionState, edits  # at use: the store's
        # protocol imports this package (its chunk types), and context imports the protocol

        state = edits.refresh(self.storage.events, session_id, CompactionState())
        summary = next((s for s in state.summaries if s.seq == summary_seq), None)
        if summary is None:
            raise KairoxUserError(
                f"seq {summary_seq} of session {session_id} is not an active summary; "
                f"`kairox summary show {session_id}` lists them"
            )
        return self.add(
            line_of(summary, line), scope=scope, session_id=session_id, source_seq=summary_seq
        )

    # --- reading -----------------------------------------------------------------------

    def get(self, chunk_id: str) -> Chunk:
        return self.store.get(chunk_id)

    def list(
        self,
        scope: str | None = None,
        *,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> builtins.list[Chunk]:
        """Chunks, oldest first: all; one scope's; or (ids, no scope) those a session of
        that workspace sees."""
        return self.store.list(scope, session_id=session_id, workspace_id=workspace_id)

    def search(
        self,
        query: str,
        *,
        session_id: str | None,
        workspace_id: str | None,
        k: int | None = None,
        threshold: float | None = None,
    ) -> builtins.list[ChunkHit]:
        """Chunks visible to that session with cosine similarity >= ``threshold``
        (default ``[longterm] threshold``), at most ``k`` (``[longterm] k``), best first."""
        cfg = self.config.longterm
        k = cfg.k if k is None else k
        if not 0 <= k <= MAX_SEARCH_K:
            raise KairoxUserError(f"k must be between 0 and {MAX_SEARCH_K}, not {k}")
        check_text(query, "the query")
        threshold = cfg.threshold if threshold is None else threshold
        hits = self.nearest(query, session_id=session_id, workspace_id=workspace_id, k=k)
        return [h for h in hits if h.similarity >= threshold]

    def nearest(
        self, query: str, *, session_id: str | None, workspace_id: str | None, k: int
    ) -> builtins.list[ChunkHit]:
        """The ``k`` visible chunks nearest ``query`` whatever their similarity (the
        trace shows those under the threshold too)."""
        if not query.strip() or k <= 0:
            return []
        return self.store.nearest(query, visible_owners(session_id, workspace_id), k)

    def _workspace_of(self, session_id: str) -> str | None:
        info = self.storage.events.get_session(session_id)
        return info.workspace_id if info is not None else None


def _home(chunk: Chunk) -> str:
    return chunk_home_session(chunk.scope, chunk.session_id, chunk.workspace_id)


def _checked(text: str) -> str:
    text = check_text(text, "the chunk's text").strip()
    if not text:
        raise KairoxUserError("a long-term chunk needs some text")
    if len(text) > MAX_CHUNK_CHARS:
        raise KairoxUserError(
            f"a long-term chunk holds at most {MAX_CHUNK_CHARS} characters ({len(text)} "
            f"given); split it, or index documents with `kairox index`"
        )
    return text
