"""Turns for the web: the chat's own ``ChatEngine.run_turn``, streamed as SSE events.

The web app and the OpenAI-compatible endpoint drive a turn exactly as the terminal
chat does (kairox_core/chat/engine.py: assemble, stream the provider through the
session's marker filter, record, route proposals, run the engines); this module only
turns its callbacks into an async stream. Providers are built once per profile and
kept for the server's life (a local model loads once).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from kairox_core.chat.engine import ChatEngine, TurnOutcome
from kairox_core.errors import KairoxError, StorageError
from kairox_core.providers.base import ModelProvider
from kairox_core.providers.resolve import build_provider, choose_provider
from kairox_core.web.serialize import event_json, proposal_json

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig
    from kairox_core.facade import Kairox
    from kairox_core.session import Session


class Providers:
    """One model provider per profile, built on first use."""

    def __init__(self, config: KairoxConfig) -> None:
        self.config = config
        self._built: dict[str, tuple[ModelProvider, str]] = {}

    def get(self, profile: str) -> tuple[ModelProvider, str]:
        if profile not in self._built:
            choice = choose_provider(self.config, profile=profile)
            provider = build_provider(choice.config)
            self._built[profile] = (provider, f"model: {provider.model} via {choice.reason}")
        return self._built[profile]

    async def aclose(self) -> None:
        for provider, _ in self._built.values():
            await provider.close()
        self._built.clear()


def sse(event: str, data: Any) -> str:
    """One server-sent event (the data is JSON, one line)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def engine_for(kx: Kairox, providers: Providers, session: Session) -> ChatEngine:
    provider, note = providers.get(session.profile)
    return ChatEngine(kx, session, kx.config, provider=provider, provider_note=note)


async def stream_turn(
    engine: ChatEngine, prompt: str, *, instructions: Sequence[str] = ()
) -> AsyncIterator[tuple[str, Any]]:
    """``(event, data)`` pairs: ``delta`` texts as they arrive (already cleaned), then
    ``trace``, ``proposal`` / ``accepted`` / ``compaction`` for what the turn recorded,
    and ``done`` (or ``error``, whose ``kind`` names the error's class; an error of the
    database also carries the HTTP ``status`` it means: the turn could not be recorded).
    A ``notice`` comes first when the profile has tools the model is not offered."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    notice = await engine.tool_notice()
    if notice:  # before the answer, so it is not read as a tool's work
        yield "notice", {"message": notice}

    async def run() -> TurnOutcome:
        try:
            return await engine.run_turn(prompt, queue.put_nowait, instructions=instructions)
        finally:
            queue.put_nowait(None)

    task = asyncio.ensure_future(run())
    try:
        while (text := await queue.get()) is not None:
            yield "delta", {"text": text}
        try:
            outcome = await task
        except KairoxError as exc:  # the budget guard, the database: the turn is not recorded
            error: dict[str, Any] = {"message": str(exc), "kind": type(exc).__name__}
            if isinstance(exc, StorageError):
                error["status"] = exc.http_status
            yield "error", error
            return
    finally:
        if not task.done():
            task.cancel()  # the client went away: the turn aborts, the session is free
    if outcome.trace is not None:
        yield "trace", outcome.trace.as_dict()
    for proposal in outcome.pending:  # the turn's own records: no second read
        yield "proposal", proposal_json(proposal)
    for accepted in outcome.accepted:
        yield "accepted", event_json(accepted)
    for event in outcome.compaction:
        yield "compaction", event_json(event)
    if outcome.error:
        yield "error", {"message": outcome.error}
    yield (
        "done",
        {
            "text": outcome.text,
            "acknowledgement": outcome.acknowledgement,
            "unsaved": outcome.unsaved,
            "turn_id": outcome.turn_id,
            "invalid": [i.reason for i in outcome.invalid],
            # what the person is told about them, once each
            "notes": list(dict.fromkeys(i.describe() for i in outcome.invalid)),
        },
    )
