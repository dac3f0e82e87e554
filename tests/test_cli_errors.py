"""`kairox` commands given bad input: an exit-2 error saying what, where and how to fix
it, never a traceback, and nothing written that the user did not ask for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kairox_core.cli import main

SCRIPTED = '[providers.demo]\nkind = "scripted"\nreplies = ["ok"]\n'


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def kairox(
    tmp_path: Path, *args: str, stdin: bytes = b"", config: str = SCRIPTED
) -> subprocess.CompletedProcess[bytes]:
    conf = tmp_path / "kairox.toml"
    conf.write_text(config)
    env = {**os.environ, "KAIROX_DB": str(tmp_path / "k.db"), "KAIROX_CONFIG": str(conf)}
    return subprocess.run(
        [sys.executable, "-m", "kairox_core", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
    )


def sessions(tmp_path: Path) -> list[str]:
    import json

    out = kairox(tmp_path, "sessions", "--json")
    assert out.returncode == 0, out.stderr
    return [s["session_id"] for s in json.loads(out.stdout)]


def test_index_of_a_path_that_does_not_exist_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kairox_home: Path
) -> None:
    (tmp_path / "docs").mkdir()
    code, _, err = run_main(
        ["--db", str(tmp_path / "k.db"), "index", str(tmp_path / "docs"), "/nonexistent-kx"],
        capsys,
    )
    assert code == 2 and "Traceback" not in err
    assert "/nonexistent-kx" in err and "does not exist" in err
    assert not (tmp_path / "k.db").exists()  # refused before anything was opened


def test_kb_index_of_a_path_that_does_not_exist_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kairox_home: Path
) -> None:
    conf = tmp_path / "kairox.toml"
    conf.write_text('[knowledge_bases.h]\nkind = "sqlite_fts"\npath = "h.db"\n')
    code, _, err = run_main(["--config", str(conf), "kb", "index", "h", "/nonexistent-kx"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "/nonexistent-kx" in err and "does not exist" in err
    assert not (tmp_path / "h.db").exists()


@pytest.mark.slow
def test_plain_chat_replaces_bytes_that_are_not_utf8_and_says_so(tmp_path: Path) -> None:
    out = kairox(tmp_path, "chat", "--plain", stdin=b"caf\xe9 \xff ok\n")
    err = out.stderr.decode()
    assert out.returncode == 0, err
    assert "Traceback" not in err
    assert "line 1: bytes that are not UTF-8 were replaced with U+FFFD" in err
    assert out.stdout.decode() == "ok\n"
    events = kairox(tmp_path, "events", sessions(tmp_path)[0], "--json")
    assert "caf\ufffd \ufffd ok" in events.stdout.decode()


@pytest.mark.slow
def test_plain_chat_with_empty_stdin_creates_no_session(tmp_path: Path) -> None:
    for stdin in (b"", b"\n  \n"):
        out = kairox(tmp_path, "chat", "--plain", stdin=stdin)
        assert out.returncode == 0, out.stderr
        assert "no session created" in out.stderr.decode()
    assert sessions(tmp_path) == []


@pytest.mark.slow
def test_chat_with_an_unknown_session_is_an_error(tmp_path: Path) -> None:
    kairox(tmp_path, "chat", "--plain", stdin=b"hello\n")  # one real session
    before = sessions(tmp_path)
    out = kairox(tmp_path, "chat", "--plain", "--session", "s-unknown", stdin=b"hi\n")
    err = out.stderr.decode()
    assert out.returncode == 2 and "Traceback" not in err, err
    assert "no session 's-unknown'" in err and "kairox sessions" in err and "--create" in err
    assert sessions(tmp_path) == before


@pytest.mark.slow
def test_chat_create_starts_a_session_with_the_id_given(tmp_path: Path) -> None:
    out = kairox(tmp_path, "chat", "--plain", "--session", "s-mine", "--create", stdin=b"hi\n")
    assert out.returncode == 0, out.stderr
    assert sessions(tmp_path) == ["s-mine"]
    again = kairox(tmp_path, "chat", "--plain", "--session", "s-mine", stdin=b"again\n")
    assert again.returncode == 0, again.stderr
    assert sessions(tmp_path) == ["s-mine"]


@pytest.mark.slow
def test_create_needs_a_session_id(tmp_path: Path) -> None:
    out = kairox(tmp_path, "chat", "--plain", "--create", stdin=b"hi\n")
    assert out.returncode == 2 and b"--create needs --session" in out.stderr


@pytest.mark.slow
def test_plain_chat_ends_with_the_command_that_resumes_the_session(tmp_path: Path) -> None:
    out = kairox(tmp_path, "chat", "--plain", stdin=b"hello\n")
    assert out.returncode == 0, out.stderr
    (sid,) = sessions(tmp_path)
    last = out.stderr.decode().splitlines()[-1]
    assert last == f"kairox: session {sid}; resume it with: kairox chat --session {sid}"


@pytest.mark.slow  # starts the CLI twice (DEVELOPERS.md: test tiers)
def test_the_printed_resume_command_resumes_a_session_of_another_workspace(
    tmp_path: Path,
) -> None:
    out = kairox(tmp_path, "chat", "--plain", "--workspace", "proj", stdin=b"hello\n")
    assert out.returncode == 0, out.stderr
    command = out.stderr.decode().splitlines()[-1].split("resume it with: ", 1)[1]
    assert command.startswith("kairox chat --session ") and "--workspace" not in command
    again = kairox(tmp_path, *command.split()[1:], "--plain", stdin=b"again\n")
    err = again.stderr.decode()
    assert again.returncode == 0, err
    assert "(workspace 'proj'" in err and "belongs to workspace" not in err


async def test_plain_chat_replaces_lone_surrogates_in_any_stream(
    tmp_path: Path, kairox_home: Path
) -> None:
    import io

    from kairox_core.chat.engine import ChatEngine
    from kairox_core.chat.plain import PlainChat
    from kairox_core.config import parse_config
    from kairox_core.events import UserMessageAdded
    from kairox_core.providers.scripted import ScriptedProvider

    engine = ChatEngine.open(parse_config({}), tmp_path / "k.db", provider=ScriptedProvider(["ok"]))
    err = io.StringIO()
    chat = PlainChat(engine, ["fine\n", "a\ud800b\udcffc\n"], io.StringIO(), err)
    assert await chat.run() == 0, err.getvalue()
    prompts = [
        e.text for e in engine.kx.events(engine.session_id) if isinstance(e, UserMessageAdded)
    ]
    # \udcff is an escaped byte 0xff (invalid alone); \ud800 came from no byte at all
    assert prompts == ["fine", "a\ufffdb\ufffdc"]
    assert "line 2: bytes that are not UTF-8" in err.getvalue()
    assert "line 1:" not in err.getvalue()
    await engine.close()


@pytest.mark.slow
def test_the_resume_command_repeats_the_config_and_database_given(tmp_path: Path) -> None:
    conf, db = tmp_path / "my conf.toml", tmp_path / "chat.db"
    conf.write_text(SCRIPTED)
    env = {k: v for k, v in os.environ.items() if k not in ("KAIROX_CONFIG", "KAIROX_DB")}
    args = ["--config", str(conf), "--db", str(db), "chat", "--plain"]
    out = subprocess.run(
        [sys.executable, "-m", "kairox_core", *args],
        input=b"hello\n",
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    last = out.stderr.decode().splitlines()[-1]
    assert last.endswith(
        f"kairox --config '{conf}' --db {db} chat --session {last.split()[2][:-1]}"
    )


def test_the_resume_command_keeps_a_database_url_as_written(tmp_path: Path) -> None:
    from kairox_core.cli.chat_cmd import _as_given

    url = "postgresql://kairox@/team?host=/run/pg"
    assert _as_given(url) == url  # a Path would have folded '//' and made it relative
    keep = "postgresql://kairox:$env:PGPASS@db.internal:5432/team"
    assert _as_given(keep) == keep
    assert _as_given("postgresql://kairox:s3cret@db.internal/team") == (
        "postgresql://kairox:***@db.internal/team"
    )
    assert _as_given(str(tmp_path / "k.db")) == str(tmp_path / "k.db")
    assert _as_given("rel.db") == str(Path("rel.db").absolute())
