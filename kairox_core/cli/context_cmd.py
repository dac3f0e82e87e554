"""``kairox context SESSION``: what the next turn would send; ``kairox sessions``."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import click

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.context.trace import ContextTrace, LayerTrace

# Layers in the order the messages are sent, with the labels shown to people.
LAYER_TITLES = (
    ("system", "system prompt + instructions"),
    ("packs", "context packs"),
    ("memories", "memories"),
    ("pinned", "pinned facts"),
    ("summaries", "summaries"),
    ("longterm", "long-term memory"),
    ("retrieval", "retrieval + knowledge bases"),
    ("history", "history"),
    ("prompt", "new prompt"),
)
ITEM_LAYERS = ("packs", "memories", "pinned", "summaries", "longterm", "retrieval")


def _open(cli_ctx: CliContext) -> Any:
    from kairox_core.facade import Kairox

    return Kairox.open(cli_ctx.database, cli_ctx.config)


@click.command("context")
@click.argument("session_id", metavar="SESSION")
@click.option("--prompt", default="", help="The next prompt (default: empty).")
@click.option("--profile", help="Assemble for this profile instead of the session's own.")
@click.option("--json", "as_json", is_flag=True, help="Print the trace and messages as JSON.")
@click.option(
    "--messages", "show_messages", is_flag=True, help="Also print the messages that would be sent."
)
@pass_cli
def context_command(
    cli_ctx: CliContext,
    session_id: str,
    prompt: str,
    profile: str | None,
    as_json: bool,
    show_messages: bool,
) -> None:
    """Show what the next turn of SESSION would send, layer by layer.

    Token counts per layer (system, memories, pinned facts and summaries, retrieval,
    history, the prompt), the budget, and every item left out with the reason, as
    `kairox chat` would send it (its system prompt included). Nothing is written. A
    prompt that cannot fit exits 2 with the size of each part.
    """
    from kairox_core.facade import UnknownSessionError

    if not cli_ctx.database_exists:
        raise UnknownSessionError(
            f"no session '{session_id}': the database {cli_ctx.database} does not exist yet"
        )
    from kairox_core.prompt import front_end_system_prompt

    with _open(cli_ctx) as kx:
        kx.get_session(session_id)  # UnknownSessionError names the fix
        # the system prompt `kairox chat` sends, resolved by the same function
        system = front_end_system_prompt(cli_ctx.config)
        session = kx.session(session_id=session_id, system_prompt=system)
        assembled = session.preview_sync(prompt, profile=profile)
    trace = assembled.trace
    if as_json:
        click.echo(
            json.dumps(
                {
                    "session": session_id,
                    "workspace": session.workspace_id,
                    "profile": trace.profile,
                    "trace": trace.as_dict(),
                    "messages": assembled.messages,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        return
    _print_trace(session_id, session.workspace_id, trace)
    if show_messages:
        from rich.console import Console

        console = Console()
        for message in assembled.messages:
            console.rule(f"[bold]{message['role']}")
            console.print(
                message.get("content") or json.dumps(message.get("tool_calls")),
                markup=False,
                highlight=False,
            )


def _print_trace(session_id: str, workspace: str, trace: ContextTrace) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    margin = f" +{trace.margin:.0%} margin" if trace.margin else ""
    console.print(
        f"[bold]session[/] {session_id}  [bold]workspace[/] {workspace}  "
        f"[bold]profile[/] {trace.profile}  ({trace.encoding}{margin})"
    )
    table = Table(title="next turn's context", title_justify="left")
    table.add_column("layer")
    table.add_column("tokens", justify="right")
    table.add_column("limit", justify="right")
    table.add_column("messages", justify="right")
    table.add_column("items", justify="right")
    table.add_column("dropped", justify="right")
    for name, title in LAYER_TITLES:
        layer = trace.layer(name)
        table.add_row(
            title,
            str(layer.tokens),
            "" if layer.limit is None else str(layer.limit),
            str(layer.messages),
            str(len(layer.included)),
            str(len(layer.dropped)),
        )
    table.add_row("reply priming", str(trace.priming), "", "", "", "")
    table.add_section()
    table.add_row("[bold]total", f"[bold]{trace.total}", str(trace.budget), "", "", "")
    console.print(table)
    console.print(
        f"budget {trace.budget} = context_window {trace.context_window} - reserve "
        f"{trace.reserve}; {trace.total} used, {trace.budget - trace.total} free"
    )
    for name in ITEM_LAYERS:
        _print_items(console, name, trace.layer(name))
    dropped = [(name, item) for name, _ in LAYER_TITLES for item in trace.layer(name).dropped]
    if dropped:
        out = Table(title="left out", title_justify="left")
        for col in ("layer", "item", "tokens", "why"):
            out.add_column(col, justify="right" if col == "tokens" else "left", overflow="fold")
        for name, item in dropped:
            out.add_row(
                name,
                item.label if name == "history" else f"{item.label} ({item.id})",
                str(item.tokens),
                item.reason or "",
            )
        console.print(out)
    notes = [(name, note) for name, _ in LAYER_TITLES for note in trace.layer(name).notes]
    for name, note in notes:
        console.print(f"[dim]{name}:[/] {note}", highlight=False)


def _print_items(console: Any, name: str, layer: LayerTrace) -> None:
    if not layer.included:
        return
    from rich.table import Table

    table = Table(title=f"{name} included", title_justify="left", show_header=False)
    table.add_column("item")
    table.add_column("id")
    table.add_column("tokens", justify="right")
    for item in layer.included:
        table.add_row(item.label, item.id, str(item.tokens))
    console.print(table)


@click.command("sessions")
@click.option("--workspace", help="Only this workspace's sessions.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def sessions_command(cli_ctx: CliContext, workspace: str | None, as_json: bool) -> None:
    """List the sessions in the database, oldest first."""
    rows: list[dict[str, Any]] = []
    if cli_ctx.database_exists:
        with _open(cli_ctx) as kx:
            rows = [s.as_dict() for s in kx.sessions(workspace=workspace)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no sessions yet")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    table.add_column("session", no_wrap=True)
    for col in ("workspace", "profile", "started", "events", "last seq", "archived"):
        table.add_column(
            col, justify="right" if col in ("events", "last seq") else "left", overflow="fold"
        )
    for r in rows:
        started = dt.datetime.fromtimestamp(r["created_at"]).strftime("%Y-%m-%d %H:%M")
        table.add_row(
            r["session_id"],
            r["workspace_id"] or "",
            r["profile"] or "",
            started,
            str(r["event_count"]),
            str(r["last_seq"]),
            "yes" if r["archived"] else "",
        )
    Console().print(table)


def register(cli: click.Group) -> None:
    cli.add_command(context_command)
    cli.add_command(sessions_command)
