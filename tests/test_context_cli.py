"""``kairox context`` and ``kairox sessions``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kairox_core import Kairox
from kairox_core.cli import cli, context_cmd

context_cmd.register(cli)

TOML = """
[kairox]
system_prompt = "You are terse."
[profiles.default]
model = "gpt-4o"
context_window = 3000
reserve = 200
[profiles.tiny]
model = "gpt-4o"
context_window = 60
reserve = 10
"""


@pytest.fixture
def setup(kairox_home: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    toml = tmp_path / "kairox.toml"
    toml.write_text(TOML)
    db = tmp_path / "kx.db"
    with Kairox.open(db, toml) as kx:
        s = kx.session(workspace="w1")
        s.run_turn_sync("I like tea.", 'Noted. <memory scope="user" key="drink">tea</memory>')
        kx.approvals.accept(kx.approvals.pending()[0].id)
        s.run_turn_sync(
            "Look it up",
            "Found it.",
            tool_results=[
                {"tool_call_id": "c1", "tool_name": "search", "result": "tea is a drink"}
            ],
        )
        sid = s.id
    return toml, db, sid


def run(setup: tuple[Path, Path, str], *args: str, code: int = 0) -> Result:
    toml, db, _ = setup
    result = CliRunner().invoke(cli, ["--config", str(toml), "--db", str(db), *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_help_texts() -> None:
    for command in (context_cmd.context_command, context_cmd.sessions_command):
        assert command.help
        assert "Usage" in CliRunner().invoke(cli, [command.name or "", "--help"]).output


def test_sessions_lists_them(setup: tuple[Path, Path, str]) -> None:
    _, _, sid = setup
    rows = json.loads(run(setup, "sessions", "--json").output)
    assert [(r["session_id"], r["workspace_id"], r["profile"]) for r in rows] == [
        (sid, "w1", "default")
    ]
    assert sid in run(setup, "sessions").output
    assert json.loads(run(setup, "sessions", "--workspace", "other", "--json").output) == []


def test_sessions_without_a_database(kairox_home: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "none.db"), "sessions"])
    assert result.exit_code == 0 and "no sessions yet" in result.output
    assert not (tmp_path / "none.db").exists()


def test_context_json_layer_by_layer(setup: tuple[Path, Path, str]) -> None:
    _, _, sid = setup
    data: dict[str, Any] = json.loads(
        run(setup, "context", sid, "--prompt", "what do I drink?", "--json").output
    )
    trace = data["trace"]
    assert data["session"] == sid and trace["budget"] == 2800
    layers = trace["layers"]
    assert layers["memories"]["included"][0]["label"] == "user:drink"
    assert layers["history"]["messages"] == 6  # 2 turns: 4 messages + a tool call + result
    assert layers["prompt"]["tokens"] > 0 and trace["total"] <= trace["budget"]
    assert data["messages"][-1] == {"role": "user", "content": "what do I drink?"}
    assert sum(layer["tokens"] for layer in layers.values()) + 3 == trace["total"]


def test_context_table_shows_layers_and_drops(setup: tuple[Path, Path, str]) -> None:
    _, _, sid = setup
    out = run(setup, "context", sid, "--profile", "default", "--prompt", "x " * 2700).output
    for word in ("memories", "history", "new prompt", "budget 2800", "left out", "budget full"):
        assert word in out, out
    shown = run(setup, "context", sid, "--messages").output
    assert "<kairox:memories>" in shown and "You are terse." in shown


def test_context_does_not_write(setup: tuple[Path, Path, str]) -> None:
    _, _, sid = setup
    before = json.loads(run(setup, "sessions", "--json").output)[0]["event_count"]
    run(setup, "context", sid, "--prompt", "hello")
    assert json.loads(run(setup, "sessions", "--json").output)[0]["event_count"] == before


def kairox(setup: tuple[Path, Path, str], *args: str) -> subprocess.CompletedProcess[str]:
    toml, db, _ = setup
    exe = Path(sys.executable).parent / "kairox"
    env = {**os.environ, "KAIROX_CONFIG": str(toml), "KAIROX_DB": str(db)}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.slow
def test_budget_exceeded_is_a_clear_error(setup: tuple[Path, Path, str]) -> None:
    _, _, sid = setup
    proc = kairox(setup, "context", sid, "--profile", "tiny", "--prompt", "word " * 100)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "does not fit the context budget of profile 'tiny'" in proc.stderr
    assert "new prompt" in proc.stderr and "system prompt" in proc.stderr
    assert "budget is 50" in proc.stderr


@pytest.mark.slow
def test_unknown_session_is_a_clear_error(setup: tuple[Path, Path, str]) -> None:
    proc = kairox(setup, "context", "s-nope")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no session 's-nope'" in proc.stderr and "kairox sessions" in proc.stderr
