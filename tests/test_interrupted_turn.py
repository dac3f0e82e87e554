"""An interrupted turn is visible: a process killed mid-reply leaves a prompt with no
reply, and ``kairox events``, the TUI (and the web app, tests_web) say the turn was
interrupted (derived when read, kairox_core/turn_status.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.widgets import ChatMessage
from kairox_core.cli import cli, compaction_cmd
from kairox_core.events import AssistantMessageCompleted, Event, UserMessageAdded
from kairox_core.facade import Kairox
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.store.leases import HOST
from kairox_core.testing.multiprocess import INTERRUPTED_PROMPT, config, kill_mid_reply
from kairox_core.turn_status import INTERRUPTED_NOTE, interrupted_turns

compaction_cmd.register(cli)  # `kairox events` (as tests/test_compaction_cli.py does)

TIMEOUT = 240  # a hang guard for the child, never a speed claim
ME = os.getpid()


def prompt(seq: int, turn: str, pid: int | None = ME, host: str | None = HOST) -> Event:
    return UserMessageAdded(
        session_id="s", seq=seq, turn_id=turn, text="q", writer_pid=pid, writer_host=host
    )


def reply(seq: int, turn: str) -> Event:
    return AssistantMessageCompleted(session_id="s", seq=seq, turn_id=turn, text="a")


def dead_except(*pids: int) -> object:
    return lambda pid: pid in pids


def test_a_turn_whose_writer_is_gone_is_interrupted() -> None:
    events = [prompt(1, "t1", pid=4242), reply(2, "t1"), prompt(3, "t2", pid=4242)]
    (turn,) = interrupted_turns(events, alive=dead_except())
    assert (turn.turn_id, turn.prompt_seq, turn.last_seq) == ("t2", 3, 3)
    assert turn.as_dict()["note"] == INTERRUPTED_NOTE


def test_a_turn_in_flight_is_not_interrupted() -> None:
    # its writer runs (here or in another process), and it has not moved on
    events = [prompt(1, "t1"), reply(2, "t1"), prompt(3, "t2", pid=4242)]
    assert interrupted_turns(events, alive=dead_except(ME, 4242)) == []
    # a writer on another host: only its later turns tell
    assert interrupted_turns([prompt(1, "t1", pid=7, host="elsewhere")]) == []


def test_a_writer_that_moved_on_interrupted_its_earlier_turn() -> None:
    # another writer's turns in between (two processes on one session) change nothing
    events = [
        prompt(1, "a1", pid=ME),
        prompt(2, "b1", pid=4242),
        reply(3, "b1"),
        prompt(4, "a2", pid=ME),
        prompt(5, "b2", pid=4242),
    ]
    found = interrupted_turns(events, alive=dead_except(ME, 4242))
    assert [t.turn_id for t in found] == ["a1"]


def test_turns_written_before_writers_were_recorded_count_only_when_followed() -> None:
    events = [prompt(1, "t1", None, None), prompt(2, "t2", None, None)]
    assert [t.turn_id for t in interrupted_turns(events)] == ["t1"]


def test_answered_turns_are_never_interrupted() -> None:
    events = [prompt(1, "t1", pid=4242), reply(2, "t1")]
    assert interrupted_turns(events, alive=dead_except()) == []


def test_a_turn_of_this_process_records_its_writer(kairox_home: Path, tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "kx.db", config(enabled=False)) as kx:
        session = kx.session(workspace="w")
        turn = session.begin_turn_sync("hello")
        (event,) = [e for e in kx.events(session.id) if isinstance(e, UserMessageAdded)]
        assert (event.writer_pid, event.writer_host) == (ME, HOST)
        assert interrupted_turns(kx.events(session.id)) == []  # in flight here
        turn.abort_sync()
        session.run_turn_sync("again", "answered")
        # the aborted turn has no reply and this process went on to another turn
        assert [t.turn_id for t in interrupted_turns(kx.events(session.id))] == [turn.turn_id]


@pytest.mark.slow
async def test_a_turn_killed_mid_reply_shows_as_interrupted(
    kairox_home: Path, tmp_path: Path
) -> None:
    db = tmp_path / "kx.db"
    sid = "garden"
    kill_mid_reply(db, sid, timeout=TIMEOUT)

    with Kairox.open(db, config(enabled=False)) as kx:
        events = kx.events(sid)
    (turn,) = interrupted_turns(events)
    prompts = {e.turn_id: e.text for e in events if isinstance(e, UserMessageAdded)}
    assert prompts[turn.turn_id] == INTERRUPTED_PROMPT

    # kairox events: a TurnInterrupted line after the turn's last event
    toml = tmp_path / "kairox.toml"
    toml.write_text('[profiles.default]\nmodel = "gpt-4o"\n')
    out = CliRunner().invoke(
        cli, ["--config", str(toml), "--db", str(db), "events", sid], env={"COLUMNS": "300"}
    )
    assert out.exit_code == 0, out.output
    assert "TurnInterrupted" in out.output and "no reply was recorded" in out.output
    lines = CliRunner().invoke(
        cli, ["--config", str(toml), "--db", str(db), "events", sid, "--json"]
    )
    assert f'"turn_id": "{turn.turn_id}"' in lines.output and '"derived": true' in lines.output

    # the TUI, resuming the session: a note right under the interrupted prompt
    engine = ChatEngine.open(
        config(enabled=False), db, session_id=sid, provider=ScriptedProvider(["ok"])
    )
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        texts = [m.text for m in app.query(ChatMessage)]
    at = texts.index(INTERRUPTED_PROMPT)
    assert texts[at + 1] == INTERRUPTED_NOTE, texts
    assert texts.count(INTERRUPTED_NOTE) == 1  # the answered turn is not marked
