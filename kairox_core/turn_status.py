"""Which turns of a session were interrupted: a prompt recorded, no reply ever will be.

A process killed mid-reply (kill -9, a power cut) writes nothing more: its turn is a
``UserMessageAdded`` (and perhaps some ``ModelTokenDelta`` batches) with no
``AssistantMessageCompleted``. Nothing can be written at the moment of the crash, and
writing a marker later is a guess when another process may still be answering, so
the status is derived when the session is read, from who wrote the prompt
(``writer_pid`` and ``writer_host`` on the event). A turn without a reply is
interrupted when:

- its writer is on this host (same pid namespace) and its pid no longer runs; or
- its writer has since started another turn of the session (one process runs a
  session's turns one after another, so the earlier one ended without a reply: a
  crash, an error, an abort); or
- it was written by a version that did not record its writer and a later turn exists.

A turn in flight (its writer alive, no later turn of its) is not interrupted, wherever
it runs. A writer on another host is judged by its later turns only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kairox_core.events import AssistantMessageCompleted, Event, UserMessageAdded
from kairox_core.store.leases import HOST, pid_alive

INTERRUPTED_NOTE = "interrupted — no reply was recorded"
INTERRUPTED_TYPE = "TurnInterrupted"  # the derived entry's type in listings


@dataclass(frozen=True)
class InterruptedTurn:
    """A turn whose reply was never recorded; ``last_seq`` is its last event."""

    turn_id: str
    prompt_seq: int
    last_seq: int

    def as_dict(self) -> dict[str, object]:
        return {
            "turn_id": self.turn_id,
            "prompt_seq": self.prompt_seq,
            "last_seq": self.last_seq,
            "note": INTERRUPTED_NOTE,
        }

    def to_dict(self, session_id: str, created_at: float) -> dict[str, object]:
        """Shaped like an event's ``to_dict`` (seq None, ``derived``: never stored), for
        listings of the audit trail; ``created_at`` is the turn's last event's."""
        return {
            "type": INTERRUPTED_TYPE,
            "version": 1,
            "session_id": session_id,
            "seq": None,
            "created_at": created_at,
            "derived": True,
            "payload": self.as_dict(),
        }


def interrupted_turns(
    events: Iterable[Event], *, alive: Callable[[int], bool] = pid_alive
) -> list[InterruptedTurn]:
    """The interrupted turns among ``events`` (a session's, in seq order), oldest first.
    ``alive`` answers whether a pid of this host runs (a test may pass its own)."""
    prompts: dict[str, UserMessageAdded] = {}
    last_seq: dict[str, int] = {}
    replied: set[str] = set()
    later_turn: set[str] = set()  # turns whose writer went on to another turn
    newest_of: dict[tuple[object, object], str] = {}  # writer -> its newest turn so far
    any_later: set[str] = set()  # turns followed by any other turn
    for event in events:
        turn_id = getattr(event, "turn_id", None)
        if not isinstance(turn_id, str):
            continue
        last_seq[turn_id] = event.seq or 0
        if isinstance(event, AssistantMessageCompleted):
            replied.add(turn_id)
        elif isinstance(event, UserMessageAdded) and turn_id not in prompts:
            any_later.update(prompts)
            writer = (event.writer_host, event.writer_pid)
            previous = newest_of.get(writer)
            if previous is not None:
                later_turn.add(previous)
            newest_of[writer] = turn_id
            prompts[turn_id] = event
    out = []
    for turn_id, prompt in prompts.items():
        if turn_id in replied:
            continue
        if _interrupted(prompt, turn_id in later_turn, turn_id in any_later, alive):
            out.append(InterruptedTurn(turn_id, prompt.seq or 0, last_seq[turn_id]))
    return out


def _interrupted(
    prompt: UserMessageAdded, writer_moved_on: bool, followed: bool, alive: Callable[[int], bool]
) -> bool:
    if prompt.writer_pid is None:  # an older version: only a later turn tells
        return followed
    if writer_moved_on:
        return True
    return prompt.writer_host == HOST and not alive(prompt.writer_pid)


def interrupted_by_prompt(events: Iterable[Event]) -> Mapping[int, InterruptedTurn]:
    """``interrupted_turns`` keyed by the seq of each turn's prompt (for front ends that
    draw a marker under the prompt)."""
    return {t.prompt_seq: t for t in interrupted_turns(events)}
