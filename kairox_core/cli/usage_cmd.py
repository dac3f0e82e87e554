"""``kairox usage [SESSION]``: tokens spent per session, compaction included."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.usage import SessionUsage, Totals, UsageReport

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def _n(value: int, estimated: bool = False) -> str:
    return f"~{value:,}" if estimated else f"{value:,}"


@click.command("usage")
@click.argument("session_id", metavar="[SESSION]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@pass_cli
def usage_command(cli_ctx: CliContext, session_id: str | None, as_json: bool) -> None:
    """Show the tokens spent per session: the model's turns (prompt and completion, as
    the provider reported them) and compaction (the model strategy's calls; extractive
    spends none), with totals. Given SESSION, also each turn and each compaction.

    A figure marked ~ is estimated: the provider reported no usage, so Kairox's own
    count stands in (without any count, the stored message sizes: a lower bound)."""
    from kairox_core.facade import Kairox, UnknownSessionError
    from kairox_core.usage import usage

    if not cli_ctx.database_exists:
        if session_id is not None:
            raise UnknownSessionError(
                f"no session '{session_id}': the database {cli_ctx.database} does not exist "
                f"yet; `kairox sessions` lists the sessions"
            )
        report = UsageReport(())
    else:
        with Kairox.open(cli_ctx.database, cli_ctx.config) as kx:
            report = usage(kx, session_id)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    if not report.sessions:
        click.echo("no sessions yet")
        return
    _print(report, detailed=session_id is not None)


def _print(report: UsageReport, *, detailed: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="tokens spent", title_justify="left")
    table.add_column("session", no_wrap=True)
    for col in ("turns", "prompt", "completion", "compaction", "total"):
        table.add_column(col, justify="right")
    for s in report.sessions:
        _row(table, s.session_id, s.totals)
    if len(report.sessions) > 1:
        _row(table, "all sessions", report.totals, style="bold")
    console.print(table)
    if detailed:
        for s in report.sessions:
            _details(console, s)
    if report.totals.estimated:
        console.print(
            f"~ estimated ({report.totals.estimated} turns or compactions): the provider "
            "reported no usage, so Kairox's own count stands in",
            style="dim",
        )


def _row(table: Table, name: str, t: Totals, style: str | None = None) -> None:
    turns_est = t.estimated_turns > 0
    runs = f" ({t.compactions} run{'s' if t.compactions != 1 else ''})" if t.compactions else ""
    table.add_row(
        name,
        str(t.turns),
        _n(t.prompt_tokens, turns_est),
        _n(t.completion_tokens, turns_est),
        _n(t.compaction_tokens, t.estimated_compactions > 0) + runs,
        _n(t.total_tokens, t.estimated > 0),
        style=style,
    )


def _details(console: Console, s: SessionUsage) -> None:
    from rich.table import Table

    turns = Table(title=f"turns of {s.session_id}", title_justify="left")
    for col in ("seq", "model", "prompt", "completion", "total"):
        turns.add_column(col, justify="right" if col != "model" else "left")
    for t in s.turns:
        turns.add_row(
            str(t.seq),
            t.model or t.provider or "-",
            _n(t.prompt_tokens, t.estimated),
            _n(t.completion_tokens, t.estimated),
            _n(t.total_tokens, t.estimated),
        )
    console.print(turns)
    if not s.compactions:
        return
    runs = Table(title=f"compactions of {s.session_id}", title_justify="left")
    for col in ("seq", "strategy", "model", "replaced", "read", "written", "model tokens"):
        runs.add_column(col, justify="right" if col not in ("strategy", "model") else "left")
    for c in s.compactions:
        runs.add_row(
            str(c.seq),
            c.strategy,
            c.model or "-",
            f"{c.first_seq}-{c.last_seq}",
            f"{c.tokens_in:,}",
            f"{c.tokens_out:,}",
            _n(c.total_tokens, c.estimated) if c.uses_model else "none (no model)",
        )
    console.print(runs)


def register(cli: click.Group) -> None:
    cli.add_command(usage_command)
