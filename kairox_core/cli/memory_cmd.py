"""``kairox memory``: browse, approve, edit and delete memories.

Every command opens the database afresh and closes it when done (no cache), so what
another process changed shows on the next command. Ids: ``m-...`` are memories,
``p-...`` are proposals.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.errors import KairoxUserError

if TYPE_CHECKING:  # the stores load when a command runs, not when `kairox` starts
    from kairox_core.markers import MemoryScope
    from kairox_core.memory.approvals import ApprovalService, Proposal
    from kairox_core.memory.base import MemoryStore
    from kairox_core.memory.records import MemoryRecord

SCOPE_HELP = "Memory scope: session, user or workspace."


def parse_scope(value: str) -> MemoryScope:
    from kairox_core.memory.records import parse_scope as parse

    return parse(value)


def _not_found(message: str) -> KairoxUserError:
    from kairox_core.memory.records import MemoryNotFoundError

    return MemoryNotFoundError(message)


@dataclass
class _Memory:
    memories: MemoryStore
    approvals: ApprovalService


@contextmanager
def _open(cli_ctx: CliContext) -> Iterator[_Memory]:
    from kairox_core.memory.approvals import ApprovalService
    from kairox_core.memory.backends import open_memory_store
    from kairox_core.store.database import Database
    from kairox_core.store.event_store import EventStore

    config = cli_ctx.config
    target = cli_ctx.database
    if isinstance(target, str):  # a storage URL: its plugin's stores, in its transactions
        from kairox_core.facade import open_storage

        storage = open_storage(target)
        try:
            yield _Memory(
                storage.memories,
                ApprovalService(
                    storage.events,
                    storage.memories,
                    proposals=storage.proposals,
                    shared=True,
                    max_body_chars=config.memory.max_body_chars,
                ),
            )
        finally:
            storage.close()
        return
    db = Database.open(target)
    events = EventStore(db)
    memories = open_memory_store(config.memory.store, db)
    try:
        yield _Memory(
            memories, ApprovalService(events, memories, max_body_chars=config.memory.max_body_chars)
        )
    finally:
        memories.close()
        events.close()
        db.release()


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _owner(record: MemoryRecord) -> str:
    if record.scope == "workspace":
        return f"workspace {record.workspace_id}"
    if record.scope == "session":
        return f"session {record.session_id}"
    return "user"


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@click.group("memory")
def memory_group() -> None:
    """Browse and manage memories and the proposals waiting for approval."""


@memory_group.command("list")
@click.option("--scope", help=SCOPE_HELP + " Default: all.")
@click.option("--workspace", help="Only what this workspace sees (user memories apply everywhere).")
@click.option("--session", help="Only this session's session memories.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def list_command(
    cli_ctx: CliContext,
    scope: str | None,
    workspace: str | None,
    session: str | None,
    as_json: bool,
) -> None:
    """List accepted memories, newest first."""
    wanted = parse_scope(scope) if scope is not None else None
    with _open(cli_ctx) as mem:
        records = mem.memories.list(wanted, workspace_id=workspace, session_id=session)
    if as_json:
        _echo_json([r.as_dict() for r in records])
        return
    if not records:
        click.echo("no memories")
        return
    table = Table(title=f"{len(records)} memories")
    table.add_column("id", no_wrap=True)
    for column in ("scope", "owner", "key", "body", "updated"):
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(
            r.id,
            r.scope.value,
            escape(_owner(r)),
            escape(r.key or "-"),
            escape(_short(r.body)),  # data, not rich markup
            _when(r.updated_at),
        )
    Console().print(table)


@memory_group.command("show")
@click.argument("item_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def show_command(cli_ctx: CliContext, item_id: str, as_json: bool) -> None:
    """Show one memory (m-...) or proposal (p-...) in full."""
    with _open(cli_ctx) as mem:
        record = mem.memories.get_by_id(item_id)
        proposal = None if record is not None else mem.approvals.get_proposal(item_id)
        versions = []
        if record is not None and record.key is not None:
            versions = mem.memories.history(
                record.scope,
                record.key,
                workspace_id=record.workspace_id,
                session_id=record.session_id,
            )
    if record is None and proposal is None:
        raise _not_found(
            f"no memory or proposal with id '{item_id}'; `kairox memory list` and "
            f"`kairox memory pending` show the ids"
        )
    if record is not None:
        data = record.as_dict()
        data["versions"] = len(versions) or 1
    else:
        assert proposal is not None
        data = proposal.as_dict()
    if as_json:
        _echo_json(data)
        return
    body = data.pop("body")
    for name, value in data.items():
        if name.endswith("_at"):
            value = _when(value)
        elif isinstance(value, dict):
            value = ", ".join(f"{k}={v!r}" for k, v in value.items() if v)
        click.echo(f"{name}: {value}")
    click.echo("body:")
    click.echo(body)


def _proposal_table(proposals: list[Proposal]) -> Table:
    table = Table(title=f"{len(proposals)} pending proposals")
    table.add_column("id", no_wrap=True)
    for column in ("scope", "key", "body", "from", "raised", "warning"):
        table.add_column(column, overflow="fold")
    for p in proposals:
        origin = f"session {p.session_id}" + (
            f"\nworkspace {p.workspace_id}" if p.workspace_id else ""
        )
        warning = (
            "[red]TAINTED: the body appears in a tool result or retrieved text[/red]"
            if p.tainted
            else ""
        )
        table.add_row(
            p.id,
            p.scope.value + (f"\n(model: {p.model_scope})" if p.model_scope else ""),
            escape(p.key or "-"),
            escape(_short(p.body, 80)),
            origin,
            _when(p.created_at),
            warning,
        )
    return table


@memory_group.command("pending")
@click.option("--workspace", help="Only proposals raised in this workspace.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def pending_command(cli_ctx: CliContext, workspace: str | None, as_json: bool) -> None:
    """List proposals waiting for approval, oldest first (tainted ones are flagged)."""
    with _open(cli_ctx) as mem:
        proposals = mem.approvals.pending(workspace_id=workspace)
    if as_json:
        _echo_json([p.as_dict() for p in proposals])
        return
    if not proposals:
        click.echo("no pending proposals")
        return
    Console().print(_proposal_table(proposals))


@memory_group.command("approve")
@click.argument("proposal_id", metavar="ID")
@click.option("--body", help="Accept with this text instead of the proposed one.")
@click.option(
    "--scope",
    type=click.Choice(["user", "workspace", "session"]),
    help="Store it in this scope instead of the proposed one (a personal fact: user).",
)
@click.option("--key", help="Store it under this key instead of the proposed one.")
@pass_cli
def approve_command(
    cli_ctx: CliContext,
    proposal_id: str,
    body: str | None,
    scope: str | None,
    key: str | None,
) -> None:
    """Accept a pending proposal, optionally correcting its text, scope or key."""
    with _open(cli_ctx) as mem:
        record = mem.approvals.accept(proposal_id, body=body, scope=scope, key=key)
    click.echo(f"accepted {proposal_id} as {record.id} ({record.scope.value}:{record.key})")


@memory_group.command("reject")
@click.argument("proposal_id", metavar="ID")
@click.option("--reason", help="Why; kept with the proposal and in the event log.")
@pass_cli
def reject_command(cli_ctx: CliContext, proposal_id: str, reason: str | None) -> None:
    """Reject a pending proposal."""
    with _open(cli_ctx) as mem:
        mem.approvals.reject(proposal_id, reason=reason)
    click.echo(f"rejected {proposal_id}")


def _edited_text(current: str, body: str | None) -> str | None:
    if body is not None:
        return body
    edited = click.edit(current + "\n", extension=".md")
    if edited is None:
        return None
    return edited.rstrip("\n")


@memory_group.command("edit")
@click.argument("item_id", metavar="ID")
@click.option("--body", help="The new text (default: open $EDITOR on the current one).")
@pass_cli
def edit_command(cli_ctx: CliContext, item_id: str, body: str | None) -> None:
    """Change a memory's body; for a pending proposal (p-...), edit then accept it."""
    with _open(cli_ctx) as mem:
        record = mem.memories.get_by_id(item_id)
        if record is not None:
            text = _edited_text(record.body, body)
            if text is None or text == record.body:
                click.echo("no change")
                return
            updated = mem.approvals.edit_memory(item_id, text)
            click.echo(f"edited {updated.id}")
            return
        proposal = mem.approvals.get_proposal(item_id)
        if proposal is None:
            raise _not_found(
                f"no memory or proposal with id '{item_id}'; `kairox memory list` shows the ids"
            )
        if proposal.status != "pending":
            raise KairoxUserError(f"proposal '{item_id}' is already {proposal.status}")
        text = _edited_text(proposal.body, body)
        if text is None:
            click.echo("no change; the proposal is still pending")
            return
        accepted = mem.approvals.accept(item_id, body=text)
        click.echo(f"accepted {item_id} as {accepted.id} (edited)")


@memory_group.command("delete")
@click.argument("memory_id", metavar="ID")
@pass_cli
def delete_command(cli_ctx: CliContext, memory_id: str) -> None:
    """Delete a memory (its bodies stay visible in `kairox memory history`)."""
    with _open(cli_ctx) as mem:
        gone = mem.approvals.delete_memory(memory_id)
    click.echo(f"deleted {gone.id} ({gone.scope.value}:{gone.key or '-'})")


@memory_group.command("add")
@click.argument("body")
@click.option("--scope", default="user", show_default=True, help=SCOPE_HELP)
@click.option("--key", help="Key (required for user and workspace memories).")
@click.option("--workspace", help="Workspace (required for workspace memories).")
@click.option("--session", help="Session (required for session memories).")
@pass_cli
def add_command(
    cli_ctx: CliContext,
    body: str,
    scope: str,
    key: str | None,
    workspace: str | None,
    session: str | None,
) -> None:
    """Write a memory yourself: accepted at once."""
    wanted = parse_scope(scope)
    missing = {"workspace": ("--workspace", workspace), "session": ("--session", session)}
    if wanted != "session" and not key:
        raise KairoxUserError(f"a {wanted.value} memory needs a key: add --key NAME")
    if wanted.value in missing and not missing[wanted.value][1]:
        flag = missing[wanted.value][0]
        raise KairoxUserError(f"a {wanted.value} memory needs {flag} ID")
    with _open(cli_ctx) as mem:
        record = mem.approvals.remember(
            wanted, key, body, workspace_id=workspace, session_id=session
        )
    click.echo(f"remembered {record.id} ({record.scope.value}:{record.key or '-'})")


@memory_group.command("history")
@click.argument("key")
@click.option(
    "--scope",
    help=SCOPE_HELP + " Default: workspace with --workspace, session with --session, else user.",
)
@click.option("--workspace", help="The workspace of a workspace memory.")
@click.option("--session", help="The session of a session memory.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def history_command(
    cli_ctx: CliContext,
    key: str,
    scope: str | None,
    workspace: str | None,
    session: str | None,
    as_json: bool,
) -> None:
    """Every body KEY has had, oldest first, the current one last."""
    if scope is not None:
        wanted = parse_scope(scope)
    else:
        wanted = parse_scope("workspace" if workspace else "session" if session else "user")
    if wanted == "workspace" and not workspace:
        raise KairoxUserError("workspace memories need --workspace ID")
    if wanted == "session" and not session:
        raise KairoxUserError("session memories need --session ID")
    with _open(cli_ctx) as mem:
        versions = mem.memories.history(wanted, key, workspace_id=workspace, session_id=session)
    if as_json:
        _echo_json([v.as_dict() for v in versions])
        return
    if not versions:
        click.echo(f"no {wanted.value} memory '{key}' has ever existed here")
        return
    table = Table(title=f"history of {wanted.value}:{key}")
    for column in ("#", "body", "from", "until", "ended", "memory"):
        table.add_column(column, overflow="fold")
    for i, v in enumerate(versions, 1):
        table.add_row(
            str(i),
            escape(v.body),
            _when(v.valid_from),
            _when(v.replaced_at),
            v.ended or "current",
            v.memory_id,
        )
    Console().print(table)


def register(cli: click.Group) -> None:
    cli.add_command(memory_group)
