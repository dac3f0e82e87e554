"""``kairox longterm ...`` and ``kairox pack ...``: CliRunner per command, errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kairox_core.cli import cli, longterm_cmd, main, pack_cmd

longterm_cmd.register(cli)
pack_cmd.register(cli)


@pytest.fixture
def setup(kairox_home: Path, tmp_path: Path) -> tuple[Path, Path]:
    toml = tmp_path / "kairox.toml"
    toml.write_text('[retrieval]\nworkspace_index = false\n[packs]\ndir = "team-packs"\n')
    return toml, tmp_path / "kx.db"


def run(setup: tuple[Path, Path], *args: str) -> Result:
    toml, db = setup
    result = CliRunner().invoke(cli, ["--config", str(toml), "--db", str(db), *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def run_json(setup: tuple[Path, Path], *args: str) -> Any:
    return json.loads(run(setup, *args, "--json").output)


def fail(setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str], *args: str) -> str:
    toml, db = setup
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(toml), "--db", str(db), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("kairox: error:")
    return err


def test_every_command_has_help() -> None:
    for group in (longterm_cmd.longterm_group, pack_cmd.pack_group):
        assert group.help
        for name, command in group.commands.items():  # type: ignore[attr-defined]
            assert command.help, name
            out = CliRunner().invoke(cli, [group.name or "", name, "--help"]).output
            assert "Usage" in out, name
    assert set(pack_cmd.pack_group.commands) >= {  # type: ignore[attr-defined]
        "create",
        "list",
        "show",
        "edit",
        "rm",
        "promote",
        "publish",
        "activate",
    }


def test_longterm_add_list_search_edit_rm(setup: tuple[Path, Path]) -> None:
    out = run(setup, "longterm", "add", "--workspace", "w1", "We deploy on Fridays.").output
    chunk_id = out.split()[1]
    assert chunk_id.startswith("lt-") and "(project)" in out
    run(setup, "longterm", "add", "--scope", "global", "Ada prefers tea.")
    listed = run_json(setup, "longterm", "list", "--workspace", "w1")
    assert [c["text"] for c in listed] == ["We deploy on Fridays.", "Ada prefers tea."]
    assert run_json(setup, "longterm", "list", "--workspace", "w2")[0]["text"] == "Ada prefers tea."
    hits = run_json(setup, "longterm", "search", "--workspace", "w1", "when do we deploy?")
    assert [h["id"] for h in hits] == [chunk_id] and hits[0]["similarity"] > 0.3
    assert "no chunk reaches" in run(setup, "longterm", "search", "--workspace", "w2", "x y").output
    run(setup, "longterm", "edit", chunk_id, "We deploy on Thursdays.")
    assert "Thursdays" in run(setup, "longterm", "list").output
    assert f"removed {chunk_id}" in run(setup, "longterm", "rm", chunk_id).output
    assert len(run_json(setup, "longterm", "list")) == 1


def test_longterm_errors_exit_2(
    setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert "no long-term chunk 'lt-nope'" in fail(setup, capsys, "longterm", "rm", "lt-nope")
    assert "nothing to keep" in fail(setup, capsys, "longterm", "add")
    assert "no session 'ghost'" in fail(setup, capsys, "longterm", "add", "--session", "ghost", "x")
    assert "SEQ:LINE" in fail(
        setup, capsys, "longterm", "add", "--session", "s", "--from-summary", "x"
    )


def test_pack_lifecycle(setup: tuple[Path, Path], tmp_path: Path) -> None:
    ids = [
        run(setup, "longterm", "add", "--scope", "global", t).output.split()[1]
        for t in ("Use British spelling.", "Cite the ticket.", "ISO dates.")
    ]
    out = run(setup, "pack", "promote", *ids, "--pack", "house").output
    assert "draft pack house" in out
    assert run_json(setup, "pack", "list")[0] | {"text": ""} == {
        "name": "house",
        "level": "personal",
        "text": "",
        "draft": True,
        "published_by": None,
        "published_at": None,
        "path": None,
        "active": False,
    }
    run(setup, "pack", "activate", "house")
    listed = run_json(setup, "pack", "list")[0]
    assert listed["active"] and not listed["draft"]
    shown = run(setup, "pack", "show", "house").stdout
    assert shown == "Use British spelling.\nCite the ticket.\nISO dates.\n"
    out = run(setup, "pack", "publish", "house", "--level", "team", "--by", "ada").output
    assert "published house as team by ada" in out
    assert (tmp_path / "team-packs" / "house.md").exists()  # beside kairox.toml
    (tmp_path / "notes.md").write_text("# Notes\nBe kind.\n")
    run(setup, "pack", "create", "notes", "--file", str(tmp_path / "notes.md"))
    run(setup, "pack", "edit", "notes", "--text", "Be very kind.")
    assert run(setup, "pack", "show", "notes").stdout == "Be very kind.\n"
    run(setup, "pack", "activate", "house", "--off")
    assert not run_json(setup, "pack", "list")[1]["active"]
    run(setup, "pack", "rm", "house")
    assert not (tmp_path / "team-packs" / "house.md").exists()


def test_pack_errors_exit_2(setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert "no context pack 'ghost'" in fail(setup, capsys, "pack", "show", "ghost")
    assert "not valid" in fail(setup, capsys, "pack", "create", "a/b")
    run(setup, "pack", "create", "p", "--text", "x", "--level", "org")
    assert "only moves up" in fail(setup, capsys, "pack", "publish", "p", "--level", "team")
    assert "give --text TEXT or --file PATH" in fail(setup, capsys, "pack", "edit", "p")


def test_longterm_list_prints_bracketed_text_as_written(
    kairox_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    db = str(tmp_path / "kx.db")
    runner = CliRunner()
    added = runner.invoke(
        cli, ["--db", db, "longterm", "add", "use [kairox] tags", "--scope", "global"]
    )
    assert added.exit_code == 0, added.output
    listed = runner.invoke(cli, ["--db", db, "longterm", "list"])
    assert "use [kairox] tags" in listed.output
