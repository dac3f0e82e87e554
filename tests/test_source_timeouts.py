"""Source timeouts that hold: a hanging knowledge base, a locked SQLite file and a
source that blocks the event loop each cost a turn no more than the timeout."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kairox_core import Kairox, hookimpl
from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.config import KairoxConfig, KnowledgeBaseConfig
from kairox_core.plugins import get_plugins
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.composite import CompositeWorkspaceRetriever, RetrieverSource
from kairox_core.retrieval.threads import run_blocking
from kairox_core.store.connection import connect

RELEASE = threading.Event()  # set at teardown, so no hung thread outlives the tests
HANGING_LOCK = threading.Lock()
HANG_SECONDS = 60.0


class HangingKB:
    """A knowledge base whose blocking call (in a worker thread) never answers in time.
    ``hanging`` counts the calls still blocked: a turn that returns while it is non-zero
    did not wait for the source."""

    capabilities = RetrieverCapabilities()

    hang: float | None = HANG_SECONDS  # None (the CLI test's child): until RELEASE
    hanging = 0

    def __init__(self, name: str) -> None:
        self.name = name
        # this test's release: a call that only starts once the test is over (queued
        # behind a blocked loop) returns at once instead of hanging in the next test
        self.release = RELEASE

    def _query(self) -> list[RetrievalHit]:
        kind = type(self)  # each kind counts its own calls
        with HANGING_LOCK:
            kind.hanging += 1
        try:
            self.release.wait(self.hang)
        finally:
            with HANGING_LOCK:
                kind.hanging -= 1
        return [RetrievalHit("too late", 1.0, self.name, "late")]

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        return await run_blocking(self._query)

    async def close(self) -> None:
        return None


class BlockingKB:
    """A knowledge base that does its blocking work on the event loop itself."""

    capabilities = RetrieverCapabilities()

    def __init__(self, name: str, seconds: float) -> None:
        self.name = name
        self.seconds = seconds

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        time.sleep(self.seconds)
        return [RetrievalHit("blocking answer", 1.0, self.name, "b")]

    async def close(self) -> None:
        return None


class PoliteKB:
    """Answers after yielding to the loop (as a network call would), blocking nothing."""

    capabilities = RetrieverCapabilities()

    name = "polite"

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        await asyncio.sleep(0)
        return [RetrievalHit("polite answer", 1.0, self.name, "p")]

    async def close(self) -> None:
        return None


class LoopBlockingKB(HangingKB):
    """A plugin's source that blocks its event loop (``time.sleep`` in async code)
    until released: on the turn's loop it would hold the turn for as long."""

    hanging = 0

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        return self._query()  # RELEASE.wait on the loop itself


class StubbornKB(HangingKB):
    """A plugin's source that swallows cancellation and keeps waiting: ``wait_for``
    on the turn's loop would wait for it to finish."""

    hanging = 0
    cancels_ignored = 0

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        answer = asyncio.ensure_future(run_blocking(self._query))
        while True:
            try:
                return await asyncio.shield(answer)
            except asyncio.CancelledError:
                StubbornKB.cancels_ignored += 1  # and keeps waiting for its answer


class HangingPlugin:
    @hookimpl
    def kairox_register_retrievers(self, register: Any) -> None:
        register("hanging", lambda kb: HangingKB(kb.id))
        register("loop_blocking", lambda kb: LoopBlockingKB(kb.id))
        register("stubborn", lambda kb: StubbornKB(kb.id))


@pytest.fixture(autouse=True)
def _release_hung_threads() -> Iterator[None]:
    global RELEASE
    RELEASE = threading.Event()  # sources made by this test wait on this one
    yield
    RELEASE.set()


def hanging_config(kind: str = "hanging") -> KairoxConfig:
    return KairoxConfig.model_validate(
        {
            "profiles": {"default": {"model": "gpt-4o", "context_window": 6000, "reserve": 500}},
            "retrieval": {"workspace_index": False},
            "knowledge_bases": {"stuck": {"kind": kind, "timeout": 1}},
        }
    )


def test_a_hanging_knowledge_base_costs_a_turn_its_timeout(
    kairox_home: Path, tmp_path: Path, register_plugin: Any
) -> None:
    register_plugin(HangingPlugin(), "hanging-kb")
    with Kairox.open(tmp_path / "kx.db", hanging_config()) as kx:
        session = kx.session()
        turn = session.begin_turn_sync("what is in the stuck knowledge base?")
        still_hanging = HangingKB.hanging
        turn.abort_sync()
    notes = turn.trace.layer("retrieval").notes
    assert any("stuck failed: timed out after 1s" in n for n in notes), notes
    assert still_hanging == 1, "the turn waited for the hanging source"


@pytest.mark.parametrize("kind", ["loop_blocking", "stubborn"])
def test_a_source_that_blocks_its_loop_or_ignores_cancellation_costs_a_turn_its_timeout(
    kairox_home: Path, tmp_path: Path, register_plugin: Any, kind: str
) -> None:
    register_plugin(HangingPlugin(), "hanging-kb")
    source = {"loop_blocking": LoopBlockingKB, "stubborn": StubbornKB}[kind]
    with Kairox.open(tmp_path / "kx.db", hanging_config(kind)) as kx:
        session = kx.session()
        turn = session.begin_turn_sync("what is in the stuck knowledge base?")
        still_hanging = source.hanging
        turn.complete_sync("I could not read it.")
        # the session is usable while the source still hangs in its own thread
        again = session.begin_turn_sync("and now?")
        hanging_after_second = source.hanging
        again.abort_sync()
    assert still_hanging == 1, "the turn waited for the source"
    assert hanging_after_second >= 1, "the second turn waited for the source"
    for t in (turn, again):
        notes = t.trace.layer("retrieval").notes
        assert any("source stuck failed: timed out after 1s" in n for n in notes), notes


@pytest.mark.slow
def test_the_cli_exits_promptly_while_a_source_thread_hangs(tmp_path: Path) -> None:
    toml = tmp_path / "kairox.toml"
    toml.write_text(
        textwrap.dedent(
            """
            [profiles.default]
            model = "gpt-4o"
            [retrieval]
            workspace_index = false
            [knowledge_bases.stuck]
            kind = "hanging"
            timeout = 1
            """
        )
    )
    script = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("hanging_kb", {str(__file__)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.HangingKB.hang = None  # never answers: only a daemon thread lets us exit
        from kairox_core.plugins import get_plugins
        get_plugins().add(module.HangingPlugin(), "hanging-kb")
        from kairox_core.cli import main
        main(["--config", {str(toml)!r}, "--db", {str(tmp_path / "kx.db")!r},
              "search", "anything"])
        """
    )
    env = {**os.environ, "KAIROX_HOME": str(tmp_path / "home")}
    # the source never answers, so exiting at all is the claim (the timeout only keeps
    # a broken build from hanging the suite)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert "timed out after 1s" in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr  # a failed source is reported by exit 1


def test_a_locked_sqlite_knowledge_base_waits_no_longer_than_its_timeout(
    tmp_path: Path,
) -> None:
    db = tmp_path / "papers.db"
    conn = connect(db, vec=False)
    conn.execute("PRAGMA journal_mode = DELETE")  # a file another tool wrote: no WAL
    conn.execute("CREATE VIRTUAL TABLE papers USING fts5(id, text)")
    conn.execute("INSERT INTO papers VALUES ('p1', 'tea is brewed at eighty degrees')")
    conn.close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import select, sqlean, sys\n"
            f"c = sqlean.connect({str(db)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            # held until the test ends it (300 s: a broken build fails instead of hanging)
            "select.select([sys.stdin], [], [], 300)\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        kb = KnowledgeBaseConfig.model_validate(
            {"id": "papers", "kind": "sqlite_fts", "path": str(db), "table": "papers", "timeout": 1}
        )
        retriever = get_plugins().get("retrievers", "sqlite_fts").factory(kb)
        composite = CompositeWorkspaceRetriever([RetrieverSource(retriever, timeout=1.0)])

        async def go() -> Any:
            try:
                return await composite.search("tea", 3)
            finally:
                await composite.close()

        result = asyncio.run(go())
        assert holder.poll() is None  # the lock was still held when the search returned
    finally:
        holder.kill()
        holder.wait()
    (report,) = result.sources
    assert not report.ok and report.error
    assert "locked" in report.error or "timed out" in report.error, report.error


async def test_a_source_that_blocks_the_event_loop_is_reported() -> None:
    composite = CompositeWorkspaceRetriever(
        [
            RetrieverSource(BlockingKB("hog", 0.6), timeout=0.2),
            RetrieverSource(PoliteKB(), timeout=5.0),
            RetrieverSource(BlockingKB("brief", 0.01), timeout=0.2, kind="knowledge_base"),
        ]
    )
    result = await composite.search("anything", 3)
    reports = {r.name: r for r in result.sources}
    hog = reports["hog"]
    assert not hog.ok and hog.error and "blocked the event loop" in hog.error
    assert hog.blocked_ms >= 500
    polite = reports["polite"]
    assert polite.ok and polite.blocked_ms < hog.blocked_ms / 2  # waited, not blamed
    assert reports["brief"].ok
    assert {h.source for h in result.hits} == {"polite", "brief"}
