"""The built-in longterm engine: one ``longterm`` contribution per assembly (the active
packs and the recalled chunks), which the assembler fits within the share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.engines import AssemblyRequest


async def test_contributions_for_packs_and_chunks(tmp_path: Path) -> None:
    cfg = KairoxConfig.model_validate(
        {
            "retrieval": {"workspace_index": False},
            "packs": {"dir": str(tmp_path / "packs")},
            "longterm": {"share": 0.02, "threshold": 0.15},
            "profiles": {"default": {"context_window": 4000, "reserve": 0}},
        }
    )
    with Kairox.open(tmp_path / "k.db", cfg) as kx:
        s = kx.session(workspace="w")
        kx.packs.create("rules", text="Answer briefly.")
        kx.packs.activate("rules")
        near = kx.longterm.add("The staging password rotates on Mondays.", scope="global")
        long = kx.longterm.add("The staging password policy: " + "detail " * 80, scope="global")
        kx.longterm.add("Ada likes green tea.", scope="global")
        engine = kx.engine("longterm")
        (out,) = await engine.before_assembly(
            s, AssemblyRequest("When does the staging password rotate?", "default")
        )
        assert out.layer == "longterm" and out.longterm is not None
        assert [(p.name, p.text) for p in out.longterm.packs] == [("rules", "Answer briefly.")]
        assert out.longterm.recall.chunks[0].id == near.id

        context = s.preview_sync("When does the staging password rotate?")
        system = "\n".join(str(m["content"]) for m in context.messages if m["role"] == "system")
        assert "Answer briefly." in system  # the pack, mandatory
        text = "\n".join(str(m["content"]) for m in context.messages)
        assert "<kairox:longterm>" in text and near.text in text
        assert long.id not in text  # 80 tokens of share: the long one does not fit
        reasons = " ".join(str(i.reason) for i in context.trace.layer("longterm").dropped)
        included = [i.id for i in context.trace.layer("longterm").included]
        assert near.id in included
        assert "over the long-term share" in reasons and "below the threshold" in reasons

        (unrelated,) = await engine.before_assembly(s, AssemblyRequest("", "default"))
        assert unrelated.longterm is not None and not unrelated.longterm.recall.chunks


async def test_a_store_that_never_held_a_chunk_is_not_searched(tmp_path: Path) -> None:
    """A fresh database's long-term store has no vector space: a turn's search returns
    nothing without embedding the prompt or creating the space (it used to create it,
    a write transaction inside the first turn of every database)."""
    with Kairox.open(tmp_path / "k.db", KairoxConfig()) as kx:
        s = kx.session(workspace="w")
        store = kx.longterm.store
        embedded: list[str] = []
        real = store.backend.embed_query

        def embed_query(text: str) -> list[float]:
            embedded.append(text)
            return real(text)

        store.backend.embed_query = embed_query  # type: ignore[method-assign]
        try:
            (out,) = await kx.engine("longterm").before_assembly(
                s, AssemblyRequest("When does the staging password rotate?", "default")
            )
            assert out.longterm is not None and not out.longterm.recall.chunks
            assert store.rows.vector_space() is None and embedded == []
            chunk = kx.longterm.add("The staging password rotates on Mondays.", scope="global")
            (out,) = await kx.engine("longterm").before_assembly(
                s, AssemblyRequest("When does the staging password rotate?", "default")
            )
            assert out.longterm is not None
            assert [c.id for c in out.longterm.recall.chunks] == [chunk.id]
            assert embedded == ["When does the staging password rotate?"]
        finally:
            del store.backend.embed_query  # the process's shared backend, as it was


async def test_nothing_to_add_is_known_on_the_loop_without_a_thread_hop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pack active and no chunk ever stored (most chats): the engine answers on the
    event loop, without the thread hop; with a pack active it reads it in a thread."""
    import kairox_core.longterm.engine as engine_module

    hops: list[object] = []
    real = engine_module.run_blocking

    async def counted(fn: Any, *args: Any, **kw: Any) -> Any:
        hops.append(fn)
        return await real(fn, *args, **kw)

    monkeypatch.setattr(engine_module, "run_blocking", counted)
    cfg = KairoxConfig.model_validate({"packs": {"dir": str(tmp_path / "packs")}})
    with Kairox.open(tmp_path / "k.db", cfg) as kx:
        s = kx.session(workspace="w")
        engine = kx.engine("longterm")
        (out,) = await engine.before_assembly(s, AssemblyRequest("hello there", "default"))
        assert out.longterm is not None and not out.longterm.packs
        assert not out.longterm.recall.chunks and hops == []
        kx.packs.create("rules", text="Answer briefly.")
        kx.packs.activate("rules")
        (out,) = await engine.before_assembly(s, AssemblyRequest("hello there", "default"))
        assert out.longterm is not None and [p.name for p in out.longterm.packs] == ["rules"]
        assert len(hops) == 1
