"""``kairox chat``: the terminal chat, or ``--plain`` for pipes and scripts."""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click
from click.core import ParameterSource

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.config import is_database_url
from kairox_core.errors import KairoxUserError
from kairox_core.sync import run_sync


@click.command("chat")
@click.option("--profile", help="Profile (or alias) to chat with (default: the config's).")
@click.option("--workspace", help="Workspace whose memories and documents to use.")
@click.option("--session", "session_id", help="Resume this session id (see `kairox sessions`).")
@click.option(
    "--create", is_flag=True, help="With --session: start a session with that id if there is none."
)
@click.option(
    "--provider", "provider_id", help="A [providers.<id>] to use instead of the profile's."
)
@click.option(
    "--plain",
    is_flag=True,
    help="No TUI: prompts from stdin (one per line), "
    "answers to stdout, proposals and events on stderr.",
)
@click.option(
    "--attach",
    "attach_paths",
    multiple=True,
    metavar="PATH",
    help="Attach a file (image, PDF, text) to the first prompt (repeatable; /attach "
    "PATH does it at the prompt).",
)
@click.option("--approve-all", is_flag=True, help="With --plain: accept every memory proposal.")
@click.option("--reject-all", is_flag=True, help="With --plain: reject every memory proposal.")
@pass_cli
def chat_command(
    cli_ctx: CliContext,
    profile: str | None,
    workspace: str | None,
    session_id: str | None,
    create: bool,
    provider_id: str | None,
    plain: bool,
    attach_paths: tuple[str, ...],
    approve_all: bool,
    reject_all: bool,
) -> None:
    """Chat with memory: streamed answers cleaned of <memory> tags, approval cards for
    memories the model proposes (ctrl+n selects one, then a / r / e), a trace of every
    turn's context (ctrl+t) and the Memory view (ctrl+y); /help lists the keys. On exit
    the session id and the command that resumes it are printed. With no provider
    configured, the offline default model is used."""
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.providers.resolve import build_provider, choose_provider

    if approve_all and reject_all:
        raise click.UsageError("--approve-all and --reject-all exclude each other")
    if (approve_all or reject_all) and not plain:
        raise click.UsageError("--approve-all / --reject-all need --plain")
    if create and not session_id:
        raise click.UsageError("--create needs --session ID (the id of the session to start)")
    config = cli_ctx.config
    from kairox_core.attachments import from_path

    attachments = [from_path(path) for path in attach_paths]  # a bad file: before anything
    if session_id and not create:
        _require_session(cli_ctx, session_id)
    resume_args = _global_args(cli_ctx)
    stdin: Iterator[str] | None = None
    if plain:
        stdin = _prompt_lines(sys.stdin)
        if stdin is None:
            click.echo("kairox: no input on stdin; no session created", err=True)
            return
    provider = None
    if provider_id:
        provider = build_provider(choose_provider(config, provider_id).config)
    engine = ChatEngine.open(
        config,
        cli_ctx.database,
        profile=profile,
        workspace=workspace,
        session_id=session_id,
        provider=provider,
    )
    if provider is not None:
        engine.provider_note = f"model: {provider.model} via provider '{provider_id}'"
    engine.staged.extend(attachments)
    if plain:
        from kairox_core.chat.plain import PlainChat

        decide = "approve" if approve_all else "reject" if reject_all else None
        runner = PlainChat(
            engine,
            stdin or iter(()),
            sys.stdout,
            sys.stderr,
            decide=decide,
            resume_args=resume_args,
        )

        async def go() -> int:
            try:
                return await runner.run()
            finally:
                await engine.close()

        sys.exit(run_sync(go()))
    from kairox_core.chat.app import ChatApp

    app = ChatApp(engine, resume_args=resume_args)
    try:
        app.run()
    finally:
        run_sync(engine.close())
        click.echo(f"kairox: {app.resume_hint}", err=True)


def _require_session(cli_ctx: CliContext, session_id: str) -> None:
    """``--session`` names a session that exists: a typo must not start a new one."""
    from kairox_core.facade import Kairox

    database = cli_ctx.database
    found = False
    if cli_ctx.database_exists:
        with Kairox.open(database, cli_ctx.config) as kx:
            found = kx.events_store.get_session(session_id) is not None
    if not found:
        raise KairoxUserError(
            f"no session '{session_id}' in {database}\n"
            f"  fix: `kairox sessions` lists the sessions there; "
            f"add --create to start a new session with this id"
        )


def _global_args(cli_ctx: CliContext) -> tuple[str, ...]:
    """The ``--config``/``--db`` given on the command line, for the resume command."""
    root = click.get_current_context().find_root()
    args: list[str] = []
    for option, param, value in (
        ("--config", "config_path", cli_ctx.config_path),
        ("--db", "db_path", cli_ctx.db_path),
    ):
        if value and root.get_parameter_source(param) == ParameterSource.COMMANDLINE:
            args += [option, _as_given(value) if option == "--db" else str(Path(value).absolute())]
    return tuple(args)


def _as_given(db: str) -> str:
    """A ``--db`` for the resume command: a file as an absolute path; a storage URL as
    written (``Path`` would fold its ``//``), a literal password in it masked (it would
    land in the terminal's scrollback; a ``$env:NAME`` one is kept)."""
    if not is_database_url(db):
        return str(Path(db).absolute())
    parts = urlsplit(db)
    if parts.password and not parts.password.startswith("$env:"):
        user, _, host = parts.netloc.rpartition("@")
        name = user.split(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))
    return db


def _prompt_lines(stream: Any) -> Iterator[str] | None:
    """stdin's lines, or None when it holds no prompt (then no session is created).

    Undecodable bytes are kept as surrogate escapes, for ``PlainChat`` to replace and
    report, instead of failing inside the loop that reads them."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="surrogateescape")
    lines = iter(stream)
    head: list[str] = []
    for line in lines:
        head.append(line)
        if line.strip():
            return itertools.chain(head, lines)
    return None


def register(cli: click.Group) -> None:
    cli.add_command(chat_command)
