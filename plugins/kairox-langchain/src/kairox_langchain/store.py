"""``KairoxStore``: a LangGraph ``BaseStore`` over Kairox memories and long-term chunks.

Namespaces map to Kairox scopes (namespaces.py). An item's value is ``{"text": ...}``:
Kairox keeps text, and the text is what its turns put in front of the model. Writes
are a person's writes, accepted at once and recorded as events (``kx.approvals``
``remember``/``edit_memory``/``delete_memory``, ``kx.longterm`` ``add``/``edit``/
``delete``); the model's own ``<memory>`` markers still go through approval (see
``KairoxChatMessageHistory`` and ``KairoxChat``). Search with a query is Kairox's k-NN
over long-term chunks, above ``[longterm] threshold`` (or ``threshold=``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from kairox_core.markers import KEY_RE
from kairox_langchain.errors import UnsupportedValueError
from kairox_langchain.namespaces import (
    LONGTERM,
    MEMORIES,
    Scope,
    check_prefix,
    scope_of,
)

if TYPE_CHECKING:
    from kairox_core import Kairox


class KairoxStore(BaseStore):
    """``KairoxStore(kx, threshold=None)``: LangGraph's long-term memory store over
    ``kx``. ``threshold`` overrides ``[longterm] threshold`` for searches."""

    def __init__(self, kx: Kairox, *, threshold: float | None = None) -> None:
        self.kx = kx
        self.threshold = threshold

    # --- BaseStore ----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread: Kairox's stores are synchronous (SQLite, the
        embedding of a chunk), so the caller's loop keeps running meanwhile."""
        return await asyncio.to_thread(self.batch, list(ops))

    def add(self, namespace: tuple[str, ...], text: str) -> Item:
        """Add a long-term chunk and return its item (its key is the id Kairox gave
        it): ``put`` cannot create a chunk under a key of your choosing."""
        scope = scope_of(namespace)
        if scope.kind != LONGTERM:
            raise UnsupportedValueError(
                f"add() creates long-term chunks; {tuple(namespace)!r} holds memories, "
                f"which are keyed: use put(namespace, key, {{'text': ...}})"
            )
        chunk = self.kx.longterm.add(
            text,
            scope=scope.scope,
            session_id=scope.session_id,
            workspace_id=scope.workspace_id,
        )
        return _item(scope.namespace, chunk.id, chunk.text, chunk.created_at, chunk.updated_at)

    async def aadd(self, namespace: tuple[str, ...], text: str) -> Item:
        return await asyncio.to_thread(self.add, namespace, text)

    # --- the operations -----------------------------------------------------------------

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(scope_of(op.namespace), op.key)
        if isinstance(op, PutOp):
            scope = scope_of(op.namespace)
            if op.value is None:
                self._delete(scope, op.key)
            else:
                self._put(scope, op.key, dict(op.value), op.index)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise UnsupportedValueError(f"KairoxStore does not know the operation {op!r}")

    def _get(self, scope: Scope, key: str) -> Item | None:
        if scope.kind == MEMORIES:
            record = self._memory(scope, key)
            if record is None:
                return None
            return _item(scope.namespace, key, record.body, record.created_at, record.updated_at)
        chunk = self._chunk(scope, key)
        if chunk is None:
            return None
        return _item(scope.namespace, key, chunk.text, chunk.created_at, chunk.updated_at)

    def _put(self, scope: Scope, key: str, value: dict[str, Any], index: Any) -> None:
        text = _text_of(value, scope.namespace, key)
        if scope.kind == MEMORIES:
            if index not in (None, False) and list(index) not in (["text"], ["$"]):
                raise _index_error(index)
            existing = self._memory(scope, key)
            if existing is not None and existing.key is None:  # a keyless memory, by id
                self.kx.approvals.edit_memory(existing.id, text)
                return
            if not KEY_RE.fullmatch(key):
                raise UnsupportedValueError(
                    f"'{key}' cannot be a Kairox memory key: use 1-128 letters, digits, "
                    f"'_', '.', ':' or '-' (the key of a <memory> marker)"
                )
            self.kx.approvals.remember(
                scope.scope,
                key,
                text,
                workspace_id=scope.workspace_id,
                session_id=scope.session_id,
            )
            return
        if index is False or (index is not None and list(index) not in (["text"], ["$"])):
            raise _index_error(index)
        chunk = self._chunk(scope, key)
        if chunk is None:
            raise UnsupportedValueError(
                f"no long-term chunk '{key}' in {scope.namespace!r}: a chunk's key is the "
                f"id Kairox gives it, so put() only edits one; create chunks with "
                f"KairoxStore.add(namespace, text), or keep keyed items under "
                f"('memories', ...)"
            )
        self.kx.longterm.edit(chunk.id, text)

    def _delete(self, scope: Scope, key: str) -> None:
        if scope.kind == MEMORIES:
            record = self._memory(scope, key)
            if record is not None:
                self.kx.approvals.delete_memory(record.id)
            return
        chunk = self._chunk(scope, key)
        if chunk is not None:
            self.kx.longterm.delete(chunk.id)

    # --- search -------------------------------------------------------------------------

    def _search(self, op: SearchOp) -> list[SearchItem]:
        check_prefix(op.namespace_prefix)
        scopes = [
            scope_of(ns)
            for ns in self._namespaces()
            if ns[: len(op.namespace_prefix)] == tuple(op.namespace_prefix)
        ]
        wanted = op.offset + op.limit
        if op.query:
            if any(s.kind == MEMORIES for s in scopes) or op.namespace_prefix[:1] == (MEMORIES,):
                raise UnsupportedValueError(
                    "Kairox memories are not embedded (every approved memory is in each "
                    "turn's context): search ('memories', ...) without a query to list "
                    "them, or search ('longterm', ...) by similarity"
                )
            found = [h for s in scopes for h in self._nearest(s, op.query, op.filter, wanted)]
            found.sort(key=lambda item: -(item.score or 0.0))
        else:
            found = [
                item for s in scopes for item in self._listed(s) if _matches(item.value, op.filter)
            ]
        return found[op.offset : wanted]

    def _nearest(
        self, scope: Scope, query: str, filter: dict[str, Any] | None, wanted: int
    ) -> list[SearchItem]:
        """Kairox's k-NN for ``scope``'s chunks above the threshold. A k-NN query sees
        a session's, its workspace's and global chunks together, so ``k`` grows until
        ``wanted`` chunks of this scope are found or none is left above the threshold."""
        session_id = scope.session_id
        workspace_id = scope.workspace_id
        if scope.scope == "session":
            info = self.kx.session_info(scope.session_id or "")
            workspace_id = info.workspace_id if info is not None else None
        k = max(wanted, 1)
        while True:
            hits = self.kx.longterm.search(
                query,
                session_id=session_id,
                workspace_id=workspace_id,
                k=k,
                threshold=self.threshold,
            )
            mine = [
                _item(
                    scope.namespace,
                    h.chunk.id,
                    h.chunk.text,
                    h.chunk.created_at,
                    h.chunk.updated_at,
                    score=h.similarity,
                )
                for h in hits
                if _owned(scope, h.chunk)
            ]
            mine = [item for item in mine if _matches(item.value, filter)]
            if len(mine) >= wanted or len(hits) < k:
                return mine
            k *= 2

    def _listed(self, scope: Scope) -> Iterator[SearchItem]:
        if scope.kind == MEMORIES:
            records = self.kx.memories.list(
                scope.scope, workspace_id=scope.workspace_id, session_id=scope.session_id
            )
            for r in sorted(records, key=lambda r: r.created_at):
                if _memory_owned(scope, r):
                    key = r.key if r.key is not None else r.id
                    yield _item(scope.namespace, key, r.body, r.created_at, r.updated_at)
            return
        for chunk in self.kx.longterm.list(
            scope.scope, session_id=scope.session_id, workspace_id=scope.workspace_id
        ):
            if _owned(scope, chunk):
                yield _item(
                    scope.namespace, chunk.id, chunk.text, chunk.created_at, chunk.updated_at
                )

    # --- namespaces ---------------------------------------------------------------------

    def _namespaces(self) -> list[tuple[str, ...]]:
        """Every namespace that holds an item now, sorted."""
        found: set[tuple[str, ...]] = set()
        for r in self.kx.memories.list():
            found.add(
                Scope(
                    MEMORIES, r.scope.value, workspace_id=r.workspace_id, session_id=r.session_id
                ).namespace
            )
        for c in self.kx.longterm.list():
            found.add(
                Scope(
                    LONGTERM, c.scope, workspace_id=c.workspace_id, session_id=c.session_id
                ).namespace
            )
        return sorted(found)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = self._namespaces()
        for cond in op.match_conditions or ():
            namespaces = [ns for ns in namespaces if _path_matches(ns, cond.match_type, cond.path)]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[op.offset : op.offset + op.limit]

    # --- lookups ------------------------------------------------------------------------

    def _memory(self, scope: Scope, key: str) -> Any:
        record = None
        if KEY_RE.fullmatch(key):
            record = self.kx.memories.get(
                scope.scope, key, workspace_id=scope.workspace_id, session_id=scope.session_id
            )
        if record is None:  # a keyless (session) memory is listed under its id
            by_id = self.kx.memories.get_by_id(key)
            if by_id is not None and by_id.key is None and _memory_owned(scope, by_id):
                record = by_id
        return record

    def _chunk(self, scope: Scope, key: str) -> Any:
        from kairox_core import KairoxUserError

        try:
            chunk = self.kx.longterm.get(key)
        except KairoxUserError:  # ChunkNotFoundError: no chunk with that id
            return None
        return chunk if _owned(scope, chunk) else None


def _owned(scope: Scope, chunk: Any) -> bool:
    if chunk.scope != scope.scope:
        return False
    if scope.scope == "project":
        return bool(chunk.workspace_id == scope.workspace_id)
    if scope.scope == "session":
        return bool(chunk.session_id == scope.session_id)
    return True


def _memory_owned(scope: Scope, record: Any) -> bool:
    if record.scope.value != scope.scope:
        return False
    if scope.scope == "workspace":
        return bool(record.workspace_id == scope.workspace_id)
    if scope.scope == "session":
        return bool(record.session_id == scope.session_id)
    return True


def _item(
    namespace: tuple[str, ...],
    key: str,
    text: str,
    created: float,
    updated: float,
    *,
    score: float | None = None,
) -> SearchItem:
    return SearchItem(
        namespace=namespace,
        key=key,
        value={"text": text},
        created_at=datetime.fromtimestamp(created, tz=timezone.utc),
        updated_at=datetime.fromtimestamp(updated, tz=timezone.utc),
        score=score,
    )


def _text_of(value: Any, namespace: tuple[str, ...], key: str) -> str:
    if not isinstance(value, dict) or set(value) != {"text"} or not isinstance(value["text"], str):
        shown = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise UnsupportedValueError(
            f"KairoxStore keeps text: put {namespace!r}/{key!r} a value "
            f"{{'text': '...'}}, not {shown} (Kairox memories and chunks are text, which "
            f"is what its turns put in front of the model)"
        )
    text: str = value["text"]
    return text


def _index_error(index: Any) -> UnsupportedValueError:
    return UnsupportedValueError(
        f"index={index!r}: Kairox embeds a long-term chunk's text, always, and never a "
        f"memory; leave index unset (or ['text'])"
    )


def _matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    """LangGraph's filter: equality, ``$eq`` and ``$ne``; other operators are an error."""
    for field, want in (filter or {}).items():
        have = value.get(field)
        if isinstance(want, dict):
            for op_name, operand in want.items():
                if (op_name == "$eq" and have != operand) or (op_name == "$ne" and have == operand):
                    return False
                if op_name not in ("$eq", "$ne"):
                    raise UnsupportedValueError(
                        f"filter operator {op_name!r} is not supported by KairoxStore: "
                        f"values are {{'text': ...}}; use equality, '$eq' or '$ne'"
                    )
        elif have != want:
            return False
    return True


def _path_matches(ns: tuple[str, ...], match_type: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))
