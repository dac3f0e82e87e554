"""The kind in a kairox.toml, through the real ``kairox`` command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from kairox_core.cli import main


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


CONFIG = """
[kairox]
database = "kairox.db"

[retrieval]
workspace_index = false

[profiles.default]
[profiles.ops]
aliases = ["oncall"]

[knowledge_bases.handbook]
kind = "tantivy"
path = "indexes/handbook"
source_paths = ["docs"]
stored_fields = ["team"]
profiles = ["ops"]

[knowledge_bases.faq]
kind = "tantivy"
path = "indexes/faq"
source_paths = ["faq.jsonl"]

[knowledge_bases.missing]
kind = "tantivy"
path = "indexes/never-built"
enabled = false
"""


def run_kairox(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed script, in a new process (slow to start: used once)."""
    exe = Path(sys.executable).with_name("kairox")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def kairox(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``kairox(*args)`` through the CLI's own entry point, in this process."""

    def invoke(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return invoke


@pytest.fixture
def project(kairox_home: Path, tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "deploy.md").write_text("# Deploying\n\nUse blue-green rollouts.\n")
    (tmp_path / "docs" / "oncall.md").write_text(
        "# On-call\n\nPage the on-call engineer when a rollout fails.\n"
    )
    rows = [
        {
            "_id": "q1",
            "title": "Rollouts",
            "text": "Rollouts happen on Tuesdays.",
            "metadata": {"team": "release"},
        }
    ]
    (tmp_path / "faq.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "kairox.toml").write_text(CONFIG)
    return tmp_path


def test_index_search_and_profile_scoping(project: Path, kairox: Callable[..., Result]) -> None:
    built = kairox("kb", "index", "handbook", "--json")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout.strip().splitlines()[-1])["added"] == 2
    assert kairox("kb", "index", "faq").returncode == 0

    hits = json.loads(kairox("kb", "search", "handbook", "rollouts", "--json").stdout)
    assert {h["metadata"]["title"] for h in hits} == {"Deploying", "On-call"}
    assert all(h["source"] == "handbook" and h["metadata"]["snippet"] for h in hits)

    default = json.loads(kairox("search", "rollouts", "--json").stdout)
    assert {h["source"] for h in default["hits"]} == {"faq"}  # handbook is ops-only
    ops = json.loads(kairox("search", "rollouts", "--profile", "oncall", "--json").stdout)
    assert {h["source"] for h in ops["hits"]} == {"faq", "handbook"}


def test_errors_are_one_clear_line(project: Path) -> None:
    result = run_kairox("kb", "search", "missing", "rollouts")
    assert result.returncode != 0
    assert "knowledge base 'missing'" in result.stderr
    assert "kairox kb index missing" in result.stderr
    assert "Traceback" not in result.stderr


def test_first_search_builds_from_source_paths(
    project: Path, kairox: Callable[..., Result]
) -> None:
    result = kairox("kb", "search", "faq", "tuesdays", "--json")
    assert result.returncode == 0, result.stderr
    assert [h["doc_id"] for h in json.loads(result.stdout)] == ["q1"]
