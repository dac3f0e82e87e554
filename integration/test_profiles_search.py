"""`kairox search --profile P` queries exactly P's knowledge bases and fuses them by RRF."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import KINDS, SEES, Deployment
from corpus import QUERY

from kairox_core.retrieval.fusion import RRF_K

Cli = Callable[..., tuple[int, str, str]]
KAIROX = str(Path(sys.executable).with_name("kairox"))


def search(cli: Cli, profile: str, query: str = QUERY, *extra: str) -> dict[str, Any]:
    code, out, err = cli("search", query, "--profile", profile, "--json", *extra)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.parametrize("profile", ["research", "support", "helpdesk"])
def test_search_queries_exactly_the_profiles_sources(
    deployment: Deployment, kairox_cli: Cli, profile: str
) -> None:
    before = deployment.query_counts()
    result = search(kairox_cli, profile)
    reports = {s["name"]: s for s in result["sources"]}
    assert set(reports) == SEES[profile]
    for report in reports.values():
        assert report["kind"] == "knowledge_base" and report["ok"], report
        assert report["hits"] >= 1 and not report["timed_out"]
    # the services agree: only the profile's remote knowledge bases were asked anything
    after = deployment.query_counts()
    asked = {name for name in after if after[name] > before[name]}
    assert asked == SEES[profile] & set(after)
    assert {h["source"] for h in result["hits"]} <= SEES[profile]


def test_alias_resolves_to_its_profile(kairox_cli: Cli) -> None:
    assert search(kairox_cli, "helpdesk")["profile"] == "support"


def test_default_profile_sees_no_knowledge_base(deployment: Deployment, kairox_cli: Cli) -> None:
    before = deployment.query_counts()
    code, out, err = kairox_cli("search", QUERY, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["profile"] == "default" and result["sources"] == [] and result["hits"] == []
    assert deployment.query_counts() == before


def _rrf(ranks: list[int]) -> float:
    return sum(1.0 / (RRF_K + r) for r in ranks)


def test_research_hits_are_one_rrf_fused_list(kairox_cli: Cli) -> None:
    result = search(kairox_cli, "research", QUERY, "--k", "6")
    hits = result["hits"]
    ids = [h["doc_id"] for h in hits]
    assert len(ids) == len(set(ids)) == 6  # no duplicates, k respected
    # hits from all three sources in one list, best fused score first
    assert {h["source"] for h in hits} == {"notes", "papers", "articles"}
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    # vol-ash is in Pinecone and Weaviate: one hit, credited to both, ranked first
    ash = hits[0]
    assert ash["doc_id"] == "vol-ash"
    assert sorted(ash["metadata"]["sources"]) == ["articles", "papers"]
    # every fused score is an RRF sum over the sources that returned the document
    for hit in hits:
        n = len(hit["metadata"]["sources"])
        assert _rrf([1] * n) >= hit["score"] >= _rrf([6] * n) - 1e-12, hit
    assert ash["score"] > max(h["score"] for h in hits[1:])


def test_support_hits_come_from_both_of_its_sources(kairox_cli: Cli) -> None:
    hits = search(kairox_cli, "support", QUERY, "--k", "4")["hits"]
    by_source = {h["source"] for h in hits}
    assert by_source == {"faq", "handbook"}
    top_two = {h["doc_id"] for h in hits[:2]}
    assert "kb-evacuation" in top_two
    assert any(d.endswith("volcano-tours.md") for d in top_two)


def test_kb_list_names_the_providing_distribution(kairox_cli: Cli) -> None:
    code, out, err = kairox_cli("kb", "list", "--json")
    assert code == 0, err
    rows = {row["id"]: row for row in json.loads(out)}
    assert {kb: row["kind"] for kb, row in rows.items()} == KINDS
    for kb, row in rows.items():
        dist = "kairox-core" if KINDS[kb] == "sqlite_fts" else f"kairox-{KINDS[kb]}"
        assert row["provided_by"].endswith(f"({dist})"), row
    assert rows["faq"]["profiles"] == ["helpdesk"] and rows["papers"]["profiles"] == ["research"]


def test_kb_search_reaches_each_kind(kairox_cli: Cli) -> None:
    expected = {
        "faq": "volcano-tours.md",
        "handbook": "kb-evacuation",
        "notes": "note-seismic",
        "papers": "vol-ash",
        "articles": "vol-ash",
    }
    for kb, doc in expected.items():
        code, out, err = kairox_cli("kb", "search", kb, QUERY, "--k", "1", "--json")
        assert code == 0, (kb, err)
        (hit,) = json.loads(out)
        assert hit["source"] == kb and hit["doc_id"].endswith(doc), (kb, hit)


def test_a_failing_source_degrades_the_search(
    deployment: Deployment, kairox_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong Weaviate key: that source is reported failed, the others still answer."""
    monkeypatch.setenv("KX_INT_WEAVIATE_KEY", "not-the-key")
    code, out, err = kairox_cli("search", QUERY, "--profile", "research", "--json")
    assert code == 1 and "Traceback" not in err
    result = json.loads(out)
    reports = {s["name"]: s for s in result["sources"]}
    assert not reports["articles"]["ok"] and "articles" in reports["articles"]["error"]
    assert reports["papers"]["ok"] and reports["notes"]["ok"]
    assert {h["source"] for h in result["hits"]} == {"papers", "notes"}


def test_console_script_in_a_subprocess(deployment: Deployment) -> None:
    """The installed `kairox` script against the HTTP kinds (no Stubber needed: no Bedrock)."""
    env = {**os.environ, **deployment.env}
    env.pop("KAIROX_CONFIG", None)
    done = subprocess.run(
        [
            KAIROX,
            "--config",
            str(deployment.config),
            "--db",
            str(deployment.root / "sub.db"),
            "search",
            QUERY,
            "-p",
            "research",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=deployment.root,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {s["name"] for s in result["sources"] if s["ok"]} == SEES["research"]
    assert result["hits"][0]["doc_id"] == "vol-ash"
