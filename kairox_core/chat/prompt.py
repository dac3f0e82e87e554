"""The chat's system prompt: ``kairox_core.prompt``, shared with ``kairox context`` so
the two cannot resolve it differently."""

from __future__ import annotations

from kairox_core.prompt import MEMORY_PROTOCOL, front_end_system_prompt, system_prompt_for

__all__ = ["MEMORY_PROTOCOL", "front_end_system_prompt", "system_prompt_for"]
