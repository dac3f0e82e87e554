"""A kind or backend whose plugin is not installed: exit 2 naming the distribution to install.

The nox ``tests`` session installs no plugin; ``KAIROX_LOAD_PLUGINS=""`` (load no
entry-point plugin) gives the same view in a development venv that has some installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.cli import main
from kairox_core.plugins import reset_plugins

KINDS = ("tantivy", "bedrock", "pinecone", "weaviate")


@pytest.fixture
def no_plugins(kairox_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "")
    reset_plugins()
    return kairox_home


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_clear_line(err: str, key: str, dist: str) -> None:
    assert "Traceback" not in err
    assert err.startswith("kairox: error: ") and len(err.strip().splitlines()) <= 3, err
    assert key in err and f"pip install {dist}" in err, err


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "command",
    [["search", "lava", "-p", "research"], ["kb", "search", "docs", "lava"], ["config", "check"]],
)
def test_knowledge_base_kind_names_its_distribution(
    kind: str,
    command: list[str],
    tmp_path: Path,
    no_plugins: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = tmp_path / "kairox.toml"
    config.write_text(
        f"[profiles.default]\n[profiles.research]\n\n"
        f'[knowledge_bases.docs]\nkind = "{kind}"\nprofiles = ["research"]\n'
    )
    code, out, err = run(
        ["--config", str(config), "--db", str(tmp_path / "k.db"), *command], capsys
    )
    assert code == 2 and out == ""
    assert_one_clear_line(err, "knowledge_bases.docs.kind", f"kairox-{kind}")


def test_sentence_transformers_backend_names_its_distribution(
    tmp_path: Path, no_plugins: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "kairox.toml"
    config.write_text('[retrieval]\nbackend = "sentence-transformers"\n')
    code, out, err = run(
        ["--config", str(config), "--db", str(tmp_path / "k.db"), "search", "lava"], capsys
    )
    assert code == 2 and out == ""
    assert_one_clear_line(err, "retrieval.backend", "kairox-sentence-transformers")


def test_a_built_in_kind_still_works_without_plugins(
    tmp_path: Path, no_plugins: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "lava.md").write_text("# Lava\n\nLava flows from a volcano.\n")
    config = tmp_path / "kairox.toml"
    config.write_text(
        f"[retrieval]\nworkspace_index = false\n\n[knowledge_bases.docs]\n"
        f'kind = "sqlite_fts"\npath = "{(tmp_path / "docs.db").as_posix()}"\n'
    )
    base = ["--config", str(config), "--db", str(tmp_path / "k.db")]
    code, _, err = run([*base, "kb", "index", "docs", str(tmp_path / "docs")], capsys)
    assert code == 0, err
    code, out, err = run([*base, "search", "lava volcano", "--json"], capsys)
    assert code == 0, err
    assert '"doc_id"' in out and "lava.md" in out
