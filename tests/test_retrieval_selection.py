"""Profile-based selection of knowledge bases, plus the workspace index."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kairox_core.config import parse_config
from kairox_core.errors import UnknownNameError
from kairox_core.retrieval.index import WorkspaceRagIndex
from kairox_core.retrieval.selection import retriever_for_profile
from kairox_core.store.connection import connect


def _kb_db(path: Path, rows: list[tuple[str, str]]) -> Path:
    conn = connect(path, vec=False)
    conn.execute("CREATE VIRTUAL TABLE documents USING fts5(id UNINDEXED, text)")
    conn.executemany("INSERT INTO documents VALUES (?, ?)", rows)
    conn.close()
    return path


def _config(tmp_path: Path, **retrieval: Any) -> Any:
    legal = _kb_db(tmp_path / "legal.db", [("law-1", "contract law and liability")])
    med = _kb_db(tmp_path / "med.db", [("med-1", "liability of clinical trials")])
    return parse_config(
        {
            "profiles": {"default": {}, "lawyer": {"aliases": ["legal"]}, "doctor": {}},
            "retrieval": retrieval,
            "knowledge_bases": {
                "statutes": {
                    "kind": "sqlite_fts",
                    "path": str(legal),
                    "profiles": ["legal"],
                    "timeout": 25.0,
                    "weight": 2.0,
                },
                "trials": {"kind": "sqlite_fts", "path": str(med), "profiles": ["doctor"]},
                "off": {"kind": "sqlite_fts", "path": str(med), "enabled": False},
            },
        }
    )


def test_only_the_profiles_knowledge_bases(tmp_path: Path) -> None:
    config = _config(tmp_path, timeout=40.0)
    db = tmp_path / "kx.db"
    WorkspaceRagIndex(db, "default").add_text("ws-1", "liability notes in the workspace")
    for profile, expected in (
        ("lawyer", ["workspace", "statutes"]),
        ("legal", ["workspace", "statutes"]),
        ("doctor", ["workspace", "trials"]),
        ("default", ["workspace"]),
    ):
        composite = retriever_for_profile(config, profile, db)
        assert composite.names == expected, profile
        result = asyncio.run(composite.search("liability", 5))
        asyncio.run(composite.close())
        assert all(s.ok for s in result.sources), result.sources
        assert {h.source for h in result.hits} == set(expected)
    lawyer = retriever_for_profile(config, "lawyer", db)
    by_name = {s.name: s for s in lawyer.sources}
    assert by_name["statutes"].timeout == 25.0 and by_name["statutes"].weight == 2.0
    assert by_name["workspace"].timeout == 40.0 and by_name["workspace"].kind == "workspace"
    asyncio.run(lawyer.close())
    doctor = retriever_for_profile(config, "doctor", db)
    assert {s.name: s for s in doctor.sources}["trials"].timeout == 40.0  # [retrieval] timeout
    asyncio.run(doctor.close())


def test_workspace_index_can_be_disabled(tmp_path: Path) -> None:
    config = _config(tmp_path, workspace_index=False)
    assert retriever_for_profile(config, "legal", tmp_path / "kx.db").names == ["statutes"]


def test_workspaces_are_separate(tmp_path: Path) -> None:
    config = _config(tmp_path)
    db = tmp_path / "kx.db"
    WorkspaceRagIndex(db, "other").add_text("o-1", "liability elsewhere")
    composite = retriever_for_profile(config, "default", db, workspace_id="mine")
    assert asyncio.run(composite.search("liability", 5)).hits == []


def test_unknown_kind_names_the_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kairox_core.plugins import reset_plugins

    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "")  # built-ins only, even if tantivy is installed
    reset_plugins()
    config = parse_config({"knowledge_bases": {"idx": {"kind": "tantivy", "path": "x"}}})
    with pytest.raises(UnknownNameError, match="pip install kairox-tantivy") as info:
        retriever_for_profile(config, None, tmp_path / "kx.db")
    assert "knowledge_bases.idx" in str(info.value)
    monkeypatch.delenv("KAIROX_LOAD_PLUGINS")
    reset_plugins()
