"""LangGraph namespaces <-> Kairox scopes.

    ("memories", "user")                 user memories (one user per database)
    ("memories", "workspace", WORKSPACE) a workspace's memories
    ("memories", "session", SESSION)     a session's memories
    ("longterm", "global")               long-term chunks every session sees
    ("longterm", "project", WORKSPACE)   chunks of one workspace (scope "project")
    ("longterm", "session", SESSION)     chunks of one session

Memories are keyed (the item key is the memory's key); chunks are keyed by the id
Kairox gives them (``lt-...``). Anything else maps to no scope: a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass

from kairox_langchain.errors import UnknownNamespaceError

MEMORIES = "memories"
LONGTERM = "longterm"

# (kind, scope) -> the owner label the namespace needs after them (None: none)
_SHAPES: dict[tuple[str, str], str | None] = {
    (MEMORIES, "user"): None,
    (MEMORIES, "workspace"): "workspace",
    (MEMORIES, "session"): "session",
    (LONGTERM, "global"): None,
    (LONGTERM, "project"): "workspace",
    (LONGTERM, "session"): "session",
}

SHAPES_HELP = (
    '("memories", "user"), ("memories", "workspace", WORKSPACE), '
    '("memories", "session", SESSION_ID), ("longterm", "global"), '
    '("longterm", "project", WORKSPACE) or ("longterm", "session", SESSION_ID)'
)


@dataclass(frozen=True)
class Scope:
    """Where a namespace's items live in Kairox."""

    kind: str  # MEMORIES or LONGTERM
    scope: str  # memories: user/workspace/session; longterm: global/project/session
    workspace_id: str | None = None
    session_id: str | None = None

    @property
    def namespace(self) -> tuple[str, ...]:
        owner = self.workspace_id if _SHAPES[(self.kind, self.scope)] == "workspace" else None
        owner = owner or (self.session_id if self.scope == "session" else None)
        return (self.kind, self.scope, owner) if owner else (self.kind, self.scope)


def scope_of(namespace: tuple[str, ...]) -> Scope:
    """The Kairox scope of a full namespace; ``UnknownNamespaceError`` otherwise."""
    ns = tuple(namespace)
    if len(ns) >= 2 and (ns[0], ns[1]) in _SHAPES:
        owner = _SHAPES[(ns[0], ns[1])]
        if owner is None and len(ns) == 2:
            return Scope(ns[0], ns[1])
        if owner is not None and len(ns) == 3:
            if owner == "workspace":
                return Scope(ns[0], ns[1], workspace_id=ns[2])
            return Scope(ns[0], ns[1], session_id=ns[2])
    raise UnknownNamespaceError(
        f"the LangGraph namespace {ns!r} maps to no Kairox scope; use {SHAPES_HELP}"
    )


def check_prefix(prefix: tuple[str, ...]) -> None:
    """A search prefix must lead to at least one namespace shape."""
    if len(prefix) > 3 or not any(
        _matches_shape(prefix, kind, scope, owner) for (kind, scope), owner in _SHAPES.items()
    ):
        raise UnknownNamespaceError(
            f"the LangGraph namespace prefix {tuple(prefix)!r} maps to no Kairox scope; "
            f"namespaces are {SHAPES_HELP}"
        )


def _matches_shape(prefix: tuple[str, ...], kind: str, scope: str, owner: str | None) -> bool:
    """Labels 0 and 1 are fixed, label 2 (a workspace or session id) is anything."""
    if len(prefix) > (3 if owner else 2):
        return False
    return prefix[:2] == (kind, scope)[: len(prefix[:2])]
