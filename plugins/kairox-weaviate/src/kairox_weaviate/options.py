"""``[knowledge_bases.<id>]`` keys of kind ``weaviate``: the options model the plugin
registers, so the core validates them and reports errors like its own (file, key, fix)
before any network traffic. No heavy imports here: the plugin module imports this on
every ``kairox`` start.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import SplitResult, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)
from pydantic import model_validator as _model_validator

Mode = Literal["hybrid", "bm25", "near_vector"]
MODES: tuple[str, ...] = ("hybrid", "bm25", "near_vector")
DEFAULT_GRPC_PORT = 50051
DEFAULT_ALPHA = 0.7  # the weaviate-client's own default for hybrid search
DEFAULT_EMBEDDING = "hashing"

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def _split(url: str) -> SplitResult:
    """``url`` as http(s)://host[:port] (a bare host means http), or ValueError."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port  # raises on a bad port
    except ValueError:  # e.g. an unbalanced "[" for an IPv6 host
        raise ValueError(f"expected http(s)://host[:port], got {url!r}") from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or (port is not None and port <= 0)
    ):
        raise ValueError(f"expected http(s)://host[:port], got {url!r}")
    return parts


class WeaviateOptions(BaseModel):
    """Everything the retriever needs, validated; ``api_key`` stays a ``$env:`` reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: Name
    collection: Name
    grpc_host: Name | None = None  # None: the url's host
    grpc_port: int = Field(DEFAULT_GRPC_PORT, gt=0, lt=65536)
    grpc_secure: bool | None = None  # None: as the url (https -> TLS)
    mode: Mode = "hybrid"
    alpha: float = Field(DEFAULT_ALPHA, ge=0.0, le=1.0)  # 0 keyword only, 1 vector only
    fusion: Literal["relative_score", "ranked"] = "relative_score"
    target_vector: Name | None = None
    max_vector_distance: float | None = None
    embedding: Name | None = None  # None in hybrid mode: the server vectorises the query
    embedding_options: dict[str, Any] = Field(default_factory=dict)
    api_key: str | None = None  # "$env:NAME", resolved at use with kb.secret("api_key")
    headers: dict[str, str] = Field(default_factory=dict)  # values may be "$env:NAME"
    tenant: Name | None = None
    text_property: Name = "text"
    id_property: Name | None = None
    properties: tuple[Name, ...] | None = None  # None: every non-reference property
    query_properties: tuple[Name, ...] | None = None  # BM25 fields, e.g. ["title^2", "text"]

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        _split(url)
        return url

    @_model_validator(mode="before")
    @classmethod
    def _derived_defaults(cls, data: Any) -> Any:
        """gRPC host and TLS default to the url's; near_vector embeds with ``hashing``."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        url = data.get("url")
        if isinstance(url, str):
            try:
                parts = _split(url.strip())
            except ValueError:
                return data  # the url field reports it
            data.setdefault("grpc_host", parts.hostname)
            data.setdefault("grpc_secure", parts.scheme == "https")
        if data.get("mode") == "near_vector":
            data.setdefault("embedding", DEFAULT_EMBEDDING)
        return data

    # --- derived -----------------------------------------------------------------

    @property
    def http_secure(self) -> bool:
        return _split(self.url).scheme == "https"

    @property
    def http_host(self) -> str:
        return str(_split(self.url).hostname)

    @property
    def http_port(self) -> int:
        return _split(self.url).port or (443 if self.http_secure else 8080)

    @property
    def grpc_hostname(self) -> str:
        return self.grpc_host or self.http_host

    @property
    def grpc_tls(self) -> bool:
        return self.http_secure if self.grpc_secure is None else self.grpc_secure

    @property
    def http_url(self) -> str:
        return f"{'https' if self.http_secure else 'http'}://{self.http_host}:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        return f"{self.grpc_hostname}:{self.grpc_port}"
