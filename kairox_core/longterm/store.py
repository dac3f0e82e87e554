"""The long-term storage seam: what chunks and personal packs need from a storage backend.

``Storage.longterm`` is a ``LongTermStore``: rows of long-term chunks with their vectors
(one vector space: the embedding backend that made them, and its dimension), k-NN by
owner partition, and the rows of personal packs and pack activations. Embedding, ids,
visibility rules and events stay in the core (chunks.py, service.py, packs.py), so every
backend behaves the same; a backend only keeps rows. Its writes join the storage's
``atomic()`` block, so a row and its event commit together. Team and org packs are
Markdown files (packfiles.py), on no backend.

Distances are cosine (``similarity = 1 - distance``; sqlite-vec's ``distance_metric=
cosine`` and pgvector's ``<=>`` agree to float32 rounding), so a ``[longterm]
threshold`` means the same on every backend. ``kairox_core.testing.longterm_contract``
is the test class a backend must pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kairox_core.capabilities import LongTermCapabilities

Embed = Callable[[Sequence[str]], Sequence[Sequence[float]]]
"""Vectors for texts (an embedding backend's ``embed_documents``), for re-embedding."""


@dataclass(frozen=True)
class Chunk:
    """A long-term chunk. ``session_id`` is the session that wrote it (always set for
    scope ``session``); ``workspace_id`` its workspace (always set for ``project``)."""

    id: str
    scope: str
    text: str
    session_id: str | None
    workspace_id: str | None
    created_at: float
    updated_at: float
    source_seq: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope,
            "text": self.text,
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "source_seq": self.source_seq,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class PackRow:
    """A personal pack as stored (``draft``: made by promote, not injected yet)."""

    name: str
    text: str
    draft: bool
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class Activation:
    """A pack activated for ``workspace_id`` (``""``: for every workspace)."""

    workspace_id: str
    name: str
    activated_at: float


@dataclass(frozen=True)
class StoredChunk:
    """A chunk with its partition and vector, as a copy moves it."""

    chunk: Chunk
    owner: str
    vector: tuple[float, ...]


@runtime_checkable
class LongTermStore(Protocol):
    """Rows of long-term chunks and personal packs on one storage backend."""

    @property
    def capabilities(self) -> LongTermCapabilities:
        """What it supports beyond this protocol (``when_free``: a probe without waiting)."""
        ...

    def atomic(self) -> AbstractContextManager[object]:
        """The storage's transaction (nests)."""
        ...

    # --- the vector space ------------------------------------------------------------

    def vector_space(self) -> tuple[str, int] | None:
        """(backend name, dimension) of the stored vectors; None before the first use."""
        ...

    def use_space(self, backend: str, dimension: int, embed: Embed) -> int:
        """Make (``backend``, ``dimension``) the space of the vectors. When another one
        was recorded, every chunk is re-embedded with ``embed``, in one transaction.
        Returns how many chunks were re-embedded (0: the space was already in use)."""
        ...

    # --- chunks ----------------------------------------------------------------------

    def insert_chunks(self, rows: Sequence[tuple[Chunk, str, Sequence[float]]]) -> None:
        """(chunk, owner partition, vector) rows; the vectors must be of the space in
        use (``use_space`` first). A chunk id already stored raises."""
        ...

    def get_chunk(self, chunk_id: str) -> Chunk | None: ...

    def update_chunk(
        self, chunk_id: str, text: str, updated_at: float, vector: Sequence[float]
    ) -> bool:
        """New text and vector (owner and scope stay); False when no such chunk."""
        ...

    def delete_chunk(self, chunk_id: str) -> bool:
        """The row and its vector; False when no such chunk."""
        ...

    def list_chunks(
        self,
        *,
        scope: str | None = None,
        owners: Sequence[str] | None = None,
        session_id: str | None = None,
        workspace_id: str | None = None,
    ) -> list[Chunk]:
        """Chunks matching every filter given, oldest first (insertion order)."""
        ...

    def nearest_chunks(
        self, vector: Sequence[float], owners: Sequence[str], k: int
    ) -> list[tuple[Chunk, float]]:
        """The ``k`` chunks of ``owners`` nearest ``vector`` by cosine, as (chunk,
        similarity), best first, ties oldest first; exact, no threshold. Chunks whose
        similarity is undefined (a zero vector) are left out."""
        ...

    def export_chunks(self) -> Iterator[StoredChunk]:
        """Every chunk with its owner and vector (float32 values), oldest first."""
        ...

    def chunk_counts(self) -> tuple[int, int]:
        """(chunk rows, stored vectors): equal unless the store is damaged."""
        ...

    # --- personal packs and activations ----------------------------------------------

    def get_pack(self, name: str) -> PackRow | None: ...

    def list_packs(self) -> list[PackRow]:
        """By name."""
        ...

    def insert_pack(self, row: PackRow) -> None:
        """A new pack; a name already stored raises."""
        ...

    def update_pack(self, name: str, text: str, draft: bool, updated_at: float) -> bool: ...

    def delete_pack(self, name: str) -> bool:
        """The pack's row (its activations stay: see ``delete_activations``)."""
        ...

    def activate_pack(self, workspace_id: str, name: str, activated_at: float) -> None:
        """Idempotent: an activation already there keeps its time."""
        ...

    def deactivate_pack(self, workspace_id: str, name: str) -> None: ...

    def delete_activations(self, name: str) -> None: ...

    def activations(self, workspace_id: str | None = None) -> list[Activation]:
        """Those in force for ``workspace_id`` (its own and every workspace's); all when
        None. Oldest first, then by name."""
        ...


def chunk_filters(
    placeholder: str,
    *,
    scope: str | None,
    session_id: str | None,
    workspace_id: str | None,
) -> tuple[list[str], list[object]]:
    """``list_chunks``' equality filters as SQL terms and their arguments, for any
    dialect (``placeholder``: ``?`` or ``%s``); each store adds its own owners term."""
    where: list[str] = []
    args: list[object] = []
    for column, value in (
        ("scope", scope),
        ("session_id", session_id),
        ("workspace_id", workspace_id),
    ):
        if value is not None:
            where.append(f"{column} = {placeholder}")
            args.append(value)
    return where, args


__all__ = ["Activation", "Embed", "LongTermStore", "PackRow", "StoredChunk", "chunk_filters"]
