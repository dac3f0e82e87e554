"""Wire format, options, filters and every error path, with the real SDK and the local index."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import API_KEY, closed_port
from hypothesis import given, settings
from hypothesis import strategies as st
from pinecone_helpers import KB_NAME, build, seed_records, seed_vectors

from kairox_core.errors import ConfigError
from kairox_core.retrieval.base import (
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
)
from kairox_core.testing.contracts import CONTRACT_DOCS, ContractDoc
from kairox_pinecone import mapping
from kairox_pinecone.retriever import PineconeRetriever
from kairox_pinecone.testing import FakePinecone, bag_of_words, matches_filter

pytestmark = pytest.mark.usefixtures("test_backend")


def run(
    retriever: PineconeRetriever,
    query: str = "chlorophyll",
    k: int = 3,
    filters: dict[str, Any] | None = None,
) -> Any:
    async def go() -> Any:
        try:
            return await retriever.retrieve(query, k, filters)
        finally:
            await retriever.close()

    return asyncio.run(go())


def last_body(server: FakePinecone, path: str) -> tuple[dict[str, str], dict[str, Any]]:
    for req_path, headers, raw in reversed(server.requests):
        if req_path == path:
            return headers, json.loads(raw)
    raise AssertionError(f"no request to {path}")


@pytest.fixture
def seeded(pinecone_server: FakePinecone) -> FakePinecone:
    seed_vectors(pinecone_server.url, "docs", CONTRACT_DOCS)
    return pinecone_server


def retriever_for(server: FakePinecone, api_key_env: str, **options: Any) -> PineconeRetriever:
    options.setdefault("embedding_backend", "kairox-test-bow")
    options.setdefault("namespace", "docs")
    return build(server.url, api_key=api_key_env, **options)


# --- the wire ----------------------------------------------------------------------


def test_query_request_is_pinecone_json_with_api_key_and_version(
    seeded: FakePinecone, api_key_env: str
) -> None:
    hits = run(
        retriever_for(seeded, api_key_env),
        "moon gravity tides",
        2,
        {"category": ["physics", "geology"]},
    )
    assert hits[0].doc_id == "doc-tides" and len(hits) == 2
    headers, body = last_body(seeded, "/query")
    assert headers["api-key"] == API_KEY and headers["x-pinecone-api-version"]
    assert body["topK"] == 2 and body["namespace"] == "docs" and body["includeMetadata"] is True
    assert body["filter"] == {"category": {"$in": ["physics", "geology"]}}
    assert len(body["vector"]) == 64


def test_hits_carry_text_metadata_and_chunk_id(seeded: FakePinecone, api_key_env: str) -> None:
    hit = run(retriever_for(seeded, api_key_env), "magma lava volcano", 1)[0]
    assert hit.text.startswith("Magma rises") and hit.source == KB_NAME
    assert hit.doc_id == hit.chunk_id == "doc-volcano"
    assert hit.metadata == {"title": "Volcanoes", "category": "geology"}
    assert 0 < hit.score <= 1


def test_static_filter_is_anded_with_the_call_filters(
    seeded: FakePinecone, api_key_env: str
) -> None:
    retriever = retriever_for(seeded, api_key_env, filter={"title": {"$ne": "Enzymes"}})
    hits = run(retriever, "chemical proteins", 5, {"category": "biology"})
    assert [h.doc_id for h in hits] == ["doc-photo"]
    _, body = last_body(seeded, "/query")
    assert body["filter"] == {
        "$and": [{"title": {"$ne": "Enzymes"}}, {"category": {"$eq": "biology"}}]
    }


def test_text_field_and_doc_id_field(pinecone_server: FakePinecone, api_key_env: str) -> None:
    from pinecone import Pinecone

    index = Pinecone(api_key=API_KEY).Index(host=pinecone_server.url)
    chunks = [
        ("a#1", "Tides follow the moon."),
        ("a#2", "The moon's gravity pulls."),
        ("b#1", "Volcanoes erupt lava."),
    ]
    index.upsert(
        vectors=[
            {
                "id": cid,
                "values": bag_of_words(text),
                "metadata": {"chunk_text": text, "source_doc": cid.split("#")[0]},
            }
            for cid, text in chunks
        ],
        namespace="chunks",
    )
    index.close()
    retriever = retriever_for(
        pinecone_server,
        api_key_env,
        namespace="chunks",
        text_field="chunk_text",
        doc_id_field="source_doc",
    )
    hits = run(retriever, "moon gravity tides", 2)
    assert [h.doc_id for h in hits] == ["a", "b"]  # one hit per document, best chunk first
    assert last_body(pinecone_server, "/query")[1]["topK"] == 4
    assert hits[0].chunk_id in {"a#1", "a#2"} and "chunk_text" not in hits[0].metadata


def test_wrong_text_field_is_a_config_error(seeded: FakePinecone, api_key_env: str) -> None:
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever_for(seeded, api_key_env, text_field="body"))
    assert "'body'" in str(info.value) and "text" in str(info.value)


def test_min_score_drops_weak_matches(seeded: FakePinecone, api_key_env: str) -> None:
    hits = run(retriever_for(seeded, api_key_env, min_score=0.3), "zyxwvut qwertzuiop", 5)
    assert hits == []
    assert run(retriever_for(seeded, api_key_env, min_score=0.3), "magma lava volcano", 5)


def test_euclidean_distances_become_higher_is_better() -> None:
    found = [mapping.Found("a", 0.1, {"text": "near"}), mapping.Found("b", 2.0, {"text": "far"})]
    hits, _ = mapping.to_hits(
        found, source="s", text_field="text", doc_id_field=None, k=5, metric="euclidean"
    )
    assert [h.doc_id for h in hits] == ["a", "b"] and hits[0].score > hits[1].score


def test_integrated_inference_defaults_to_the_default_namespace(
    make_server: Callable[..., FakePinecone], api_key_env: str
) -> None:
    server = make_server(embed=bag_of_words)
    seed_records(server.url, "__default__", CONTRACT_DOCS)
    retriever = build(server.url, api_key=api_key_env, integrated_inference=True)
    hits = run(retriever, "magma lava volcano", 2, {"category": "geology"})
    assert [h.doc_id for h in hits] == ["doc-volcano", "doc-quartz"]
    _, body = last_body(server, "/records/namespaces/__default__/search")
    assert body["query"] == {
        "top_k": 2,
        "inputs": {"text": "magma lava volcano"},
        "filter": {"category": {"$eq": "geology"}},
    }


def test_integrated_inference_on_a_plain_index_is_a_clear_error(
    seeded: FakePinecone, api_key_env: str
) -> None:
    with pytest.raises(RetrieverError) as info:
        run(retriever_for(seeded, api_key_env, integrated_inference=True))
    assert "Integrated inference is not configured" in str(info.value)
    assert KB_NAME in str(info.value)


def test_fake_index_stats_decode_with_the_sdk_models(seeded: FakePinecone) -> None:
    from pinecone import Pinecone

    index = Pinecone(api_key=API_KEY).Index(host=seeded.url)
    stats = index.describe_index_stats()
    index.close()
    assert stats.dimension == 64 and stats.total_vector_count == len(CONTRACT_DOCS)
    assert stats.namespaces["docs"].vector_count == len(CONTRACT_DOCS)


# --- filters -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "filters, needle",
    [
        ({"category": []}, "non-empty list"),
        ({"category": {"$near": 1}}, "unknown operator"),
        ({"category": None}, "cannot compare"),
        ({"$or": [{"a": 1}]}, "not operators"),
        ({"category": {"$in": "biology"}}, "needs a list"),
    ],
)
def test_filters_pinecone_cannot_apply_fail_before_any_call(
    pinecone_server: FakePinecone, api_key_env: str, filters: dict[str, Any], needle: str
) -> None:
    with pytest.raises(RetrieverError) as info:
        run(retriever_for(pinecone_server, api_key_env), "q", 3, filters)
    assert needle in str(info.value) and KB_NAME in str(info.value)
    assert not any(path == "/query" for path, _, _ in pinecone_server.requests)


_values = st.one_of(st.text(max_size=6), st.integers(-1000, 1000), st.booleans())


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["category", "lang", "year", "tag"]),
        st.one_of(_values, st.lists(_values, min_size=1, max_size=3)),
        max_size=3,
    ),
    st.dictionaries(st.sampled_from(["category", "lang", "year", "tag"]), _values, max_size=4),
)
def test_translated_filters_mean_what_the_kairox_filter_means(
    filters: dict[str, Any], metadata: dict[str, Any]
) -> None:
    """A document passes the Pinecone filter exactly when it passes the Kairox filter."""
    flt = mapping.build_filter(None, filters)
    expected = all(
        metadata.get(k) in v if isinstance(v, list) else metadata.get(k) == v
        for k, v in filters.items()
    )
    assert (flt is None or matches_filter(flt, metadata)) == expected


# --- errors ------------------------------------------------------------------------


def test_dimension_mismatch_is_a_config_error_naming_the_backend(
    seeded: FakePinecone, api_key_env: str
) -> None:
    retriever = retriever_for(seeded, api_key_env, embedding_options={"dimension": 32})
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever)
    assert "dimension" in str(info.value) and "embedding" in str(info.value)


def test_unknown_route_is_a_config_error(
    api_key_env: str, make_server: Callable[..., FakePinecone]
) -> None:
    server = make_server()
    retriever = build(
        server.url + "/not-an-index", api_key=api_key_env, embedding_backend="kairox-test-bow"
    )
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever)
    assert "not found" in str(info.value)


def test_bad_key_is_an_auth_error_and_not_retried(
    pinecone_server: FakePinecone, api_key_env: str
) -> None:
    retriever = build(pinecone_server.url, api_key="pc-wrong", embedding_backend="kairox-test-bow")
    with pytest.raises(RetrieverAuthError) as info:
        run(retriever)
    assert "401" in str(info.value) and "Invalid API Key" in str(info.value)
    assert len(pinecone_server.requests) == 1


def test_unreachable_and_slow(make_server: Callable[..., FakePinecone], api_key_env: str) -> None:
    unreachable = build(
        f"http://127.0.0.1:{closed_port()}",
        api_key=api_key_env,
        embedding_backend="kairox-test-bow",
        timeout=20,
    )
    started = time.monotonic()
    with pytest.raises(RetrieverUnavailable) as info:
        run(unreachable)
    assert "cannot reach" in str(info.value) and time.monotonic() - started < 10
    slow = make_server(delay=3.0)
    started = time.monotonic()
    with pytest.raises(RetrieverTimeout) as tinfo:
        run(build(slow.url, api_key=api_key_env, embedding_backend="kairox-test-bow", timeout=0.3))
    assert time.monotonic() - started < 2.0 and "0.3s" in str(tinfo.value)


# --- configuration -----------------------------------------------------------------


def test_api_key_from_env_reference(
    pinecone_server: FakePinecone, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAIROX_TEST_PINECONE_KEY", raising=False)
    with pytest.raises(Exception) as info:
        build(pinecone_server.url, api_key="$env:KAIROX_TEST_PINECONE_KEY")
    assert "KAIROX_TEST_PINECONE_KEY is not set" in str(info.value)


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"host": ""}, "key 'knowledge_bases.vectors.host': is empty"),
        ({"metric": "manhattan"}, "metric"),
        ({"hots": "x"}, "unknown key 'knowledge_bases.vectors.hots'"),
        ({"filter": "category = 1"}, "key 'knowledge_bases.vectors.filter'"),
        ({"min_score": "high"}, "key 'knowledge_bases.vectors.min_score'"),
        ({"embedding_options": "dimension=3"}, "key 'knowledge_bases.vectors.embedding_options'"),
    ],
)
def test_bad_configuration_names_the_knowledge_base(
    api_key_env: str, options: dict[str, Any], needle: str
) -> None:
    options = {"host": "http://127.0.0.1:1", "api_key": api_key_env, **options}
    with pytest.raises(ConfigError) as info:
        build(**options)
    assert needle in str(info.value)


def test_missing_api_key_falls_back_to_pinecone_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    with pytest.raises(RetrieverConfigError) as info:
        build("http://127.0.0.1:1")
    assert "missing api_key" in str(info.value)
    monkeypatch.setenv("PINECONE_API_KEY", API_KEY)
    assert build("http://127.0.0.1:1").host == "http://127.0.0.1:1"


def test_unknown_embedding_backend_is_a_config_error(
    seeded: FakePinecone, api_key_env: str
) -> None:
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever_for(seeded, api_key_env, embedding_backend="no-such-backend"))
    assert "no-such-backend" in str(info.value)
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever_for(seeded, api_key_env, embedding_options={"colour": "blue"}))
    assert "cannot be made" in str(info.value) and "colour" in str(info.value)


def test_k_beyond_pinecones_limit_is_capped(seeded: FakePinecone, api_key_env: str) -> None:
    hits = run(retriever_for(seeded, api_key_env), "magma", 50_000)
    assert len(hits) == len(CONTRACT_DOCS)
    assert last_body(seeded, "/query")[1]["topK"] == 10_000


def test_default_hashing_backend(pinecone_server: FakePinecone, api_key_env: str) -> None:
    from kairox_core.plugins import get_plugins

    if "hashing" not in get_plugins().names("embedding_backends"):
        pytest.skip("this kairox-core has no built-in 'hashing' embedding backend yet")
    backend = get_plugins().get("embedding_backends", "hashing").factory()
    from pinecone import Pinecone

    index = Pinecone(api_key=API_KEY).Index(host=pinecone_server.url)
    docs: list[ContractDoc] = list(CONTRACT_DOCS)
    index.upsert(
        vectors=[
            {"id": d.id, "values": backend.embed_query(d.text), "metadata": {"text": d.text}}
            for d in docs
        ],
        namespace="h",
    )
    index.close()
    retriever = build(pinecone_server.url, api_key=api_key_env, namespace="h")
    assert run(retriever, "moon gravity tides", 1)[0].doc_id == "doc-tides"


def test_plugin_registers_without_importing_the_sdk() -> None:
    code = (
        "import sys\n"
        "from kairox_core.plugins import get_plugins\n"
        "assert 'pinecone' in get_plugins().names('retrievers')\n"
        "assert 'pinecone' not in sys.modules, 'SDK imported at registration'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_invalid_host_is_a_config_error(api_key_env: str) -> None:
    retriever = build("not a host", api_key=api_key_env, embedding_backend="kairox-test-bow")
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever)
    assert "not a host" in str(info.value) and KB_NAME in str(info.value)
