"""``kairox_core.usage`` and ``kairox usage``: turns and compaction spend from events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kairox_core import Kairox
from kairox_core.cli import cli, main, usage_cmd
from kairox_core.config import parse_config
from kairox_core.events import AssistantMessageCompleted, UserMessageAdded
from kairox_core.facade import UnknownSessionError
from kairox_core.testing.fake_openai import FakeOpenAIServer, serve
from kairox_core.usage import Totals, session_usage, usage

usage_cmd.register(cli)

PROFILE = {"default": {"model": "gpt-4o", "context_window": 8000, "reserve": 500}}


def config_for(strategy: str, summariser: dict[str, Any] | None = None) -> Any:
    compaction: dict[str, Any] = {"strategy": strategy, "keep_recent_exchanges": 1}
    providers: dict[str, Any] = {}
    if summariser is not None:
        providers["summariser"] = summariser
        compaction["provider"] = "summariser"
    return parse_config({"profiles": PROFILE, "providers": providers, "compaction": compaction})


def three_turns(kx: Kairox) -> str:
    """A reported turn, one a provider counted itself, one with no usage at all."""
    s = kx.session(workspace="w")
    turn = s.begin_turn_sync("Alice booked room 101 for 3 May.")
    turn.complete_sync(
        "Booked.",
        model="gpt-4o",
        provider="openai",
        usage={"prompt_tokens": 900, "completion_tokens": 12},
    )
    turn = s.begin_turn_sync("Bob brings lunch for 12.")
    turn.complete_sync(
        "Noted.", usage={"prompt_tokens": 950, "completion_tokens": 3, "estimated": 1}
    )
    s.run_turn_sync("And the projector?", "Room 101 has one.")
    return str(s.id)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    yield from serve(reply="Alice booked room 101 on 3 May.", models=("summary-model",))


def test_turns_reported_estimated_and_counted(kairox_home: Path, tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "k.db", config_for("extractive")) as kx:
        sid = three_turns(kx)
        (report,) = usage(kx, sid).sessions
        events = kx.events(sid)
    reported, local, counted = report.turns
    assert (reported.prompt_tokens, reported.completion_tokens, reported.estimated) == (
        900,
        12,
        False,
    )
    assert (reported.model, reported.provider) == ("gpt-4o", "openai")
    assert (local.prompt_tokens, local.completion_tokens, local.estimated) == (950, 3, True)
    # no usage: the stored counts of what the turn sent and received, marked estimated
    user = [e for e in events if isinstance(e, UserMessageAdded)][-1]
    reply = [e for e in events if isinstance(e, AssistantMessageCompleted)][-1]
    assert counted.estimated and counted.seq == reply.seq
    assert (counted.prompt_tokens, counted.completion_tokens) == (user.tokens, reply.tokens)
    assert counted.prompt_tokens > 0 and counted.completion_tokens > 0
    t = report.totals
    assert (t.turns, t.estimated_turns, t.compactions, t.compaction_tokens) == (3, 2, 0, 0)
    assert t.prompt_tokens == 900 + 950 + counted.prompt_tokens
    assert t.total_tokens == t.turn_tokens == sum(x.total_tokens for x in report.turns)


def test_extractive_compaction_reads_and_writes_but_spends_nothing(
    kairox_home: Path, tmp_path: Path
) -> None:
    with Kairox.open(tmp_path / "k.db", config_for("extractive")) as kx:
        sid = three_turns(kx)
        assert kx.compact(sid).ok
        (c,) = usage(kx, sid).sessions[0].compactions
    assert (c.strategy, c.model, c.uses_model, c.estimated) == ("extractive", None, False, False)
    assert c.tokens_in > 0 and c.tokens_out > 0
    assert c.prompt_tokens == c.completion_tokens == c.total_tokens == 0
    assert (c.first_seq, c.last_seq) == (2, 7)  # the two older exchanges


def test_model_compaction_on_a_scripted_provider_is_model_spend(
    kairox_home: Path, tmp_path: Path
) -> None:
    scripted = {"kind": "scripted", "replies": ["Alice booked room 101 on 3 May."]}
    with Kairox.open(tmp_path / "k.db", config_for("model", scripted)) as kx:
        sid = three_turns(kx)
        assert kx.compact(sid).ok
        report = usage(kx, sid).sessions[0]
    (c,) = report.compactions
    assert (c.strategy, c.uses_model) == ("model", True)
    assert c.prompt_tokens > c.tokens_in > 0 and c.completion_tokens > 0
    assert c.estimated  # the scripted provider counts locally and says so
    t = report.totals
    assert (t.compactions, t.compaction_prompt_tokens) == (1, c.prompt_tokens)
    assert t.total_tokens == t.turn_tokens + c.total_tokens


def test_model_compaction_with_reported_usage(
    kairox_home: Path, tmp_path: Path, server: FakeOpenAIServer
) -> None:
    summariser = {
        "kind": "openai",
        "base_url": server.base_url,
        "model": "summary-model",
        "retry_backoff": 0.0,
    }
    with Kairox.open(tmp_path / "k.db", config_for("model", summariser)) as kx:
        sid = three_turns(kx)
        assert kx.compact(sid).ok
        (c,) = usage(kx, sid).sessions[0].compactions
    assert (c.model, c.uses_model, c.estimated) == ("summary-model", True, False)
    assert c.prompt_tokens > 0 and c.completion_tokens > 0


def test_every_session_and_unknown_ones(kairox_home: Path, tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "k.db", config_for("extractive")) as kx:
        first, second = three_turns(kx), three_turns(kx)
        report = usage(kx)
        assert [s.session_id for s in report.sessions] == [first, second]
        assert report.totals.turns == 6
        assert report.totals.total_tokens == 2 * report.sessions[0].totals.total_tokens
        with pytest.raises(UnknownSessionError, match="no session 'nope'"):
            usage(kx, "nope")
    assert session_usage("x", []).totals.total_tokens == 0


async def test_a_chat_turn_records_the_providers_own_count_as_estimated(
    kairox_home: Path, tmp_path: Path
) -> None:
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.providers.scripted import ScriptedProvider

    engine = ChatEngine.open(
        parse_config({"profiles": PROFILE}), tmp_path / "k.db", provider=ScriptedProvider(["Hi."])
    )
    await engine.run_turn("hello", lambda _: None)
    (turn,) = usage(engine.kx, engine.session_id).sessions[0].turns
    user = next(e for e in engine.history() if isinstance(e, UserMessageAdded))
    assert turn.estimated and turn.model == "scripted"
    assert turn.prompt_tokens > (user.tokens or 0)  # the whole context sent, system prompt included
    await engine.close()


# --- the command ------------------------------------------------------------------------


def invoke(db: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--db", str(db), "usage", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.mark.slow
def test_cli_table_detail_and_json(kairox_home: Path, tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    toml = tmp_path / "kairox.toml"
    toml.write_text(
        '[compaction]\nstrategy = "model"\nprovider = "summariser"\nkeep_recent_exchanges = 1\n'
        '[providers.summariser]\nkind = "scripted"\nreplies = ["Alice booked room 101."]\n'
    )
    with Kairox.open(db, toml) as kx:
        sid = three_turns(kx)
        other = three_turns(kx)
        assert kx.compact(sid).ok
        expected = usage(kx, sid).as_dict()
    out = invoke(db)
    assert sid in out and other in out and "all sessions" in out
    detail = invoke(db, sid)
    assert "turns of" in detail and "compactions of" in detail and "model" in detail
    assert "~" in detail and "estimated" in detail
    assert json.loads(invoke(db, sid, "--json")) == expected
    everything = json.loads(invoke(db, "--json"))
    assert everything["totals"]["turns"] == 6 and everything["totals"]["compactions"] == 1


def test_cli_without_sessions_help_and_errors(
    kairox_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "none.db"
    assert invoke(db) == "no sessions yet\n"
    assert json.loads(invoke(db, "--json")) == {"sessions": [], "totals": Totals().as_dict()}
    help_text = CliRunner().invoke(cli, ["usage", "--help"]).output
    assert "compaction" in help_text and "--json" in help_text
    for target in (db, tmp_path / "k.db"):
        if target != db:
            with Kairox.open(target, config_for("extractive")) as kx:
                three_turns(kx)
        with pytest.raises(SystemExit) as exc:
            main(["--db", str(target), "usage", "nope"])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("kairox: error: no session 'nope'") and "Traceback" not in err
    result = CliRunner().invoke(cli, ["--db", str(db), "usage", "--frobnicate"])
    assert result.exit_code == 2
