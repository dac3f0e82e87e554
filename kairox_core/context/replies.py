"""Past replies as the model reads them back: its memory tags rendered as decided.

With ``[memory] history_tags`` a reply's history text keeps the tags the model wrote
(``AssistantMessageCompleted.model_text``), so a long conversation keeps showing it the
protocol. A small model also copies those tags: a personal fact it once filed under
``workspace`` comes back as the scope of the next one (issue 28). With ``[memory]
history_decided`` each tag is shown as what became of it instead (a ``ReplyView``
decides: the approved scope, key and body; a note for a rejected one; pending as
written). A decision can come after the reply is read, so a rendering that depended
on a pending proposal is not final: the history cache renders it again each turn
until it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from kairox_core.context.counting import ProfileCounter
from kairox_core.context.rendering import assistant_message
from kairox_core.context.sources import HistoryUnit

TAG_OPENING = "<memory"


class ReplyView(Protocol):
    """For each tagged reply ``(seq, turn_id, text as stored)`` of a session, the text
    the model reads and whether that is final (no proposal of it still pending).
    Replies it leaves out are read as stored."""

    def __call__(
        self, session_id: str, replies: Sequence[tuple[int, str, str]]
    ) -> Mapping[int, tuple[str, bool]]: ...


def tagged_text(unit: HistoryUnit) -> str | None:
    """The stored text of a reply that carries memory tags; None for any other unit."""
    if unit.kind != "assistant":
        return None
    content = unit.messages[0].get("content")
    return content if isinstance(content, str) and TAG_OPENING in content else None


def render_replies(
    units: list[HistoryUnit],
    view: ReplyView,
    session_id: str,
    counter: ProfileCounter,
    originals: Mapping[int, str] | None = None,
) -> tuple[list[HistoryUnit], dict[int, str]]:
    """``units`` with their tagged replies rendered by ``view`` (counted again when the
    text changed), and the stored text of those whose rendering is not final, by seq.
    ``originals``: the stored text of units already rendered once (their content is
    the rendering, not what was stored)."""
    originals = originals or {}
    tagged = []
    for unit in units:
        stored = originals.get(unit.seq)
        if stored is None:
            stored = tagged_text(unit)
        if stored is not None:
            tagged.append((unit.seq, unit.turn_id, stored))
    if not tagged:
        return units, {}
    seen = view(session_id, tagged)
    stored_by_seq = {seq: text for seq, _, text in tagged}
    unsettled: dict[int, str] = {}
    out: list[HistoryUnit] = []
    for unit in units:
        found = seen.get(unit.seq)
        stored = stored_by_seq.get(unit.seq)
        if found is None or stored is None:
            out.append(unit)
            continue
        text, final = found
        if not final:
            unsettled[unit.seq] = stored
        if text == unit.messages[0].get("content"):
            out.append(unit)
            continue
        message = assistant_message(text)
        out.append(unit._replace(messages=(message,), tokens=counter.message(message)))
    return out, unsettled


__all__ = ["TAG_OPENING", "ReplyView", "render_replies", "tagged_text"]
