"""Tokens spent per session, compaction included, added up from the event store.

The events already record every model call's usage (``AssistantMessageCompleted.usage``
for turns, ``CompactionSummary.usage`` / ``tokens_in`` / ``tokens_out`` for summaries);
this module only sums them, so `kairox usage`, the TUI and the web app report the same
figures. Nothing is cached: another process's turns count on the next call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kairox_core.events import AssistantMessageCompleted, CompactionSummary


@dataclass
class SessionUsage:
    """One session's spend. ``chat_*`` from turns, ``compaction_*`` from summaries."""

    session_id: str
    turns: int = 0
    chat_prompt_tokens: int = 0
    chat_completion_tokens: int = 0
    compactions: int = 0
    compaction_prompt_tokens: int = 0
    compaction_completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return (
            self.chat_prompt_tokens
            + self.chat_completion_tokens
            + self.compaction_prompt_tokens
            + self.compaction_completion_tokens
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_tokens": self.total_tokens}


def _int(mapping: dict[str, int] | None, key: str) -> int:
    value = (mapping or {}).get(key, 0)
    return value if isinstance(value, int) else 0


def session_usage(kx: Any, session_id: str) -> SessionUsage:
    """Add up one session's events (read afresh from the database)."""
    out = SessionUsage(session_id=session_id)
    types = ["AssistantMessageCompleted", "CompactionSummary"]
    for event in kx.events_store.read(session_id, types=types):
        if isinstance(event, AssistantMessageCompleted):
            out.turns += 1
            out.chat_prompt_tokens += _int(event.usage, "prompt_tokens")
            out.chat_completion_tokens += _int(event.usage, "completion_tokens")
        elif isinstance(event, CompactionSummary):
            out.compactions += 1
            if event.usage:  # the model strategy's real usage
                out.compaction_prompt_tokens += _int(event.usage, "prompt_tokens")
                out.compaction_completion_tokens += _int(event.usage, "completion_tokens")
            elif event.model:  # a model ran but reported no usage: the compactor's counts
                out.compaction_prompt_tokens += event.tokens_in
                out.compaction_completion_tokens += event.tokens_out
            # else: the extractive strategy, no model call, nothing spent
    return out


def usage(kx: Any, session_id: str | None = None) -> list[SessionUsage]:
    """Per-session usage: the one session asked for, or every session in the database."""
    ids = [session_id] if session_id is not None else [s.session_id for s in kx.sessions()]
    return [session_usage(kx, sid) for sid in ids]
