"""The chat loop shared by the Textual app and ``--plain``: one turn at a time.

A turn: assemble the context, stream the model's reply through the session's marker
filter (what the user sees is already cleaned of ``<memory>`` markup), record it, then
report what the turn proposed. Errors from the model or the budget guard come back as
readable messages; the session's events stay intact (the user message is recorded, the
reply is recorded with whatever text arrived).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kairox_core.config import KairoxConfig
from kairox_core.errors import KairoxError
from kairox_core.events import (
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    Event,
    MemoryAccepted,
    MemoryProposed,
    MemoryRejected,
)
from kairox_core.markers import InvalidMarker, MemoryMarker
from kairox_core.memory.copied import copied_note, split_copied
from kairox_core.memory.cues import may_ask_to_remember, says_remember
from kairox_core.memory.records import MemoryRecord, Proposal
from kairox_core.memory.request_check import (
    CUED,
    DROPPED,
    RequestVerdict,
    provider_request_check,
)
from kairox_core.memory.restate import RESTATED, RESTATED_UNTAGGED, provider_restate
from kairox_core.memory.scope_check import ScopeVerdict, provider_check
from kairox_core.prompt import front_end_system_prompt
from kairox_core.providers.base import ModelProvider
from kairox_core.providers.resolve import build_provider, choose_provider
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.results import TurnResult
from kairox_core.toolloop import Tool, ToolLoopResult, ToolStep, run_model_turn, tool_limitation

if TYPE_CHECKING:
    from kairox_core.context.trace import ContextTrace
    from kairox_core.facade import Kairox
    from kairox_core.session import Session
    from kairox_core.turn import Turn

COMPACTION_EVENTS = (
    ContextCompactionStarted,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
)


@dataclass
class TurnOutcome:
    """What one turn produced, for the front end to show."""

    prompt: str
    text: str = ""
    trace: ContextTrace | None = None
    proposals: list[MemoryProposed] = field(default_factory=list)  # waiting for a person
    pending: list[Proposal] = field(default_factory=list)  # the same, as records
    accepted: list[MemoryAccepted] = field(default_factory=list)  # session scope, untainted
    invalid: list[InvalidMarker] = field(default_factory=list)  # markers the model got wrong
    compaction: list[Event] = field(default_factory=list)
    error: str | None = None
    acknowledgement: str = ""  # shown when the reply was memory tags and nothing else
    tool_steps: list[ToolStep] = field(default_factory=list)  # tool calls and results
    tool_notes: list[str] = field(default_factory=list)  # servers down, bounds reached
    unsaved: str = ""  # the reply claims to have noted something, and nothing was saved
    turn_id: str = ""  # the turn's id in the event log ("" when it never began)
    scope_checks: list[ScopeVerdict] = field(default_factory=list)  # [memory] scope_check
    request_check: RequestVerdict | None = None  # [memory] request_check, when it ran
    dropped: list[MemoryMarker] = field(default_factory=list)  # tags never proposed
    answered_again: bool = False  # the reply shown is the model's second answer
    restated: bool = False  # the tags proposed were written from the message alone
    restate_note: str = ""  # why restating kept the reply's tags, when it did
    restated_because: str = RESTATED
    copied: list[MemoryMarker] = field(default_factory=list)  # copied from the system prompt
    on_text: Callable[[str], None] = field(default=lambda _: None, repr=False, compare=False)

    @property
    def scope_notes(self) -> list[str]:
        """What the scope and request checks changed or could not do, one line each (an
        agreement says nothing: the card shows the scope, the tag its card)."""
        notes = [f"memory scope: {v.note}" for v in self.scope_checks if not v.agreed]
        verdict = self.request_check
        if self.restated:
            notes.append(f"memory: {self.restated_because}")
        elif self.restate_note:
            notes.append(f"memory: {self.restate_note}")
        if self.copied:
            notes.append(f"memory: {copied_note(self.copied)}")
        if self.dropped and not self.restated and not self.copied:
            notes.append(f"memory: {DROPPED.format(n=len(self.dropped))}")
        elif verdict is not None and (verdict.asked is None or verdict.note == CUED):
            notes.append(f"memory: {verdict.note}")
        return notes


def collect_turn_result(result: TurnResult, outcome: TurnOutcome) -> None:
    """What the turn's result says the engines and the approval flow did, for showing:
    proposals still waiting, session memories taken at once, compaction events. Read
    from the result, never from the store again."""
    outcome.pending = result.pending
    waiting = {p.id for p in outcome.pending}
    for event in result.memory_events:
        if isinstance(event, MemoryProposed) and event.proposal_id in waiting:
            outcome.proposals.append(event)
        elif isinstance(event, MemoryAccepted) and event.scope == "session":
            outcome.accepted.append(event)
    for compaction in result.compactions:
        outcome.compaction += [e for e in compaction.events if isinstance(e, COMPACTION_EVENTS)]


def acknowledgement(outcome: TurnOutcome) -> str:
    """A line for the person when the model answered with memory tags alone.

    Small local models often reply to "remember that..." with the tag and no words;
    the tag is hidden, so without this the chat would show an empty answer.
    """
    if outcome.text.strip() or not (outcome.proposals or outcome.accepted):
        return ""
    if not outcome.proposals:
        return "Noted for this conversation."
    n = len(outcome.proposals)
    return f"Noted: {'a memory' if n == 1 else f'{n} memories'} to approve."


# What a reply says when it claims to have kept something ("Noted.", "I'll remember
# that", "I've saved it", ...). Small models say it without writing a tag.
_CLAIM = re.compile(
    r"\b(?:noted|i(?:'ll| will) (?:remember|keep (?:that|this|it) in mind|note)|"
    r"i(?:'ve| have) (?:noted|saved|stored|remembered|made a note)|"
    r"(?:saved|stored|remembered) (?:that|this|it)|made a note|will do)\b",
    re.IGNORECASE,
)
UNSAVED = (
    "Nothing was saved: the reply says it noted something, but the model wrote no "
    "memory tag. Ask again, or keep it yourself with /remember TEXT."
)


# what the person sees between a reply given up by the request check and the second
# answer (the first was streamed already); the note under the turn says why
ANSWERED_AGAIN = "\n\n[answered again without a memory tag]\n\n"


UNSAVED_DROPPED = (
    "Nothing was saved: the model's memory tag was left out because the request check "
    "judged the message not a request to remember. If it was one, keep it yourself with "
    "/remember TEXT."
)
UNSAVED_COPIED = (
    "Nothing was saved: the model's memory tag copied the system prompt's example, not "
    "your words. Ask again, or keep it yourself with /remember TEXT."
)
MISSED = (
    "Nothing was saved: the message asked to remember something, but the model wrote no "
    "memory tag for it. Ask again, or keep it yourself with /remember TEXT."
)


UNCHANGED = (
    "Nothing new was saved: the reply says it noted something, but its memory tag only "
    "repeated what is already kept ({keys}). Ask again, or keep it yourself with "
    "/remember TEXT."
)


def claims_kept(text: str) -> bool:
    """Whether ``text`` says it kept something ("Noted.", "I'll remember that", ...)."""
    return _CLAIM.search(text) is not None


def unsaved_claim(
    text: str, markers: Sequence[object], proposals: Sequence[object] | None = None
) -> str:
    """The warning for a reply that claims to have noted something while the turn
    saved nothing: it wrote no memory tag at all, or (``proposals``: what its tags
    raised) only tags repeating a memory already kept, which may be another fact than
    the one asked for (issue 28: "Noted." over a repeat of the previous tag)."""
    if not claims_kept(text):
        return ""
    if not markers:
        return UNSAVED
    if proposals is not None and not proposals:
        keys = {m.key or m.scope.value for m in markers if isinstance(m, MemoryMarker)}
        return UNCHANGED.format(keys=", ".join(sorted(keys)))
    return ""


def unsaved_note(
    outcome: TurnOutcome,
    text: str,
    markers: Sequence[MemoryMarker],
    proposals: Sequence[object],
) -> str:
    """The "Nothing was saved" warning for a reply about to be recorded ("" for none):
    ``unsaved_claim``, or ``MISSED`` when the message asked to remember and no tag came
    of it, naming the step that left a written tag out (the request check, a copy)."""
    note = unsaved_claim(text, markers, proposals)
    asked = outcome.request_check is not None and outcome.request_check.asked
    if asked and not markers and not note:
        return MISSED  # asked to remember, and no tag even restated
    if note == UNSAVED and (outcome.copied or outcome.answered_again):
        return UNSAVED_COPIED if outcome.copied else UNSAVED_DROPPED
    return note


class Toolbox(Protocol):
    """What offers tools to the model (``McpToolbox``: the profile's MCP servers)."""

    async def tools(self) -> tuple[list[Tool], list[str]]: ...
    async def aclose(self) -> None: ...


class ChatEngine:
    """Holds the Kairox facade, one session and its model provider."""

    def __init__(
        self,
        kx: Kairox,
        session: Session,
        config: KairoxConfig,
        *,
        provider: ModelProvider,
        provider_note: str,
        toolbox: Toolbox | None = None,
        scope_check: bool | None = None,
        request_check: bool | None = None,
        restate_tags: bool | None = None,
    ) -> None:
        self.kx = kx
        self.session = session
        self.config = config
        self.provider = provider
        self.provider_note = provider_note
        # offers tools to the model: ``await toolbox.tools() -> (tools, notes)``, ``aclose()``
        self.toolbox = toolbox
        self._toolbox_profile = session.profile
        self.staged: list[dict[str, Any]] = []  # /attach: files that go with the next prompt
        self._own_toolbox = False  # True: built from [mcp_servers] for the session's profile
        # ask the model about each tag's scope before it is proposed ([memory] scope_check;
        # None: the setting, for a real model only, never the scripted test provider)
        self.scope_check = (
            config.memory.scope_check and not isinstance(provider, ScriptedProvider)
            if scope_check is None
            else scope_check
        )
        # ask the model whether a tagged reply's message asked to remember anything
        # ([memory] request_check; None: the setting, for a real model only)
        self.request_check = (
            config.memory.request_check and not isinstance(provider, ScriptedProvider)
            if request_check is None
            else request_check
        )
        # write each tagged reply's tags again from the message alone ([memory]
        # restate_tags; None: the setting, for a real model only)
        self.restate_tags = (
            config.memory.restate_tags and not isinstance(provider, ScriptedProvider)
            if restate_tags is None
            else restate_tags
        )

    @classmethod
    def open(
        cls,
        config: KairoxConfig,
        database: Path | str,
        *,
        profile: str | None = None,
        workspace: str | None = None,
        session_id: str | None = None,
        provider: ModelProvider | None = None,
        scope_check: bool | None = None,
        request_check: bool | None = None,
        restate_tags: bool | None = None,
    ) -> ChatEngine:
        from kairox_core.facade import Kairox

        profile_name, _ = config.resolve_profile(profile)
        kx = Kairox.open(database, config=config)
        try:
            if profile is None and session_id is not None:  # resumed: its own profile
                profile_name = _stored_profile(kx, session_id) or profile_name
            note = "model provider given by the caller"
            if provider is None:
                choice = choose_provider(config, profile=profile_name)
                provider = build_provider(choice.config)
                note = f"model: {provider.model} via {choice.reason}"
            # workspace None: a resumed session keeps its own (the resume hint names none)
            session = kx.session(
                workspace=workspace,
                profile=profile,
                session_id=session_id,
                system_prompt=front_end_system_prompt(config),  # as `kairox context` shows it
            )
        except BaseException:
            kx.close()
            raise
        toolbox = None
        if config.mcp_servers_for(profile_name):
            from kairox_core.mcp.client import McpToolbox  # the SDK loads on the first turn

            toolbox = McpToolbox.for_profile(config, profile_name)
        engine = cls(
            kx,
            session,
            config,
            provider=provider,
            provider_note=note,
            toolbox=toolbox,
            scope_check=scope_check,
            request_check=request_check,
            restate_tags=restate_tags,
        )
        engine._own_toolbox = True
        return engine

    async def _switch_toolbox(self) -> None:
        """Stop the old profile's MCP servers; the new profile's start on first use."""
        if self.toolbox is not None:
            await self.toolbox.aclose()
        self.toolbox = None
        self._toolbox_profile = self.profile
        if self.config.mcp_servers_for(self.profile):
            from kairox_core.mcp.client import McpToolbox

            self.toolbox = McpToolbox.for_profile(self.config, self.profile)

    # --- facts the front ends show ----------------------------------------------------

    @property
    def session_id(self) -> str:
        return str(self.session.id)

    @property
    def workspace(self) -> str:
        return str(self.session.workspace_id)

    @property
    def profile(self) -> str:
        return str(self.session.profile)

    def history(self) -> list[Event]:
        return list(self.kx.events(self.session_id))

    # --- a turn ----------------------------------------------------------------------------

    async def run_turn(
        self,
        prompt: str,
        on_text: Callable[[str], None],
        on_tool: Callable[[ToolStep], None] | None = None,
        *,
        instructions: Sequence[str] = (),
    ) -> TurnOutcome:
        """``instructions``: the caller's own (an OpenAI client's system message), sent
        with the system prompt and paid for inside the budget."""
        outcome = TurnOutcome(prompt=prompt, on_text=on_text)
        tools, notes = await self._tools()
        attachments, self.staged = self.staged, []
        try:  # ContextBudgetExceeded: nothing sent, the files stay staged
            turn = await self.session.begin_turn(prompt, attachments, instructions=instructions)
        except BaseException:
            self.staged = attachments + self.staged
            raise
        _, profile = self.config.resolve_profile(self.profile)
        limits = self.config.tools
        memory = self.config.memory
        async with turn:  # cancelled (Ctrl-C, app closed): the turn aborts, the session is free

            async def answer() -> ToolLoopResult:
                return await run_model_turn(
                    turn,
                    self.provider,
                    tools=tools,
                    max_rounds=limits.max_rounds,
                    max_result_chars=limits.max_result_chars,
                    timeout=limits.timeout,
                    max_tokens=profile.reserve,
                    on_text=on_text,
                    on_tool=on_tool,
                    notes=notes,
                )

            loop = await answer()
            loop, drop, restated = await self._memory_checks(turn, prompt, loop, answer, outcome)
            drop, restated, because = self._without_copies(turn, prompt, drop, restated, outcome)
            outcome.trace = turn.trace
            outcome.turn_id = turn.turn_id
            outcome.tool_steps, outcome.tool_notes = loop.steps, loop.notes
            outcome.error = loop.error
            if loop.error and not loop.fed and not loop.steps and not outcome.answered_again:
                await turn.abort()  # the prompt stays in the audit; no empty reply recorded
                return outcome
            result = await turn.complete(
                model=self.provider.model,
                provider=self.provider.name,
                usage=loop.usage,
                scope_check=(
                    provider_check(self.provider, timeout=memory.scope_check_timeout)
                    if self.scope_check
                    else None
                ),
                drop_markers=drop,
                replace_markers=restated,
                replaced_because=because,
                flag=lambda text, markers, proposals: unsaved_note(
                    outcome, text, markers, proposals
                ),
            )
        outcome.text = result.text
        outcome.invalid = list(result.invalid)
        outcome.scope_checks = list(result.scope_checks)
        outcome.dropped = list(result.dropped)
        collect_turn_result(result, outcome)
        outcome.acknowledgement = acknowledgement(outcome)
        outcome.unsaved = result.flagged  # recorded: a reload or a resume says it again
        if outcome.acknowledgement:
            on_text(outcome.acknowledgement)
        return outcome

    async def _memory_checks(
        self,
        turn: Turn,
        prompt: str,
        loop: ToolLoopResult,
        answer: Callable[[], Awaitable[ToolLoopResult]],
        outcome: TurnOutcome,
    ) -> tuple[ToolLoopResult, str | None, list[MemoryMarker]]:
        """The request check and restating, on the reply just streamed: the turn's
        reply (a second answer when its tags were dropped), why its tags are dropped
        (None: they are not), and the restated tags to propose instead (none: keep)."""
        memory = self.config.memory
        tagged = bool(turn.markers)
        if loop.error or not (tagged or (self.request_check and self._asks_untagged(prompt))):
            return loop, None, []
        if self.request_check:
            check = provider_request_check(self.provider, timeout=memory.scope_check_timeout)
            outcome.request_check = verdict = await check(prompt)
            if verdict.drops and says_remember(prompt):
                # the message asks in so many words ("Save this: ..."); the one-word
                # verdict called two such requests "other" in the trial (issue 28)
                outcome.request_check = verdict = RequestVerdict(True, verdict.answer, CUED)
            if tagged and verdict.drops:
                turn.restart(history_tags=False)
                outcome.on_text(ANSWERED_AGAIN)
                outcome.answered_again = True
                return await answer(), verdict.note, []
            if not tagged and not verdict.asked:
                return loop, None, []
        if not self.restate_tags:
            return loop, None, []
        restate = provider_restate(
            self.provider,
            self.session.system_prompt or front_end_system_prompt(self.config),
            max_tokens=self.config.resolve_profile(self.profile)[1].reserve,
            timeout=memory.scope_check_timeout,
            max_body_chars=memory.max_body_chars,
            max_markers=memory.max_proposals_per_turn,
        )
        found = await restate(prompt)
        outcome.restate_note = found.note
        outcome.restated = bool(found.markers)
        outcome.restated_because = RESTATED if tagged else RESTATED_UNTAGGED
        return loop, None, found.markers

    def _without_copies(
        self,
        turn: Turn,
        prompt: str,
        drop: str | None,
        restated: list[MemoryMarker],
        outcome: TurnOutcome,
    ) -> tuple[str | None, list[MemoryMarker], str]:
        """The turn's markers less those copied from the system prompt
        (``kairox_core.memory.copied``), as ``complete`` takes them: why all are dropped,
        the markers proposed instead of the reply's, and why they replace them."""
        if drop is not None:
            return drop, restated, outcome.restated_because
        system = self.session.system_prompt or front_end_system_prompt(self.config)
        if restated:
            kept, copied = split_copied(restated, prompt, system)
            outcome.copied += copied
            if kept:
                return None, kept, outcome.restated_because
            outcome.restated = False  # a copy is no restatement: the reply's tags stand
            outcome.restate_note = "restating gave only a tag copied from the system prompt"
        kept, copied = split_copied(turn.markers, prompt, system)
        outcome.copied += copied
        if not copied:
            return None, [], outcome.restated_because
        note = copied_note(copied)
        return (None, kept, note) if kept else (note, [], note)

    def _asks_untagged(self, prompt: str) -> bool:
        """Whether the request check looks at this turn's untagged reply
        (``[memory] request_check_untagged``: always, off, or cued by the message)."""
        mode = self.config.memory.request_check_untagged
        return mode == "always" or (mode == "cued" and may_ask_to_remember(prompt))

    async def tool_notice(self) -> str:
        """What the person must know before a turn when the profile has MCP tools the
        model cannot call ("" when it can, or there are none): the front ends show it
        first, so a reply such as "Created." is not mistaken for a tool's work."""
        servers = self.config.mcp_servers_for(self.profile)
        if self.toolbox is None and servers and not self._own_toolbox:
            names = ", ".join(s.id for s in servers)
            return (
                f"this front end does not start MCP servers: the tools of {names} are not offered"
            )
        tools, _ = await self._tools()
        if not tools:
            return ""
        reason = await tool_limitation(self.provider)
        if reason is None:
            return ""
        return f"{reason}: the {len(tools)} tool(s) of the MCP servers are not offered to it"

    async def _tools(self) -> tuple[list[Tool], list[str]]:
        """The toolbox's tools; a toolbox that cannot work is a note, never a failed turn."""
        if self._toolbox_profile != self.profile and self._own_toolbox:
            await self._switch_toolbox()  # /profile: the new profile's servers
        if self.toolbox is None:
            return [], []
        try:
            tools, notes = await self.toolbox.tools()
        except KairoxError as exc:
            return [], [f"tools unavailable: {exc}"]
        return list(tools), list(notes)

    # --- actions ---------------------------------------------------------------------------

    def attach(self, path: str | Path) -> dict[str, Any]:
        """Read a file (``attachments.from_path``) to send with the next prompt."""
        from kairox_core.attachments import from_path

        attachment = from_path(path)
        self.staged.append(attachment)
        return attachment

    def approve(
        self,
        proposal_id: str,
        body: str | None = None,
        *,
        scope: str | None = None,
        key: str | None = None,
    ) -> MemoryRecord:
        """Accept a proposal, with the person's corrections (None: as proposed)."""
        return self.kx.approvals.accept(proposal_id, body=body, scope=scope, key=key)

    def reject(self, proposal_id: str, reason: str | None = None) -> Proposal:
        return self.kx.approvals.reject(proposal_id, reason=reason)

    async def close(self) -> None:
        if self.toolbox is not None:
            await self.toolbox.aclose()  # stops the MCP servers
        await self.provider.close()
        await self.kx.aclose()


def describe_attachment(att: dict[str, Any]) -> str:
    """``report.pdf (PDF, 3 pages)``: what ``/attach`` confirms."""
    name = att.get("filename", "?")
    if att.get("kind") == "image":
        return f"{name} (image, {att.get('media_type', '?')})"
    if "pages" in att:
        return f"{name} (PDF, {att['pages']} page{'s' if att['pages'] != 1 else ''})"
    return f"{name} (text, {len(str(att.get('text', '')))} characters)"


def _stored_profile(kx: Kairox, session_id: str) -> str | None:
    """The profile a stored session runs with (resolved), or None: a new session, or a
    profile this configuration lacks (opening the session then says so)."""
    info = kx.events_store.get_session(session_id)
    if info is None or not info.profile:
        return None
    try:
        name, _ = kx.config.resolve_profile(info.profile)
    except KairoxError:
        return None
    return str(name)


def scoped(scope: str, key: str | None) -> str:
    """``scope:key``, or the scope alone for a keyless memory (never ``scope:None``)."""
    return f"{scope}:{key}" if key else str(scope)


def describe_event(event: Event) -> str:
    """One line for an event, as the trace panel and ``--plain`` show it."""
    if isinstance(event, MemoryProposed):
        taint = " TAINTED" if event.tainted else ""
        check = f" ({event.scope_check})" if event.scope_check else ""
        return (
            f"MemoryProposed {scoped(event.scope, event.key)}{taint} id={event.proposal_id}{check}"
        )
    if isinstance(event, MemoryAccepted):
        edited = " (edited)" if event.edited else ""
        return f"MemoryAccepted {scoped(event.scope, event.key)}{edited}"
    if isinstance(event, MemoryRejected):
        reason = f" ({event.reason})" if event.reason else ""
        return f"MemoryRejected {scoped(event.scope, event.key)}{reason}"
    if isinstance(event, ContextCompactionFailed):
        return f"ContextCompactionFailed: {event.reason}"
    if isinstance(event, ContextCompactionSkipped):
        return f"ContextCompactionSkipped: {event.reason}"
    if isinstance(event, ContextCompactionStarted):
        return f"ContextCompactionStarted seqs {event.first_seq}-{event.last_seq}"
    if isinstance(event, ContextCompactionCompleted):
        return f"ContextCompactionCompleted summary at seq {event.summary_seq}"
    return event.type
