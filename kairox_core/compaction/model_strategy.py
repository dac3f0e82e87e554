"""The ``model`` compaction strategy: a model provider writes the summary.

Any registered provider works (``[compaction] provider`` names a ``[providers.<id>]``;
unset, the session profile's provider is used, so compaction may run on a cheaper model
than chat). The prompt asks for a faithful summary, one fact per line, that keeps names,
numbers, dates, decisions and open tasks and leaves out secrets, paths and tokens; the
compactor still redacts secrets from whatever comes back. A transcript longer than
``max_input_tokens`` is summarised in rolling windows (each window sees the summary so
far), so a small model's context is never overrun. Usage from every call is summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core.config import KairoxConfig
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.providers.base import ModelProvider, TokenUsage
from kairox_core.tokens import TokenCounter

SYSTEM_PROMPT = (
    "You compress an earlier part of a conversation between a user and an AI assistant so "
    "the assistant can continue without it. Write a faithful summary in plain sentences, "
    "one fact per line, in the order things happened. Keep names, numbers, dates, "
    "decisions, preferences, open tasks and questions still unanswered. Do not invent or "
    "guess anything that is not in the text. Leave out secrets of every kind: API keys, "
    "passwords, tokens, credentials, private keys, and file system paths; write "
    "'[secret omitted]' or '[path omitted]' in their place. No preamble, no headings."
)
DEFAULT_MAX_INPUT_TOKENS = 6000


@dataclass(frozen=True)
class ModelSummary:
    text: str
    model: str
    usage: dict[str, int]
    strategy: str = "model"


def render_event(event: Event, limit_chars: int = 4000) -> str:
    """One transcript line for a conversation event (others render empty)."""
    if isinstance(event, UserMessageAdded):
        return f"User: {event.text}"
    if isinstance(event, AssistantMessageCompleted):
        return f"Assistant: {event.text}"
    if isinstance(event, ToolInvocationCompleted):
        result = event.result if len(event.result) <= limit_chars else (
            event.result[:limit_chars] + " [...]")
        return f"Tool {event.tool_name}({event.arguments}) returned: {result}"
    return ""


def windows(lines: Sequence[str], max_tokens: int, counter: TokenCounter) -> list[str]:
    """Consecutive lines packed into texts of at most ``max_tokens`` (a longer line is
    cut), so each model call fits."""
    out: list[str] = []
    current: list[str] = []
    used = 0
    for line in lines:
        n = counter.count(line) + 1
        if n > max_tokens:
            enc_line = line[: max(1, len(line) * max_tokens // n)]
            line, n = enc_line, counter.count(enc_line) + 1
        if current and used + n > max_tokens:
            out.append("\n".join(current))
            current, used = [], 0
        current.append(line)
        used += n
    if current:
        out.append("\n".join(current))
    return out


class ModelStrategy:
    """Summarise with a model provider (built lazily, closed after each run)."""

    name = "model"

    def __init__(
        self, *, config: KairoxConfig | None = None, profile: str | None = None,
        provider: ModelProvider | None = None, max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
        temperature: float | None = 0.0, **_: Any,
    ) -> None:
        self.config = config or KairoxConfig()
        self.profile = profile
        self._provider = provider
        self._owned = provider is None  # built here: closed after each run
        self.max_input_tokens = max_input_tokens
        self.temperature = temperature

    def provider(self) -> ModelProvider:
        if self._provider is None:
            from kairox_core.providers import provider_for

            self._provider = provider_for(self.config, self.config.compaction.provider,
                                          profile=self.profile)
        return self._provider

    async def summarise(
        self, events: Sequence[Event], previous: Sequence[str] = (), *,
        target_tokens: int | None = None,
    ) -> ModelSummary:
        target = target_tokens or self.config.compaction.target_tokens
        counter = TokenCounter()
        lines = [line for line in (render_event(e) for e in events) if line]
        summary = "\n".join(p.strip() for p in previous if p.strip())
        provider = self.provider()
        prompt_tokens = completion_tokens = 0
        try:
            room = max(256, self.max_input_tokens - counter.count(summary) - target)
            for window in windows(lines, room, counter) or [""]:
                user = (f"Summary so far:\n{summary}\n\n" if summary else "")
                user += (f"Conversation to add:\n{window}\n\nWrite the updated summary, at "
                         f"most about {target} tokens.")
                result = await provider.complete(
                    [{"role": "system", "content": SYSTEM_PROMPT},
                     {"role": "user", "content": user}],
                    max_tokens=target, temperature=self.temperature)
                summary = result.text.strip()
                usage: TokenUsage = result.usage
                prompt_tokens += usage.prompt_tokens
                completion_tokens += usage.completion_tokens
        finally:
            if self._owned and self._provider is not None:
                await self._provider.close()
                self._provider = None
        if not summary:
            raise ValueError(f"model provider '{provider.name}' returned an empty summary")
        return ModelSummary(summary, provider.model, {"prompt_tokens": prompt_tokens,
                                                      "completion_tokens": completion_tokens})


def create(**options: Any) -> ModelStrategy:
    """The factory registered as ``model``."""
    return ModelStrategy(**options)
