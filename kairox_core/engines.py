"""The engine seam: objects a session calls at fixed points of every turn.

An engine (compaction, recall of past turns, long-term memory, anything a third party
adds) is registered through ``kairox_register_engines(register)`` as
``register(name, factory)`` with ``factory(ctx: EngineContext) -> Engine``; ``Kairox``
(the composition root) builds each once, handing it the engine context (storage,
configuration, long-term services: never the ``Kairox`` itself), and hands them to every
session. The core calls engines only through the protocols below, so it never imports an
engine module: dependencies run engine -> core, never back.

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

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kairox_core.context.contributions import AssemblyRequest, Contribution, ContributionLayer
from kairox_core.engine_context import EngineContext
from kairox_core.hookspecs import Registrar
from kairox_core.plugins import Category
from kairox_core.results import CompactionResult, TurnResult

if TYPE_CHECKING:
    from kairox_core.context.assembler import ContextAssembler
    from kairox_core.context.sources import CompactionState, MemoryItem


class EngineSession(Protocol):
    """The session as an engine sees it (``kairox_core.session.Session`` is one): who
    it is, its assembler and compaction state, and the one call an engine may make
    while the session is held (``compact_locked``)."""

    id: str
    workspace_id: str
    profile: str
    compaction: CompactionState

    @property
    def busy(self) -> bool: ...

    def assembler(self, profile: str | None = None) -> ContextAssembler: ...

    def memories(self) -> list[MemoryItem]: ...

    def refresh_compaction(self) -> CompactionState: ...

    def history_tokens(self, limit: int | None = None, *, profile: str | None = None) -> int: ...

    async def compact_locked(
        self,
        first_seq: int | None = None,
        last_seq: int | None = None,
        *,
        trigger: str = "auto",
    ) -> CompactionResult: ...

    def record_compaction(self, result: CompactionResult) -> None: ...


class Engine:
    """Base of an engine: every fixed point does nothing until overridden.

    A method runs with the session held, so it must not call the session's queued
    methods (``compact``, ``pin_fact``, ...); ``session.compact_locked`` is allowed.
    An exception in ``after_turn`` or ``on_compacted`` is the engine's: it propagates
    from ``after_turn`` (the turn is recorded already) and is a note on the result
    from ``on_compacted`` (a compaction is never undone)."""

    name: str = "engine"

    async def before_assembly(
        self, session: EngineSession, request: AssemblyRequest
    ) -> Sequence[Contribution]:
        return ()

    async def after_turn(self, session: EngineSession, result: TurnResult) -> None:
        return None

    async def on_compacted(self, session: EngineSession, compaction: CompactionResult) -> None:
        return None

    async def aclose(self) -> None:
        """Release what the engine holds (clients, models); called by ``Kairox.close``."""
        return None


@runtime_checkable
class CompactionEngine(Protocol):
    """An engine that serves ``session.compact()``: at most one per ``Kairox``."""

    async def compact(
        self,
        session: EngineSession,
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
        self, session: EngineSession, attachment: Mapping[str, Any]
    ) -> dict[str, str] | None: ...


# The engines registry, typed here because the registry module sits below this seam:
# annotate ``kairox_register_engines(register: EngineRegistrar)`` with this one, and
# mypy checks each factory against ``factory(ctx: EngineContext) -> Engine``.
EngineFactory = Callable[[EngineContext], Engine]
EngineRegistrar = Registrar[EngineFactory]
ENGINES: Category[EngineFactory] = Category("engines")


class EngineHolder(Protocol):
    """What holds engines by name (a ``Kairox``): for helpers such as ``recall_of``."""

    def engine(self, name: str) -> Engine: ...


__all__ = [
    "ENGINES",
    "AssemblyRequest",
    "CompactionEngine",
    "CompactionResult",
    "Contribution",
    "ContributionLayer",
    "Engine",
    "EngineContext",
    "EngineFactory",
    "EngineHolder",
    "EngineRegistrar",
    "EngineSession",
    "SynopsisWriter",
    "TurnResult",
]
