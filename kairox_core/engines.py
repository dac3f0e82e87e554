"""The engine seam: objects a session calls at fixed points of every turn.

An engine (compaction, recall of past turns, long-term memory, anything a third party
adds) is registered through ``kairox_register_engines(register)`` as
``register(name, factory)`` with ``factory(kx) -> Engine``; ``Kairox`` (the composition
root) builds each once and hands them to every session. The core calls engines only
through the protocols below, so it never imports an engine module: dependencies run
engine -> core, never back.

The fixed points, all called while the session is held (one turn at a time):

- ``before_assembly(session, request)``: before a turn's context is assembled (and for
  a preview). Returns ``Contribution`` objects the assembler places by their layer.
- ``after_turn(session, result)``: after ``complete()`` has recorded the reply.
- ``on_compacted(session, compaction)``: after a compaction stored its summary.

``Engine`` implements all three as do-nothing defaults: subclass it and override what
you need. One engine may also serve ``session.compact()`` by implementing
``CompactionEngine``, and write the synopses of long documents attached to a turn by
implementing ``SynopsisWriter``; each is found by its protocol, never by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from kairox_core.events import CompactionSummary, Event
from kairox_core.retrieval.base import RetrievalHit

if TYPE_CHECKING:
    from kairox_core.context.longterm import LongTermContext
    from kairox_core.session import Session, TurnResult

# Where a contribution goes in the assembled context (see ContextAssembler):
# "system"    text appended to the system message (mandatory, small: a long-term block)
# "mandatory" its own block right after the system message, always present (context
#             packs); too big for the budget: the turn is refused
# "recalled"  hits (past turns) competing with retrieval hits in the retrieval share
# "longterm"  active context packs (mandatory) and chunks recalled by similarity (a
#             block fitted within [longterm] share, never a reason to refuse a turn),
#             as plain data in ``longterm``
ContributionLayer = Literal["system", "mandatory", "recalled", "longterm"]


@dataclass(frozen=True)
class AssemblyRequest:
    """What is being assembled: the prompt, the profile, and the history cut-off
    (``before_seq``: a turn's own prompt seq when it is reassembled after a tool call)."""

    prompt: str
    profile: str
    before_seq: int | None = None


@dataclass(frozen=True)
class Contribution:
    """Context an engine adds to one assembly, labelled for the trace.

    ``engine`` names who contributed; ``label`` names the block (``mandatory``) or the
    trace item; ``text`` is the content (``system``/``mandatory``), ``hits`` the turns
    (``recalled``), ``longterm`` the packs and chunks (``longterm``: the assembler fits
    and traces them); ``notes`` go to the trace of the layer the contribution lands in."""

    engine: str
    layer: ContributionLayer
    label: str = ""
    text: str = ""
    hits: tuple[RetrievalHit, ...] = ()
    notes: tuple[str, ...] = ()
    longterm: LongTermContext | None = None


@dataclass
class CompactionResult:
    """What one compaction did. ``status``: ``completed``, ``failed`` or ``skipped``.

    ``summary`` (the stored event) and ``originals`` (the conversation events it
    replaced, seq order; not those of summaries it folded) are set when completed:
    the session hands them to every engine's ``on_compacted``."""

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
        skip = {"summary", "originals"}
        return {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in self.__dict__.items()
            if k not in skip
        }


class Engine:
    """Base of an engine: every fixed point does nothing until overridden.

    A method runs with the session held, so it must not call the session's queued
    methods (``compact``, ``pin_fact``, ...); ``session.compact_locked`` is allowed.
    An exception in ``after_turn`` or ``on_compacted`` is the engine's: it propagates
    from ``after_turn`` (the turn is recorded already) and is a note on the result
    from ``on_compacted`` (a compaction is never undone)."""

    name: str = "engine"

    async def before_assembly(
        self, session: Session, request: AssemblyRequest
    ) -> Sequence[Contribution]:
        return ()

    async def after_turn(self, session: Session, result: TurnResult) -> None:
        return None

    async def on_compacted(self, session: Session, compaction: CompactionResult) -> None:
        return None

    async def aclose(self) -> None:
        """Release what the engine holds (clients, models); called by ``Kairox.close``."""
        return None


@runtime_checkable
class CompactionEngine(Protocol):
    """An engine that serves ``session.compact()``: at most one per ``Kairox``."""

    async def compact(
        self,
        session: Session,
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
        trigger: str = "manual",
    ) -> CompactionResult: ...


@runtime_checkable
class SynopsisWriter(Protocol):
    """An engine that writes a long document's synopsis when a turn attaches it (the
    first engine found serves). ``begin_turn`` stores what it returns on the attachment
    (``synopsis``, ``synopsis_by``): the new prompt carries the whole text, older turns
    and summaries the synopsis. None: the document is short enough to travel whole."""

    async def synopsis(
        self, session: Session, attachment: Mapping[str, Any]
    ) -> dict[str, str] | None: ...


__all__ = [
    "AssemblyRequest",
    "CompactionEngine",
    "CompactionResult",
    "Contribution",
    "ContributionLayer",
    "Engine",
    "SynopsisWriter",
]
