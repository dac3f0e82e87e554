"""A ``[Summary]`` card of the Memory view: the summary the model sees, expandable to
the original messages it replaced.

Compaction never deletes: the originals stay in the event store, and a summary names
their seq range (original seqs even after folding), so expanding a card is one read of
that range. The read happens on the first expansion only: most cards are never opened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Static

from kairox_core.context.sources import SummaryItem
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)

if TYPE_CHECKING:
    from kairox_core.facade import Kairox

ORIGINAL_TYPES = ("UserMessageAdded", "AssistantMessageCompleted", "ToolInvocationCompleted")
MAX_ORIGINAL_CHARS = 2000  # per message: a pasted document stays readable around it


def original_messages(kx: Kairox, session_id: str, summary: SummaryItem) -> list[Event]:
    """The conversation events ``summary`` stands for, in seq order."""
    return list(
        kx.events_store.read(
            session_id, first_seq=summary.first_seq, last_seq=summary.last_seq, types=ORIGINAL_TYPES
        )
    )


def describe_original(event: Event) -> tuple[str, str]:
    """(who, text) of one original message, as the card lists it."""
    if isinstance(event, UserMessageAdded):
        names = [str(a.get("filename", a.get("kind", "?"))) for a in event.attachments]
        extra = f"  [attached: {', '.join(names)}]" if names else ""
        return "user", event.text + extra
    if isinstance(event, AssistantMessageCompleted):
        return "assistant", event.text
    if isinstance(event, ToolInvocationCompleted):
        return f"tool {event.tool_name}", f"({event.arguments}) → {event.result}"
    return event.type, ""


def append_originals(text: Text, originals: Sequence[Event]) -> None:
    """The messages a summary replaced, one ``seq N who: body`` line each (long bodies
    cut at ``MAX_ORIGINAL_CHARS``): the Memory view's card and the chat's card alike."""
    for event in originals:
        who, body = describe_original(event)
        if len(body) > MAX_ORIGINAL_CHARS:
            body = body[:MAX_ORIGINAL_CHARS] + f"… ({len(body) - MAX_ORIGINAL_CHARS} more)"
        text.append(f"seq {event.seq} {who}: ", style="bold")
        text.append(body.rstrip() + "\n")


class SummaryCard(Static, can_focus=True):
    """``enter`` (or a click) shows the original messages; again, hides them."""

    DEFAULT_CSS = """
    SummaryCard { border: round $secondary; padding: 0 1; margin: 0 0 1 0; }
    SummaryCard:focus { border: double $secondary; }
    SummaryCard.expanded { border: round $accent; }
    SummaryCard.left-out { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "toggle_originals", "Show/hide originals"),
    ]

    class Toggled(Message):
        """The card opened or closed (the view keeps it so across refreshes)."""

        def __init__(self, card: SummaryCard) -> None:
            super().__init__()
            self.card = card

    def __init__(
        self,
        summary: SummaryItem,
        load: Callable[[SummaryItem], Sequence[Event]],
        *,
        tokens: int | None,
        expanded: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.summary = summary
        self.tokens = tokens  # its share of the prompt; None: left out (no room)
        self._loader = load
        self._originals: list[Event] | None = None
        self.expanded = False
        if tokens is None:
            self.add_class("left-out")
        if expanded:
            self._set_expanded(True)

    @property
    def originals(self) -> list[Event]:
        if self._originals is None:
            self._originals = list(self._loader(self.summary))
        return self._originals

    def on_mount(self) -> None:
        self.update(self.render_card())

    def on_click(self, event: events.Click) -> None:
        self.action_toggle_originals()

    def action_toggle_originals(self) -> None:
        self._set_expanded(not self.expanded)
        self.update(self.render_card())
        self.post_message(self.Toggled(self))

    def _set_expanded(self, expanded: bool) -> None:
        self.expanded = expanded
        self.set_class(expanded, "expanded")

    def render_card(self) -> Text:
        s = self.summary
        text = Text()
        text.append("[Summary] ", style="bold magenta")
        text.append(f"seqs {s.first_seq}-{s.last_seq}", style="bold")
        meta = [f"stored at seq {s.seq}"]
        if s.strategy:
            meta.append(s.strategy)
        meta.append(
            f"{self.tokens} tokens in context"
            if self.tokens is not None
            else "left out of this context: no room"
        )
        text.append("  " + " · ".join(meta) + "\n", style="dim")
        text.append(s.text.rstrip() + "\n")
        if not self.expanded:
            text.append(
                f"enter: show the original messages of seqs {s.first_seq}-{s.last_seq}",
                style="dim",
            )
            return text
        originals = self.originals
        text.append(
            f"── {len(originals)} original messages it replaced (enter hides them) ──\n",
            style="bold cyan",
        )
        if not originals:
            text.append("(none: the range holds no conversation events)\n", style="dim")
        append_originals(text, originals)
        return text
