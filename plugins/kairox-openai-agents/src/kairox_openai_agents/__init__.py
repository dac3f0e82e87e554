"""Kairox for the OpenAI Agents SDK: ``KairoxSession``, a ``Session`` whose items are
Kairox's assembled context (memories, compaction summaries, recall, history under the
budget), so ``Runner.run(agent, input, session=KairoxSession(kx, "chat-1"))`` gets
Kairox's memory with no other change."""

from __future__ import annotations

from kairox_openai_agents.items import KairoxSessionError, UnsupportedItemError
from kairox_openai_agents.session import KairoxSession

__all__ = ["KairoxSession", "KairoxSessionError", "UnsupportedItemError"]
