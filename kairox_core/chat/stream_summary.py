"""``[Summary]`` cards in the chat itself: a compacted range shows as one collapsed card.

The chat draws a session from its events (``ChatApp.show_history``); once a range is
compacted, its messages are replaced by one card saying what it stands for (the seq
range, when it was compacted, how many messages). ``enter`` (or a click) opens it to the
summary as the model now sees it (edits and drops applied) and the original messages,
read from the event store (summary_card.py: the Memory view's card, reused). On the
focused card ``s`` edits the summary, ``x`` drops a line, ``p`` pins a line and ``l``
keeps a line in long-term memory (scope session); lines are numbered as ``kairox summary
show`` prints them. The chat redraws after each change, so an edited summary shows its
edited text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message

from kairox_core.chat.summary_card import SummaryCard, append_originals
from kairox_core.chat.widgets import EditScreen
from kairox_core.context.sources import SummaryItem
from kairox_core.events import Event
from kairox_core.summary_lines import numbered_lines

if TYPE_CHECKING:
    from kairox_core.facade import Kairox
    from kairox_core.session import Session


@dataclass(frozen=True)
class StreamSummary:
    """An active summary with what the chat says of it."""

    item: SummaryItem
    created_at: float  # when the range was compacted (its CompactionSummary event)
    originals: list[Event]  # the conversation events it stands for


def stream_summaries(kx: Kairox, session: Session) -> list[StreamSummary]:
    """The session's active summaries, oldest range first, with their originals."""
    from kairox_core.chat.summary_card import original_messages

    out = []
    for item in session.refresh_compaction().summaries:
        stored = kx.events_store.read(session.id, first_seq=item.seq, last_seq=item.seq)
        when = stored[0].created_at if stored else 0.0
        out.append(StreamSummary(item, when, original_messages(kx, session.id, item)))
    return out


def listing(summary: SummaryItem) -> str:
    return "\n".join(f"{i}: {line}" for i, line in numbered_lines(summary.text))


class ChatSummaryCard(SummaryCard):
    """A compacted range in the chat: collapsed to one line until opened."""

    DEFAULT_CSS = """
    ChatSummaryCard { border: round $secondary; padding: 0 1; margin: 0 0 1 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "toggle_originals", "Open/close"),
        Binding("s", "edit", "Edit summary"),
        Binding("x", "drop", "Drop a line"),
        Binding("p", "pin", "Pin a line"),
        Binding("l", "keep", "Line to long-term"),
    ]

    class Act(Message):
        """Run ``name`` on the session (or ``kx.longterm``) with ``args``, then redraw."""

        def __init__(self, card: ChatSummaryCard, name: str, *args: Any) -> None:
            super().__init__()
            self.card = card
            self.name = name
            self.args = args

    def __init__(self, shown: StreamSummary, **kwargs: Any) -> None:
        def load(_: SummaryItem) -> Sequence[Event]:
            return shown.originals

        super().__init__(shown.item, load, tokens=0, **kwargs)
        self.shown = shown

    def render_card(self) -> Text:
        s, n = self.summary, len(self.shown.originals)
        when = dt.datetime.fromtimestamp(self.shown.created_at).strftime("%Y-%m-%d %H:%M")
        text = Text()
        text.append("[Summary] ", style="bold magenta")
        text.append(f"seqs {s.first_seq}-{s.last_seq}", style="bold")
        text.append(f" · {n} message{'s' if n != 1 else ''} · compacted {when}", style="dim")
        if not self.expanded:
            text.append("\nenter: open (the summary and the original messages)", style="dim")
            return text
        text.append("\n")
        for i, line in numbered_lines(s.text):
            text.append(f"{i}: ", style="dim")
            text.append(line.rstrip() + "\n")
        text.append(
            f"── the {n} original messages (enter closes) · s edit · x drop a line · "
            "p pin a line · l line to long-term ──\n",
            style="bold cyan",
        )
        append_originals(text, self.shown.originals)
        return text

    def _ask(self, title: str, initial: str, then: Callable[[str], None]) -> None:
        def done(value: str | None) -> None:
            if value is not None and value.strip():
                then(value.strip())

        self.app.push_screen(EditScreen(title, initial), done)

    def _line(self, verb: str, name: str) -> None:
        def run(value: str) -> None:
            if not value.isdigit():
                self.notify(f"{value!r} is not a line number", severity="error")
                return
            self.post_message(self.Act(self, name, self.summary.seq, int(value)))

        self._ask(f"Type the number of the line to {verb}:\n{listing(self.summary)}", "", run)

    def action_edit(self) -> None:
        s = self.summary

        def save(text: str) -> None:
            self.post_message(self.Act(self, "edit_summary", s.seq, text))

        self._ask(f"Edit summary of seqs {s.first_seq}-{s.last_seq}", s.text.strip(), save)

    def action_drop(self) -> None:
        self._line("drop", "drop_chunk")

    def action_pin(self) -> None:
        self._line("pin (verbatim in every turn)", "pin_line")

    def action_keep(self) -> None:
        self._line("keep in long-term memory", "keep_line")
