"""Event types: frozen dataclasses that round-trip through JSON.

The event store is append-only; every state change of a session is one of these.
``seq`` is assigned by the store. An event type this version does not know (written
by a newer Kairox) loads as ``GenericEvent`` instead of failing.
"""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

EVENT_TYPES: dict[str, type[Event]] = {}
E = TypeVar("E", bound="type[Event]")


def register_event(cls: E) -> E:
    """Class decorator: make an event type loadable by name."""
    EVENT_TYPES[cls.__name__] = cls
    return cls


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of all events. ``seq`` is None until the event store assigns it."""

    VERSION: ClassVar[int] = 1

    session_id: str
    seq: int | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def type(self) -> str:
        return type(self).__name__

    def payload(self) -> dict[str, Any]:
        """The event's own fields (not session_id/seq/created_at), JSON-ready."""
        skip = {"session_id", "seq", "created_at"}
        return {
            f.name: _to_json(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in skip
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "version": self.VERSION,
            "session_id": self.session_id,
            "seq": self.seq,
            "created_at": self.created_at,
            "payload": self.payload(),
        }

    def with_seq(self: _Ev, seq: int) -> _Ev:
        return dataclasses.replace(self, seq=seq)


_Ev = TypeVar("_Ev", bound=Event)


def _to_json(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    return value


def _hint_is_tuple(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_hint_is_tuple(a) for a in typing.get_args(hint))
    return False


@dataclass(frozen=True, kw_only=True)
class GenericEvent(Event):
    """An event of a type this version does not know; kept whole so nothing is lost."""

    type_name: str
    version: int = 1
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:
        return self.type_name

    def payload(self) -> dict[str, Any]:
        return dict(self.data)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["version"] = self.version
        return d


def event_from_dict(d: dict[str, Any]) -> Event:
    """Inverse of ``Event.to_dict``; unknown types become ``GenericEvent``."""
    base = {"session_id": d["session_id"], "seq": d.get("seq"), "created_at": d["created_at"]}
    payload = dict(d.get("payload") or {})
    cls = EVENT_TYPES.get(d["type"])
    if cls is None:
        return GenericEvent(
            **base, type_name=d["type"], version=int(d.get("version", 1)), data=payload
        )
    known, tuples = _field_kinds(cls)
    kwargs: dict[str, Any] = {}
    for name, value in payload.items():
        if name not in known:
            continue  # a field added by a newer version: ignore it
        if name in tuples and isinstance(value, list):
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        kwargs[name] = value
    return cls(**base, **kwargs)


_FIELD_KINDS: dict[type[Event], tuple[frozenset[str], frozenset[str]]] = {}


def _field_kinds(cls: type[Event]) -> tuple[frozenset[str], frozenset[str]]:
    """(field names, tuple-typed field names) of an event class; cached because
    ``get_type_hints`` evaluates every annotation and reading a long session calls this
    once per event."""
    kinds = _FIELD_KINDS.get(cls)
    if kinds is None:
        hints = typing.get_type_hints(cls)
        names = frozenset(f.name for f in dataclasses.fields(cls))
        kinds = names, frozenset(n for n in names if _hint_is_tuple(hints.get(n)))
        _FIELD_KINDS[cls] = kinds
    return kinds


# --- session lifecycle -------------------------------------------------------------


@register_event
@dataclass(frozen=True, kw_only=True)
class SessionStarted(Event):
    workspace_id: str
    profile: str


@register_event
@dataclass(frozen=True, kw_only=True)
class ProfileSwitched(Event):
    from_profile: str
    to_profile: str


@register_event
@dataclass(frozen=True, kw_only=True)
class SessionArchived(Event):
    reason: str | None = None


# --- conversation ------------------------------------------------------------------


@register_event
@dataclass(frozen=True, kw_only=True)
class UserMessageAdded(Event):
    turn_id: str
    text: str
    # Attachments as JSON objects: {"kind": "image"|"document", "filename": ..., ...}
    attachments: tuple[dict[str, Any], ...] = ()
    tokens: int | None = None  # cached count of the rendered message, see ContextAssembler
    token_counter: str | None = None  # the counting scheme of ``tokens`` (encoding+margin)
    # the process that ran the turn: a turn without a reply whose writer is gone was
    # interrupted (kairox_core/turn_status.py)
    writer_pid: int | None = None
    writer_host: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ModelTokenDelta(Event):
    turn_id: str
    delta: str


@register_event
@dataclass(frozen=True, kw_only=True)
class AssistantMessageCompleted(Event):
    turn_id: str
    text: str  # cleaned: <memory> markup removed
    # What the model reads back as this reply in history: ``text`` with the memory tags
    # it wrote (None: the same as ``text``), so the conversation keeps teaching it the
    # protocol; people and front ends see ``text``.
    model_text: str | None = None
    model: str | None = None
    provider: str | None = None
    usage: dict[str, int] | None = None
    # memory tags the model wrote in this turn and the turn left out, never proposed
    # (``[memory] request_check``: the message asked for no memory), and why
    dropped_tags: list[str] | None = None
    dropped_because: str | None = None
    tokens: int | None = None
    token_counter: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ReplyFlagged(Event):
    """A warning the person was shown under a reply, kept so that a reload, a resumed
    session or ``kairox events`` says it again: ``note`` is "Nothing was saved: ..."
    when the reply claims to have noted something and the turn kept nothing."""

    turn_id: str
    note: str


@register_event
@dataclass(frozen=True, kw_only=True)
class ToolInvocationCompleted(Event):
    turn_id: str
    tool_call_id: str
    tool_name: str
    arguments: str
    result: str
    tokens: int | None = None
    token_counter: str | None = None


# --- memory ------------------------------------------------------------------------


@register_event
@dataclass(frozen=True, kw_only=True)
class MemoryProposed(Event):
    proposal_id: str
    scope: str
    key: str | None
    body: str
    workspace_id: str | None = None
    turn_id: str | None = None
    raw: str = ""
    tainted: bool = False
    supersedes: str | None = None  # the pending proposal this one replaces
    source: str = "assistant"  # "assistant" (a marker) or "user" (remembered by hand)
    # set when a scope check ran (kairox_core.memory.scope_check): the scope the model
    # wrote in its tag, and what the check did ("the model wrote workspace; ...")
    model_scope: str | None = None
    scope_check: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class MemoryAccepted(Event):
    proposal_id: str | None
    memory_id: str
    scope: str
    key: str | None
    body: str
    edited: bool = False
    workspace_id: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class MemoryRejected(Event):
    proposal_id: str
    scope: str
    key: str | None
    reason: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class MemoryEdited(Event):
    memory_id: str
    scope: str
    key: str | None
    body: str
    previous_body: str


@register_event
@dataclass(frozen=True, kw_only=True)
class MemoryDeleted(Event):
    memory_id: str
    scope: str
    key: str | None
    body: str  # the last body, so the audit trail keeps it
    workspace_id: str | None = None


# --- compaction --------------------------------------------------------------------


@register_event
@dataclass(frozen=True, kw_only=True)
class ContextCompactionStarted(Event):
    compaction_id: str
    first_seq: int
    last_seq: int
    strategy: str
    trigger: str = "auto"  # "auto" | "manual"


@register_event
@dataclass(frozen=True, kw_only=True)
class CompactionSummary(Event):
    compaction_id: str
    summary: str
    first_seq: int  # provenance: the replaced range of original seqs, inclusive
    last_seq: int
    strategy: str
    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    folded_summaries: tuple[int, ...] = ()  # seqs of earlier summaries this one replaces
    usage: dict[str, int] | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ContextCompactionCompleted(Event):
    compaction_id: str
    summary_seq: int


@register_event
@dataclass(frozen=True, kw_only=True)
class ContextCompactionFailed(Event):
    compaction_id: str
    reason: str


@register_event
@dataclass(frozen=True, kw_only=True)
class ContextCompactionSkipped(Event):
    reason: str
    trigger: str = "auto"  # "auto" | "manual"


@register_event
@dataclass(frozen=True, kw_only=True)
class SummaryEdited(Event):
    summary_seq: int
    text: str
    previous_text: str


@register_event
@dataclass(frozen=True, kw_only=True)
class FactPinned(Event):
    fact_id: str
    text: str
    source_seq: int | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class FactUnpinned(Event):
    """A pinned fact is released: later turns no longer include it (it stays in the
    audit trail, and in any summary or recalled turn that holds its words)."""

    fact_id: str
    text: str


@register_event
@dataclass(frozen=True, kw_only=True)
class ChunkDropped(Event):
    summary_seq: int
    chunk_index: int
    text: str
