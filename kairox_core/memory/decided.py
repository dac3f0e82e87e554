"""A reply's memory tags as decided: what the model reads back with ``[memory]
history_decided`` (a ``kairox_core.context.replies.ReplyView``).

Each tag the model wrote is matched to the proposal it raised (same turn, same raw
text) and shown as what became of it:

- accepted: the scope, key and body the person approved (after any correction), as a
  tag; unchanged, the tag exactly as the model wrote it;
- rejected: ``REJECTED_NOTE`` in its place, never a tag it could copy again;
- pending (or superseded, or a tag that raised no proposal): as the model wrote it.

Only rendering: history is never parsed for proposals (those come from the model's
new output alone), so these tags are never routed again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kairox_core.memory.base import MemoryStore
from kairox_core.memory.records import Proposal
from kairox_core.store.protocol import ProposalStore

REJECTED_NOTE = "(memory proposal rejected by the person)"
_SPACES = re.compile(r"[ \t]{2,}")


def tag(scope: str, key: str | None, body: str) -> str:
    """A memory tag as the protocol writes it."""
    key_part = f' key="{key}"' if key else ""
    return f'<memory scope="{scope}"{key_part}>{body}</memory>'


class DecidedReplies:
    """``ReplyView`` over a storage's proposals and memories."""

    def __init__(
        self, proposals: ProposalStore, memories: MemoryStore, rejected: str = REJECTED_NOTE
    ) -> None:
        self.proposals = proposals
        self.memories = memories
        self.rejected = rejected

    def __call__(
        self, session_id: str, replies: Sequence[tuple[int, str, str]]
    ) -> Mapping[int, tuple[str, bool]]:
        by_turn: dict[str, list[Proposal]] = {}
        turn_ids = [turn_id for _, turn_id, _ in replies if turn_id]
        for p in self.proposals.for_turns(session_id, turn_ids):
            if p.source == "assistant" and p.raw and p.turn_id:
                by_turn.setdefault(p.turn_id, []).append(p)
        out: dict[int, tuple[str, bool]] = {}
        for seq, turn_id, text in replies:
            final = True
            shown = text
            for p in by_turn.get(turn_id, ()):
                if p.raw not in shown:
                    continue
                final = final and p.status != "pending"
                instead = self._shown(p)
                if instead != p.raw:
                    shown = shown.replace(p.raw, instead)
            out[seq] = (_SPACES.sub(" ", shown).strip() if shown != text else text, final)
        return out

    def _shown(self, p: Proposal) -> str:
        """What one proposal's tag becomes in history."""
        if p.status == "rejected":
            return self.rejected
        if p.status != "accepted":
            return p.raw
        record = self.memories.get_by_id(p.memory_id) if p.memory_id else None
        scope = record.scope.value if record is not None else p.scope.value
        key = record.key if record is not None else p.key
        body = p.final_body if p.final_body is not None else p.body
        if (scope, key, body) == (p.scope.value, p.key, p.body):
            return p.raw
        return tag(scope, key, body)


__all__ = ["REJECTED_NOTE", "DecidedReplies", "tag"]
