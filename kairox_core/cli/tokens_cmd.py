"""``kairox tokens``: count tokens offline, and show a profile's budget."""

from __future__ import annotations

import json
import sys

import click

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.tokens import ENCODING_URLS, TokenCounter, encoding_for_model


@click.command("tokens")
@click.argument("text", required=False)
@click.option("--encoding", type=click.Choice(sorted(ENCODING_URLS)), help="Encoding to use.")
@click.option("--model", help="Count as this model would (its encoding, or a safety margin).")
@click.option("--profile", help="Profile whose budget to show (default: the default profile).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def tokens_command(
    cli_ctx: CliContext,
    text: str | None,
    encoding: str | None,
    model: str | None,
    profile: str | None,
    as_json: bool,
) -> None:
    """Count the tokens in TEXT (or stdin) and show how much of the budget it takes."""
    if text is None:
        if sys.stdin.isatty():
            raise click.UsageError("give TEXT or pipe text on stdin")
        text = sys.stdin.read()
    pname, prof = cli_ctx.config.resolve_profile(profile)
    if encoding:
        counter = TokenCounter(encoding)
    elif model:
        counter = TokenCounter.for_model(model, unknown_margin=prof.token_margin)
    else:
        enc = prof.encoding or encoding_for_model(prof.model)
        counter = TokenCounter(enc) if enc else TokenCounter(margin=prof.token_margin)
    n = counter.count(text)
    as_message = counter.count_messages([{"role": "user", "content": text}])
    result = {
        "tokens": n,
        "as_chat_message": as_message,
        "encoding": counter.encoding_name,
        "margin": counter.margin,
        "profile": pname,
        "budget": prof.budget,
        "share_of_budget": round(as_message / prof.budget, 4),
    }
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(
        f"{n} tokens ({counter.encoding_name}"
        f"{f', +{counter.margin:.0%} margin' if counter.margin else ''}); "
        f"as a chat message {as_message}"
    )
    click.echo(
        f"profile '{pname}': budget {prof.budget} = context_window "
        f"{prof.context_window} - reserve {prof.reserve}; this message uses "
        f"{result['share_of_budget']:.2%}"
    )


def register(cli: click.Group) -> None:
    cli.add_command(tokens_command)
