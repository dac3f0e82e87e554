"""Hostile files in the shared pack directory stay local to themselves: each is reported
(``scan``, ``kairox pack list``, ``kairox pack check``) and skipped, the other packs load
and turns go on; only regular files under the size limit are read, so a FIFO never
blocks and ``--file /dev/zero`` is refused instead of read until memory runs out."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kairox_core import Kairox
from kairox_core.cli import cli, main, pack_cmd
from kairox_core.config import KairoxConfig
from kairox_core.errors import KairoxUserError
from kairox_core.longterm.packfiles import MAX_PACK_BYTES, PackDirectory, read_text_file

pack_cmd.register(cli)

GOOD = '+++\nname = "good"\nlevel = "team"\n+++\nBe kind.\n'
DEEP = 20_000


def hostile_directory(d: Path) -> dict[str, str]:
    """A pack directory with one good pack and one of each bad file; the message
    expected for each bad file's name."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "good.md").write_text(GOOD)
    (d / "bad name.md").write_text(GOOD.replace("good", "bad name"))
    (d / "toml.md").write_text('+++\nname = "toml"\nlevel = team\n+++\nx\n')
    (d / "deep.md").write_text(
        '+++\nname = "deep"\nlevel = "team"\nx = ' + "[" * DEEP + "]" * DEEP + "\n+++\nx\n"
    )
    (d / "latin1.md").write_bytes(b'+++\nname = "latin1"\nlevel = "team"\n+++\ncaf\xe9\n')
    (d / "d.md").mkdir()
    (d / "loop.md").symlink_to(d / "loop.md")
    os.mkfifo(d / "x.md")
    (d / "zero.md").symlink_to("/dev/zero")
    with (d / "huge.md").open("wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_PACK_BYTES + 1)
    (d / "other.md").write_text(GOOD.replace('"good"', '"someone-else"'))
    (d / "README.md").write_text("# Our packs\n")
    (d / ".hidden.md").write_text("not a pack, not reported")
    return {
        "bad name.md": "not a valid pack name",
        "toml.md": "not valid TOML",
        "deep.md": "nested too deeply",
        "latin1.md": "not UTF-8",
        "d.md": "is a directory",
        "loop.md": "cannot open",
        "x.md": "is a FIFO",
        "zero.md": "is a device",
        "huge.md": f"over the limit of {MAX_PACK_BYTES} bytes",
        "other.md": "differs from the file's name",
        "README.md": "starts with a '+++' line",
    }


def test_every_bad_file_is_reported_and_the_good_one_loads(tmp_path: Path) -> None:
    expected = hostile_directory(tmp_path / "packs")
    packs, problems = PackDirectory(tmp_path / "packs").scan()
    assert [p.name for p in packs] == ["good"]
    found = {Path(p.path).name: p.problem for p in problems}
    assert set(found) == set(expected)
    for name, message in expected.items():
        assert message in found[name], (name, found[name])


@pytest.fixture
def kx(tmp_path: Path) -> Iterator[Kairox]:
    config = KairoxConfig.model_validate(
        {
            "retrieval": {"workspace_index": False},
            "packs": {"dir": str(tmp_path / "packs"), "active": ["good", "x", "deep"]},
        }
    )
    hostile_directory(tmp_path / "packs")
    with Kairox.open(tmp_path / "k.db", config) as kx:
        yield kx


def test_the_facade_lists_the_good_packs_and_turns_go_on(kx: Kairox) -> None:
    assert [p.name for p in kx.packs.list()] == ["good"]
    for name in ("x", "zero", "d", "loop", "deep", "latin1"):
        with pytest.raises(KairoxUserError, match=f"{name}\\.md"):
            kx.packs.get(name)
    turn = kx.session(workspace="w").begin_turn_sync("hello")
    packs = [m["content"] for m in turn.messages if "<kairox:packs>" in str(m["content"])]
    assert packs and "Be kind." in packs[0]
    notes = " ".join(turn.trace.layer("packs").notes)
    assert "pack 'x' is active but unreadable" in notes and "FIFO" in notes
    assert "pack 'deep' is active but unreadable" in notes
    turn.complete_sync("hi")
    with pytest.raises(KairoxUserError, match="FIFO"):  # the name is taken by a bad file
        kx.packs.create("x", level="team", text="t")


def test_pack_text_over_the_limit_is_refused(kx: Kairox) -> None:
    with pytest.raises(KairoxUserError, match="at most 1048576 bytes"):
        kx.packs.create("big", text="x" * (MAX_PACK_BYTES + 1))
    kx.packs.create("small", text="fine")
    with pytest.raises(KairoxUserError, match="at most"):
        kx.packs.edit("small", "é" * (MAX_PACK_BYTES // 2 + 1))


@pytest.fixture
def setup(kairox_home: Path, tmp_path: Path) -> tuple[Path, Path]:
    toml = tmp_path / "kairox.toml"
    toml.write_text('[retrieval]\nworkspace_index = false\n[packs]\ndir = "team-packs"\n')
    hostile_directory(tmp_path / "team-packs")
    return toml, tmp_path / "kx.db"


def test_pack_list_shows_the_good_packs_and_names_the_skipped_files(
    setup: tuple[Path, Path],
) -> None:
    toml, db = setup
    result = CliRunner().invoke(cli, ["--config", str(toml), "--db", str(db), "pack", "list"])
    assert result.exit_code == 0, result.output
    assert "good" in result.stdout and "skipped" not in result.stdout
    assert "x.md: is a FIFO" in result.stderr and "kairox pack check" in result.stderr
    listed = CliRunner().invoke(
        cli, ["--config", str(toml), "--db", str(db), "pack", "list", "--json"]
    )
    assert [p["name"] for p in json.loads(listed.stdout)] == ["good"]


def test_pack_check_reports_each_problem_and_exits_1(setup: tuple[Path, Path]) -> None:
    toml, db = setup
    base = ["--config", str(toml), "--db", str(db), "pack", "check"]
    result = CliRunner().invoke(cli, base)
    assert result.exit_code == 1
    assert "1 pack files load, 11 do not" in result.stdout
    assert "deep.md: front matter is nested too deeply" in result.stdout
    data = json.loads(CliRunner().invoke(cli, [*base, "--json"]).stdout)
    assert len(data["problems"]) == 11 and data["ok"][0].endswith("good.md")
    for bad in Path(data["directory"]).iterdir():
        if bad.name != "good.md":
            bad.unlink() if not bad.is_dir() or bad.is_symlink() else bad.rmdir()
    clean = CliRunner().invoke(cli, base)
    assert clean.exit_code == 0 and "1 pack files load, 0 do not" in clean.stdout


def hostile_file(kind: str, where: Path) -> Path:
    if kind == "device":
        return Path("/dev/zero")
    path = where / f"{kind}.md"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "big":
        path.write_bytes(b"x" * (MAX_PACK_BYTES + 1))
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe")
    elif kind == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("device", "is a device"),
        ("fifo", "is a FIFO"),
        ("big", "over the limit"),
        ("binary", "UTF-8"),
        ("directory", "is a directory"),
    ],
)
def test_pack_create_file_refuses_what_is_not_a_small_text_file(
    setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str], kind: str, message: str
) -> None:
    toml, db = setup
    path = hostile_file(kind, toml.parent)
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(toml), "--db", str(db), "pack", "create", "p", "--file", str(path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and str(path) in err and message in err, err
    assert "Traceback" not in err


def test_read_text_file_reads_a_regular_file_whole(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("héllo\n" * 10_000)
    assert read_text_file(tmp_path / "a.md") == "héllo\n" * 10_000
    with pytest.raises(KairoxUserError, match="over the limit of 10 bytes"):
        read_text_file(tmp_path / "a.md", limit=10)
    with pytest.raises(KairoxUserError, match="cannot open"):
        read_text_file(tmp_path / "missing.md")
