"""``kairox chat``: the terminal chat, or ``--plain`` for pipes and scripts."""

from __future__ import annotations

import sys

import click

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.sync import run_sync


@click.command("chat")
@click.option("--profile", help="Profile (or alias) to chat with (default: the config's).")
@click.option("--workspace", help="Workspace whose memories and documents to use.")
@click.option("--session", "session_id", help="Resume this session id (see `kairox sessions`).")
@click.option(
    "--provider", "provider_id", help="A [providers.<id>] to use instead of the profile's."
)
@click.option(
    "--plain",
    is_flag=True,
    help="No TUI: prompts from stdin (one per line), "
    "answers to stdout, proposals and events on stderr.",
)
@click.option("--approve-all", is_flag=True, help="With --plain: accept every memory proposal.")
@click.option("--reject-all", is_flag=True, help="With --plain: reject every memory proposal.")
@pass_cli
def chat_command(
    cli_ctx: CliContext,
    profile: str | None,
    workspace: str | None,
    session_id: str | None,
    provider_id: str | None,
    plain: bool,
    approve_all: bool,
    reject_all: bool,
) -> None:
    """Chat with memory: streamed answers cleaned of <memory> tags, approval cards for
    memories the model proposes, a trace of every turn's context (ctrl+t) and the Memory
    view (ctrl+y). With no provider configured, the offline default model is used."""
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.providers.resolve import build_provider, choose_provider

    if approve_all and reject_all:
        raise click.UsageError("--approve-all and --reject-all exclude each other")
    if (approve_all or reject_all) and not plain:
        raise click.UsageError("--approve-all / --reject-all need --plain")
    config = cli_ctx.config
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
    if plain:
        from kairox_core.chat.plain import PlainChat

        decide = "approve" if approve_all else "reject" if reject_all else None
        runner = PlainChat(engine, sys.stdin, sys.stdout, sys.stderr, decide=decide)

        async def go() -> int:
            try:
                return await runner.run()
            finally:
                await engine.close()

        sys.exit(run_sync(go()))
    from kairox_core.chat.app import ChatApp

    app = ChatApp(engine)
    try:
        app.run()
    finally:
        run_sync(engine.close())


def register(cli: click.Group) -> None:
    cli.add_command(chat_command)
