"""What the contract does not cover: the wire protocol, options, modes and error causes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from conftest import (
    API_KEY,
    KEY_ENV,
    WORDS_BACKEND,
    WordHashEmbedder,
    closed_port,
    kb_config,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.errors import ConfigError
from kairox_core.plugins import get_plugins
from kairox_core.retrieval.base import (
    RetrievalHit,
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverUnavailable,
)
from kairox_core.retrieval.selection import build_knowledge_base
from kairox_weaviate.options import WeaviateOptions
from kairox_weaviate.plugin import make_retriever
from kairox_weaviate.retriever import WeaviateRetriever
from kairox_weaviate.testing import FakeObject, FakeWeaviate

TEXTS = {
    "a": ("The moon's gravity pulls the oceans and makes the tides rise and fall.", "physics"),
    "b": ("Magma rises through the crust and erupts from a volcano as lava.", "geology"),
    "c": ("Enzymes are proteins that speed up chemical reactions in cells.", "biology"),
    "d": ("Chemical weathering of granite makes clay; the moon has no weathering.", "geology"),
}


def objects(embedder: WordHashEmbedder, **extra: Any) -> list[FakeObject]:
    return [
        FakeObject(
            {"doc_id": key, "text": text, "category": cat, "rank": i, **extra},
            {"default": embedder.embed_query(text)},
        )
        for i, (key, (text, cat)) in enumerate(TEXTS.items())
    ]


def collection(server: FakeWeaviate, embedder: WordHashEmbedder, **kwargs: Any) -> str:
    name = f"Kx{uuid.uuid4().hex[:12]}"
    if "tenants" not in kwargs:
        kwargs.setdefault("vectorizer", embedder.embed_query)
        server.add_collection(name, objects(embedder), **kwargs)
    else:
        server.add_collection(name, **kwargs)
    return name


def retriever(
    server: FakeWeaviate, name: str, kb_id: str = "wv", **options: Any
) -> WeaviateRetriever:
    opts = {
        "url": server.url,
        "grpc_port": server.grpc_port,
        "collection": name,
        "api_key": f"$env:{KEY_ENV}",
        "id_property": "doc_id",
        **options,
    }
    made = make_retriever(kb_config(kb_id, **opts))
    assert isinstance(made, WeaviateRetriever)
    return made


def search(
    r: WeaviateRetriever, query: str, k: int = 4, filters: dict[str, Any] | None = None
) -> list[RetrievalHit]:
    async def go() -> list[RetrievalHit]:
        try:
            return await r.retrieve(query, k, filters)
        finally:
            await r.close()

    return asyncio.run(go())


@pytest.fixture
def server(fake_weaviate: FakeWeaviate) -> FakeWeaviate:
    fake_weaviate.rest_log.clear()
    fake_weaviate.grpc_log.clear()
    return fake_weaviate


# --- protocol ------------------------------------------------------------------------


def test_api_key_travels_as_bearer_on_rest_and_grpc(
    server: FakeWeaviate, words_backend: WordHashEmbedder
) -> None:
    name = collection(server, words_backend)
    assert search(retriever(server, name), "moon tides")
    paths = [path for _, path, _ in server.rest_log]
    assert paths[:2] == ["/v1/meta", f"/v1/schema/{name}"]
    assert {auth for _, _, auth in server.rest_log} == {f"Bearer {API_KEY}"}
    method, metadata, request = server.grpc_log[-1]
    assert method == "Search"
    assert metadata["authorization"] == f"Bearer {API_KEY}"
    assert metadata["x-weaviate-client"].startswith("weaviate-client-python/")
    assert request.collection == name and request.limit == 4
    assert request.HasField("hybrid_search") and request.hybrid_search.query == "moon tides"
    assert request.metadata.score


def test_hybrid_request_carries_alpha_vector_and_target(
    server: FakeWeaviate, words_backend: WordHashEmbedder
) -> None:
    name = f"Kx{uuid.uuid4().hex[:12]}"
    server.add_collection(
        name,
        [
            FakeObject(
                {"text": t}, {"body": words_backend.embed_query(t), "title": [1.0] + [0.0] * 511}
            )
            for t, _ in TEXTS.values()
        ],
        named_vectors=("body", "title"),
    )
    hits = search(
        retriever(server, name, alpha=0.25, target_vector="body", embedding=WORDS_BACKEND),
        "moon gravity",
    )
    hybrid = server.grpc_log[-1][2].hybrid_search
    alpha = hybrid.alpha_param if hybrid.use_alpha_param else hybrid.alpha
    assert alpha == pytest.approx(0.25)
    assert list(hybrid.target_vectors) + list(hybrid.targets.target_vectors) == ["body"]
    assert hits[0].text.startswith("The moon's gravity")


def test_alpha_moves_between_keyword_and_vector_ranking(
    server: FakeWeaviate, words_backend: WordHashEmbedder
) -> None:
    name = collection(server, words_backend)
    query = "moon weathering"
    keyword = [h.doc_id for h in search(retriever(server, name, mode="bm25"), query)]
    alpha0 = [h.doc_id for h in search(retriever(server, name, alpha=0.0), query)]
    vector = [
        h.doc_id
        for h in search(
            retriever(server, name, mode="near_vector", embedding=WORDS_BACKEND), query, k=2
        )
    ]
    alpha1 = [h.doc_id for h in search(retriever(server, name, alpha=1.0), query, k=2)]
    assert alpha0 == keyword and keyword[0] == "d"
    assert alpha1 == vector
    assert set(keyword) == {"a", "d"}  # only documents with a query term match BM25


def test_query_properties_boost_and_ranked_fusion(
    server: FakeWeaviate, words_backend: WordHashEmbedder
) -> None:
    name = f"Kx{uuid.uuid4().hex[:12]}"
    server.add_collection(
        name,
        [
            FakeObject(
                {"doc_id": "t", "title": "tides", "text": "the sea rises twice a day"},
                {"default": words_backend.embed_query("tides sea")},
            ),
            FakeObject(
                {
                    "doc_id": "b",
                    "title": "sea life",
                    "text": "tides tides tides bring crabs and the sea onto the beach",
                },
                {"default": words_backend.embed_query("sea crabs beach")},
            ),
        ],
    )
    plain = search(retriever(server, name, mode="bm25"), "tides")
    boosted = search(
        retriever(server, name, mode="bm25", query_properties=["title^5", "text"]), "tides"
    )
    assert plain[0].doc_id == "b" and boosted[0].doc_id == "t"
    assert list(server.grpc_log[-1][2].bm25_search.properties) == ["title^5", "text"]
    ranked = search(retriever(server, name, fusion="ranked", alpha=0.5), "tides crabs")
    assert server.grpc_log[-1][2].hybrid_search.fusion_type == 1  # FUSION_TYPE_RANKED
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)


def test_hit_mapping(server: FakeWeaviate, words_backend: WordHashEmbedder) -> None:
    name = collection(server, words_backend)
    hit = search(retriever(server, name, "kb-x"), "volcano lava", k=1)[0]
    assert hit.source == "kb-x" and hit.doc_id == "b"
    assert hit.metadata == {"doc_id": "b", "category": "geology", "rank": 1}
    assert uuid.UUID(str(hit.chunk_id))
    no_id = search(retriever(server, name, id_property=None), "volcano lava", k=1)[0]
    assert no_id.doc_id == no_id.chunk_id  # the object's uuid
    near = search(
        retriever(server, name, mode="near_vector", embedding=WORDS_BACKEND), TEXTS["b"][0], k=1
    )[0]
    assert near.doc_id == "b" and near.score == pytest.approx(1.0, abs=1e-5)  # 1 - distance
    only = search(retriever(server, name, properties=["rank"]), "volcano lava", k=1)[0]
    assert only.metadata == {"rank": 1, "doc_id": "b"} and only.text == TEXTS["b"][0]
    assert set(server.grpc_log[-1][2].properties.non_ref_properties) == {"rank", "text", "doc_id"}


# --- filters -------------------------------------------------------------------------


def test_filters(server: FakeWeaviate, words_backend: WordHashEmbedder) -> None:
    name = collection(server, words_backend)
    r = retriever(server, name, mode="bm25")
    assert {h.doc_id for h in search(r, "chemical moon", filters={"category": "geology"})} == {"d"}
    both = search(r, "chemical moon", filters={"category": ["biology", "physics"]})
    assert {h.doc_id for h in both} == {"a", "c"}
    assert search(r, "chemical moon", filters={"category": "geology", "rank": 0}) == []
    assert search(r, "chemical moon", filters={"category": []}) == []
    with pytest.raises(RetrieverError, match="cannot filter on 'category'"):
        search(r, "moon", filters={"category": {"$gt": 1}})
    sent = server.grpc_log[-1][2].filters  # all_of(category, rank); the last two never left
    assert len(sent.filters) == 2


# --- tenants and named vectors ---------------------------------------------------------


def test_tenant(server: FakeWeaviate, words_backend: WordHashEmbedder) -> None:
    name = collection(
        server,
        words_backend,
        tenants={
            "alice": objects(words_backend, owner="alice")[:2],
            "bob": objects(words_backend, owner="bob")[2:],
        },
    )
    alice = search(retriever(server, name, tenant="alice", mode="bm25"), "moon chemical")
    bob = search(retriever(server, name, tenant="bob", mode="bm25"), "moon chemical")
    assert {h.metadata["owner"] for h in alice} == {"alice"} and {h.doc_id for h in alice} == {"a"}
    assert {h.doc_id for h in bob} == {"c", "d"}
    assert server.grpc_log[-1][2].tenant == "bob"
    with pytest.raises(RetrieverConfigError, match="tenant") as info:
        search(retriever(server, name, "kb-mt", mode="bm25"), "moon")
    assert "kb-mt" in str(info.value)
    with pytest.raises(RetrieverConfigError, match="tenant not found"):
        search(retriever(server, name, tenant="carol", mode="bm25"), "moon")


def test_unknown_target_vector(server: FakeWeaviate, words_backend: WordHashEmbedder) -> None:
    name = collection(server, words_backend)
    with pytest.raises(RetrieverConfigError, match="named vector nope") as info:
        search(retriever(server, name, "kb-tv", target_vector="nope"), "moon")
    assert "kb-tv" in str(info.value)


# --- errors --------------------------------------------------------------------------


def test_unknown_collection(server: FakeWeaviate) -> None:
    with pytest.raises(RetrieverConfigError, match="collection 'Missing' does not exist") as info:
        search(retriever(server, "Missing", "kb-miss"), "moon")
    assert str(info.value).startswith("knowledge base 'kb-miss':")


def test_grpc_port_closed_is_unavailable_fast(server: FakeWeaviate) -> None:
    r = retriever(server, "Docs", "kb-grpc", grpc_port=closed_port(), timeout=10)
    started = time.monotonic()
    with pytest.raises(RetrieverUnavailable, match="gRPC port") as info:
        search(r, "moon")
    assert time.monotonic() - started < 5  # not the client's 1+2+4+... s retry backoff
    assert "kb-grpc" in str(info.value)


def test_grpc_unauthenticated_is_an_auth_error(
    start_fake: Callable[..., FakeWeaviate], words_backend: WordHashEmbedder
) -> None:
    fake = start_fake(api_key=API_KEY, rest_checks_key=False)
    name = collection(fake, words_backend)
    with pytest.raises(RetrieverAuthError, match="UNAUTHENTICATED") as info:
        search(retriever(fake, name, "kb-grpc-auth", api_key="wrong"), "moon")
    assert "kb-grpc-auth" in str(info.value)


def test_forbidden_collection_is_an_auth_error(
    start_fake: Callable[..., FakeWeaviate], words_backend: WordHashEmbedder
) -> None:
    fake = start_fake(api_key=API_KEY)
    name = collection(fake, words_backend)
    fake.denied.add(name)
    with pytest.raises(RetrieverAuthError, match="HTTP 403") as info:  # REST schema check
        search(retriever(fake, name, "kb-rbac"), "moon")
    assert "kb-rbac" in str(info.value)
    r = retriever(fake, name, "kb-rbac")
    fake.denied.clear()

    async def later() -> None:
        try:
            await r.retrieve("moon", 1)  # connected while allowed...
            fake.denied.add(name)
            await r.retrieve("moon", 1)  # ...then the role lost the permission
        finally:
            await r.close()

    with pytest.raises(RetrieverAuthError, match="PERMISSION_DENIED"):
        asyncio.run(later())


def test_missing_key_is_an_auth_error(
    server: FakeWeaviate, words_backend: WordHashEmbedder
) -> None:
    name = collection(server, words_backend)
    with pytest.raises(RetrieverAuthError, match="HTTP 401"):
        search(retriever(server, name, api_key=None), "moon")


def test_unset_env_var_is_a_config_error(
    server: FakeWeaviate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(RetrieverConfigError, match=f"environment variable {KEY_ENV}"):
        search(retriever(server, "Docs", "kb-env"), "moon")


def test_near_vector_default_embedding_is_the_core_hashing_backend(
    server: FakeWeaviate, words_backend: WordHashEmbedder
) -> None:
    host = get_plugins()
    if "hashing" not in host.names("embedding_backends"):
        r = retriever(server, collection(server, words_backend), "kb-nv", mode="near_vector")
        assert r.options.embedding == "hashing"
        with pytest.raises(RetrieverConfigError, match="embedding backend 'hashing'") as info:
            search(r, "moon")
        assert "kb-nv" in str(info.value)
        return
    hashing = host.get("embedding_backends", "hashing").factory()
    name = f"Kx{uuid.uuid4().hex[:12]}"
    server.add_collection(
        name,
        [
            FakeObject({"doc_id": key, "text": text}, {"default": hashing.embed_query(text)})
            for key, (text, _) in TEXTS.items()
        ],
    )
    hits = search(retriever(server, name, mode="near_vector"), "volcano magma lava", k=2)
    assert hits[0].doc_id == "b"


def test_client_is_reused_and_survives_a_new_event_loop(
    server: FakeWeaviate, words_backend: WordHashEmbedder
) -> None:
    r = retriever(server, collection(server, words_backend))

    async def twice() -> int:
        await r.retrieve("moon", 2)
        await r.retrieve("lava", 2)
        return sum(1 for _, path, _ in server.rest_log if path == "/v1/meta")

    assert asyncio.run(twice()) == 1  # one connect for both queries
    assert asyncio.run(r.retrieve("moon", 1))  # another loop: reconnects transparently
    asyncio.run(r.close())
    assert r._client is None


# --- options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"collection": "Docs"}, "missing required key 'knowledge_bases.kb-opt.url'"),
        ({"url": "http://h:8080"}, "missing required key 'knowledge_bases.kb-opt.collection'"),
        ({"url": "ftp://h", "collection": "D"}, "expected http(s)://host"),
        ({"url": "http://[::1", "collection": "D"}, "expected http(s)://host"),
        (
            {"url": "http://h", "collection": "D", "mode": "dense"},
            "key 'knowledge_bases.kb-opt.mode'",
        ),
        ({"url": "http://h", "collection": "D", "alpha": 1.5}, "less than or equal to 1"),
        ({"url": "http://h", "collection": "D", "grpc_port": "x"}, "kb-opt.grpc_port"),
        ({"url": "http://h", "collection": "D", "colection": "x"}, "did you mean 'collection'"),
        ({"url": "http://h", "collection": "D", "properties": "text"}, "kb-opt.properties"),
    ],
)
def test_option_errors_name_the_key(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_retriever(kb_config("kb-opt", **options))
    assert message in str(info.value) and info.value.key is not None
    assert info.value.key.startswith("knowledge_bases.kb-opt.")


def test_the_core_validates_with_the_registered_model(kairox_plugins: Any) -> None:
    assert kairox_plugins.get("retrievers", "weaviate").options is WeaviateOptions
    with pytest.raises(ConfigError, match="did you mean 'collection'"):
        build_knowledge_base(kb_config("kb-opt", url="http://h", collection="D", colection="x"))


def test_option_defaults() -> None:
    opts = make_retriever(kb_config(url="https://wv.example.com", collection="Docs")).options
    assert (opts.http_host, opts.http_port, opts.http_secure) == ("wv.example.com", 443, True)
    assert (opts.grpc_host, opts.grpc_port, opts.grpc_secure) == ("wv.example.com", 50051, True)
    assert (opts.mode, opts.alpha, opts.text_property, opts.embedding) == (
        "hybrid",
        0.7,
        "text",
        None,
    )
    local = make_retriever(kb_config(url="localhost", collection="D", grpc_host="g")).options
    assert (local.http_url, local.grpc_target) == ("http://localhost:8080", "g:50051")


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "url",
                "collection",
                "mode",
                "alpha",
                "grpc_port",
                "grpc_secure",
                "max_vector_distance",
                "properties",
                "headers",
                "tenant",
                "bogus",
            ]
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 70000),
            st.floats(allow_nan=True),
            st.text(max_size=12),
            st.lists(st.text(max_size=5), max_size=3),
            st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
        ),
    )
)
def test_any_options_parse_or_fail_clearly(options: dict[str, Any]) -> None:
    """Whatever a kairox.toml holds, building the retriever raises nothing but a config
    error naming the knowledge base and the key (no TypeError or ValueError leaking out)."""
    options = {"url": "http://localhost:8080", "collection": "Docs", **options}
    options = {k: v for k, v in options.items() if v is not None}
    try:
        opts = make_retriever(kb_config("kb-h", **options)).options
    except ConfigError as exc:
        assert exc.key is not None and exc.key.startswith("knowledge_bases.kb-h.")
        return
    assert 0.0 <= opts.alpha <= 1.0 and 0 < opts.grpc_port < 65536
    assert opts.mode in ("hybrid", "bm25", "near_vector")
