"""The core's long-term store contract, unchanged, against a real PostgreSQL + pgvector."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from kairox_core.cli import main
from kairox_core.config import KairoxConfig
from kairox_core.facade import Kairox
from kairox_core.longterm.chunks import Chunk
from kairox_core.store.protocol import Storage
from kairox_core.testing.longterm_contract import LongTermStoreContract
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer


class TestPostgresLongTermStore(LongTermStoreContract):
    @pytest.fixture(autouse=True)
    def _server(self, pg_server: PgTestServer) -> None:
        self.server = pg_server

    def make_storage(self, tmp_path: Path) -> Storage:
        return PostgresStorage(self.server.fresh_database())


CONFIG = """
[kairox]
database = "{database}"

[retrieval]
workspace_index = false

[packs]
dir = "{packs}"
"""
FACT = "The staging database password rotates every Monday at 9am."
ABOUT = "When does the staging database password rotate?"


def _config(tmp_path: Path) -> KairoxConfig:
    return KairoxConfig.model_validate(
        {"retrieval": {"workspace_index": False}, "packs": {"dir": str(tmp_path / "packs")}}
    )


def test_a_turn_on_postgres_carries_packs_and_recalled_chunks(tmp_path: Path, pg_url: str) -> None:
    """Two hosts' worth of Kairox on one server: what one keeps, the other's turn recalls."""
    with Kairox.open(pg_url, _config(tmp_path)) as writer:
        first = writer.session(workspace="docs")
        chunk = writer.longterm.add(FACT, scope="project", session_id=first.id)
        writer.packs.create("house-rules", text="Answer in British English.")
        writer.packs.activate("house-rules", workspace_id="docs")
    with Kairox.open(pg_url, _config(tmp_path)) as reader:
        later = reader.session(workspace="docs")
        turn = later.begin_turn_sync(ABOUT)
        text = "\n".join(str(m.get("content") or "") for m in turn.messages)
        assert "<kairox:longterm>" in text and FACT in text
        assert "<kairox:packs>" in text and "British English" in text
        assert [i.id for i in turn.trace.layer("longterm").included] == [chunk.id]
        turn.complete_sync("Mondays.")
        other = reader.session(workspace="elsewhere")
        assert FACT not in str(other.begin_turn_sync(ABOUT).messages)
        added = [e for e in reader.events(first.id) if e.type == "LongTermChunkAdded"]
        assert [e.chunk_id for e in added] == [chunk.id]  # type: ignore[attr-defined]


def test_the_cli_keeps_and_finds_chunks_and_packs_on_postgres(
    kairox_home: Path, tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = kairox_home.parent / "kairox.toml"
    config.write_text(CONFIG.format(database=pg_url, packs=tmp_path / "packs"))

    def kairox(*args: str) -> str:
        capsys.readouterr()
        try:
            main(list(args))
        except SystemExit as exc:
            assert not exc.code, capsys.readouterr().err
        return capsys.readouterr().out

    kairox("longterm", "add", FACT, "--scope", "project", "--workspace", "docs")
    found = json.loads(kairox("longterm", "search", ABOUT, "--workspace", "docs", "--json"))
    assert [h["text"] for h in found] == [FACT] and found[0]["similarity"] > 0.3
    assert json.loads(kairox("longterm", "search", ABOUT, "--workspace", "other", "--json")) == []
    kairox("pack", "create", "house-rules", "--text", "Answer in British English.")
    kairox("pack", "activate", "house-rules", "--workspace", "docs")
    listed = json.loads(kairox("pack", "list", "--json", "--workspace", "docs"))
    assert [p["name"] for p in listed] == ["house-rules"]
    kairox("pack", "publish", "house-rules", "--level", "team", "--by", "ada")
    assert (tmp_path / "packs" / "house-rules.md").exists()
    with Kairox.open(pg_url, _config(tmp_path)) as kx:
        assert kx.storage.longterm.list_packs() == []  # published: a file now
        assert [a.name for a in kx.storage.longterm.activations("docs")] == ["house-rules"]


def test_one_process_re_embeds_when_two_switch_the_backend_at_once(pg_url: str) -> None:
    stores = [PostgresStorage(pg_url), PostgresStorage(pg_url)]
    try:
        first = stores[0].longterm
        first.use_space("old", 2, lambda texts: [])
        first.insert_chunks(
            [
                (Chunk(f"lt-{i}", "global", f"t{i}", None, None, 1.0, 1.0), "g", [1.0, 0.0])
                for i in range(20)
            ]
        )
        embedded: list[int] = []
        barrier = threading.Barrier(2)

        def embed(texts: Sequence[str]) -> list[list[float]]:
            embedded.append(len(texts))
            return [[0.0, 1.0, 0.0] for _ in texts]

        def switch(storage: PostgresStorage, out: list[int]) -> None:
            barrier.wait()
            out.append(storage.longterm.use_space("new", 3, embed))

        done: list[int] = []
        threads = [threading.Thread(target=switch, args=(s, done)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(done) == [0, 20] and sum(embedded) == 20
        assert stores[1].longterm.vector_space() == ("new", 3)
        assert {s.vector for s in stores[1].longterm.export_chunks()} == {(0.0, 1.0, 0.0)}
    finally:
        for s in stores:
            s.close()
