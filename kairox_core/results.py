"""What a turn and a compaction did: ``TurnResult`` and ``CompactionResult``.

Returned to the caller and handed to the engines (``after_turn``, ``on_compacted``),
they carry everything a front end shows after a turn (the reply, the proposals with
their status, the compactions the engines ran, the recalled turns), so no front end
reads the store again for it. Plain values, below the session and the engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kairox_core.events import CompactionSummary, Event
from kairox_core.markers import InvalidMarker, MemoryMarker
from kairox_core.memory.records import Proposal
from kairox_core.memory.scope_check import ScopeVerdict
from kairox_core.retrieval.base import RetrievalHit


@dataclass
class CompactionResult:
    """What one compaction did. ``status``: ``completed``, ``failed`` or ``skipped``.

    ``summary`` (the stored event) and ``originals`` (the conversation events it
    replaced, seq order; not those of summaries it folded) are set when completed:
    the session hands them to every engine's ``on_compacted``. ``events``: the events
    the run recorded (started, the summary, completed/failed/skipped), as stored;
    ``engines``: the engines whose ``on_compacted`` took the result (a failed one is a
    note instead)."""

    status: str
    reason: str = ""
    compaction_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    summary_seq: int | None = None
    folded: tuple[int, ...] = ()
    strategy: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    notes: list[str] = field(default_factory=list)
    summary: CompactionSummary | None = field(default=None, repr=False, compare=False)
    originals: tuple[Event, ...] = field(default=(), repr=False, compare=False)
    events: tuple[Event, ...] = field(default=(), repr=False, compare=False)
    engines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def __str__(self) -> str:
        if self.status == "completed":
            folded = f", folding summaries {list(self.folded)}" if self.folded else ""
            return (
                f"seqs {self.first_seq}-{self.last_seq} summarised by {self.strategy} "
                f"({self.tokens_in} -> {self.tokens_out} tokens) at seq "
                f"{self.summary_seq}{folded}"
            )
        return f"{self.status}: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        skip = {"summary", "originals", "events"}
        return {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in self.__dict__.items()
            if k not in skip
        }


@dataclass
class TurnResult:
    """What ``complete()`` recorded: the cleaned reply, markers and their proposals,
    and what the engines did in the turn.

    ``proposals``: every proposal the reply's markers made, with its status as the turn
    ended (``accepted`` for a session memory taken at once, ``superseded`` when a later
    marker of the same turn replaced it, else ``pending``); ``memory_events`` the
    ``MemoryProposed``/``MemoryAccepted`` events they recorded. ``compactions``: the
    compactions engines ran at the turn's end (each with its events). ``recalled``: the
    past turns the engines recalled into this turn's context."""

    turn_id: str
    text: str
    assistant_seq: int
    markers: list[MemoryMarker] = field(default_factory=list)
    invalid: list[InvalidMarker] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    tool_results: int = 0
    memory_events: list[Event] = field(default_factory=list)
    compactions: list[CompactionResult] = field(default_factory=list)
    recalled: list[RetrievalHit] = field(default_factory=list)
    scope_checks: list[ScopeVerdict] = field(default_factory=list)  # one per marker, if run
    # tags the turn left out ([memory] request_check: the message asked for no memory),
    # never proposed; ``dropped_because`` says why ("" when none were dropped)
    dropped: list[MemoryMarker] = field(default_factory=list)
    dropped_because: str = ""
    # the warning recorded under the reply (a ``ReplyFlagged`` event): "" for none
    flagged: str = ""

    @property
    def pending(self) -> list[Proposal]:
        """The proposals waiting for a person's decision."""
        return [p for p in self.proposals if p.status == "pending"]

    @property
    def accepted(self) -> list[Proposal]:
        """The proposals accepted at once (session memories the model was trusted with)."""
        return [p for p in self.proposals if p.status == "accepted"]


__all__ = ["CompactionResult", "TurnResult"]
