"""Tokens spent per session: the model's turns and compaction, added up from events.

Every number comes from the event store, so any process (``kairox usage``, the chat's
Memory view, ``kairox serve``) reports the same figures. A turn costs what the provider
reported with ``AssistantMessageCompleted.usage``. A provider that counted locally (its
backend reported nothing) stores ``"estimated": 1`` beside its count of the whole
context sent; the turn is marked estimated. With no usage at all, the stored counts of
the user message, tool results and reply stand in (estimated, and a lower bound: the
rest of the assembled context is not stored with the turn). Compaction spends model
tokens only when its strategy calls a model (``model``: the usage summed into
``CompactionSummary.usage``); an extractive run reads and writes text
(``tokens_in``/``tokens_out``) without spending any.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kairox_core.errors import UnknownSessionError
from kairox_core.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)

if TYPE_CHECKING:
    from kairox_core.store.protocol import Storage

USAGE_EVENT_TYPES = (
    "UserMessageAdded",
    "ToolInvocationCompleted",
    "AssistantMessageCompleted",
    "CompactionSummary",
)


@dataclass(frozen=True)
class TurnUsage:
    """One completed turn's model call."""

    seq: int
    turn_id: str
    model: str | None
    provider: str | None
    prompt_tokens: int
    completion_tokens: int
    estimated: bool  # no usage reported: counted from the stored messages

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "turn_id": self.turn_id,
            "model": self.model,
            "provider": self.provider,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "estimated": self.estimated,
        }


@dataclass(frozen=True)
class CompactionUsage:
    """One stored summary: what the run read and wrote, and the model tokens it spent.

    ``prompt_tokens``/``completion_tokens`` are model spend (zero for a strategy that
    calls no model); ``tokens_in``/``tokens_out`` are the text summarised and written."""

    seq: int
    compaction_id: str
    strategy: str
    model: str | None
    first_seq: int
    last_seq: int
    tokens_in: int
    tokens_out: int
    prompt_tokens: int
    completion_tokens: int
    uses_model: bool
    estimated: bool  # a model was named but no usage reported: tokens_in/out stand in

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "compaction_id": self.compaction_id,
            "strategy": self.strategy,
            "model": self.model,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "uses_model": self.uses_model,
            "estimated": self.estimated,
        }


@dataclass(frozen=True)
class Totals:
    """Sums over turns and compactions, with how many of each were estimated."""

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    compactions: int = 0
    compaction_prompt_tokens: int = 0
    compaction_completion_tokens: int = 0
    estimated_turns: int = 0
    estimated_compactions: int = 0

    @property
    def turn_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def compaction_tokens(self) -> int:
        return self.compaction_prompt_tokens + self.compaction_completion_tokens

    @property
    def total_tokens(self) -> int:
        return self.turn_tokens + self.compaction_tokens

    @property
    def estimated(self) -> int:
        return self.estimated_turns + self.estimated_compactions

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(Totals))
        )

    def as_dict(self) -> dict[str, int]:
        return {
            **dataclasses.asdict(self),
            "turn_tokens": self.turn_tokens,
            "compaction_tokens": self.compaction_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True)
class SessionUsage:
    session_id: str
    workspace_id: str | None
    turns: tuple[TurnUsage, ...]
    compactions: tuple[CompactionUsage, ...]

    @property
    def totals(self) -> Totals:
        return Totals(
            turns=len(self.turns),
            prompt_tokens=sum(t.prompt_tokens for t in self.turns),
            completion_tokens=sum(t.completion_tokens for t in self.turns),
            compactions=len(self.compactions),
            compaction_prompt_tokens=sum(c.prompt_tokens for c in self.compactions),
            compaction_completion_tokens=sum(c.completion_tokens for c in self.compactions),
            estimated_turns=sum(t.estimated for t in self.turns),
            estimated_compactions=sum(c.estimated for c in self.compactions),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "totals": self.totals.as_dict(),
            "turns": [t.as_dict() for t in self.turns],
            "compactions": [c.as_dict() for c in self.compactions],
        }


@dataclass(frozen=True)
class UsageReport:
    sessions: tuple[SessionUsage, ...]

    @property
    def totals(self) -> Totals:
        out = Totals()
        for s in self.sessions:
            out = out + s.totals
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "sessions": [s.as_dict() for s in self.sessions],
            "totals": self.totals.as_dict(),
        }


class HasStorage(Protocol):
    """What ``usage`` reads from: a ``Kairox`` (or anything holding a storage)."""

    @property
    def storage(self) -> Storage: ...


def usage(source: HasStorage, session_id: str | None = None) -> UsageReport:
    """Token spend of one session (``UnknownSessionError`` if there is none) or of every
    session in ``source``'s database, oldest first."""
    store = source.storage.events
    if session_id is not None:
        info = store.get_session(session_id)
        if info is None:
            raise UnknownSessionError(
                f"no session '{session_id}' in {source.storage.location}; "
                f"`kairox sessions` lists them"
            )
        infos = [info]
    else:
        infos = store.sessions()
    return UsageReport(
        tuple(
            session_usage(
                info.session_id,
                store.read(info.session_id, types=USAGE_EVENT_TYPES),
                workspace_id=info.workspace_id,
            )
            for info in infos
        )
    )


def session_usage(
    session_id: str, events: Iterable[Event], *, workspace_id: str | None = None
) -> SessionUsage:
    """The spend in ``events`` (one session's, in seq order; other types are ignored)."""
    sent: dict[str, int] = {}  # turn_id -> stored tokens of what the turn sent
    turns: list[TurnUsage] = []
    compactions: list[CompactionUsage] = []
    for event in events:
        if isinstance(event, UserMessageAdded | ToolInvocationCompleted):
            sent[event.turn_id] = sent.get(event.turn_id, 0) + (event.tokens or 0)
        elif isinstance(event, AssistantMessageCompleted):
            turns.append(_turn(event, sent.get(event.turn_id, 0)))
        elif isinstance(event, CompactionSummary):
            compactions.append(_compaction(event))
    return SessionUsage(session_id, workspace_id, tuple(turns), tuple(compactions))


def _reported(usage: Mapping[str, int] | None) -> tuple[int, int, bool] | None:
    """(prompt, completion, estimated) from a usage dict; None when there is none.

    A provider that counted locally (the backend reported nothing) stores
    ``"estimated": 1``: its counts are of the whole context sent, so they are kept."""
    if not usage:
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    if prompt is None and completion is None:
        return None
    return int(prompt or 0), int(completion or 0), bool(usage.get("estimated"))


def _turn(event: AssistantMessageCompleted, sent_tokens: int) -> TurnUsage:
    prompt, completion, estimated = _reported(event.usage) or (
        sent_tokens,
        event.tokens or 0,
        True,
    )
    return TurnUsage(
        seq=event.seq or 0,
        turn_id=event.turn_id,
        model=event.model,
        provider=event.provider,
        prompt_tokens=prompt,
        completion_tokens=completion,
        estimated=estimated,
    )


def _compaction(event: CompactionSummary) -> CompactionUsage:
    reported = _reported(event.usage)
    uses_model = reported is not None or event.model is not None
    estimated = False
    if reported is not None:
        prompt, completion, estimated = reported
    elif uses_model:  # a model was named but reported nothing: what it read and wrote
        prompt, completion, estimated = event.tokens_in, event.tokens_out, True
    else:
        prompt = completion = 0
    return CompactionUsage(
        seq=event.seq or 0,
        compaction_id=event.compaction_id,
        strategy=event.strategy,
        model=event.model,
        first_seq=event.first_seq,
        last_seq=event.last_seq,
        tokens_in=event.tokens_in,
        tokens_out=event.tokens_out,
        prompt_tokens=prompt,
        completion_tokens=completion,
        uses_model=uses_model,
        estimated=estimated,
    )
