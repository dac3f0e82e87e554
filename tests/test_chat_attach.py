"""/attach PATH in the TUI and plain mode, and ``kairox chat --plain --attach PATH``: the
file goes with the next prompt, recorded on its ``UserMessageAdded``."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Input

from kairox_core.attachments import MAX_BYTES
from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.plain import PlainChat
from kairox_core.chat.widgets import ChatMessage
from kairox_core.config import parse_config
from kairox_core.events import UserMessageAdded
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.testing.files import BROKEN_PDF, ZIP, encrypted_pdf, pdf_with

PNG = b"\x89PNG\r\n\x1a\n" + bytes(25)


def bad_files(tmp_path: Path) -> list[tuple[Path, str]]:
    """Files no surface may attach, and what the error must say about each."""
    files = [
        ("locked.pdf", encrypted_pdf(), "the PDF is encrypted"),
        ("broken.pdf", BROKEN_PDF, "the PDF cannot be read"),
        ("archive.zip", ZIP, "not a type Kairox reads"),
    ]
    out = []
    for name, data, said in files:
        (tmp_path / name).write_bytes(data)
        out.append((tmp_path / name, said))
    with open(tmp_path / "big.txt", "wb") as big:
        big.truncate(MAX_BYTES + 1)  # sparse: the size is checked before anything is read
    out.append((tmp_path / "big.txt", f"is over the limit of {MAX_BYTES:,}"))
    return out


def engine_for(tmp_path: Path) -> ChatEngine:
    config = parse_config({"retrieval": {"workspace_index": False}})
    return ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(["Read it."]))


def prompts(engine: ChatEngine) -> list[UserMessageAdded]:
    return [e for e in engine.history() if isinstance(e, UserMessageAdded)]


@pytest.mark.slow
async def test_attach_in_the_tui_goes_with_the_next_message(
    tmp_path: Path, kairox_home: Path
) -> None:
    (tmp_path / "notes.txt").write_text("The launch moved to 4 March.", encoding="utf-8")
    engine = engine_for(tmp_path)
    app = ChatApp(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one("#prompt", Input)
        bad = bad_files(tmp_path)
        lines = [f"/attach {tmp_path / 'missing.pdf'}", *(f"/attach {p}" for p, _ in bad)]
        for line in [*lines, f"/attach {tmp_path / 'notes.txt'}"]:
            prompt.value = line
            await pilot.press("enter")
            await pilot.pause()
        notes = [m.text for m in app.query(ChatMessage) if m.role in ("note", "error")]
        assert any("no such file" in n for n in notes)
        for path, said in bad:
            assert any(f"{path.name}: " in n and said in n for n in notes), said
        assert any(n.startswith("attached notes.txt (text, 28 characters)") for n in notes)
        prompt.value = "what changed?"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        said = [m.text for m in app.query(ChatMessage) if m.role == "user"]
        assert said == ["what changed?  [attached: notes.txt]"]
    provider = engine.provider
    assert isinstance(provider, ScriptedProvider)
    sent = str(provider.calls[-1][-1]["content"])
    assert sent.startswith("what changed?") and "The launch moved to 4 March." in sent
    (asked,) = prompts(engine)
    assert [a["filename"] for a in asked.attachments] == ["notes.txt"] and engine.staged == []
    await engine.close()


async def test_attach_in_plain_mode(tmp_path: Path, kairox_home: Path) -> None:
    (tmp_path / "login.png").write_bytes(PNG)
    engine = engine_for(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    lines = io.StringIO(f"/attach {tmp_path / 'login.png'}\nwhy does this fail?\n")
    assert await PlainChat(engine, lines, out, err).run() == 0
    assert "attached login.png (image, image/png)" in err.getvalue()
    (asked,) = prompts(engine)
    assert asked.attachments[0]["kind"] == "image" and asked.text == "why does this fail?"
    await engine.close()


async def test_bad_files_in_plain_mode_are_errors_and_the_chat_goes_on(
    tmp_path: Path, kairox_home: Path
) -> None:
    bad = bad_files(tmp_path)
    engine = engine_for(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    lines = io.StringIO("".join(f"/attach {p}\n" for p, _ in bad) + "still there?\n")
    assert await PlainChat(engine, lines, out, err).run() == 1  # 1: a line failed
    for path, said in bad:
        assert f"{path.name}: " in err.getvalue() and said in err.getvalue(), said
    (asked,) = prompts(engine)
    assert asked.text == "still there?" and asked.attachments == ()
    await engine.close()


def kairox(
    tmp_path: Path, *args: str, stdin: bytes, columns: int = 80
) -> subprocess.CompletedProcess[bytes]:
    conf = tmp_path / "kairox.toml"
    conf.write_text('[providers.demo]\nkind = "scripted"\nreplies = ["ok"]\n')
    env = {**os.environ, "KAIROX_DB": str(tmp_path / "k.db"), "KAIROX_CONFIG": str(conf)}
    env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "kairox_core", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_chat_plain_attach_and_its_errors(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Plan\nship on Fridays\n", encoding="utf-8")
    (tmp_path / "report.pdf").write_bytes(pdf_with(["Revenue rose", "Costs fell"]))
    attach = ["--attach", str(tmp_path / "notes.md"), "--attach", str(tmp_path / "report.pdf")]
    out = kairox(tmp_path, "chat", "--plain", *attach, stdin=b"sum up\n")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.decode().split("--session ")[-1].strip()
    events = kairox(tmp_path, "events", sid, "--json", "--type", "UserMessageAdded", stdin=b"")
    (asked,) = [json.loads(line) for line in events.stdout.decode().splitlines()]
    notes, report = asked["payload"]["attachments"]
    assert notes["text"] == "# Plan\nship on Fridays\n"
    assert base64.b64decode(report["data"]) == (tmp_path / "report.pdf").read_bytes()
    table = kairox(tmp_path, "events", sid, "--type", "UserMessageAdded", stdin=b"", columns=400)
    shown = table.stdout.decode()
    assert "report.pdf (application/pdf, 2 pages, 24 characters, original kept" in shown
    for path, said in [(tmp_path / "nope.pdf", "no such file"), *bad_files(tmp_path)]:
        bad = kairox(tmp_path, "chat", "--plain", "--attach", str(path), stdin=b"hi\n")
        err = bad.stderr.decode()
        assert bad.returncode == 2 and said in err and "Traceback" not in err, err
