"""The Memory view's Long-term tab: the chunks this session sees, multi-select, promote.

``space`` selects or unselects the chunk under the cursor; ``m`` promotes the selected
ones (or the one under the cursor) to a draft personal context pack; ``e`` edits and
``d`` deletes the chunk under the cursor (events, like ``kairox longterm``). The tab's
bindings take precedence over the Memory view's while its table has focus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from kairox_core.chat.widgets import EditScreen
from kairox_core.errors import KairoxError

if TYPE_CHECKING:
    from kairox_core.chat.engine import ChatEngine


class LongTermPane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_chunk", "Select"),
        Binding("m", "promote", "Promote to context pack"),
        Binding("e", "edit_chunk", "Edit chunk"),
        Binding("d", "delete_chunk", "Delete chunk"),
    ]

    def __init__(self, engine: ChatEngine, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = engine
        self.selected: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static(
            "space: select · m: promote to a draft context pack · e: edit · d: delete",
            id="longterm-help",
        )
        yield DataTable(id="longterm-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#longterm-table", DataTable).add_columns("", "scope", "text", "id")
        self.load()

    def load(self) -> None:
        e = self.engine
        table = self.query_one("#longterm-table", DataTable)
        if not table.columns:  # not mounted yet: on_mount loads
            return
        row = table.cursor_coordinate.row  # the cursor stays put: the next `d` must not hit row 0
        table.clear()
        chunks = e.kx.longterm.list(session_id=e.session_id, workspace_id=e.workspace)
        known = {c.id for c in chunks}
        self.selected &= known
        for c in chunks:
            text = c.text if len(c.text) <= 80 else c.text[:77] + "..."
            mark = "✓" if c.id in self.selected else ""
            table.add_row(mark, c.scope, text, c.id, key=c.id)
        if chunks:
            table.move_cursor(row=min(row, len(chunks) - 1), animate=False)

    def _current(self) -> str | None:
        table = self.query_one("#longterm-table", DataTable)
        if table.row_count == 0:
            self.notify("no long-term chunk here yet: /remember TEXT keeps one", severity="warning")
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_toggle_chunk(self) -> None:
        chunk_id = self._current()
        if chunk_id is None:
            return
        self.selected ^= {chunk_id}
        table = self.query_one("#longterm-table", DataTable)
        row = table.cursor_coordinate.row
        self.load()
        table.move_cursor(row=row)

    def action_promote(self) -> None:
        current = self._current()
        table = self.query_one("#longterm-table", DataTable)
        in_order = [str(row.value) for row in table.rows]  # the pack keeps the table's order
        ids = [i for i in in_order if i in self.selected] or ([current] if current else [])
        if not ids:
            return
        try:
            pack = self.engine.kx.packs.promote(ids)
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
            return
        self.selected.clear()
        self.notify(
            f"draft pack {pack.name} ({len(ids)} chunks); `kairox pack activate {pack.name}`"
        )
        self.load()

    def action_edit_chunk(self) -> None:
        chunk_id = self._current()
        if chunk_id is None:
            return
        chunk = self.engine.kx.longterm.get(chunk_id)

        def save(text: str | None) -> None:
            if text is None or not text.strip():
                return
            try:
                self.engine.kx.longterm.edit(chunk_id, text.strip())
            except KairoxError as exc:
                self.notify(str(exc), severity="error")
            self.load()

        self.app.push_screen(EditScreen(f"Edit long-term chunk {chunk_id}", chunk.text), save)

    def action_delete_chunk(self) -> None:
        chunk_id = self._current()
        if chunk_id is None:
            return
        try:
            self.engine.kx.longterm.delete(chunk_id)
            self.notify(f"deleted {chunk_id}")
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
        self.load()
