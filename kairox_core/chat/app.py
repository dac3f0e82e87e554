"""The Textual chat: streamed, cleaned answers; memory cards; trace panel; Memory view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Header, Input, Static

from kairox_core.chat.engine import (
    ChatEngine,
    TurnOutcome,
    describe_attachment,
    describe_event,
    scoped,
)
from kairox_core.chat.resume import resume_hint
from kairox_core.chat.slash import (
    HELP,
    Attach,
    Compact,
    Help,
    Remember,
    RememberChunk,
    SwitchProfile,
    parse_slash,
)
from kairox_core.chat.stream_summary import ChatSummaryCard, stream_summaries
from kairox_core.chat.summary_card import SummaryCard, describe_original
from kairox_core.chat.widgets import ChatMessage, MemoryCard, render_trace
from kairox_core.errors import KairoxError
from kairox_core.events import (
    AssistantMessageCompleted,
    ContextCompactionCompleted,
    MemoryAccepted,
    MemoryProposed,
    ReplyFlagged,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.summary_lines import line_of
from kairox_core.toolloop import ToolStep
from kairox_core.turn_status import INTERRUPTED_NOTE, interrupted_turns

CONVERSATION = (UserMessageAdded, AssistantMessageCompleted, ToolInvocationCompleted)
# what a [Summary] card stands for: the messages and the notes under the replies
SAID = (*CONVERSATION, ReplyFlagged, MemoryAccepted)

KEYS_HELP = """\
Keys:
  enter     send the message
  ctrl+n    select the next memory card waiting for a decision; on a card:
              a approve · r reject · e edit then approve (ctrl+s saves, escape cancels)
              any other letter goes back to the message you are typing
  escape    back to the message input
  ctrl+t    show or hide the trace panel
  ctrl+y    the Memory view
  ctrl+r    remember this: pick a message, then the whole of it or one line, as a
              long-term chunk (scope session unless you pick another)
  tab       moves through the chat to a [Summary] card (a compacted range); on it:
              enter open/close · s edit · x drop a line · p pin a line · l line to long-term
  ctrl+c    quit; the session id and the command that resumes it are printed"""


class TracePanel(VerticalScroll):
    """Per turn: each context source with its tokens and what was dropped; memory and
    compaction events as they happen."""

    DEFAULT_CSS = """
    TracePanel { width: 45%; border-left: solid $accent; padding: 0 1; }
    TracePanel.hidden { display: none; }
    """

    def add_trace(self, turn_no: int, trace: Any) -> None:
        self.mount(Static(render_trace(turn_no, trace)))
        self.scroll_end(animate=False)

    def add_line(self, line: str, style: str = "") -> None:
        self.mount(Static(Text(line, style=style)))
        self.scroll_end(animate=False)


class ChatApp(App[str]):
    """``kairox chat``."""

    TITLE = "Kairox chat"
    CSS = """
    #chat { width: 1fr; padding: 0 1; }
    #prompt { dock: bottom; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+t", "toggle_trace", "Trace"),
        Binding("ctrl+y", "memory_view", "Memory view"),
        Binding("ctrl+n", "next_card", "Memory card"),
        Binding("ctrl+r", "remember_line", "Remember a line"),
        Binding("escape", "focus_prompt", "Prompt", show=False),
        Binding("ctrl+c", "quit", "Quit", priority=True),
    ]

    def __init__(self, engine: ChatEngine, *, resume_args: Sequence[str] = ()) -> None:
        super().__init__()
        self.engine = engine
        self.resume_args = tuple(resume_args)  # --config/--db for the resume command
        self.turns = 0
        self.busy = False
        self._waiting_note: ChatMessage | None = None  # "a memory waits...", while one does
        self._open_summaries: set[int] = set()  # seqs of the [Summary] cards opened

    @property
    def resume_hint(self) -> str:
        """What ``kairox chat`` prints on exit: the session id and how to resume it."""
        return resume_hint(self.engine.session_id, self.resume_args)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal():
            yield VerticalScroll(id="chat")
            yield TracePanel(id="trace")
        # select_on_focus off: coming back from a card must not select the half-typed
        # message, or the next key would replace it
        yield Input(placeholder="Message (or /help)", id="prompt", select_on_focus=False)
        yield Footer()

    @property
    def chat(self) -> VerticalScroll:
        return self.query_one("#chat", VerticalScroll)

    @property
    def trace_panel(self) -> TracePanel:
        return self.query_one(TracePanel)

    def on_mount(self) -> None:
        e = self.engine
        self.sub_title = f"session {e.session_id} · workspace {e.workspace} · profile {e.profile}"
        self.note(e.provider_note)
        self.show_history()
        self.query_one("#prompt", Input).focus()
        self.tell_tool_notice()

    @work(group="tool-notice")
    async def tell_tool_notice(self) -> None:
        """Before the turn: the profile's tools the model is not offered (checking it may
        load the model, so the chat is usable meanwhile)."""
        try:
            notice = await self.engine.tool_notice()
        except KairoxError as exc:  # the model does not start: the first turn says it too
            self.note(str(exc), "error")
            return
        if notice:
            self.note(notice, "error")

    def note(self, text: str, role: str = "note") -> ChatMessage:
        message = ChatMessage(role, text)
        self.chat.mount(message)
        self.chat.scroll_end(animate=False)
        return message

    def show_history(self, *, resumed: bool = True) -> None:
        """A resumed session shows what was said before; a compacted range shows as one
        ``[Summary]`` card in place of its messages (stream_summary.py)."""
        shown = 0
        e = self.engine
        pending = {p.id for p in e.kx.approvals.pending(session_id=e.session_id)}
        summaries = stream_summaries(e.kx, e.session)
        drawn: set[int] = set()
        history = self.engine.history()
        # a turn whose process died mid-reply: a note under its last event
        interrupted = {t.last_seq for t in interrupted_turns(history)}
        for event in history:
            seq = event.seq or 0
            covering = next(
                (s for s in summaries if s.item.first_seq <= seq <= s.item.last_seq), None
            )
            if covering is not None and isinstance(event, SAID):
                if covering.item.seq not in drawn:
                    drawn.add(covering.item.seq)
                    expanded = covering.item.seq in self._open_summaries
                    self.chat.mount(ChatSummaryCard(covering, expanded=expanded))
                if isinstance(event, UserMessageAdded):
                    shown += 1
                continue
            if isinstance(event, UserMessageAdded):
                self.note(describe_original(event)[1], "user")  # with its attachments' names
                shown += 1
            elif isinstance(event, AssistantMessageCompleted):
                self.note(event.text, "assistant")
            elif isinstance(event, ToolInvocationCompleted):
                self.note(f"tool {event.tool_name} → {event.result[:200]}", "note")
            elif isinstance(event, ReplyFlagged):
                self.note(event.note, "error")  # "Nothing was saved", as said at the time
            elif isinstance(event, MemoryAccepted) and event.scope == "session":
                self.note(f"session memory noted [{event.key or '-'}]: {event.body}")
            elif isinstance(event, MemoryProposed) and event.proposal_id in pending:
                self.chat.mount(MemoryCard(event))  # still undecided: decide it here
            if seq in interrupted:
                self.note(INTERRUPTED_NOTE, "note")
        if shown and resumed:
            self.note(f"resumed: {shown} earlier prompts above")
        self.update_waiting_note()

    async def redraw_chat(self) -> None:
        """Draw the session again from its events: after a compaction or a change to a
        summary, its ``[Summary]`` card replaces the messages it stands for."""
        await self.chat.remove_children()
        self._waiting_note = None
        self.note(self.engine.provider_note)
        self.show_history(resumed=False)

    def on_summary_card_toggled(self, message: SummaryCard.Toggled) -> None:
        seq = message.card.summary.seq
        if message.card.expanded:
            self._open_summaries.add(seq)  # stays open across redraws
        else:
            self._open_summaries.discard(seq)

    async def on_chat_summary_card_act(self, message: ChatSummaryCard.Act) -> None:
        """Edit, drop, pin or keep long-term, from a card in the chat; then redraw."""
        e, name, args = self.engine, message.name, message.args
        try:
            if name == "keep_line":
                chunk = e.kx.longterm.pin_summary_line(e.session_id, *args)
                done = f"kept in long-term memory [{chunk.scope}] {chunk.text}"
            elif name == "pin_line":
                seq, number = args
                fact = await e.session.pin_fact(
                    line_of(e.session.active_summary(seq), number), source_seq=seq
                )
                done = f"pinned: {fact.text}"
            else:  # edit_summary, drop_chunk
                await getattr(e.session, name)(*args)
                done = "summary edited" if name == "edit_summary" else "line dropped"
        except KairoxError as exc:
            self.note(str(exc), "error")
            return
        self._open_summaries.add(message.card.summary.seq)
        await self.redraw_chat()
        self.note(done)
        for card in self.query(ChatSummaryCard):
            if card.summary.seq == message.card.summary.seq:
                card.focus()

    # --- input ----------------------------------------------------------------------------

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value
        event.input.value = ""
        if not text.strip():
            return
        if self.busy:
            self.note("still answering the previous prompt; wait a moment", "error")
            return
        try:
            command = parse_slash(text)
        except KairoxError as exc:
            self.note(str(exc), "error")
            return
        if command is None:
            self.run_turn(text)
        else:
            await self.run_slash(command)

    @work(exclusive=True, group="turn")
    async def run_turn(self, prompt: str) -> None:
        self.busy = True
        names = ", ".join(str(a.get("filename", "?")) for a in self.engine.staged)
        self.note(prompt + (f"  [attached: {names}]" if names else ""), "user")
        answer = ChatMessage("assistant", "")
        answer.thinking = True  # until the first token: a local model may take a while
        self.chat.mount(answer)

        def on_text(delta: str) -> None:
            answer.append(delta)
            self.chat.scroll_end(animate=False)

        def on_tool(step: ToolStep) -> None:  # one line for the call, one for its result
            line = ChatMessage("tool", f"{step.call_line()}\n{step.result_line()}")
            self.chat.mount(line, before=answer)  # above the answer they lead to
            self.chat.scroll_end(animate=False)

        try:
            outcome = await self.engine.run_turn(prompt, on_text, on_tool)
        except KairoxError as exc:  # the budget guard, a provider that cannot start...
            answer.remove()
            self.note(str(exc), "error")
            self.trace_panel.add_line(f"turn refused: {exc}", "red")
            return
        finally:
            self.busy = False
            answer.stop_thinking()
        self.show_outcome(outcome)

    def show_outcome(self, outcome: TurnOutcome) -> None:
        self.turns += 1
        if outcome.trace is not None:
            self.trace_panel.add_trace(self.turns, outcome.trace)
        if outcome.error:
            self.note(outcome.error, "error")
        for step in outcome.tool_steps:
            self.trace_panel.add_line(
                f"{step.source}: {step.call_line(80)}", "cyan" if step.ok else "red"
            )
        for line in [*outcome.tool_notes, *outcome.scope_notes]:
            self.trace_panel.add_line(line, "yellow")
        for line in dict.fromkeys(bad.describe() for bad in outcome.invalid):
            self.trace_panel.add_line(line, "yellow")  # a misspelt tag and its closer: once
        for accepted in outcome.accepted:
            self.note(f"session memory noted [{accepted.key or '-'}]: {accepted.body}")
            self.trace_panel.add_line(describe_event(accepted), "green")
        if outcome.unsaved:
            self.note(outcome.unsaved, "error")
        for event in outcome.compaction:
            self.trace_panel.add_line(describe_event(event), "magenta")
        if any(isinstance(ev, ContextCompactionCompleted) for ev in outcome.compaction):
            self.call_later(self.redraw_chat)  # the compacted range becomes a [Summary] card
        cards = []
        for proposal in outcome.proposals:
            self.trace_panel.add_line(describe_event(proposal), "yellow")
            card = MemoryCard(proposal)
            self.chat.mount(card)
            cards.append(card)
        self.chat.scroll_end(animate=False)
        if cards:  # the prompt keeps the keyboard: typing must never decide a card
            self.update_waiting_note()

    def update_waiting_note(self) -> None:
        """One note says how many cards wait for a decision, below the latest card; it
        goes once the last card is decided."""
        pending = [c for c in self.query(MemoryCard) if not c.decided]
        if self._waiting_note is not None:
            self._waiting_note.remove()
            self._waiting_note = None
        if pending:
            n = len(pending)
            many = f"{n} memories wait" if n > 1 else "a memory waits"
            self._waiting_note = self.note(
                f"{many} for your decision: ctrl+n selects a card, then a / r / e"
            )

    def sync_cards(self) -> None:
        """Mark the cards whose proposal was decided elsewhere (the Memory view, the CLI,
        the web app) as decided, as the store says."""
        for card in self.query(MemoryCard):
            if card.decided:
                continue
            current = self.engine.kx.approvals.get_proposal(card.proposal.proposal_id)
            if current is not None and current.status != "pending":
                card.mark("approve" if current.status == "accepted" else "reject")
        self.update_waiting_note()

    def on_memory_card_typed_away(self, message: MemoryCard.TypedAway) -> None:
        prompt = self.query_one("#prompt", Input)
        prompt.focus()
        prompt.insert_text_at_cursor(message.character)

    def on_memory_card_decided(self, message: MemoryCard.Decided) -> None:
        card, p = message.card, message.card.proposal
        try:
            if message.verdict == "approve":
                record = self.engine.approve(
                    p.proposal_id, body=message.body, scope=message.scope, key=message.key
                )
                where = scoped(record.scope.value, record.key)
                self.trace_panel.add_line(f"MemoryAccepted {where}", "green")
            else:
                self.engine.reject(p.proposal_id, reason="rejected in kairox chat")
                self.trace_panel.add_line(f"MemoryRejected {scoped(p.scope, p.key)}", "red")
        except KairoxError as exc:
            self.note(str(exc), "error")
            return
        card.mark(message.verdict, message.body, scope=message.scope, key=message.key)
        self.update_waiting_note()
        pending = [c for c in self.query(MemoryCard) if not c.decided]
        if pending:
            pending[0].focus()
        else:
            self.action_focus_prompt()

    async def run_slash(self, command: object) -> None:
        e = self.engine
        try:
            if isinstance(command, Help):
                self.note(f"{HELP}\n\n{KEYS_HELP}")
            elif isinstance(command, Remember):
                record = e.kx.approvals.remember(
                    command.scope,
                    command.key,
                    command.text,
                    workspace_id=e.workspace,
                    session_id=e.session_id,
                )
                self.note(f"remembered [{command.scope}:{command.key}] {command.text}")
                self.trace_panel.add_line(f"MemoryAccepted {command.scope}:{record.key}", "green")
            elif isinstance(command, RememberChunk):  # long-term memory (kairox_core/longterm)
                chunk = e.kx.longterm.add(
                    command.text,
                    scope=command.scope,
                    session_id=e.session_id,
                    workspace_id=e.workspace,
                )
                self.note(f"kept in long-term memory [{chunk.scope}] {chunk.text}")
                self.trace_panel.add_line(f"LongTermChunkAdded {chunk.scope}:{chunk.id}", "green")
            elif isinstance(command, Attach):
                att = e.attach(command.path)
                self.note(f"attached {describe_attachment(att)}: it goes with your next message")
            elif isinstance(command, Compact):
                await self.compact_now()
            elif isinstance(command, SwitchProfile):
                await e.session.switch_profile(command.name)
                self.note(f"profile is now '{e.profile}'")
                self.sub_title = (
                    f"session {e.session_id} · workspace {e.workspace} · profile {e.profile}"
                )
        except KairoxError as exc:
            self.note(str(exc), "error")

    async def compact_now(self) -> None:
        e = self.engine
        result = await e.kx.compact_async(e.session_id)
        if result.ok:
            await self.redraw_chat()
        self.note(f"compaction: {result}")
        self.trace_panel.add_line(f"compaction: {result}", "magenta")

    # --- actions ----------------------------------------------------------------------------

    def action_toggle_trace(self) -> None:
        self.trace_panel.toggle_class("hidden")

    def action_focus_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()

    def action_next_card(self) -> None:
        """Focus the next undecided card after the focused one, cycling."""
        pending = [c for c in self.query(MemoryCard) if not c.decided]
        if not pending:
            self.note("no memory card is waiting for a decision")
            return
        after = pending.index(self.focused) + 1 if self.focused in pending else 0
        card = pending[after % len(pending)]
        card.focus()
        card.scroll_visible(animate=False)

    async def action_quit(self) -> None:
        """Quit with the resume command as the result, which ``kairox chat`` prints."""
        self.exit(self.resume_hint)

    def action_remember_line(self) -> None:
        """Remember this: any message, or a line of it, as a chunk (remember_line.py)."""
        from kairox_core.chat.remember_line import Remembered, RememberScreen, keep, said

        messages = said(self.engine.history())
        if not messages:
            self.note("nothing said yet: there is no line to remember")
            return

        def done(chosen: Remembered | None) -> None:
            if chosen is None:
                return
            try:
                chunk = keep(self.engine, chosen)
            except KairoxError as exc:
                self.note(str(exc), "error")
                return
            self.note(f"kept in long-term memory [{chunk.scope}] {chunk.text}")
            self.trace_panel.add_line(f"LongTermChunkAdded {chunk.scope}:{chunk.id}", "green")

        self.push_screen(RememberScreen(messages), done)

    def action_memory_view(self) -> None:
        from kairox_core.chat.memory_view import MemoryView

        def back(_: None) -> None:  # draw what was compacted or edited there
            self.call_later(self.redraw_chat)

        self.push_screen(MemoryView(self.engine), back)
