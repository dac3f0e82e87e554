"""The ``model`` compaction strategy: a model provider writes the summary.

Any registered provider works (``[compaction] provider`` names a ``[providers.<id>]``;
unset, the session profile's provider is used, so compaction may run on a cheaper model
than chat). The prompt asks for a faithful summary, one fact per line, that keeps names,
numbers, dates, decisions and open tasks and leaves out secrets, paths and tokens; the
compactor still redacts secrets from whatever comes back. A transcript longer than
``[compaction] max_input_tokens`` is summarised in rolling windows (each window sees the
summary so far), so a small model's context is never overrun. Usage of all calls is summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kairox_core.capabilities import StrategyCapabilities
from kairox_core.compaction.base import CompactionOutput, CompactionRequest, HistoryItem
from kairox_core.config import KairoxConfig
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


def render_item(item: HistoryItem, limit_chars: int = 4000) -> str:
    """One transcript line for a history item (a long tool result is cut)."""
    if item.role == "user":
        return f"User: {item.text}"
    if item.role == "assistant":
        return f"Assistant: {item.text}"
    if item.role == "tool":
        text = item.text if len(item.text) <= limit_chars else item.text[:limit_chars] + " [...]"
        return f"Tool {item.name or 'call'} returned: {text}"
    return item.text


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
    capabilities = StrategyCapabilities(model=True)

    def __init__(
        self,
        *,
        config: KairoxConfig | None = None,
        profile: str | None = None,
        provider: ModelProvider | None = None,
        max_input_tokens: int | None = None,
        temperature: float | None = 0.0,
        **_: Any,
    ) -> None:
        self.config = config or KairoxConfig()
        max_input_tokens = max_input_tokens or self.config.compaction.max_input_tokens
        self.profile = profile
        self._provider = provider
        self._owned = provider is None  # built here: closed after each run
        self.max_input_tokens = max_input_tokens
        self.temperature = temperature

    def provider(self) -> ModelProvider:
        if self._provider is None:
            from kairox_core.providers import provider_for

            self._provider = provider_for(
                self.config, self.config.compaction.provider, profile=self.profile
            )
        return self._provider

    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        """Summary of ``request.items`` (earlier summaries first) in rolling windows."""
        target = request.target_tokens
        counter = request.counter
        items = request.items
        summary = "\n".join(i.text.strip() for i in items if i.role == "summary" and i.text)
        lines = [render_item(i) for i in items if i.role != "summary" and i.text.strip()]
        provider = self.provider()
        model = provider.model
        prompt_tokens = completion_tokens = 0
        estimated = False  # a call the backend reported no usage for (kairox usage marks it)
        try:
            room = max(256, self.max_input_tokens - counter.count(summary) - target)
            for window in windows(lines, room, counter) or [""]:
                user = f"Summary so far:\n{summary}\n\n" if summary else ""
                user += (
                    f"Conversation to add:\n{window}\n\nWrite the updated summary, at "
                    f"most about {target} tokens."
                )
                result = await provider.complete(
                    [
                        {"role": "system", "content": SYSTEM_PROMPT},
                        {"role": "user", "content": user},
                    ],
                    max_tokens=target,
                    temperature=self.temperature,
                )
                summary = result.text.strip()
                usage: TokenUsage = result.usage
                prompt_tokens += usage.prompt_tokens
                completion_tokens += usage.completion_tokens
                estimated = estimated or usage.estimated
                model = result.model or model
        finally:
            if self._owned and self._provider is not None:
                await self._provider.close()
                self._provider = None
        if not summary:
            raise ValueError(f"model provider '{provider.name}' returned an empty summary")
        return CompactionOutput(
            summary,
            model,
            tokens_in=sum(counter.count(line) for line in lines),
            tokens_out=counter.count(summary),
            strategy=self.name,
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
            | ({"estimated": 1} if estimated else {}),
        )


def create(**options: Any) -> ModelStrategy:
    """The factory registered as ``model``."""
    return ModelStrategy(**options)
