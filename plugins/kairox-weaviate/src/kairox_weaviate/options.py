"""``[knowledge_bases.<id>]`` keys of kind ``weaviate``, parsed and checked up front.

Parsing happens when the retriever is built, so a typo or a missing key is reported
once, naming the knowledge base and the key, before any network traffic. No heavy
imports here: the plugin module imports this on every ``kairox`` start.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from kairox_core.config import KnowledgeBaseConfig
from kairox_core.retrieval.base import RetrieverConfigError

Mode = Literal["hybrid", "bm25", "near_vector"]
MODES: tuple[str, ...] = ("hybrid", "bm25", "near_vector")
DEFAULT_GRPC_PORT = 50051
DEFAULT_ALPHA = 0.7  # the weaviate-client's own default for hybrid search
DEFAULT_EMBEDDING = "hashing"

KNOWN_KEYS = frozenset(
    {
        "url",
        "grpc_host",
        "grpc_port",
        "grpc_secure",
        "collection",
        "target_vector",
        "mode",
        "alpha",
        "fusion",
        "max_vector_distance",
        "embedding",
        "embedding_options",
        "api_key",
        "headers",
        "tenant",
        "text_property",
        "id_property",
        "properties",
        "query_properties",
    }
)


@dataclass(frozen=True)
class WeaviateOptions:
    """Everything the retriever needs, validated; ``api_key`` stays a ``$env:`` reference."""

    http_host: str
    http_port: int
    http_secure: bool
    grpc_host: str
    grpc_port: int
    grpc_secure: bool
    collection: str
    mode: Mode = "hybrid"
    alpha: float = DEFAULT_ALPHA
    fusion: Literal["relative_score", "ranked"] = "relative_score"
    target_vector: str | None = None
    max_vector_distance: float | None = None
    embedding: str | None = None  # None in hybrid mode: the server vectorises the query
    embedding_options: Mapping[str, Any] = field(default_factory=dict)
    tenant: str | None = None
    text_property: str = "text"
    id_property: str | None = None
    properties: tuple[str, ...] | None = None  # None: every non-reference property
    query_properties: tuple[str, ...] | None = None  # BM25 fields, e.g. ("title^2", "text")
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def http_url(self) -> str:
        return f"{'https' if self.http_secure else 'http'}://{self.http_host}:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        return f"{self.grpc_host}:{self.grpc_port}"


def parse_options(kb: KnowledgeBaseConfig) -> WeaviateOptions:
    """Validate ``kb.options``; every problem is a ``RetrieverConfigError`` naming the key."""
    opts = kb.options
    name = kb.id or "weaviate"

    def bad(key: str, problem: str) -> RetrieverConfigError:
        return RetrieverConfigError(name, f"key '{key}': {problem}")

    unknown = sorted(set(opts) - KNOWN_KEYS)
    if unknown:
        hint = difflib.get_close_matches(unknown[0], sorted(KNOWN_KEYS), n=1)
        tip = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise bad(
            unknown[0],
            f"unknown key for kind 'weaviate'{tip}; known keys: {', '.join(sorted(KNOWN_KEYS))}",
        )

    url = _string(opts, "url", bad, required=True)
    assert url is not None
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
    except ValueError:  # e.g. an unbalanced "[" for an IPv6 host
        raise bad("url", f"expected http(s)://host[:port], got {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad("url", f"expected http(s)://host[:port], got {url!r}")
    secure = parts.scheme == "https"
    try:
        http_port = parts.port or (443 if secure else 8080)
    except ValueError:
        raise bad("url", f"invalid port in {url!r}") from None

    collection = _string(opts, "collection", bad, required=True)
    assert collection is not None
    mode = opts.get("mode", "hybrid")
    if mode not in MODES:
        raise bad("mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
    alpha = _number(opts, "alpha", bad, DEFAULT_ALPHA)
    if not 0.0 <= alpha <= 1.0:
        raise bad("alpha", f"must be between 0 (keyword only) and 1 (vector only), got {alpha}")
    fusion = opts.get("fusion", "relative_score")
    if fusion not in ("relative_score", "ranked"):
        raise bad("fusion", f"expected 'relative_score' or 'ranked', got {fusion!r}")
    max_distance = opts.get("max_vector_distance")
    if max_distance is not None:
        max_distance = _number(opts, "max_vector_distance", bad, 0.0)
    grpc_port = opts.get("grpc_port", DEFAULT_GRPC_PORT)
    if not isinstance(grpc_port, int) or isinstance(grpc_port, bool) or not 0 < grpc_port < 65536:
        raise bad("grpc_port", f"expected a port number, got {grpc_port!r}")
    grpc_secure = opts.get("grpc_secure", secure)
    if not isinstance(grpc_secure, bool):
        raise bad("grpc_secure", f"expected true or false, got {grpc_secure!r}")
    embedding = _string(opts, "embedding", bad)
    if embedding is None and mode == "near_vector":
        embedding = DEFAULT_EMBEDDING
    embedding_options = opts.get("embedding_options", {})
    if not isinstance(embedding_options, dict):
        raise bad("embedding_options", "expected a table of options for the embedding backend")
    headers = opts.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise bad("headers", "expected a table of string header values")

    return WeaviateOptions(
        http_host=parts.hostname,
        http_port=http_port,
        http_secure=secure,
        grpc_host=_string(opts, "grpc_host", bad) or parts.hostname,
        grpc_port=grpc_port,
        grpc_secure=grpc_secure,
        collection=collection,
        mode=mode,
        alpha=alpha,
        fusion=fusion,
        target_vector=_string(opts, "target_vector", bad),
        max_vector_distance=max_distance,
        embedding=embedding,
        embedding_options=dict(embedding_options),
        tenant=_string(opts, "tenant", bad),
        text_property=_string(opts, "text_property", bad) or "text",
        id_property=_string(opts, "id_property", bad),
        properties=_names(opts, "properties", bad),
        query_properties=_names(opts, "query_properties", bad),
        headers=dict(headers),
    )


def _string(opts: Mapping[str, Any], key: str, bad: Any, *, required: bool = False) -> str | None:
    value = opts.get(key)
    if value is None:
        if required:
            raise bad(key, "is required")
        return None
    if not isinstance(value, str) or not value.strip():
        raise bad(key, f"expected a non-empty string, got {value!r}")
    return value.strip()


def _number(opts: Mapping[str, Any], key: str, bad: Any, default: float) -> float:
    value = opts.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad(key, f"expected a number, got {value!r}")
    return float(value)


def _names(opts: Mapping[str, Any], key: str, bad: Any) -> tuple[str, ...] | None:
    value = opts.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise bad(key, "expected a list of property names")
    return tuple(value)
