"""``[memory]``: the memory store and the limits of the marker protocol."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from kairox_core.config.base import Strict

# The memory store the core opens itself, on the event store's connection (no plugin).
BUILTIN_MEMORY_STORE = "sqlite"
BUILTIN_NAMES: dict[str, tuple[str, ...]] = {"memory_stores": (BUILTIN_MEMORY_STORE,)}


class MemorySection(Strict):
    """``[memory]``: the memory store backend and the limits of the marker protocol."""

    store: str = BUILTIN_MEMORY_STORE  # or one registered by kairox_register_memory_stores
    max_body_chars: int = Field(2000, gt=0)
    # a reply is untrusted: markers past this many become invalid ("too many proposals")
    max_proposals_per_turn: int = Field(20, ge=0)
    max_memories_tokens_share: float = Field(0.5, gt=0, le=1)
    # the model reads its own past replies with the memory tags it wrote (issue 28). On
    # by default: in benchmarks/protocol.py's 30-turn conversation the default 0.5B model
    # tagged 9 of 10 requests with it (1 without: past "Noted." replies teach "Noted."
    # with no tag), with no false tag and no recall lost (docs/memory.md).
    history_tags: bool = True
    # before a memory tag becomes a proposal, ask the model about that fact alone which
    # scope it belongs to (kairox_core.memory.scope_check; never into session, an
    # unreadable answer or a failed call keeps the tag's scope). Only with a real model:
    # the scripted test provider is not asked unless a caller asks for it. On by
    # default: in benchmarks/protocol.py's conversation the default 0.5B model's tags
    # were right 4/10 as written, 9/10 after the check; single prompts 8/10 either way.
    scope_check: bool = True
    scope_check_timeout: float = Field(60.0, gt=0)  # seconds for the one-word answer
    # when a reply carries memory tags, ask the model, with no history, whether the
    # person's message asked to remember anything (kairox_core.memory.request_check);
    # if not, the tags are dropped (never proposed; said in the event and the trace)
    # and the turn is answered once more with the memory tags left out of its history.
    # On by default: in the held-out trial conversation history tags made the default
    # 0.5B model answer questions with "Noted." and a tag (7 false tags, recall 5/8);
    # with the check, 0 false tags and recall 8/8, the benchmark's unchanged (docs/results.md).
    request_check: bool = True
    # with request_check: which replies with no memory tag it asks about too; when the
    # message asked to remember, the tags come from restating (restate_tags) or the
    # person is told nothing was saved. "cued" (default): only when the message holds
    # a word of such a request (kairox_core.memory.cues: remember, note that, keep in
    # mind, don't forget, ...), one short call on those turns; "always": every
    # untagged reply; "off": none. In the new-user trial "Don't forget that the team
    # uses Python 3.12." got no tag and no flag with "off" (issue 28). true and false
    # (the old setting) still load, as "always" and "off".
    request_check_untagged: Literal["off", "cued", "always"] = "cued"
    # when a reply carries memory tags (not dropped by the request check), ask the model
    # the person's message again on its own (the system prompt and the message, no
    # history) and propose the tags of that answer instead (kairox_core.memory.restate;
    # no tag there, an error or a timeout keeps the reply's, said in the trace). On by
    # default: deep in a conversation the model copies its earlier tags' shape and loses
    # the fact; restated, 10/10 right in the benchmark's conversation and 7/8 in the
    # trial's, against 9/10 and 3/8 (docs/results.md).
    restate_tags: bool = True
    # with history_tags: each tag the model reads back shows what became of it (the
    # approved scope, key and body; a note for a rejected one; pending as written), so
    # a rejected or corrected tag is not copied into the next reply (issue 28;
    # kairox_core/memory/decided.py, docs/memory.md). Off by default: in the 30-turn
    # conversation it gave the 0.5B model at most one more right tag (5/10 against
    # 4/10, within a rerun's variation), and it copied a rejection note or a bare
    # "Noted." it read instead (docs/results.md).
    history_decided: bool = False
    # what a rejected tag becomes there: "note" (a short note in its place) or "hidden"
    history_rejected: Literal["note", "hidden"] = "note"

    @field_validator("request_check_untagged", mode="before")
    @classmethod
    def _untagged_from_bool(cls, value: object) -> object:
        """The setting was a bool before "cued": true is "always", false is "off"."""
        if isinstance(value, bool):
            return "always" if value else "off"
        return value
