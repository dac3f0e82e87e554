"""``kairox chat --plain``: prompts from stdin, cleaned answers to stdout, the rest on stderr.

For pipes and scripts. Each input line is one prompt (or a slash command). Memory
proposals and events are written to stderr as single lines starting with ``kairox:``,
so stdout carries only the model's answers. ``--approve-all`` / ``--reject-all``
decide proposals unattended; otherwise they stay pending for ``kairox memory``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TextIO

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
from kairox_core.errors import KairoxError
from kairox_core.toolloop import ToolStep


def valid_text(line: str) -> tuple[str, bool]:
    """``line`` with what is not text replaced by U+FFFD, and whether anything was.

    A stdin read with ``surrogateescape`` keeps undecodable bytes as lone surrogates,
    which SQLite cannot store; they are decoded again here, each bad byte becoming one
    U+FFFD, so the prompt is recorded instead of ending the chat with a traceback."""
    try:
        line.encode("utf-8")
        return line, False
    except UnicodeEncodeError:
        pass
    try:
        return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), True
    except UnicodeEncodeError:  # surrogates that did not come from bytes
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in line), True


class PlainChat:
    def __init__(
        self,
        engine: ChatEngine,
        stdin: Iterable[str],
        stdout: TextIO,
        stderr: TextIO,
        *,
        decide: str | None = None,
        resume_args: Sequence[str] = (),
    ) -> None:
        self.engine = engine
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.decide = decide  # "approve" | "reject" | None
        self.resume_args = tuple(resume_args)  # --config/--db for the resume command
        self.failures = 0

    def say(self, line: str) -> None:
        self.stderr.write(f"kairox: {line}\n")
        self.stderr.flush()

    async def run(self) -> int:
        e = self.engine
        self.say(
            f"session {e.session_id} (workspace '{e.workspace}', profile '{e.profile}'); "
            f"{e.provider_note}"
        )
        try:
            await self.tell_tool_notice()
            for number, raw in enumerate(self.stdin, start=1):
                line, replaced = valid_text(raw.rstrip("\n"))
                if not line.strip():
                    continue
                if replaced:
                    self.say(f"line {number}: bytes that are not UTF-8 were replaced with U+FFFD")
                try:
                    command = parse_slash(line)
                    if command is None:
                        await self.turn(line)
                    else:
                        await self.slash(command)
                except KairoxError as exc:
                    self.failures += 1
                    self.say(f"error: {exc}")
        finally:
            self.say(resume_hint(e.session_id, self.resume_args))
        return 1 if self.failures else 0

    async def tell_tool_notice(self) -> None:
        """Before the first turn: the profile's tools the model is not offered."""
        try:
            notice = await self.engine.tool_notice()
        except KairoxError as exc:  # the model does not start: the first turn says it too
            self.say(f"error: {exc}")
            return
        if notice:
            self.say(notice)

    async def turn(self, prompt: str) -> None:
        waiting = self._thinking()

        def show(text: str) -> None:
            nonlocal waiting
            if waiting:
                self._done_thinking()
                waiting = False
            self.stdout.write(text)
            self.stdout.flush()

        def tool(step: ToolStep) -> None:  # on stderr: stdout carries only answers
            nonlocal waiting
            if waiting:
                self._done_thinking()
                waiting = False
            self.say(step.call_line())
            self.say(step.result_line())

        try:
            outcome = await self.engine.run_turn(prompt, show, tool)
        finally:
            if waiting:
                self._done_thinking()
        self.stdout.write("\n")
        self.stdout.flush()
        self.report(outcome)

    def _thinking(self) -> bool:
        """Say on stderr that the model is working, until its first token: a terminal
        gets a line that is erased then; a file or pipe keeps it as a log line."""
        if self.stderr.isatty():
            self.stderr.write("kairox: thinking…")
        else:
            self.say("thinking…")
        self.stderr.flush()
        return True

    def _done_thinking(self) -> None:
        if self.stderr.isatty():
            self.stderr.write("\r\x1b[K")  # the line is gone: the answer takes its place
            self.stderr.flush()

    def report(self, outcome: TurnOutcome) -> None:
        if outcome.error:
            self.failures += 1
            self.say(f"error: {outcome.error}")
        for line in [*outcome.tool_notes, *outcome.scope_notes]:
            self.say(line)
        for line in dict.fromkeys(bad.describe() for bad in outcome.invalid):
            self.say(line)  # a misspelt tag and its closer say it once
        if outcome.unsaved:
            self.say(outcome.unsaved)
        for accepted in outcome.accepted:
            self.say(f"session memory noted [{accepted.key or '-'}]: {accepted.body}")
        for p in outcome.proposals:
            taint = (
                " TAINTED (its text came from a tool result or retrieved text)" if p.tainted else ""
            )
            self.say(
                f"memory proposed id={p.proposal_id} [{scoped(p.scope, p.key)}]{taint}: {p.body}"
            )
            if self.decide == "approve":
                self.engine.approve(p.proposal_id)
                self.say(f"MemoryAccepted {scoped(p.scope, p.key)}")
            elif self.decide == "reject":
                self.engine.reject(p.proposal_id, reason="rejected by --reject-all")
                self.say(f"MemoryRejected {scoped(p.scope, p.key)}")
            else:
                self.say(f"pending: kairox memory approve {p.proposal_id}")
        for event in outcome.compaction:
            self.say(describe_event(event))

    async def slash(self, command: object) -> None:
        e = self.engine
        if isinstance(command, Help):
            for line in HELP.splitlines():
                self.say(line)
        elif isinstance(command, Remember):
            record = e.kx.approvals.remember(
                command.scope,
                command.key,
                command.text,
                workspace_id=e.workspace,
                session_id=e.session_id,
            )
            self.say(f"remembered [{command.scope}:{command.key}] id={record.id}")
        elif isinstance(command, RememberChunk):
            chunk = e.kx.longterm.add(
                command.text,
                scope=command.scope,
                session_id=e.session_id,
                workspace_id=e.workspace,
            )
            self.say(f"kept in long-term memory [{chunk.scope}] id={chunk.id}")
        elif isinstance(command, Attach):
            att = e.attach(command.path)
            self.say(f"attached {describe_attachment(att)}: it goes with the next prompt")
        elif isinstance(command, Compact):
            result = await e.kx.compact_async(e.session_id)
            self.say(f"compacted: {result}")
        elif isinstance(command, SwitchProfile):
            await e.session.switch_profile(command.name)
            self.say(f"profile is now '{e.profile}'")
