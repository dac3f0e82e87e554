"""The chat loop shared by the Textual app and ``--plain``: one turn at a time.

A turn: assemble the context, stream the model's reply through the session's marker
filter (what the user sees is already cleaned of ``<memory>`` markup), record it, then
report what the turn proposed. Errors from the model or the budget guard come back as
readable messages; the session's events stay intact (the user message is recorded, the
reply is recorded with whatever text arrived).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kairox_core.config import KairoxConfig
from kairox_core.errors import KairoxError
from kairox_core.events import (
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    Event,
    MemoryAccepted,
    MemoryProposed,
    MemoryRejected,
)
from kairox_core.prompt import front_end_system_prompt
from kairox_core.providers.base import ModelProvider
from kairox_core.providers.resolve import build_provider, choose_provider

COMPACTION_EVENTS = (
    ContextCompactionStarted,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
)


@dataclass
class TurnOutcome:
    """What one turn produced, for the front end to show."""

    prompt: str
    text: str = ""
    trace: Any = None
    proposals: list[MemoryProposed] = field(default_factory=list)  # waiting for a person
    accepted: list[MemoryAccepted] = field(default_factory=list)  # session scope, at once
    invalid: list[Any] = field(default_factory=list)  # markers the model got wrong
    compaction: list[Event] = field(default_factory=list)
    error: str | None = None
    acknowledgement: str = ""  # shown when the reply was memory tags and nothing else


def acknowledgement(outcome: TurnOutcome) -> str:
    """A line for the person when the model answered with memory tags alone.

    Small local models often reply to "remember that..." with the tag and no words;
    the tag is hidden, so without this the chat would show an empty answer.
    """
    if outcome.text.strip() or not (outcome.proposals or outcome.accepted):
        return ""
    if not outcome.proposals:
        return "Noted for this conversation."
    n = len(outcome.proposals)
    return f"Noted: {'a memory' if n == 1 else f'{n} memories'} to approve."


class ChatEngine:
    """Holds the Kairox facade, one session and its model provider."""

    def __init__(
        self,
        kx: Any,
        session: Any,
        config: KairoxConfig,
        *,
        provider: ModelProvider,
        provider_note: str,
    ) -> None:
        self.kx = kx
        self.session = session
        self.config = config
        self.provider = provider
        self.provider_note = provider_note

    @classmethod
    def open(
        cls,
        config: KairoxConfig,
        database: Path | str,
        *,
        profile: str | None = None,
        workspace: str | None = None,
        session_id: str | None = None,
        provider: ModelProvider | None = None,
    ) -> ChatEngine:
        from kairox_core.facade import Kairox

        profile_name, _ = config.resolve_profile(profile)
        note = "model provider given by the caller"
        if provider is None:
            choice = choose_provider(config, profile=profile_name)
            provider = build_provider(choice.config)
            note = f"model: {provider.model} via {choice.reason}"
        kx = Kairox.open(database, config=config)
        session = kx.session(
            workspace=workspace or config.kairox.default_workspace,
            profile=profile_name,
            session_id=session_id,
            system_prompt=front_end_system_prompt(config),  # as `kairox context` shows it
        )
        return cls(kx, session, config, provider=provider, provider_note=note)

    # --- facts the front ends show ----------------------------------------------------

    @property
    def session_id(self) -> str:
        return str(self.session.id)

    @property
    def workspace(self) -> str:
        return str(self.session.workspace_id)

    @property
    def profile(self) -> str:
        return str(self.session.profile)

    def history(self) -> list[Event]:
        return list(self.kx.events(self.session_id))

    # --- a turn ----------------------------------------------------------------------------

    async def run_turn(self, prompt: str, on_text: Callable[[str], None]) -> TurnOutcome:
        outcome = TurnOutcome(prompt=prompt)
        turn = await self.session.begin_turn(prompt)  # ContextBudgetExceeded: nothing sent
        outcome.trace = turn.trace
        _, profile = self.config.resolve_profile(self.profile)
        fed = False
        usage: dict[str, int] | None = None
        async with turn:  # cancelled (Ctrl-C, app closed): the turn aborts, the session is free
            try:
                async for chunk in self.provider.stream(turn.messages, max_tokens=profile.reserve):
                    if chunk.usage is not None:
                        usage = chunk.usage.as_dict()
                    if chunk.text:
                        fed = True
                        visible = turn.feed(chunk.text)
                        if visible:
                            on_text(visible)
            except KairoxError as exc:
                outcome.error = str(exc)
            except Exception as exc:  # a provider bug must not lose the turn's record
                outcome.error = f"model call failed: {type(exc).__name__}: {exc}"
            if outcome.error and not fed:
                await turn.abort()  # the prompt stays in the audit; no empty reply recorded
                return outcome
            result = await turn.complete(
                model=self.provider.model, provider=self.provider.name, usage=usage
            )
        outcome.text = result.text
        outcome.invalid = list(result.invalid)
        self._collect_turn_events(turn.turn_id, turn.prompt_seq, outcome)
        outcome.acknowledgement = acknowledgement(outcome)
        if outcome.acknowledgement:
            on_text(outcome.acknowledgement)
        return outcome

    def _collect_turn_events(self, turn_id: str, first_seq: int, outcome: TurnOutcome) -> None:
        for event in self.kx.events_store.read(self.session_id, first_seq=first_seq):
            if isinstance(event, MemoryProposed) and event.turn_id == turn_id:
                if event.scope != "session":
                    outcome.proposals.append(event)
            elif isinstance(event, MemoryAccepted) and event.scope == "session":
                outcome.accepted.append(event)
            elif isinstance(event, COMPACTION_EVENTS):
                outcome.compaction.append(event)
        pending = {p.id for p in self.kx.approvals.pending()}
        outcome.proposals = [p for p in outcome.proposals if p.proposal_id in pending]

    # --- actions ---------------------------------------------------------------------------

    def approve(self, proposal_id: str, body: str | None = None) -> Any:
        return self.kx.approvals.accept(proposal_id, body=body)

    def reject(self, proposal_id: str, reason: str | None = None) -> Any:
        return self.kx.approvals.reject(proposal_id, reason=reason)

    async def close(self) -> None:
        await self.provider.close()
        await self.kx.aclose()


def describe_event(event: Event) -> str:
    """One line for an event, as the trace panel and ``--plain`` show it."""
    if isinstance(event, MemoryProposed):
        taint = " TAINTED" if event.tainted else ""
        return f"MemoryProposed {event.scope}:{event.key}{taint} id={event.proposal_id}"
    if isinstance(event, MemoryAccepted):
        return f"MemoryAccepted {event.scope}:{event.key}" + (" (edited)" if event.edited else "")
    if isinstance(event, MemoryRejected):
        reason = f" ({event.reason})" if event.reason else ""
        return f"MemoryRejected {event.scope}:{event.key}{reason}"
    if isinstance(event, ContextCompactionFailed):
        return f"ContextCompactionFailed: {event.reason}"
    if isinstance(event, ContextCompactionSkipped):
        return f"ContextCompactionSkipped: {event.reason}"
    if isinstance(event, ContextCompactionStarted):
        return f"ContextCompactionStarted seqs {event.first_seq}-{event.last_seq}"
    if isinstance(event, ContextCompactionCompleted):
        return f"ContextCompactionCompleted summary at seq {event.summary_seq}"
    return event.type
