"""The Memory view's list of proposals waiting for a person, with the cards' keys.

Every pending proposal of the database (as ``kairox memory pending`` and the web's
Memories tab list them), this session's first: ``a`` approves, ``r`` rejects and ``e``
edits then approves the one under the cursor. The pane's bindings take precedence over
the Memory view's while its table has focus. A decision here also marks the matching
card in the chat (``ChatApp.sync_cards``).
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


class PendingPane(Vertical):
    DEFAULT_CSS = """
    PendingPane { height: auto; }
    PendingPane DataTable { height: auto; max-height: 12; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("e", "edit", "Edit + approve"),
    ]

    def __init__(self, engine: ChatEngine, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = engine

    def compose(self) -> ComposeResult:
        yield Static("", id="pending-help")
        yield DataTable(id="pending-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#pending-table", DataTable).add_columns(
            "scope", "key", "body", "session", "id"
        )
        self.load()

    def load(self) -> None:
        e = self.engine
        table = self.query_one("#pending-table", DataTable)
        if not table.columns:  # not mounted yet: on_mount loads
            return
        row = table.cursor_coordinate.row
        table.clear()
        pending = e.kx.approvals.pending()
        pending.sort(key=lambda p: p.session_id != e.session_id)  # this session's first
        for p in pending:
            body = p.body if len(p.body) <= 80 else p.body[:77] + "..."
            taint = " ⚠" if p.tainted else ""
            scope = p.scope.value
            if p.model_scope:  # the scope check moved it
                scope += f" (model: {p.model_scope})"
            table.add_row(f"{scope}{taint}", p.key or "-", body, p.session_id, p.id, key=p.id)
        if pending:
            table.move_cursor(row=min(row, len(pending) - 1), animate=False)
        self.query_one("#pending-help", Static).update(
            f"Waiting for your decision ({len(pending)}): a approve · r reject · "
            "e edit then approve (⚠ tainted: echoes a tool result or retrieved text)"
            if pending
            else "Waiting for your decision: nothing"
        )

    def _current(self) -> Any:
        table = self.query_one("#pending-table", DataTable)
        if table.row_count == 0:
            self.notify("no memory is waiting for a decision", severity="warning")
            return None
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self.engine.kx.approvals.get_proposal(str(row_key.value))

    def _decide(self, verdict: str, body: str | None = None) -> None:
        proposal = self._current()
        if proposal is None:
            return
        try:
            if verdict == "approve":
                self.engine.approve(proposal.id, body=body)
            else:
                self.engine.reject(proposal.id, reason="rejected in the Memory view")
            self.notify(f"{'approved' if verdict == 'approve' else 'rejected'} {proposal.key}")
        except KairoxError as exc:
            self.notify(str(exc), severity="error")
        self.load()
        for owner, name in ((self.screen, "load_memories"), (self.app, "sync_cards")):
            follow = getattr(owner, name, None)  # the memory table, the chat's cards
            if follow is not None:
                follow()

    def action_approve(self) -> None:
        self._decide("approve")

    def action_reject(self) -> None:
        self._decide("reject")

    def action_edit(self) -> None:
        proposal = self._current()
        if proposal is None:
            return

        def save(body: str | None) -> None:
            if body is not None and body.strip():
                self._decide("approve", body.strip())

        self.app.push_screen(EditScreen(f"Edit {proposal.key or 'memory'}", proposal.body), save)
