"""The Memory view: the layers the model sees, and a browser of stored memories.

Layers come from the same assembly a turn uses (``Session.preview``), so what is shown
is exactly what the next turn would send. The browser lists memories by scope; ``e``
edits and ``d`` deletes the selected one (with events, like ``kairox memory``). The
Long-term tab (longterm_tab.py) lists long-term chunks and promotes them to a pack.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static, TabbedContent, TabPane

from kairox_core.chat.longterm_tab import LongTermPane
from kairox_core.chat.widgets import EditScreen
from kairox_core.errors import KairoxError

SCOPES = ("user", "workspace", "session")


class MemoryView(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back to chat"),
        Binding("c", "compact", "Compact now"),
        Binding("p", "pin", "Pin a fact"),
        Binding("s", "edit_summary", "Edit summary"),
        Binding("x", "drop_chunk", "Drop summary chunk"),
        Binding("l", "keep_line", "Summary line to long-term"),
        Binding("e", "edit_memory", "Edit memory"),
        Binding("d", "delete_memory", "Delete memory"),
        Binding("r", "refresh", "Refresh"),
    ]

    def __init__(self, engine: Any) -> None:
        super().__init__()
        self.engine = engine
        self.summaries: list[Any] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="layers"):
            with TabPane("Layers the model sees", id="layers"):
                yield VerticalScroll(Static(id="layers-body"))
            with TabPane("Memories", id="memories"):
                yield DataTable(id="memory-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Long-term", id="longterm"):
                yield LongTermPane(self.engine, id="longterm-pane")
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

    @work(exclusive=True, group="layers")
    async def load_layers(self) -> None:
        session = self.engine.session
        context = await session.preview("")
        self.summaries = list(getattr(session.compaction, "summaries", []) or [])
        self.query_one("#layers-body", Static).update(render_layers(context))

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
        try:
            result = await self.engine.session.compact()
            self.notify(f"compaction: {result}")
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
        self.load_layers()

    def action_pin(self) -> None:
        def save(text: str | None) -> None:
            if text and text.strip():
                self._call_session("pin_fact", text.strip())

        self.app.push_screen(EditScreen("Pin a fact (kept verbatim in every turn)", ""), save)

    def action_edit_summary(self) -> None:
        if not self.summaries:
            self.notify("no summary yet: compact first", severity="warning")
            return
        summary = self.summaries[-1]

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
        if not self.summaries:
            self.notify("no summary yet: compact first", severity="warning")
            return
        summary = self.summaries[-1]

        def save(text: str | None) -> None:
            if text is None or not text.strip().isdigit():
                return
            self._call_session("drop_chunk", summary.seq, int(text.strip()))

        chunks = "\n".join(f"{i}: {c}" for i, c in enumerate(summary.text.split("\n")) if c)
        self.app.push_screen(
            EditScreen("Type the number of the chunk to drop:\n" + chunks, ""), save
        )

    def action_keep_line(self) -> None:
        """Keep one line of the latest summary as a project long-term chunk."""
        if not self.summaries:
            self.notify("no summary yet: compact first", severity="warning")
            return
        summary = self.summaries[-1]
        lines = [ln for ln in summary.text.split("\n") if ln.strip()]

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

        listing = "\n".join(f"{i}: {ln}" for i, ln in enumerate(lines, 1))
        self.app.push_screen(
            EditScreen("Type the number of the line to keep long-term:\n" + listing, ""), save
        )

    @work(group="session-action")
    async def _call_session(self, name: str, *args: Any) -> None:
        try:
            result = getattr(self.engine.session, name)(*args)
            if hasattr(result, "__await__"):
                await result
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
        self.load_layers()


def render_layers(context: Any) -> Text:
    """The assembled context, layer by layer, with token counts."""
    trace = context.trace
    text = Text()
    text.append(
        f"{trace.total} of {trace.budget} tokens (window {trace.context_window}, "
        f"reserve {trace.reserve})\n\n",
        style="bold",
    )
    for name, layer in trace.layers.items():
        if name == "prompt":
            continue
        text.append(f"{name}  ", style="bold cyan")
        text.append(f"{layer.tokens} tokens, {len(layer.included)} in", style="dim")
        if layer.dropped:
            text.append(f", {len(layer.dropped)} dropped", style="yellow")
        text.append("\n")
        for item in layer.included[-12:]:
            text.append(f"  • {item.label} ({item.tokens})\n")
        for item in layer.dropped[:5]:
            text.append(f"  ✗ {item.label}: {item.reason}\n", style="yellow")
        for note in layer.notes:
            text.append(f"  note: {note}\n", style="dim")
    return text
