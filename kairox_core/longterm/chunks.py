"""Long-term chunks: what they are, who sees them, and ``ChunkStore`` (embedding on top
of the storage's ``LongTermStore``, see store.py).

A chunk is text a person chose to keep, stored with its vector in a partition named by
its *owner*: ``s:<session>`` for a session chunk, ``w:<workspace>`` for a project
chunk, ``g`` for a global one. A session sees exactly three partitions (its own, its
workspace's, global), so visibility is decided by the k-NN query itself: another
session's or workspace's chunks are never read.

The backend that embedded the vectors is recorded by the store; when the configured one
differs, every chunk is re-embedded (they are short, and our own).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kairox_core.errors import KairoxUserError
from kairox_core.longterm.store import Chunk as Chunk  # re-exported: its home before

if TYPE_CHECKING:
    from kairox_core.longterm.store import LongTermStore
    from kairox_core.retrieval.base import EmbeddingBackend

SCOPES = ("session", "project", "global")


class ChunkNotFoundError(KairoxUserError):
    """No long-term chunk with that id."""


@dataclass(frozen=True)
class ChunkHit:
    """A chunk found for a query, with its cosine similarity (1 = same direction)."""

    chunk: Chunk
    similarity: float


def owner_of(scope: str, session_id: str | None, workspace_id: str | None) -> str:
    """The vec0 partition of a chunk; checks the ids its scope needs."""
    if scope not in SCOPES:
        raise KairoxUserError(f"scope must be one of {', '.join(SCOPES)}, not '{scope}'")
    if scope == "session":
        if not session_id:
            raise KairoxUserError("a session chunk needs session_id (the session it belongs to)")
        return f"s:{session_id}"
    if scope == "project":
        if not workspace_id:
            raise KairoxUserError("a project chunk needs workspace_id (its workspace)")
        return f"w:{workspace_id}"
    return "g"


def visible_owners(session_id: str | None, workspace_id: str | None) -> list[str]:
    """The partitions a session of ``workspace_id`` sees: its own, its workspace's, global."""
    owners = ["g"]
    if workspace_id:
        owners.insert(0, f"w:{workspace_id}")
    if session_id:
        owners.insert(0, f"s:{session_id}")
    return owners


class ChunkStore:
    """Long-term chunks embedded with ``backend`` on a ``LongTermStore`` (no events
    here: ``LongTerm`` writes them in the same transaction)."""

    def __init__(
        self, rows: LongTermStore, backend: EmbeddingBackend, *, location: str = ""
    ) -> None:
        self.rows = rows
        self.backend = backend
        self.location = location or "this database"

    def _use_space(self) -> None:
        """The store's vectors are the configured backend's (re-embedded if not)."""
        self.rows.use_space(
            self.backend.name, int(self.backend.dimension), self.backend.embed_documents
        )

    # --- rows --------------------------------------------------------------------------

    def insert(self, chunk: Chunk, owner: str) -> None:
        """The row and its vector."""
        vector = self.backend.embed_documents([chunk.text])[0]
        self.insert_many([(chunk, owner)], [vector])

    def insert_many(
        self, chunks: Sequence[tuple[Chunk, str]], vectors: Sequence[Sequence[float]]
    ) -> None:
        """Rows with vectors already computed (bulk loads), in one transaction."""
        with self.rows.atomic():
            self._use_space()
            self.rows.insert_chunks(
                [(c, owner, v) for (c, owner), v in zip(chunks, vectors, strict=True)]
            )

    def get(self, chunk_id: str) -> Chunk:
        chunk = self.rows.get_chunk(chunk_id)
        if chunk is None:
            raise ChunkNotFoundError(
                f"no long-term chunk '{chunk_id}' in {self.location}; "
                f"`kairox longterm list` shows the ids"
            )
        return chunk

    def update_text(self, chunk_id: str, text: str) -> Chunk:
        """New text, new vector."""
        with self.rows.atomic():
            self._use_space()
            vector = self.backend.embed_documents([text])[0]
            if not self.rows.update_chunk(chunk_id, text, time.time(), vector):
                raise ChunkNotFoundError(f"no long-term chunk '{chunk_id}'")
        return self.get(chunk_id)

    def remove(self, chunk_id: str) -> None:
        """The row and its vector (the events keep the text)."""
        if not self.rows.delete_chunk(chunk_id):
            raise ChunkNotFoundError(f"no long-term chunk '{chunk_id}'")

    def list(
        self,
        scope: str | None = None,
        *,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> builtins.list[Chunk]:
        """Chunks, oldest first. With ``session_id``/``workspace_id`` and no scope: the
        chunks such a session sees; with a scope: that scope's, narrowed by the ids."""
        if scope is not None:
            if scope not in SCOPES:
                raise KairoxUserError(f"scope must be one of {', '.join(SCOPES)}, not '{scope}'")
            return self.rows.list_chunks(
                scope=scope, session_id=session_id, workspace_id=workspace_id
            )
        if session_id is not None or workspace_id is not None:
            return self.rows.list_chunks(owners=visible_owners(session_id, workspace_id))
        return self.rows.list_chunks()

    # --- search ------------------------------------------------------------------------

    def nearest(self, query: str, owners: Sequence[str], k: int) -> builtins.list[ChunkHit]:
        """The ``k`` chunks of ``owners`` most similar to ``query``, best first (every
        similarity, no threshold: the caller decides and explains). A store that has
        never held a chunk has no vector space yet: nothing to embed or search (a search
        used to create the space, a write transaction on every fresh database's turn)."""
        space = self.rows.vector_space()
        if space is None:
            return []
        qvec = self.backend.embed_query(query)
        if not any(qvec):  # no feature at all: cosine is undefined
            return []
        if space != (self.backend.name, int(self.backend.dimension)):
            self._use_space()  # another backend's vectors: re-embedded first
        return [ChunkHit(c, sim) for c, sim in self.rows.nearest_chunks(qvec, owners, k)]

    def nearest_vector(
        self, qvec: Sequence[float], owners: Sequence[str], k: int
    ) -> builtins.list[ChunkHit]:
        self._use_space()
        return [ChunkHit(c, sim) for c, sim in self.rows.nearest_chunks(qvec, owners, k)]
