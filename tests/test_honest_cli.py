"""The CLI tells the truth: ``kairox context`` shows what a chat turn sends, ``kairox
search --k`` returns k hits when k exist, ``kairox index`` notices a backend switch."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kairox_core.chat.engine import ChatEngine
from kairox_core.cli import main
from kairox_core.config import load_config_file
from kairox_core.prompt import MEMORY_PROTOCOL
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.fusion import rrf_fuse


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def toml(kairox_home: Path, tmp_path: Path) -> Path:
    path = tmp_path / "kairox.toml"
    path.write_text(
        '[kairox]\ndatabase = "kx.db"\n[profiles.default]\ncontext_window = 8000\nreserve = 500\n'
    )
    return path


# --- kairox context: one source of truth for the system prompt --------------------------


def test_context_reports_the_system_prompt_a_chat_turn_sends(
    toml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config_file(toml)
    engine = ChatEngine.open(config, tmp_path / "kx.db", provider=ScriptedProvider(["Hello!"]))
    try:
        outcome = asyncio.run(engine.run_turn("hi there", lambda _: None))
        sid = engine.session_id
    finally:
        asyncio.run(engine.close())
        engine.kx.close()
    sent = outcome.trace.layer("system").tokens
    assert sent > 200  # the built-in memory protocol
    code, out, _ = run(["--config", str(toml), "context", sid, "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["trace"]["layers"]["system"]["tokens"] == sent
    assert data["messages"][0]["content"].startswith(MEMORY_PROTOCOL[:40])


# --- kairox search --k: k hits when k exist, a top hit that does not move with k --------


def test_fusion_counts_a_sources_shared_passage_once() -> None:
    same = [RetrievalHit("Install with pip.", 1.0, "ws", f"pkg{i}/README.md") for i in range(4)]
    other = [RetrievalHit(f"Guide {i}: pip in a venv.", 0.5, "ws", f"guide{i}") for i in range(4)]
    ranking = [same[0], other[0], same[1], same[2], other[1], same[3], other[2], other[3]]
    for limit in range(1, 6):
        fused = rrf_fuse({"ws": ranking}, limit=limit)
        assert len(fused) == limit
        assert fused[0].doc_id == "pkg0/README.md"
        assert fused[0].score == pytest.approx(1 / 61)  # one source, counted once
    # across sources a shared passage still merges, each source adding its own rank
    a = RetrievalHit("alpha text", 1.0, "kb1", "1")
    fused = rrf_fuse({"kb1": [a], "kb2": [RetrievalHit("Alpha  text", 1.0, "kb2", "9")]})
    assert len(fused) == 1 and fused[0].score == pytest.approx(2 / 61)


def test_search_returns_k_hits_and_says_how_many(
    toml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    for i in range(5):
        (docs / f"pkg{i}").mkdir(parents=True)
        (docs / f"pkg{i}" / "README.md").write_text("Install with pip install kairox.\n")
        (docs / f"guide{i}.md").write_text(
            f"Guide {i}: install kairox on host {i} with pip in a venv; note {i}.\n"
        )
    base = ["--config", str(toml)]
    assert run([*base, "index", str(docs)], capsys)[0] == 0
    tops = set()
    for k in (1, 3, 5, 6):
        code, out, _ = run(
            [*base, "search", "install kairox with pip", "--k", str(k), "--json"], capsys
        )
        assert code == 0
        hits = json.loads(out)["hits"]
        assert len(hits) == k  # 5 READMEs share one passage: 6 distinct passages exist
        tops.add(hits[0]["doc_id"])
    assert len(tops) == 1
    code, out, _ = run([*base, "search", "install kairox with pip", "--k", "5"], capsys)
    assert code == 0 and "5 hits" in out
    code, out, _ = run([*base, "search", "install kairox with pip", "--k", "9"], capsys)
    assert "6 hits (asked for 9: only 6 distinct passages match)" in " ".join(out.split())


# --- kairox index after a backend switch ------------------------------------------------


def test_index_after_a_backend_switch_asks_for_rebuild_and_rebuild_reports_its_work(
    toml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"n{i}.md").write_text(f"Note {i} about volcanoes and lava flows number {i}.\n")
    base = ["--config", str(toml)]
    code, out, _ = run([*base, "index", str(docs), "--json"], capsys)
    assert code == 0
    embedded = json.loads(out)["chunks"]
    assert embedded == 3
    switched = tmp_path / "switched.toml"
    switched.write_text(
        toml.read_text() + '[retrieval]\nbackend = "hashing"\nbackend_options = {dimension = 128}\n'
    )
    base = ["--config", str(switched)]
    code, out, err = run([*base, "index", str(docs)], capsys)
    assert code == 2, out
    assert "--rebuild" in err and "unchanged" not in out
    code, out, err = run([*base, "index", "--rebuild", "--json"], capsys)
    assert code == 0
    assert json.loads(out)["chunks"] == embedded
    code, out, err = run([*base, "index", str(docs)], capsys)
    assert code == 0 and "3 unchanged" in out


def test_long_work_prints_progress_lines_when_stderr_is_no_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kairox_core.cli.retrieval_cmd import _Steps

    with _Steps("re-embedding", 800, every=0.0) as steps:
        for done in (100, 400, 800):
            steps.update(done)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["re-embedding: 100/800 (12%)", "re-embedding: 400/800 (50%)"]
