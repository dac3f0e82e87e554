"""``kairox index``, ``kairox search`` and ``kairox kb``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kairox_core.cli import main
from kairox_core.store.connection import connect


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def project(kairox_home: Path, tmp_path: Path) -> Path:
    docs = tmp_path / "project"
    (docs / "sub").mkdir(parents=True)
    (docs / "README.md").write_text("# Kairox\nThe photosynthesis guide.\n")
    (docs / "sub" / "notes.txt").write_text("volcano lava magma")
    (docs / "image.png").write_bytes(b"\x89PNG\x00\x00binary")
    (docs / "big.log").write_text("x" * 5000)
    (docs / ".gitignore").write_text("secret/\n")
    (docs / "secret").mkdir()
    (docs / "secret" / "keys.md").write_text("photosynthesis password")
    kb = connect(tmp_path / "kb.db", vec=False)
    kb.execute("CREATE VIRTUAL TABLE documents USING fts5(id UNINDEXED, text)")
    kb.execute("INSERT INTO documents VALUES ('kb-1', 'photosynthesis in the knowledge base')")
    kb.close()
    (tmp_path / "kairox.toml").write_text(f"""
[kairox]
database = "kx.db"
[retrieval]
max_file_bytes = 4000
[profiles.default]
[profiles.bio]
aliases = ["biology"]
[profiles.builder]
[knowledge_bases.plants]
kind = "sqlite_fts"
path = "{tmp_path / "kb.db"}"
profiles = ["bio"]
[knowledge_bases.broken]
kind = "sqlite_fts"
path = "{tmp_path / "missing.db"}"
profiles = ["bio"]
[knowledge_bases.built]
kind = "sqlite_fts"
path = "{tmp_path / "built.db"}"
title_column = "title"
profiles = ["builder"]
""")
    return docs


def test_index_is_incremental_and_reports(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["index", str(project), "--json"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["added"], summary["skipped_binary"], summary["skipped_large"]) == (2, 1, 1)
    assert summary["chunks"] == 2 and summary["chunks_total"] == 2
    code, out, _ = run(["index", str(project), "--json"], capsys)
    summary = json.loads(out)
    assert (summary["added"], summary["unchanged"], summary["chunks"]) == (0, 2, 0)
    (project / "sub" / "notes.txt").unlink()
    (project / "README.md").write_text("# Kairox\nThe chlorophyll guide.\n")
    code, out, _ = run(["index", str(project)], capsys)
    assert "0 added, 1 updated, 0 unchanged, 1 removed" in out and "chunks:" in out


def test_unreadable_file_does_not_stop_the_run(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "locked.md").write_text("photosynthesis")
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "locked.md":  # as a permission error would (tests run as root)
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    code, out, err = run(["index", str(project), "--json"], capsys)
    assert code == 0 and json.loads(out)["added"] == 2
    assert "locked.md: Permission denied" in err


def test_search_is_the_composite_with_a_report(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["index", str(project)], capsys)
    code, out, err = run(["search", "photosynthesis", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert [s["name"] for s in data["sources"]] == ["workspace"]
    assert data["hits"][0]["source"] == "workspace"
    code, out, err = run(["search", "photosynthesis", "--profile", "biology", "--json"], capsys)
    data = json.loads(out)
    assert code == 1  # a source failed: reported, the others still answer
    reports = {s["name"]: s for s in data["sources"]}
    assert reports["plants"]["ok"] and not reports["broken"]["ok"]
    assert "missing.db" in reports["broken"]["error"]
    assert {h["source"] for h in data["hits"]} == {"workspace", "plants"}
    code, out, err = run(["search", "photosynthesis", "-p", "bio"], capsys)
    assert "FAILED" in err and "broken" in err and "Traceback" not in err


def test_kb_list_search_and_index(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["kb", "list", "--json"], capsys)
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows["plants"]["profiles"] == ["bio"] and rows["plants"]["kind"] == "sqlite_fts"
    assert "kairox_core.default_plugins.sqlite_fts" in rows["plants"]["provided_by"]
    code, out, _ = run(["kb", "search", "plants", "photosynthesis", "--json"], capsys)
    assert code == 0 and json.loads(out)[0]["doc_id"] == "kb-1"
    code, out, err = run(["kb", "search", "broken", "photosynthesis"], capsys)
    assert code != 0 and "knowledge base 'broken'" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = run(["kb", "search", "nope", "x"], capsys)
    assert code == 2 and "no knowledge base 'nope'" in err
    code, out, err = run(["kb", "index", "built", str(project), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["added"] == 3  # its own max_file_bytes (default 2 MB)
    code, out, _ = run(["kb", "search", "built", "volcano", "--json"], capsys)
    assert json.loads(out)[0]["doc_id"].endswith("notes.txt")
    code, out, _ = run(["kb", "index", "built", str(project)], capsys)
    assert code == 0 and "chunks: 0 indexed" in out and "embedded" not in out
    code, out, _ = run(["kb", "search", "built", "zzyzx-nowhere"], capsys)
    assert code == 0 and out.strip() == "no hits (built: zzyzx-nowhere)"


def test_rebuild_after_changing_the_backend(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["index", str(project)], capsys)
    config = tmp_path / "kairox.toml"
    config.write_text(
        config.read_text().replace(
            "max_file_bytes = 4000",
            # hybrid: the default ("auto") searches keywords alone with the hashing backend
            'max_file_bytes = 4000\nbackend_options = {dimension = 64}\nmode = "hybrid"',
        )
    )
    code, out, err = run(["search", "volcano", "--json"], capsys)
    assert code == 1
    assert "kairox index --rebuild" in json.loads(out)["sources"][0]["error"]
    code, out, err = run(["index", "--rebuild"], capsys)
    assert code == 0, err
    code, out, err = run(["search", "volcano", "--json"], capsys)
    assert code == 0 and json.loads(out)["hits"][0]["doc_id"].endswith("notes.txt")


def test_index_needs_a_path(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["index"], capsys)
    assert code == 2 and "at least one PATH" in err


def test_index_never_leaves_its_folder_through_a_symlink(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa.md").write_text("the private key")
    (project / "key.md").symlink_to(outside / "id_rsa.md")
    (project / "ssh").symlink_to(outside, target_is_directory=True)
    (project / "loop.md").symlink_to(project / "loop.md")
    (project / "readme-link.md").symlink_to(project / "README.md")  # inside: followed
    os.mkfifo(project / "pipe.md")  # not a regular file: passed over, never opened
    code, out, err = run(["index", str(project), "--json"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    # README.md, sub/notes.txt and readme-link.md (README's text again: "unchanged")
    assert summary["added"] + summary["unchanged"] == 3, summary
    outside_notes = "\n".join(summary["skipped_outside"])
    assert f"key.md: a symbolic link to {outside / 'id_rsa.md'}, outside {project}" in (
        outside_notes
    )
    assert f"ssh: a symbolic link to {outside}, outside" in outside_notes
    assert "loop.md: a symbolic link that leads nowhere" in outside_notes
    assert "skipped: " in err and "key.md" in err
    code, out, _ = run(["search", "private key", "--json"], capsys)
    assert "the private key" not in out
    code, out, _ = run(["index", str(project)], capsys)
    assert "3 links out of the folder" in out


def test_search_tables_print_bracketed_text_as_written(
    kairox_home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rich would read "[kairox]" as markup and drop it (issue 28)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "[draft] notes.md").write_text("See [kairox] and [bold]volcano[/bold] settings.\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    run(["--db", str(tmp_path / "kx.db"), "index", str(docs)], capsys)
    code, out, err = run(["--db", str(tmp_path / "kx.db"), "search", "volcano"], capsys)
    assert code == 0, err
    assert "[kairox]" in out and "[bold]volcano[/bold]" in out and "[draft] notes.md" in out


def test_the_first_index_says_what_a_real_embedder_would_bring(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["index", str(project)], capsys)
    assert code == 0
    assert "hashing backend" in err and 'backend = "sentence-transformers"' in err
    assert "kairox index --rebuild" in err and "0.87" in err
    code, _, err = run(["index", str(project)], capsys)  # not the first any more
    assert code == 0 and "hashing backend" not in err
    from kairox_core.cli.retrieval_cmd import embedding_hint

    assert embedding_hint("sentence-transformers") == ""
