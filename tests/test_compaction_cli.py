"""``kairox compact``, ``events``, ``pin`` and ``summary show|edit|drop``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kairox_core import Kairox
from kairox_core.cli import cli, compaction_cmd, longterm_cmd, main

compaction_cmd.register(cli)
longterm_cmd.register(cli)

TOML = """
[profiles.default]
model = "gpt-4o"
context_window = 8000
reserve = 500
[compaction]
strategy = "extractive"
keep_recent_exchanges = 1
target_tokens = 200
"""


@pytest.fixture
def setup(kairox_home: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    toml = tmp_path / "kairox.toml"
    toml.write_text(TOML)
    db = tmp_path / "kx.db"
    with Kairox.open(db, toml) as kx:
        s = kx.session(workspace="w1")
        for i in range(4):
            s.run_turn_sync(
                f"Alice booked room {100 + i} for the 3 May workshop.",
                f"Booked room {100 + i}; Bob confirmed catering for {20 + i}.",
            )
        sid = s.id
    return toml, db, sid


def run(setup: tuple[Path, Path, str], *args: str, code: int = 0) -> Result:
    toml, db, _ = setup
    result = CliRunner().invoke(cli, ["--config", str(toml), "--db", str(db), *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def fail(setup: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str], *args: str) -> str:
    toml, db, _ = setup
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(toml), "--db", str(db), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("kairox: error:")
    return err


def test_help_texts() -> None:
    for name in ("compact", "events", "pin", "unpin", "summary"):
        out = CliRunner().invoke(cli, [name, "--help"]).output
        assert "Usage" in out and len(out.splitlines()) > 4
    for sub in ("show", "edit", "drop"):
        assert "Usage" in CliRunner().invoke(cli, ["summary", sub, "--help"]).output


def test_compact_then_audit_edit_pin_drop(setup: tuple[Path, Path, str]) -> None:
    _, db, sid = setup
    out = run(setup, "compact", sid, "--json").output
    result = json.loads(out)
    assert result["status"] == "completed" and result["strategy"] == "extractive"
    seq = result["summary_seq"]
    shown = run(setup, "summary", "show", sid).output
    assert f"summary seq {seq}" in shown and "0: " in shown
    run(
        setup,
        "summary",
        "edit",
        sid,
        str(seq),
        "--text",
        "Alice booked rooms 100-102.\nBob handles catering.\nWorkshop on 3 May.",
    )
    dropped = run(setup, "summary", "drop", sid, str(seq), "1").output
    assert "Bob handles catering." in dropped
    pinned = run(setup, "pin", sid, "Budget cap: 4,000 EUR.").output
    assert pinned.startswith("pinned f-")
    lines = run(setup, "events", sid, "--json").output.splitlines()
    kinds = [json.loads(line)["type"] for line in lines]
    for t in (
        "ContextCompactionStarted",
        "CompactionSummary",
        "ContextCompactionCompleted",
        "SummaryEdited",
        "ChunkDropped",
        "FactPinned",
    ):
        assert t in kinds
    assert kinds.count("UserMessageAdded") == 4  # originals stay
    only = run(setup, "events", sid, "--json", "--type", "CompactionSummary").output
    assert [json.loads(x)["type"] for x in only.splitlines()] == ["CompactionSummary"]
    table = run(setup, "events", sid).output
    assert "CompactionSummary" in table and "first_seq=" in table
    with Kairox.open(db, setup[0]) as kx:
        text = "\n".join(
            str(m.get("content")) for m in kx.get_session(sid).preview_sync("next").messages
        )
    assert "Workshop on 3 May." in text and "Bob handles catering." not in text
    assert "Budget cap: 4,000 EUR." in text
    fact_id = pinned.split()[1]
    assert run(setup, "unpin", sid, fact_id).output.startswith(f"unpinned {fact_id} at seq ")
    with Kairox.open(db, setup[0]) as kx:
        session = kx.get_session(sid)
        assert session.refresh_compaction().pinned == []
        text = "\n".join(str(m.get("content")) for m in session.preview_sync("next").messages)
        kinds = [e.type for e in kx.events(sid)]
    assert "Budget cap: 4,000 EUR." not in text
    assert kinds.index("FactPinned") < kinds.index("FactUnpinned")  # both in the audit


def test_pinned_facts_are_mandatory(
    setup: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A pin is never dropped for room: if the pins do not fit, the turn is refused."""
    from kairox_core.context import ContextBudgetExceeded

    toml, db, sid = setup
    with Kairox.open(db, toml) as kx:
        session = kx.get_session(sid)
        fact = session.pin_fact_sync("The vault code is 7-7-1. " * 3)
        for prompt in ("hi", "Alice booked room " * 200):
            assert fact.text in "\n".join(
                str(m.get("content")) for m in session.preview_sync(prompt).messages
            )
        session.pin_fact_sync("filler " * 9000)
        with pytest.raises(ContextBudgetExceeded) as exc:
            session.preview_sync("hi")
        assert "pinned facts" in exc.value.parts and "kairox unpin" in str(exc.value)
    assert "no pinned fact 'f-nope'" in fail(setup, capsys, "unpin", sid, "f-nope")


def test_compact_range_and_nothing_left(setup: tuple[Path, Path, str]) -> None:
    sid = setup[2]
    out = run(setup, "compact", sid, "--range", "2:4").output
    assert out.startswith("completed: seqs 2-4")  # the first exchange (user, delta, reply)
    out = run(setup, "compact", sid, "--range", "2:4").output
    assert out.startswith("skipped: nothing to compact in seqs 2-4")


def test_user_errors_exit_2(
    setup: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    sid = setup[2]
    assert "is not a seq range" in fail(setup, capsys, "compact", sid, "--range", "x")
    assert "is empty" in fail(setup, capsys, "compact", sid, "--range", "9:3")
    assert "no session 'nope'" in fail(setup, capsys, "events", "nope")
    assert "no compaction summary at seq 3" in fail(setup, capsys, "summary", "drop", sid, "3", "0")
    assert "needs some text" in fail(setup, capsys, "pin", sid, " ")


async def test_chat_plain_compact_command(kairox_home: Path, tmp_path: Path) -> None:
    import io

    from kairox_core.chat.engine import ChatEngine
    from kairox_core.chat.plain import PlainChat
    from kairox_core.config import parse_config
    from kairox_core.providers.scripted import ScriptedProvider

    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 512}},
            "compaction": {"keep_recent_exchanges": 1},
        }
    )
    engine = ChatEngine.open(
        config, tmp_path / "k.db", provider=ScriptedProvider(["Alice booked room 101 on 3 May."])
    )
    out, err = io.StringIO(), io.StringIO()
    chat = PlainChat(engine, io.StringIO("book a room\nand lunch\n/compact\n"), out, err)
    assert await chat.run() == 0
    assert "compacted: seqs 2-" in err.getvalue() and "summarised by extractive" in err.getvalue()
    await engine.close()


@pytest.mark.slow
async def test_memory_view_compacts_pins_edits_and_drops(kairox_home: Path, tmp_path: Path) -> None:
    from textual.widgets import TextArea

    from kairox_core.chat.app import ChatApp
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.config import parse_config
    from kairox_core.events import ChunkDropped, FactPinned, SummaryEdited
    from kairox_core.providers.scripted import ScriptedProvider

    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 512}},
            "compaction": {"keep_recent_exchanges": 1},
        }
    )
    engine = ChatEngine.open(
        config, tmp_path / "k.db", provider=ScriptedProvider(["Alice booked room 101 on 3 May."])
    )
    for prompt in ("book a room", "and lunch"):
        await engine.run_turn(prompt, lambda _: None)
    app = ChatApp(engine)

    async def edit(pilot: Any, key: str, text: str) -> None:
        await pilot.press(key)
        await pilot.pause()
        app.screen.query_one(TextArea).text = text
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        await pilot.pause()

    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+y")
        await pilot.pause()
        await pilot.press("c")  # compact now
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert engine.session.refresh_compaction().summaries
        await edit(pilot, "p", "Room 101 is booked.")
        await edit(pilot, "s", "line zero\nline one")
        await edit(pilot, "x", "1")
    events = engine.kx.events(engine.session_id)
    assert [e.text for e in events if isinstance(e, FactPinned)] == ["Room 101 is booked."]
    assert [e.text for e in events if isinstance(e, SummaryEdited)] == ["line zero\nline one"]
    assert [e.text for e in events if isinstance(e, ChunkDropped)] == ["line one"]
    assert engine.session.refresh_compaction().summaries[0].text == "line zero"
    await engine.close()


def test_one_line_numbering_for_show_drop_and_from_summary(setup: tuple[Path, Path, str]) -> None:
    sid = setup[2]
    seq = json.loads(run(setup, "compact", sid, "--json").output)["summary_seq"]
    text = "Alice booked rooms 100-102.\n\nBob handles catering.\nWorkshop on 3 May."
    run(setup, "summary", "edit", sid, str(seq), "--text", text)
    run(setup, "summary", "drop", sid, str(seq), "0")
    shown = run(setup, "summary", "show", sid).output
    assert "  2: Bob handles catering.\n  3: Workshop on 3 May.\n" in shown
    kept = run(setup, "longterm", "add", "--session", sid, "--from-summary", f"{seq}:3").output
    assert "(session): Workshop on 3 May." in kept  # session: the default scope
    assert "Bob handles catering." in run(setup, "summary", "drop", sid, str(seq), "2").output
    show, drop, add = (
        " ".join(CliRunner().invoke(cli, [*cmd, "--help"]).output.split())
        for cmd in (["summary", "show"], ["summary", "drop"], ["longterm", "add"])
    )
    assert "summary drop" in show and "--from-summary" in show
    assert "as `kairox summary show` prints" in drop and "`kairox summary show` prints" in add
    assert "Default: session" in add
