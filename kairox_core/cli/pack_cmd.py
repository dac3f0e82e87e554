"""``kairox pack create|list|show|edit|rm|promote|publish|activate``: context packs."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.cli.longterm_cmd import open_kairox
from kairox_core.errors import KairoxUserError
from kairox_core.longterm.packfiles import PackProblem, read_text_file


def _text(text: str | None, file: str | None, *, required: bool) -> str | None:
    if text is not None and file is not None:
        raise KairoxUserError("give the pack's text with --text or --file, not both")
    if file is not None:  # a regular file under the pack limit: never /dev/zero or a FIFO
        return read_text_file(file, what=f"--file {file}")
    if text is None and required:
        raise KairoxUserError("no text: give --text TEXT or --file PATH (Markdown is fine)")
    return text


@click.group("pack")
def pack_group() -> None:
    """Context packs: named text always in the prompt while active.

    Levels: personal (this database), team and org (Markdown files in [packs] dir, to
    share in git). Active packs are mandatory context, counted with the system prompt.
    """


@pack_group.command("create")
@click.argument("name")
@click.option(
    "--level",
    type=click.Choice(["personal", "team", "org"]),
    default="personal",
    show_default=True,
    help="Where it lives: personal in the database, team/org in the pack directory.",
)
@click.option("--text", help="The pack's text.")
@click.option("--file", "file", type=click.Path(dir_okay=False), help="Read the text from a file.")
@pass_cli
def create_command(
    cli_ctx: CliContext, name: str, level: str, text: str | None, file: str | None
) -> None:
    """Create pack NAME (not active until `kairox pack activate NAME`)."""
    body = _text(text, file, required=False) or ""
    with open_kairox(cli_ctx) as kx:
        pack = kx.packs.create(name, level=level, text=body)
    where = f" ({pack.path})" if pack.path else ""
    click.echo(f"created {pack.level} pack {pack.name}{where}")


@pack_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--workspace", help="Mark the packs active in this workspace.")
@click.option("--profile", help="Mark the packs active for this profile.")
@pass_cli
def list_command(
    cli_ctx: CliContext, as_json: bool, workspace: str | None, profile: str | None
) -> None:
    """List packs: level, draft or not, active here or not, size."""
    with open_kairox(cli_ctx) as kx:
        packs, problems = kx.packs.scan()
        ws = workspace or kx.config.kairox.default_workspace
        active = set(kx.packs.active_names(ws, profile or kx.config.kairox.default_profile))
    _report(problems)
    if as_json:
        click.echo(
            json.dumps([{**p.as_dict(), "active": p.name in active} for p in packs], indent=2)
        )
        return
    if not packs:
        click.echo("no context packs yet; `kairox pack create NAME --text ...` makes one")
        return
    table = Table()
    for col in ("name", "level", "state", "chars", "published by"):
        table.add_column(col, overflow="fold")
    for p in packs:
        state = "draft" if p.draft else ("active" if p.name in active else "-")
        table.add_row(p.name, p.level, state, str(len(p.text)), p.published_by or "-")
    Console().print(table)


def _report(problems: list[PackProblem]) -> None:
    """Each unusable file of the pack directory, on stderr: skipped, never fatal."""
    for p in problems:
        click.echo(f"kairox: skipped {p.path}: {p.problem}", err=True)
    if problems:
        click.echo("kairox: `kairox pack check` lists these problems", err=True)


@pack_group.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def check_command(cli_ctx: CliContext, as_json: bool) -> None:
    """Check every file in the team/org pack directory; exit 1 if one cannot be used.

    A bad file (invalid name, bad front matter, not UTF-8, too large, a FIFO, a device,
    a directory, a symlink loop) is skipped by every other command, the others load.
    """
    with open_kairox(cli_ctx) as kx:
        packs, problems = kx.packs.scan()
        where = kx.packs.directory.path
    files = [p for p in packs if p.level != "personal"]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "directory": str(where),
                    "ok": [p.path for p in files],
                    "problems": [p.as_dict() for p in problems],
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        click.echo(f"{where}: {len(files)} pack files load, {len(problems)} do not")
        for p in problems:
            click.echo(f"  {p.path}: {p.problem}")
    if problems:
        raise SystemExit(1)


@pack_group.command("show")
@click.argument("name")
@pass_cli
def show_command(cli_ctx: CliContext, name: str) -> None:
    """Print pack NAME's text exactly as it is injected."""
    with open_kairox(cli_ctx) as kx:
        pack = kx.packs.get(name)
    draft = ", draft" if pack.draft else ""
    by = f", published by {pack.published_by}" if pack.published_by else ""
    click.echo(f"# {pack.name} ({pack.level}{draft}{by})", err=True)
    click.echo(pack.text)


@pack_group.command("edit")
@click.argument("name")
@click.option("--text", help="The new text.")
@click.option("--file", "file", type=click.Path(dir_okay=False), help="Read it from a file.")
@pass_cli
def edit_command(cli_ctx: CliContext, name: str, text: str | None, file: str | None) -> None:
    """Replace pack NAME's text (`PackEdited`)."""
    body = _text(text, file, required=True)
    assert body is not None
    with open_kairox(cli_ctx) as kx:
        pack = kx.packs.edit(name, body)
    click.echo(f"edited {pack.level} pack {pack.name} ({len(pack.text)} chars)")


@pack_group.command("rm")
@click.argument("name")
@pass_cli
def rm_command(cli_ctx: CliContext, name: str) -> None:
    """Delete pack NAME and its activations (a team/org pack's file is removed)."""
    with open_kairox(cli_ctx) as kx:
        pack = kx.packs.delete(name)
    click.echo(f"removed {pack.level} pack {pack.name}")


@pack_group.command("promote")
@click.argument("chunk_ids", metavar="CHUNK_ID...", nargs=-1, required=True)
@click.option("--pack", "pack_name", help="Append to this personal pack (default: a new one).")
@pass_cli
def promote_command(cli_ctx: CliContext, chunk_ids: tuple[str, ...], pack_name: str | None) -> None:
    """Copy long-term chunks into a draft personal pack (not injected until activated)."""
    with open_kairox(cli_ctx) as kx:
        pack = kx.packs.promote(list(chunk_ids), pack=pack_name)
    click.echo(
        f"promoted {len(chunk_ids)} chunks into draft pack {pack.name}; "
        f"`kairox pack activate {pack.name}` to use it"
    )


@pack_group.command("publish")
@click.argument("name")
@click.option(
    "--level", type=click.Choice(["team", "org"]), required=True, help="The level to move it to."
)
@click.option("--by", help="Who publishes (default: $KAIROX_USER, else your login name).")
@pass_cli
def publish_command(cli_ctx: CliContext, name: str, level: str, by: str | None) -> None:
    """Elevate pack NAME: personal -> team -> org (written to the shared pack directory)."""
    with open_kairox(cli_ctx) as kx:
        pack = kx.packs.publish(name, level=level, by=by)
    click.echo(f"published {pack.name} as {pack.level} by {pack.published_by} ({pack.path})")


@pack_group.command("activate")
@click.argument("name")
@click.option("--workspace", help="Only in this workspace (default: every workspace).")
@click.option("--off", is_flag=True, help="Deactivate instead.")
@pass_cli
def activate_command(cli_ctx: CliContext, name: str, workspace: str | None, off: bool) -> None:
    """Make pack NAME part of every later turn (ends a draft); --off undoes it.

    Packs named in kairox.toml ([packs] active, [packs.workspaces], [packs.profiles])
    are active too; --off cannot override those: edit the file.
    """
    with open_kairox(cli_ctx) as kx:
        pack = kx.packs.activate(name, workspace_id=workspace, active=not off)
        where = f"workspace {workspace}" if workspace else "every workspace"
        still = off and name in kx.packs.active_names(workspace, None)
    verb = "deactivated" if off else "activated"
    click.echo(f"{verb} {pack.level} pack {pack.name} in {where}")
    if still:
        click.echo(f"note: {pack.name} stays active: kairox.toml names it ([packs])", err=True)


def register(cli: click.Group) -> None:
    cli.add_command(pack_group)
