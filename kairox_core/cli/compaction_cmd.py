"""``kairox compact``, ``kairox events`` (the audit trail), ``kairox pin`` and
``kairox summary show|edit|drop``: compaction and its corrections from the shell."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.errors import KairoxUserError

if TYPE_CHECKING:
    from kairox_core.events import Event


@contextmanager
def _session(cli_ctx: CliContext, session_id: str) -> Iterator[Any]:
    from kairox_core.facade import Kairox, UnknownSessionError

    if not cli_ctx.database_exists:
        raise UnknownSessionError(
            f"no session '{session_id}': the database {cli_ctx.database} does not exist yet"
        )
    with Kairox.open(cli_ctx.database, cli_ctx.config) as kx:
        yield kx.get_session(session_id)


def _parse_range(text: str | None) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    lo, sep, hi = text.partition(":")
    try:
        first = int(lo) if lo.strip() else None
        last = int(hi) if hi.strip() else None
    except ValueError:
        first = last = -1
    if (
        not sep
        or first == -1
        or (first is None and last is None)
        or (first is not None and first < 1)
        or (last is not None and last < 1)
    ):
        raise KairoxUserError(
            f"--range {text!r} is not a seq range; write A:B (inclusive, e.g. 5:40), A: or "
            f":B, with seqs as `kairox events SESSION` shows them"
        )
    return first, last


@click.command("compact")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--range",
    "seq_range",
    metavar="A:B",
    help="Compact only seqs A..B (inclusive, widened to whole exchanges).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_cli
def compact_command(
    cli_ctx: CliContext, session_id: str, seq_range: str | None, as_json: bool
) -> None:
    """Compact SESSION now: summarise its oldest stretch not yet compacted (keeping the
    most recent exchanges), or the range given. Originals stay in the audit trail.
    Exits 1 if the strategy failed."""
    from rich.console import Console

    first, last = _parse_range(seq_range)
    console = Console(stderr=True)
    status = f"compacting {session_id} with {cli_ctx.config.compaction.strategy}..."
    with _session(cli_ctx, session_id) as session, console.status(status):
        result = session.compact_sync(first, last)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(f"{result.status}: {result}" if result.ok else str(result))
        for note in result.notes:
            click.echo(f"note: {note}")
    if result.status == "failed":
        raise SystemExit(1)


def describe_attachment(att: Any) -> str:
    """``report.pdf (application/pdf, 12 pages, 48,210 characters, original kept;
    synopsis by extractive digest)``: what is stored, not the bytes (``--json`` has
    them)."""
    if not isinstance(att, dict):
        return str(att)[:80]
    facts = [str(att.get("media_type") or att.get("kind") or "file")]
    if att.get("pages"):
        facts.append(f"{att['pages']} pages")
    if isinstance(att.get("text"), str):
        facts.append(f"{len(att['text']):,} characters")
    if isinstance(att.get("data"), str):
        facts.append(f"original kept ({len(att['data']) * 3 // 4:,} bytes)")
    about = ", ".join(facts)
    if att.get("synopsis_by"):
        about += f"; synopsis by {att['synopsis_by']}"
    return f"{att.get('filename') or 'unnamed'} ({about})"


def _describe(event: Event) -> str:
    """The interesting fields of an event, one line."""
    payload = event.payload()
    for noisy in ("tokens", "token_counter", "raw", "writer_pid", "writer_host"):
        payload.pop(noisy, None)
    parts = []
    for key, value in payload.items():
        if value in (None, "", [], {}):
            continue
        if key == "attachments" and isinstance(value, list):
            parts.append("attachments=" + "; ".join(map(describe_attachment, value)))
            continue
        text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
        text = text.replace("\n", " ⏎ ")
        parts.append(f"{key}={text[:160] + '…' if len(text) > 160 else text}")
    return "  ".join(parts)


@click.command("events")
@click.argument("session_id", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event (JSON lines).")
@click.option(
    "--type",
    "types",
    multiple=True,
    metavar="T",
    help="Only events of this type (repeatable), e.g. --type CompactionSummary.",
)
@pass_cli
def events_command(
    cli_ctx: CliContext, session_id: str, as_json: bool, types: tuple[str, ...]
) -> None:
    """Show the audit trail of SESSION: every event in seq order, nothing ever deleted
    (compaction summaries name the seq range they replace).

    The trail keeps the originals verbatim, secrets included: summaries, recalled turns
    and the long-term block are redacted before they reach a prompt, the events are not.
    Treat the database and this output as you would the secrets themselves.

    A turn whose reply was never recorded (its process was killed mid-reply) is shown
    as TurnInterrupted after its last event: derived when read, not stored."""
    from kairox_core.turn_status import INTERRUPTED_TYPE, interrupted_turns

    with _session(cli_ctx, session_id) as session:
        every = session.services.events.read(session_id)
    shown = {e.seq for e in every if not types or e.type in types}
    # derived, never stored: shown after the turn's last event
    interrupted = {
        t.last_seq: t for t in interrupted_turns(every) if not types or INTERRUPTED_TYPE in types
    }
    if as_json:
        for event in every:
            if event.seq in shown:
                click.echo(json.dumps(event.to_dict(), ensure_ascii=False))
            if event.seq in interrupted:
                line = interrupted[event.seq].to_dict(session_id, event.created_at)
                click.echo(json.dumps(line, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"events of {session_id}", show_lines=False)
    table.add_column("seq", justify="right")
    table.add_column("time")
    table.add_column("type", style="bold")
    table.add_column("details", overflow="fold")
    for event in every:
        when = dt.datetime.fromtimestamp(event.created_at).strftime("%Y-%m-%d %H:%M:%S")
        if event.seq in shown:
            table.add_row(str(event.seq), when, event.type, _describe(event))
        if event.seq in interrupted:
            turn = interrupted[event.seq]
            details = f"turn_id={turn.turn_id}  {INTERRUPTED_NOTE_CLI}"
            table.add_row("-", when, f"[red]{INTERRUPTED_TYPE}[/red]", details)
    Console().print(table)


INTERRUPTED_NOTE_CLI = (
    "interrupted — no reply was recorded (derived when read: the process that ran "
    "the turn is gone or went on to another turn)"
)


@click.command("pin")
@click.argument("session_id", metavar="SESSION")
@click.argument("text")
@pass_cli
def pin_command(cli_ctx: CliContext, session_id: str, text: str) -> None:
    """Pin TEXT in SESSION: included verbatim in every later turn, through every
    compaction (a FactPinned event)."""
    with _session(cli_ctx, session_id) as session:
        event = session.pin_fact_sync(text)
    click.echo(f"pinned {event.fact_id} at seq {event.seq}")


@click.command("unpin")
@click.argument("session_id", metavar="SESSION")
@click.argument("fact_id", metavar="FACT_ID")
@pass_cli
def unpin_command(cli_ctx: CliContext, session_id: str, fact_id: str) -> None:
    """Release pinned fact FACT_ID (as `kairox pin` printed it, or `kairox events
    SESSION --type FactPinned`) of SESSION: later turns no longer include it
    (a FactUnpinned event)."""
    with _session(cli_ctx, session_id) as session:
        event = session.unpin_fact_sync(fact_id)
    click.echo(f"unpinned {event.fact_id} at seq {event.seq}: {event.text}")


@click.group("summary")
def summary_group() -> None:
    """Look at and correct compaction summaries (each change is an event)."""


@summary_group.command("show")
@click.argument("session_id", metavar="SESSION")
@pass_cli
def summary_show(cli_ctx: CliContext, session_id: str) -> None:
    """List SESSION's active summaries with their numbered lines (chunks): the numbers
    `summary drop`, `longterm add --from-summary` and the chat's keys take."""
    from kairox_core.summary_lines import numbered_lines

    with _session(cli_ctx, session_id) as session:
        summaries = session.refresh_compaction().summaries
    if not summaries:
        click.echo("no active summaries (run `kairox compact SESSION`)")
    for s in summaries:
        click.echo(f"summary seq {s.seq} (replaces seqs {s.first_seq}-{s.last_seq}, {s.strategy}):")
        for i, line in numbered_lines(s.text):
            click.echo(f"  {i}: {line}")


@summary_group.command("edit")
@click.argument("session_id", metavar="SESSION")
@click.argument("seq", type=int)
@click.option("--text", help="The new summary text (default: open $EDITOR on the current).")
@pass_cli
def summary_edit(cli_ctx: CliContext, session_id: str, seq: int, text: str | None) -> None:
    """Replace the text of the summary stored at SEQ; the next turn sees the edit and the
    original stays in the audit trail (SummaryEdited)."""
    with _session(cli_ctx, session_id) as session:
        if text is None:
            current = session.active_summary(seq).text
            text = click.edit(current)
            if text is None or text.strip() == current.strip():
                click.echo("unchanged: nothing recorded")
                return
        event = session.edit_summary_sync(seq, text)
    click.echo(f"summary {seq} edited (SummaryEdited at seq {event.seq})")


@summary_group.command("drop")
@click.argument("session_id", metavar="SESSION")
@click.argument("seq", type=int)
@click.argument("chunk", type=int)
@pass_cli
def summary_drop(cli_ctx: CliContext, session_id: str, seq: int, chunk: int) -> None:
    """Drop chunk CHUNK (a line, numbered as `kairox summary show` prints them) of the
    summary stored at SEQ (ChunkDropped)."""
    with _session(cli_ctx, session_id) as session:
        event = session.drop_chunk_sync(seq, chunk)
    click.echo(f"dropped chunk {chunk} of summary {seq}: {event.text}")


def register(cli: click.Group) -> None:
    for command in (compact_command, events_command, pin_command, unpin_command, summary_group):
        cli.add_command(command)
