"""``kairox longterm add|list|search|edit|rm``: long-term chunks from the shell."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.errors import KairoxUserError

SCOPE_HELP = (
    "session (that session only), project (every session of the workspace) or global "
    "(every session)."
)


@contextmanager
def open_kairox(cli_ctx: CliContext) -> Iterator[Any]:
    from kairox_core.facade import Kairox

    with Kairox.open(cli_ctx.database, cli_ctx.config) as kx:
        yield kx


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _table(chunks: Sequence[Any], similarities: Sequence[float] | None = None) -> None:
    table = Table()
    columns = ["id", "scope", "where", "text", "updated"]
    if similarities is not None:
        columns.insert(0, "similarity")
    for col in columns:
        table.add_column(col, overflow="fold")
    for i, c in enumerate(chunks):
        where = c.session_id if c.scope == "session" else (c.workspace_id or "-")
        row = [c.id, c.scope, escape(where or "-"), escape(c.text), _when(c.updated_at)]
        if similarities is not None:
            row.insert(0, f"{similarities[i]:.3f}")
        table.add_row(*row)
    Console().print(table)


@click.group("longterm")
def longterm_group() -> None:
    """Long-term memory: chunks of text you chose to keep, recalled by similarity.

    A chunk joins the "long-term memory" block of a turn when the prompt is close to it
    (cosine similarity >= [longterm] threshold). Scopes: session, project, global.
    """


@longterm_group.command("add")
@click.argument("text", required=False)
@click.option(
    "--scope",
    type=click.Choice(["session", "project", "global"]),
    default=None,
    help=SCOPE_HELP + " Default: session (needs --session); with no --session, project.",
)
@click.option("--session", "session_id", help="The session it belongs to (or was written in).")
@click.option("--workspace", "workspace_id", help="The workspace of a project chunk.")
@click.option(
    "--from-summary",
    "from_summary",
    metavar="SEQ:LINE",
    help="Keep line LINE (numbered as `kairox summary show` prints it) of the summary at "
    "seq SEQ of --session instead of TEXT.",
)
@pass_cli
def add_command(
    cli_ctx: CliContext,
    text: str | None,
    scope: str | None,
    session_id: str | None,
    workspace_id: str | None,
    from_summary: str | None,
) -> None:
    """Keep TEXT as a long-term chunk (embedded now; `LongTermChunkAdded`)."""
    with open_kairox(cli_ctx) as kx:
        if from_summary is not None:
            if text is not None or session_id is None:
                raise KairoxUserError(
                    "--from-summary SEQ:LINE needs --session ID and no TEXT; e.g. "
                    "`kairox longterm add --session s-1 --from-summary 12:2`"
                )
            seq, line = _seq_line(from_summary)
            kx.get_session(session_id)  # names the session when it does not exist
            chunk = kx.longterm.pin_summary_line(session_id, seq, line, scope=scope or "session")
        else:
            if not text:
                raise KairoxUserError(
                    "nothing to keep: give TEXT, e.g. `kairox longterm add --workspace docs "
                    '"we deploy on Fridays"`, or --from-summary SEQ:LINE'
                )
            wanted = scope or ("session" if session_id else "project")
            if wanted == "project" and not (workspace_id or session_id):
                workspace_id = kx.config.kairox.default_workspace
            if session_id is not None:
                kx.get_session(session_id)
            chunk = kx.longterm.add(
                text, scope=wanted, session_id=session_id, workspace_id=workspace_id
            )
    click.echo(f"kept {chunk.id} ({chunk.scope}): {chunk.text}")


def _seq_line(value: str) -> tuple[int, int]:
    seq, sep, line = value.partition(":")
    if not sep or not seq.isdigit() or not line.isdigit():
        raise KairoxUserError(
            f"--from-summary {value!r} is not SEQ:LINE; e.g. 12:2 (seq as `kairox summary "
            f"show SESSION` prints it, then the line's number as it prints it)"
        )
    return int(seq), int(line)


@longterm_group.command("list")
@click.option(
    "--scope", type=click.Choice(["session", "project", "global"]), help="Only this scope."
)
@click.option("--session", "session_id", help="With no --scope: what this session sees.")
@click.option("--workspace", "workspace_id", help="With no --scope: what its sessions see.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def list_command(
    cli_ctx: CliContext,
    scope: str | None,
    session_id: str | None,
    workspace_id: str | None,
    as_json: bool,
) -> None:
    """List long-term chunks, oldest first."""
    with open_kairox(cli_ctx) as kx:
        if session_id and not workspace_id:
            workspace_id = kx.get_session(session_id).workspace_id
        chunks = kx.longterm.list(scope, session_id=session_id, workspace_id=workspace_id)
    if as_json:
        _echo_json([c.as_dict() for c in chunks])
    elif not chunks:
        click.echo("no long-term chunks yet; `kairox longterm add TEXT` keeps one")
    else:
        _table(chunks)


@longterm_group.command("search")
@click.argument("query")
@click.option("--session", "session_id", help="Search what this session sees.")
@click.option("--workspace", "workspace_id", help="Search what sessions of it see.")
@click.option("-k", "k", type=int, help="At most this many (default: [longterm] k).")
@click.option("--threshold", type=float, help="Minimum similarity (default: [longterm] threshold).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def search_command(
    cli_ctx: CliContext,
    query: str,
    session_id: str | None,
    workspace_id: str | None,
    k: int | None,
    threshold: float | None,
    as_json: bool,
) -> None:
    """The chunks a turn with prompt QUERY would recall, with their similarity."""
    with open_kairox(cli_ctx) as kx:
        if session_id and not workspace_id:
            workspace_id = kx.get_session(session_id).workspace_id
        if not session_id and not workspace_id:
            workspace_id = kx.config.kairox.default_workspace
        hits = kx.longterm.search(
            query, session_id=session_id, workspace_id=workspace_id, k=k, threshold=threshold
        )
        floor = kx.config.longterm.threshold if threshold is None else threshold
    if as_json:
        _echo_json([{**h.chunk.as_dict(), "similarity": h.similarity} for h in hits])
    elif not hits:
        click.echo(f"no chunk reaches similarity {floor:.2f} for this query")
    else:
        _table([h.chunk for h in hits], [h.similarity for h in hits])


@longterm_group.command("edit")
@click.argument("chunk_id", metavar="ID")
@click.argument("text")
@pass_cli
def edit_command(cli_ctx: CliContext, chunk_id: str, text: str) -> None:
    """Replace chunk ID's text (re-embedded; `LongTermChunkEdited`)."""
    with open_kairox(cli_ctx) as kx:
        chunk = kx.longterm.edit(chunk_id, text)
    click.echo(f"edited {chunk.id}: {chunk.text}")


@longterm_group.command("rm")
@click.argument("chunk_ids", metavar="ID...", nargs=-1, required=True)
@pass_cli
def rm_command(cli_ctx: CliContext, chunk_ids: tuple[str, ...]) -> None:
    """Forget chunks (their text stays in the audit trail: `LongTermChunkDeleted`)."""
    with open_kairox(cli_ctx) as kx:
        for chunk_id in chunk_ids:
            gone = kx.longterm.delete(chunk_id)
            click.echo(f"removed {gone.id} ({gone.scope})")


def register(cli: click.Group) -> None:
    cli.add_command(longterm_group)
