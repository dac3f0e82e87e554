"""The Memory view: the layers the model sees, and a browser of stored memories.

Layers come from the same assembly a turn uses (``Session.preview``), so what is shown
is exactly what the next turn would send: each layer's text, split from the assembled
messages (context/layers.py), and a ``[Summary]`` card per active summary that expands
to the original messages it replaced (summary_card.py). ``s``/``x``/``l`` act on the
focused card (else the latest). The browser lists memories by scope; ``e`` edits and
``d`` deletes the selected one (with events, like ``kairox memory``); above it, the
proposals waiting for a decision (pending_pane.py: ``a``/``r``/``e``). The Long-term tab
(longterm_tab.py) lists long-term chunks and promotes them to a pack; the Usage tab
(usage_tab.py) shows what the session has spent, compaction included.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static, TabbedContent, TabPane

from kairox_core.chat.longterm_tab import LongTermPane
from kairox_core.chat.pending_pane import PendingPane
from kairox_core.chat.summary_card import SummaryCard, original_messages
from kairox_core.chat.usage_tab import render_usage, usage_line
from kairox_core.chat.widgets import EditScreen
from kairox_core.context.layers import LayerText, content, layer_texts
from kairox_core.context.sources import SummaryItem
from kairox_core.errors import KairoxError
from kairox_core.summary_lines import numbered_lines
from kairox_core.usage import SessionUsage, usage

if TYPE_CHECKING:
    from kairox_core.chat.engine import ChatEngine

SCOPES = ("user", "workspace", "session")


class MemoryView(Screen[None]):
    # The tabs fill the screen, so a long memory table scrolls inside itself below the
    # pending pane. With Textual's auto heights a percentage of the tab pane is circular:
    # a pending pane capped at 50% was drawn one line high, its rows hidden (trial s6).
    DEFAULT_CSS = """
    MemoryView TabbedContent, MemoryView ContentSwitcher, MemoryView TabPane { height: 1fr; }
    MemoryView #memory-table { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Back to chat"),
        Binding("c", "compact", "Compact now"),
        Binding("C", "compact_range", "Compact a range", show=False),
        Binding("o", "toggle_summary", "Summary originals"),
        Binding("p", "pin", "Pin a fact"),
        Binding("s", "edit_summary", "Edit summary"),
        Binding("x", "drop_chunk", "Drop summary chunk"),
        Binding("l", "keep_line", "Summary line to long-term"),
        Binding("e", "edit_memory", "Edit memory"),
        Binding("d", "delete_memory", "Delete memory"),
        Binding("r", "refresh", "Refresh"),
    ]

    def __init__(self, engine: ChatEngine) -> None:
        super().__init__()
        self.engine = engine
        self.summaries: list[Any] = []
        self.expanded: set[int] = set()  # seqs of the cards open, kept across refreshes

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="layers"):
            with TabPane("Layers the model sees", id="layers"):
                yield VerticalScroll(id="layers-body")
            with TabPane("Memories", id="memories"):
                yield PendingPane(self.engine, id="pending-pane")
                yield DataTable(id="memory-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Long-term", id="longterm"):
                yield LongTermPane(self.engine, id="longterm-pane")
            with TabPane("Usage", id="usage"):
                yield VerticalScroll(Static(id="usage-body"))
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#memory-table", DataTable)
        table.add_columns("scope", "key", "body", "id")
        self.action_refresh()

    # --- content -----------------------------------------------------------------------------

    def action_refresh(self) -> None:
        self.load_layers()
        self.load_memories()
        if self.is_mounted:
            self.query_one(LongTermPane).load()
            self.query_one(PendingPane).load()

    @work(exclusive=True, group="layers")
    async def load_layers(self) -> None:
        session = self.engine.session
        spent = self.load_usage()
        body = self.query_one("#layers-body", VerticalScroll)
        try:
            context = await session.preview("")
        except KairoxError as exc:  # the budget guard: what the next turn would be told
            await body.remove_children()
            await body.mount(Static(Text(f"the next turn would be refused:\n{exc}", "red")))
            return
        self.summaries = list(session.compaction.summaries)
        focused = self.focused.summary.seq if isinstance(self.focused, SummaryCard) else None
        await body.remove_children()
        header = render_header(context.trace)
        header.append("\n")
        header.append_text(usage_line(spent))
        widgets: list[Static] = [Static(header, id="layers-header")]
        for layer in layer_texts(context.messages, context.trace):
            widgets.append(Static(render_layer(layer), classes="layer"))
            if layer.name == "summaries":
                widgets.extend(self._summary_cards(layer))
        await body.mount_all(widgets)
        for card in body.query(SummaryCard):
            if card.summary.seq == focused:
                card.focus()

    def _summary_cards(self, layer: LayerText) -> list[SummaryCard]:
        tokens = {item.id: item.tokens for item in layer.trace.included}
        e = self.engine

        def load(summary: SummaryItem) -> list[Any]:
            return original_messages(e.kx, e.session_id, summary)

        return [
            SummaryCard(
                s,
                load,
                tokens=tokens.get(f"seq {s.seq}"),
                expanded=s.seq in self.expanded,
            )
            for s in sorted(self.summaries, key=lambda s: s.first_seq)
        ]

    def load_usage(self) -> SessionUsage:
        e = self.engine
        (spent,) = usage(e.kx, e.session_id).sessions
        self.query_one("#usage-body", Static).update(render_usage(spent))
        return spent

    def load_memories(self) -> None:
        e = self.engine
        table = self.query_one("#memory-table", DataTable)
        table.clear()
        for scope in SCOPES:
            owner: dict[str, str] = {}
            if scope == "workspace":
                owner = {"workspace_id": e.workspace}
            elif scope == "session":
                owner = {"session_id": e.session_id}
            for record in e.kx.memories.list(scope, **owner):
                body = record.body if len(record.body) <= 80 else record.body[:77] + "..."
                table.add_row(scope, record.key or "-", body, record.id, key=record.id)

    def _selected_memory(self) -> Any:
        table = self.query_one("#memory-table", DataTable)
        if table.row_count == 0:
            self.notify("no memory selected", severity="warning")
            return None
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self.engine.kx.memories.get_by_id(str(row_key.value))

    # --- actions -------------------------------------------------------------------------------

    def action_edit_memory(self) -> None:
        record = self._selected_memory()
        if record is None:
            return

        def save(body: str | None) -> None:
            if body is None or not body.strip():
                return
            try:
                self.engine.kx.approvals.edit_memory(record.id, body.strip())
            except KairoxError as exc:
                self.notify(str(exc), severity="error")
            self.load_memories()

        self.app.push_screen(EditScreen(f"Edit {record.scope}:{record.key}", record.body), save)

    def action_delete_memory(self) -> None:
        record = self._selected_memory()
        if record is None:
            return
        try:
            self.engine.kx.approvals.delete_memory(record.id)
            self.notify(f"deleted {record.key}")
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
        self.load_memories()

    async def action_compact(self) -> None:
        await self._compact(None, None)

    async def _compact(self, first: int | None, last: int | None) -> None:
        try:
            result = await self.engine.session.compact(first, last)
            self.notify(f"compaction: {result}")
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
        self.load_layers()

    def action_compact_range(self) -> None:
        """Compact seqs A:B (widened to whole exchanges), as `kairox compact --range`."""

        def run(text: str | None) -> None:
            if text is None or not text.strip():
                return
            parsed = parse_range(text)
            if parsed is None:
                self.notify(
                    f"{text.strip()!r} is not a range: write A:B (seqs, inclusive)",
                    severity="error",
                )
                return
            self.run_worker(self._compact(*parsed), group="session-action")

        self.app.push_screen(
            EditScreen("Compact seqs A:B (inclusive; `kairox events` shows the seqs)", ""), run
        )

    def action_pin(self) -> None:
        """Pin a fact; on a focused summary card, a line of it (by number) or any text."""
        card = self.focused if isinstance(self.focused, SummaryCard) else None
        lines = dict(numbered_lines(card.summary.text)) if card else {}

        def save(text: str | None) -> None:
            if not text or not text.strip():
                return
            text = text.strip()
            if card is not None and text.isdigit() and int(text) in lines:
                line = lines[int(text)].strip()
                self._call_session("pin_fact", line, source_seq=card.summary.seq)
            else:
                self._call_session("pin_fact", text)

        title = "Pin a fact (kept verbatim in every turn)"
        if card is not None:
            title = "Pin a line of this summary (its number) or type a fact:\n" + listing(
                card.summary.text
            )
        self.app.push_screen(EditScreen(title, ""), save)

    def _target_summary(self) -> Any:
        """The summary of the focused card, else the latest; None (and a note) if none."""
        if isinstance(self.focused, SummaryCard):
            return self.focused.summary
        if not self.summaries:
            self.notify("no summary yet: compact first", severity="warning")
            return None
        return self.summaries[-1]

    def action_toggle_summary(self) -> None:
        """Expand or collapse the focused card (else the latest) to its originals."""
        target = self._target_summary()
        if target is None:
            return
        for card in self.query(SummaryCard):
            if card.summary.seq == target.seq:
                card.action_toggle_originals()
                card.focus()
                card.scroll_visible(animate=False)

    def on_summary_card_toggled(self, message: SummaryCard.Toggled) -> None:
        seq = message.card.summary.seq
        if message.card.expanded:
            self.expanded.add(seq)
        else:
            self.expanded.discard(seq)

    def action_edit_summary(self) -> None:
        summary = self._target_summary()
        if summary is None:
            return

        def save(text: str | None) -> None:
            if text and text.strip():
                self._call_session("edit_summary", summary.seq, text.strip())

        self.app.push_screen(
            EditScreen(
                f"Edit summary of seqs {summary.first_seq}-{summary.last_seq}", summary.text
            ),
            save,
        )

    def action_drop_chunk(self) -> None:
        summary = self._target_summary()
        if summary is None:
            return

        def save(text: str | None) -> None:
            if text is None or not text.strip().isdigit():
                return
            self._call_session("drop_chunk", summary.seq, int(text.strip()))

        self.app.push_screen(
            EditScreen("Type the number of the line to drop:\n" + listing(summary.text), ""),
            save,
        )

    def action_keep_line(self) -> None:
        """Keep one line of a summary (the focused card's, else the latest) as a long-term
        chunk of this session (scope session, as ``/remember``)."""
        summary = self._target_summary()
        if summary is None:
            return

        def save(text: str | None) -> None:
            if text is None or not text.strip().isdigit():
                return
            e = self.engine
            try:
                chunk = e.kx.longterm.pin_summary_line(e.session_id, summary.seq, int(text))
                self.notify(f"kept in long-term memory: {chunk.text}")
            except KairoxError as exc:
                self.notify(str(exc), severity="error")
            self.query_one(LongTermPane).load()

        self.app.push_screen(
            EditScreen(
                "Type the number of the line to keep long-term:\n" + listing(summary.text), ""
            ),
            save,
        )

    @work(group="session-action")
    async def _call_session(self, name: str, *args: Any, **kwargs: Any) -> None:
        try:
            result = getattr(self.engine.session, name)(*args, **kwargs)
            if inspect.isawaitable(result):
                await result
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
        self.load_layers()


def listing(text: str) -> str:
    """A summary's lines with the numbers ``kairox summary show`` prints."""
    return "\n".join(f"{i}: {line}" for i, line in numbered_lines(text))


def parse_range(text: str) -> tuple[int, int] | None:
    """``A:B`` as two seqs (1 <= A <= B), else None."""
    lo, sep, hi = text.strip().partition(":")
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        return None
    first, last = int(lo), int(hi)
    return (first, last) if 1 <= first <= last else None


MAX_LAYER_CHARS = 6000  # per layer on screen; `kairox context SESSION --messages` has all


KEYS = (
    "c compact now · C compact seqs A:B · o open/close a summary card (tab moves between "
    "them) · s edit · x drop a chunk · l line to long-term · p pin a fact (on a card: "
    "one of its lines) · r refresh"
)


def render_header(trace: Any) -> Text:
    text = Text(
        f"{trace.total} of {trace.budget} tokens (window {trace.context_window}, "
        f"reserve {trace.reserve}); each layer below is the text the model is sent\n",
        style="bold",
    )
    text.append(KEYS, style="dim")
    return text


def render_layer(layer: LayerText) -> Text:
    """A layer's heading (tokens, items in and out) and the text it sends."""
    trace = layer.trace
    text = Text()
    if not layer.messages and not trace.dropped and not trace.notes:
        text.append(f"{layer.name}  ", style="bold cyan")
        text.append("nothing in this layer now", style="dim")
        return text
    text.append(f"{layer.name}  ", style="bold cyan")
    text.append(f"{trace.tokens} tokens, {len(trace.included)} in", style="dim")
    if trace.dropped:
        text.append(f", {len(trace.dropped)} dropped", style="yellow")
    text.append("\n")
    for item in trace.dropped[:5]:
        text.append(f"  ✗ {item.label}: {item.reason}\n", style="yellow")
    if len(trace.dropped) > 5:
        text.append(f"  ✗ and {len(trace.dropped) - 5} more\n", style="yellow")
    for note in trace.notes:
        text.append(f"  note: {note}\n", style="dim")
    if layer.name == "summaries" and layer.messages:
        text.append("  the cards below, as sent (o or enter: the originals)\n", style="dim")
        return text
    body = layer.text
    if layer.name == "prompt" and not any(content(m) for m in layer.messages[:1]):
        body = body.replace("user: ", "user: (your next message)", 1)
    if not body:
        text.append("  (nothing in this layer now)\n", style="dim")
        return text
    if len(body) > MAX_LAYER_CHARS:
        cut = len(body) - MAX_LAYER_CHARS
        if layer.name == "history":  # the newest messages matter most
            body = f"… {cut} earlier characters not shown\n" + body[-MAX_LAYER_CHARS:]
        else:
            body = body[:MAX_LAYER_CHARS] + f"\n… {cut} more characters not shown"
    for line in body.split("\n"):
        style = "bold" if line.startswith(("[", "<kairox:", "</kairox:")) else ""
        text.append(f"  {line}\n", style=style)
    return text
