"""Remember this, on any line of the chat: ``ctrl+r`` picks a message, then the whole
message or one line of it, and keeps it as a long-term chunk (``source_seq``: the
message's seq), scope ``session`` unless another is chosen.

Messages come from the event store, not from the widgets on screen, so every message
of the session can be picked, those a ``[Summary]`` card stands for included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Select
from textual.widgets.option_list import Option

from kairox_core.events import AssistantMessageCompleted, Event, UserMessageAdded

if TYPE_CHECKING:
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.longterm.chunks import Chunk

SCOPES = ("session", "project", "global")


@dataclass(frozen=True)
class Remembered:
    """What the person chose: the text, its message's seq and the scope."""

    text: str
    source_seq: int
    scope: str


def said(events: list[Event]) -> list[tuple[int, str, str]]:
    """(seq, who, text) of each user and assistant message, in order."""
    out = []
    for e in events:
        if isinstance(e, UserMessageAdded | AssistantMessageCompleted) and e.text.strip():
            who = "you" if isinstance(e, UserMessageAdded) else "assistant"
            out.append((e.seq or 0, who, e.text))
    return out


def _short(text: str, width: int = 100) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


class RememberScreen(ModalScreen[Remembered | None]):
    """Step 1: the messages (newest selected); step 2: the whole message or a line."""

    DEFAULT_CSS = """
    RememberScreen { align: center middle; }
    RememberScreen > Vertical { width: 90%; height: 80%; border: thick $accent;
                                background: $surface; padding: 0 1; }
    RememberScreen OptionList { height: 1fr; }
    RememberScreen Select { width: 30; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back / cancel")]

    def __init__(self, messages: list[tuple[int, str, str]]) -> None:
        super().__init__()
        self.messages = messages
        self.picked: tuple[int, str, str] | None = None  # step 2: the message chosen

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(
                "Remember this: pick a message (enter), then the whole of it or one line; "
                "tab reaches the scope · escape goes back",
                id="remember-help",
            )
            yield Select(
                [(s, s) for s in SCOPES], value="session", allow_blank=False, id="remember-scope"
            )
            yield OptionList(id="remember-options")

    def on_mount(self) -> None:
        self.show_messages()

    def show_messages(self) -> None:
        self.picked = None
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(
            [Option(f"seq {seq} {who}: {_short(text)}") for seq, who, text in self.messages]
        )
        if self.messages:
            options.highlighted = len(self.messages) - 1
        options.focus()

    def show_lines(self, message: tuple[int, str, str]) -> None:
        self.picked = message
        options = self.query_one(OptionList)
        options.clear_options()
        lines = [ln for ln in message[2].splitlines() if ln.strip()]
        options.add_options(
            [Option(f"the whole message: {_short(message[2])}")]
            + [Option(f"line: {_short(ln)}") for ln in lines]
        )
        options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if self.picked is None:
            self.show_lines(self.messages[event.option_index])
            return
        seq, _, text = self.picked
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        chosen = text.strip() if event.option_index == 0 else lines[event.option_index - 1]
        scope = str(self.query_one(Select).value)
        self.dismiss(Remembered(chosen, seq, scope))

    def action_back(self) -> None:
        if self.picked is not None:
            self.show_messages()
        else:
            self.dismiss(None)


def keep(engine: ChatEngine, chosen: Remembered) -> Chunk:
    """Write the chunk (``kx.longterm.add``) for the chat's session."""
    return engine.kx.longterm.add(
        chosen.text,
        scope=chosen.scope,
        session_id=engine.session_id,
        workspace_id=engine.workspace,
        source_seq=chosen.source_seq,
    )
