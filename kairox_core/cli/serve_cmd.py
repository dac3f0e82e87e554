"""``kairox serve``: the HTTP API, the OpenAI-compatible endpoint and the web app."""

from __future__ import annotations

import os
import re

import click

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.config import ENV_PREFIX
from kairox_core.errors import KairoxUserError

TOKEN_RE = re.compile(r"[A-Za-z0-9._~+/=-]{16,512}")


def resolve_token(value: str | None) -> str | None:
    """``--token`` as given, or ``$env:NAME`` read from the environment; checked so it
    is long enough to guess at and safe in a cookie."""
    if not value:
        return None
    if value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX) :]
        resolved = os.environ.get(name)
        if not resolved:
            raise KairoxUserError(
                f"--token {value}: environment variable {name} is not set\n"
                f"  fix: export {name}=... (e.g. $(python3 -c 'import secrets; "
                f"print(secrets.token_urlsafe(24))'))"
            )
        value = resolved
    if not TOKEN_RE.fullmatch(value):
        raise KairoxUserError(
            "--token must be 16 to 512 characters of letters, digits and ._~+/=-\n"
            "  fix: python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return value


def check_bind(host: str, token: str | None, *, env: str) -> None:
    """Refuse a bind other machines may reach (anything but ``localhost`` or a loopback
    IP address, decided by parsing it) without a token."""
    from kairox_core.web.security import is_loopback

    if token is None and not is_loopback(host):
        raise KairoxUserError(
            f"--host {host} is not a loopback address (localhost, 127.0.0.0/8 or ::1), "
            f"so other machines may reach it: a token is required\n"
            f"  fix: pass --token TOKEN (or set {env}), or bind 127.0.0.1"
        )


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="KAIROX_SERVE_TOKEN",
    metavar="TOKEN",
    help="Required on every request (Bearer header, or open /?token=TOKEN once in the "
    "browser); required for any non-loopback --host. '$env:NAME' reads it from NAME. "
    "Default: $KAIROX_SERVE_TOKEN.",
)
@click.option(
    "--max-body",
    default=29_010_604,  # web.security.DEFAULT_MAX_BODY (not imported: the [web] extra)
    show_default=True,
    type=click.IntRange(1024, 64 * 1_048_576),
    help="Largest request body accepted, in bytes.",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Seconds a client has to send a request's headers before its connection is closed.",
)
@click.option(
    "--body-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Seconds a client has to send a request's body after its headers.",
)
@pass_cli
def serve_command(
    cli_ctx: CliContext,
    host: str,
    port: int,
    token: str | None,
    max_body: int,
    header_timeout: float,
    body_timeout: float,
) -> None:
    """Serve the HTTP API (/api, schema at /openapi.json), an OpenAI-compatible
    POST /v1/chat/completions and the web app (/) over one Kairox database.

    Binds 127.0.0.1 unless --host says otherwise; off loopback (anything but localhost
    or a loopback IP address) a token is required. Without a token only the Host names
    127.0.0.1, localhost, [::1] and --host itself, with the port, are answered (DNS
    rebinding). State-changing requests need the X-Kairox-CSRF: 1 header (the web app
    sends it). A client that sends its headers or its body too slowly is cut off
    (--header-timeout, --body-timeout)."""
    from kairox_core.web import require_web

    secret = resolve_token(token)
    check_bind(host, secret, env="KAIROX_SERVE_TOKEN")
    require_web()
    import uvicorn

    from kairox_core.facade import Kairox
    from kairox_core.web.app import create_app
    from kairox_core.web.timeouts import timed_protocol

    config = cli_ctx.config
    kx = Kairox.open(cli_ctx.database, config=config)
    try:
        app = create_app(kx, token=secret, host=host, port=port, max_body=max_body)
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"kairox: serving {cli_ctx.database} on http://{shown}:{port}/", err=True)
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            http=timed_protocol(header_timeout, body_timeout),
        )
    finally:
        kx.close()


def register(cli: click.Group) -> None:
    cli.add_command(serve_command)
