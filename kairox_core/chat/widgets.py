"""Widgets of the chat: messages, memory cards, notes and the trace panel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from kairox_core.events import MemoryProposed


class ChatMessage(Static):
    """One message; the assistant's grows as cleaned text streams in."""

    DEFAULT_CSS = """
    ChatMessage { padding: 0 1; margin: 0 0 1 0; }
    ChatMessage.user { color: $text; background: $boost; }
    ChatMessage.assistant { color: $text; }
    ChatMessage.error { color: $error; }
    ChatMessage.note { color: $text-muted; }
    ChatMessage.tool { color: $text-muted; margin: 0; }
    """

    def __init__(self, role: str, text: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.role = role
        self.text = text
        self.thinking = False  # True: "thinking…" shows until the first token
        self.add_class(role)

    def _label(self) -> Text:
        prefix = {"user": "You", "assistant": "Assistant", "error": "Error"}.get(self.role)
        label = Text(f"{prefix}: ", style="bold") if prefix else Text()
        label.append(self.text, style="italic" if prefix is None else "")
        if self.thinking and not self.text:
            label.append("thinking…", style="dim italic")
        return label

    def stop_thinking(self) -> None:
        """The turn ended (with or without text): no more "thinking…"."""
        self.thinking = False
        self.update(self._label())

    def on_mount(self) -> None:
        self.update(self._label())

    def append(self, delta: str) -> None:
        self.text += delta
        self.update(self._label())


class MemoryCard(Static, can_focus=True):
    """ "Remember this?": ``a`` approves, ``r`` rejects, ``e`` edits then approves.

    The keys act only while the card has focus, which it gets when asked for (ctrl+n,
    a click), never by itself: a message being typed must not decide a card."""

    DEFAULT_CSS = """
    MemoryCard { border: round $warning; padding: 0 1; margin: 0 0 1 0; }
    MemoryCard:focus { border: double $warning; }
    MemoryCard.decided { border: round $success; color: $text-muted; }
    MemoryCard.rejected { border: round $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("e", "edit", "Edit + approve"),
    ]

    class TypedAway(Message):
        """A letter that is not a card key: the person is typing a message."""

        def __init__(self, character: str) -> None:
            super().__init__()
            self.character = character

    class Decided(Message):
        def __init__(
            self,
            card: MemoryCard,
            verdict: str,
            body: str | None,
            *,
            scope: str | None = None,
            key: str | None = None,
        ) -> None:
            super().__init__()
            self.card = card
            self.verdict = verdict  # "approve" | "reject"
            self.body = body
            self.scope = scope  # None: as proposed
            self.key = key

    def __init__(self, proposal: MemoryProposed, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.proposal = proposal
        self.decided = False

    def on_mount(self) -> None:
        self.update(self._render_card())

    def on_focus(self) -> None:  # runs before Widget's handler sets has_focus
        if not self.decided:
            self.update(self._render_card(focused=True))  # its keys, now that they act

    def on_blur(self) -> None:
        if not self.decided:
            self.update(self._render_card())

    def on_key(self, event: events.Key) -> None:
        if event.character and event.is_printable and event.character not in "are":
            event.stop()
            event.prevent_default()
            self.post_message(self.TypedAway(event.character))

    def _render_card(self, status: str | None = None, *, focused: bool = False) -> Text:
        p = self.proposal
        text = Text()
        text.append("Remember this? ", style="bold")
        text.append(f"[{p.scope}] ", style="bold magenta")
        text.append(f"{p.key}\n", style="bold cyan")
        text.append(p.body + "\n")
        if p.model_scope and p.model_scope != p.scope:  # moved by [memory] scope_check
            text.append(
                f"the model wrote {p.model_scope}; the scope check chose {p.scope} "
                "(e changes it)\n",
                style="yellow",
            )
        if p.tainted:
            text.append(
                "⚠ tainted: this text also appears in a tool result or retrieved "
                "text of this turn; a document may have steered the model.\n",
                style="bold red",
            )
        else:
            text.append(
                "not tainted: no tool result or retrieved text of this turn contains it\n",
                style="dim green",
            )
        if status is None:
            status = (
                "a approve · r reject · e edit then approve · escape back to your message"
                if focused
                else "ctrl+n selects this card, then: a approve · r reject · e edit then approve"
            )
        text.append(status, style="dim")
        return text

    def action_approve(self) -> None:
        if not self.decided:
            self.post_message(self.Decided(self, "approve", None))

    def action_reject(self) -> None:
        if not self.decided:
            self.post_message(self.Decided(self, "reject", None))

    def action_edit(self) -> None:
        if self.decided:
            return

        p = self.proposal

        def done(edit: ProposalEdit | None) -> None:
            if edit is None or not edit.body.strip():
                return
            scope = edit.scope if edit.scope != p.scope else None
            key = edit.key if edit.key != (p.key or "") else None
            body = edit.body.strip() if edit.body.strip() != p.body else None
            self.post_message(self.Decided(self, "approve", body, scope=scope, key=key))

        self.app.push_screen(ProposalEditScreen(p), done)

    def mark(
        self,
        verdict: str,
        body: str | None = None,
        *,
        scope: str | None = None,
        key: str | None = None,
    ) -> None:
        self.decided = True
        self.add_class("decided")
        edited = body is not None or scope is not None or key is not None
        if verdict == "reject":
            self.add_class("rejected")
            status = "✗ rejected"
        else:
            status = "✓ remembered" + (" (edited)" if edited else "")
        if edited:
            p = self.proposal.__dict__
            changes = {"body": body or p["body"], "scope": scope or p["scope"]}
            self.proposal = MemoryProposed(**{**p, **changes, "key": key or p["key"]})
        self.update(self._render_card(status))


class EditScreen(ModalScreen[str | None]):
    """Edit a text (a memory body, a summary); ctrl+s saves, escape cancels."""

    DEFAULT_CSS = """
    EditScreen { align: center middle; }
    EditScreen > Vertical { width: 80%; height: auto; max-height: 80%; border: thick $accent;
                            background: $surface; padding: 1; }
    EditScreen TextArea { height: 10; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.initial = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{self.title_text}   (ctrl+s save · escape cancel)")
            yield TextArea(self.initial, id="edit-text")
            yield Button("Save", id="save", variant="primary")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_save()

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class ProposalEdit:
    """What a person set on a card before approving it."""

    scope: str
    key: str
    body: str


class ProposalEditScreen(ModalScreen[ProposalEdit | None]):
    """Edit a proposal's scope, key and text before approving; ctrl+s approves."""

    DEFAULT_CSS = """
    ProposalEditScreen { align: center middle; }
    ProposalEditScreen > Vertical { width: 80%; height: auto; max-height: 90%;
                                    border: thick $accent; background: $surface; padding: 1; }
    ProposalEditScreen TextArea { height: 8; }
    ProposalEditScreen Horizontal { height: auto; }
    ProposalEditScreen Select { width: 24; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Approve"),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, proposal: MemoryProposed) -> None:
        super().__init__()
        self.proposal = proposal

    def compose(self) -> ComposeResult:
        p = self.proposal
        with Vertical():
            yield Label("Edit, then approve   (ctrl+s approve · escape cancel)")
            with Horizontal():
                yield Select(
                    [(s, s) for s in ("user", "workspace", "session")],
                    value=p.scope,
                    allow_blank=False,
                    id="edit-scope",
                )
                yield Input(p.key or "", placeholder="key (user and workspace)", id="edit-key")
            yield TextArea(p.body, id="edit-text")
            yield Button("Approve", id="save", variant="primary")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_save()

    def action_save(self) -> None:
        scope = self.query_one("#edit-scope", Select).value
        key = self.query_one("#edit-key", Input).value.strip()
        body = self.query_one("#edit-text", TextArea).text
        self.dismiss(ProposalEdit(str(scope), key, body))

    def action_cancel(self) -> None:
        self.dismiss(None)


def render_trace(turn_no: int, trace: Any) -> Group:
    """A turn's context trace: each layer's tokens, what was included and dropped."""
    table = Table(
        title=f"turn {turn_no}: {trace.total}/{trace.budget} tokens",
        show_header=True,
        header_style="bold",
        expand=True,
    )
    table.add_column("source")
    table.add_column("tokens", justify="right")
    table.add_column("in", justify="right")
    table.add_column("dropped")
    for name, layer in trace.layers.items():
        if not (layer.tokens or layer.included or layer.dropped):
            continue
        dropped = ", ".join(f"{d.label} ({d.reason})" for d in layer.dropped[:3])
        if len(layer.dropped) > 3:
            dropped += f" +{len(layer.dropped) - 3} more"
        table.add_row(name, str(layer.tokens), str(len(layer.included)), dropped or "-")
    lines = []
    memories = trace.layers.get("memories")
    if memories is not None and memories.included:
        labels = ", ".join(i.label for i in memories.included)
        lines.append(Text(f"memories in context: {labels}", style="cyan"))
    return Group(table, *lines)
