"""Restating: a tag written again from the person's message alone, with no history.

Deep in a conversation a small model copies the shape of its earlier tags: in the
trial's conversation the default 0.5B model, its history clean of false tags, filed
"our deploy day is Thursday" as ``deploy-day: Deploy day`` and the staging server as
``staging-server: Staging server`` (the value lost), and in the benchmark's it filed the
Friday deploys under the previous tag's body, "PostgreSQL 16" (issue 28, docs/results.md). Asked
about the message alone (the chat's system prompt and the message, nothing else), it
writes the fact whole far more often (the single prompts of ``benchmarks/protocol.py``).
So when a reply carries memory tags (and the request check, if it ran, did not drop
them), or carries none while the request check found a request to remember
(``[memory] request_check_untagged``), the model is asked the message again on its
own, at temperature 0; the tags of that answer replace the reply's (its text is not
shown). No tag in that answer, an
error or a timeout keeps the tags as written, and the note says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kairox_core.markers import MemoryMarker, extract_memory_markers
from kairox_core.providers.base import Message, ModelProvider

RESTATED = "restated: the reply's memory tags were written again from the message alone"
RESTATED_UNTAGGED = (
    "restated: the reply wrote no memory tag for a request to remember; these are the "
    "model's tags for the message alone"
)


@dataclass(frozen=True)
class Restated:
    """The tags the model wrote for the message alone (empty: keep the reply's)."""

    markers: list[MemoryMarker] = field(default_factory=list)
    note: str = ""  # why the reply's tags were kept, when they were


Restate = Callable[[str], Awaitable[Restated]]


def question(system_prompt: str, message: str) -> list[Message]:
    """The whole input: the chat's system prompt and the person's message; no history,
    no memories."""
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": message},
    ]


def provider_restate(
    provider: ModelProvider,
    system_prompt: str,
    *,
    max_tokens: int,
    timeout: float,
    max_body_chars: int,
    max_markers: int,
) -> Restate:
    """A ``Restate`` asking ``provider``; an error, a timeout or an answer without a
    well-formed tag keeps the reply's tags and says why (never raised)."""

    async def restate(message: str) -> Restated:
        try:
            result = await asyncio.wait_for(
                provider.complete(
                    question(system_prompt, message), max_tokens=max_tokens, temperature=0.0
                ),
                timeout,
            )
        except TimeoutError:
            return Restated(note=f"restating failed (no answer within {timeout:g} s); tags kept")
        except Exception as exc:  # a provider error of any kind keeps the tags, said
            return Restated(note=f"restating failed ({type(exc).__name__}: {exc}"[:200] + ")")
        found = extract_memory_markers(
            result.text, max_body_chars=max_body_chars, max_markers=max_markers
        )
        if not found.markers:
            return Restated(note="restating wrote no memory tag; tags kept as written")
        return Restated(list(found.markers))

    return restate
