"""``kairox models``: the local models installed, their files, hashes and profiles."""

from __future__ import annotations

import json
from typing import Any

import click

from kairox_llamacpp import models


def _profiles_using(config: Any) -> dict[str, list[str]]:
    """Model name (or GGUF path) -> the profiles whose turns it would answer."""
    from kairox_core.errors import KairoxError
    from kairox_core.providers.resolve import choose_provider
    from kairox_llamacpp.provider import LlamaCppProvider

    using: dict[str, list[str]] = {}
    for pname in config.profiles:
        try:
            section = choose_provider(config, profile=pname).config
            if section.kind != "llamacpp":
                continue
            provider = LlamaCppProvider.from_config(section)  # resolves; starts nothing
        except KairoxError:
            continue
        label = provider.local.name if provider.local else str(provider.path)
        using.setdefault(label, []).append(pname)
    return using


def rows(config: Any, *, verify: bool) -> list[dict[str, Any]]:
    """One row per model of the catalog, installed or not."""
    using = _profiles_using(config) if config is not None else {}
    out = []
    for model in models.CATALOG:
        parts = models.part_paths(model)
        path = models.assembled_path(model)
        hash_ok: bool | None = None
        if verify and parts is not None:  # not assembled yet: the parts, end to end
            hash_ok = models.sha256_of([path] if path else parts) == model.sha256
        out.append(
            {
                "name": model.name,
                "installed": parts is not None,
                "file": str(path) if path else None,
                "size": model.size,
                "sha256": model.sha256,
                "hash_ok": hash_ok,
                "license": model.license,
                "default": parts is not None and models.default_model() == model,
                "profiles": using.get(model.name, []),
                "install": model.install_command,
            }
        )
    return out


def register(cli: click.Group) -> None:
    from kairox_core.cli.context import CliContext, pass_cli

    @cli.command("models")
    @click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
    @click.option(
        "--no-verify", is_flag=True, help="Skip the sha256 check of the files (a second or two)."
    )
    @pass_cli
    def models_cmd(ctx: CliContext, as_json: bool, no_verify: bool) -> None:
        """List the local models (kairox-llamacpp): file, size, hash, profiles using them."""
        table = rows(ctx.config_unchecked, verify=not no_verify)
        if as_json:
            click.echo(json.dumps(table, indent=2))
            return
        for row in table:
            mark = "*" if row["default"] else " "
            if not row["installed"]:
                click.echo(f"{mark} {row['name']}: not installed ({row['install']})")
                continue
            hash_text = {True: "sha256 ok", False: "SHA256 MISMATCH", None: "sha256 not checked"}[
                row["hash_ok"]
            ]
            if row["file"] is None:
                hash_text += " (parts; assembled on first use)"
            profiles = ", ".join(row["profiles"]) or "-"
            click.echo(
                f"{mark} {row['name']}  {row['size'] / 1e6:.0f} MB  {hash_text}  "
                f"profiles: {profiles}  license: {row['license']}\n"
                f"    {row['file'] or '(not assembled yet)'}"
            )
        click.echo("* the default when a provider names no model")
