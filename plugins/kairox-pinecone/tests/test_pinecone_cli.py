"""`kairox kb search` and `kairox search` from a kairox.toml, against the local index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY
from pinecone_helpers import seed_records

from kairox_core.plugins import get_plugins
from kairox_core.testing.contracts import CONTRACT_DOCS
from kairox_pinecone.testing import FakePinecone, bag_of_words

KAIROX = str(Path(sys.executable).with_name("kairox"))


def kairox(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DEMO_PINECONE_KEY": API_KEY,
        "KAIROX_DB": str(tmp_path / "k.db"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    env.pop("KAIROX_CONFIG", None)
    return subprocess.run(
        [KAIROX, "--config", str(tmp_path / "kairox.toml"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def config(
    tmp_path: Path, pinecone_server: FakePinecone, make_server: object, kairox_plugins: object
) -> Path:
    if "hashing" not in get_plugins().names("embedding_backends"):
        pytest.skip("this kairox-core has no built-in 'hashing' embedding backend yet")
    backend = get_plugins().get("embedding_backends", "hashing").factory()
    from pinecone import Pinecone

    index = Pinecone(api_key=API_KEY).Index(host=pinecone_server.url)
    index.upsert(
        vectors=[
            {
                "id": d.id,
                "values": backend.embed_query(d.title + " " + d.text),
                "metadata": {"text": d.text, **d.metadata},
            }
            for d in CONTRACT_DOCS
        ],
        namespace="science",
    )
    index.close()
    integrated = make_server(embed=bag_of_words)  # type: ignore[operator]
    seed_records(integrated.url, "faq", CONTRACT_DOCS)
    (tmp_path / "kairox.toml").write_text(f"""
[profiles.default]
[profiles.support]

[knowledge_bases.science]
kind = "pinecone"
host = "{pinecone_server.url}"
api_key = "$env:DEMO_PINECONE_KEY"
namespace = "science"

[knowledge_bases.faq]
kind = "pinecone"
host = "{integrated.url}"
api_key = "$env:DEMO_PINECONE_KEY"
namespace = "faq"
integrated_inference = true
profiles = ["support"]

[knowledge_bases.locked]
kind = "pinecone"
host = "{pinecone_server.url}"
api_key = "pc-not-the-key"
profiles = ["support"]
""")
    return tmp_path / "kairox.toml"


def test_kb_search_from_kairox_toml(config: Path, tmp_path: Path) -> None:
    done = kairox(tmp_path, "kb", "search", "science", "moon gravity tides", "--k", "2", "--json")
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert hits[0]["doc_id"] == "doc-tides" and hits[0]["source"] == "science"
    assert len(hits) == 2


def test_kb_search_bad_key_is_one_clear_line(config: Path, tmp_path: Path) -> None:
    done = kairox(tmp_path, "kb", "search", "locked", "moon")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "locked" in done.stderr and "refused the API key" in done.stderr


def test_search_queries_exactly_the_profiles_knowledge_bases(config: Path, tmp_path: Path) -> None:
    default = json.loads(kairox(tmp_path, "search", "magma lava volcano", "--json").stdout)
    assert {s["name"] for s in default["sources"] if s["kind"] == "knowledge_base"} == {"science"}
    done = kairox(tmp_path, "search", "-p", "support", "magma lava volcano", "--json")
    support = json.loads(done.stdout)
    by_name = {s["name"]: s for s in support["sources"] if s["kind"] == "knowledge_base"}
    assert set(by_name) == {"science", "faq", "locked"}
    assert by_name["science"]["ok"] and by_name["faq"]["ok"] and not by_name["locked"]["ok"]
    assert {h["source"] for h in support["hits"]} >= {"science", "faq"}
