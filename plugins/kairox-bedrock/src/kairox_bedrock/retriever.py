"""``BedrockRetriever``: one ``[knowledge_bases.<id>]`` of kind ``bedrock``.

boto3 is blocking, so each ``Retrieve`` call runs in a worker thread. botocore's own
retries are switched off: throttling is retried here, with exponential backoff and
jitter, inside the knowledge base's ``timeout``, so the whole call is bounded by it.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kairox_bedrock import errors, mapping
from kairox_core.retrieval.base import (
    RetrievalHit,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
)

KB_ID_PATTERN = re.compile(
    r"^[0-9a-zA-Z]{10}$|^arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:"
    r"knowledge-base/[0-9a-zA-Z]{10}$"
)
SEARCH_TYPES = ("HYBRID", "SEMANTIC")
KNOWN_OPTIONS = frozenset(
    {
        "knowledge_base_id",
        "region",
        "profile",
        "endpoint_url",
        "search_type",
        "max_attempts",
        "backoff",
        "overfetch",
    }
)


class BedrockRetriever:
    """Queries an Amazon Bedrock knowledge base with ``bedrock-agent-runtime`` ``Retrieve``."""

    def __init__(
        self,
        name: str,
        knowledge_base_id: str,
        *,
        region: str | None = None,
        profile: str | None = None,
        endpoint_url: str | None = None,
        timeout: float = 10.0,
        search_type: str | None = None,
        max_attempts: int = 5,
        backoff: float = 0.2,
        overfetch: int = 2,
        client_factory: Callable[[], Any] | None = None,
    ) -> None:
        if not KB_ID_PATTERN.match(knowledge_base_id or ""):
            raise RetrieverConfigError(
                name,
                (
                    f"knowledge_base_id {knowledge_base_id!r} is not a Bedrock knowledge base id "
                    "(10 letters/digits, e.g. 'ABCDE12345', or its ARN)"
                ),
            )
        if search_type is not None and search_type.upper() not in SEARCH_TYPES:
            raise RetrieverConfigError(
                name, f"search_type must be one of {', '.join(SEARCH_TYPES)} (got {search_type!r})"
            )
        if max_attempts < 1 or backoff < 0 or overfetch < 1:
            raise RetrieverConfigError(
                name, "max_attempts and overfetch must be >= 1 and backoff >= 0"
            )
        self.name = name
        self.knowledge_base_id = knowledge_base_id
        self.region = region
        self.profile = profile
        self.endpoint_url = endpoint_url
        self.timeout = float(timeout)
        self.search_type = search_type.upper() if search_type else None
        self.max_attempts = int(max_attempts)
        self.backoff = float(backoff)
        self.overfetch = int(overfetch)
        self._client_factory = client_factory or self._make_client
        self._client: Any = None
        self._lock = threading.Lock()
        self.attempts = 0  # Retrieve calls made by the last retrieve(), for tests and logs

    @classmethod
    def from_config(cls, kb: Any) -> BedrockRetriever:
        """Build from a ``KnowledgeBaseConfig`` (``kb.options`` holds the kind's keys)."""
        options: dict[str, Any] = dict(kb.options)
        unknown = sorted(set(options) - KNOWN_OPTIONS)
        if unknown:
            raise RetrieverConfigError(
                kb.id,
                (
                    f"unknown option(s) {', '.join(unknown)} for kind 'bedrock'; "
                    f"known: {', '.join(sorted(KNOWN_OPTIONS))}"
                ),
            )
        kb_id = options.get("knowledge_base_id")
        if not kb_id:
            raise RetrieverConfigError(
                kb.id,
                (
                    'missing knowledge_base_id: add `knowledge_base_id = "ABCDE12345"` '
                    f"under [knowledge_bases.{kb.id}]"
                ),
            )
        try:
            max_attempts = int(options.get("max_attempts", 5))
            backoff = float(options.get("backoff", 0.2))
            overfetch = int(options.get("overfetch", 2))
        except (TypeError, ValueError) as exc:
            raise RetrieverConfigError(
                kb.id, f"max_attempts, backoff and overfetch must be numbers ({exc})"
            ) from None
        return cls(
            kb.id,
            str(kb_id),
            region=options.get("region"),
            profile=options.get("profile"),
            endpoint_url=options.get("endpoint_url"),
            timeout=kb.timeout,
            search_type=options.get("search_type"),
            max_attempts=max_attempts,
            backoff=backoff,
            overfetch=overfetch,
        )

    # --- the client ---------------------------------------------------------------

    def _make_client(self) -> Any:
        import boto3
        from botocore.config import Config

        session = boto3.Session(profile_name=self.profile, region_name=self.region)
        config = Config(
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
            retries={"total_max_attempts": 1, "mode": "standard"},  # we retry throttling
            user_agent_extra="kairox-bedrock",
        )
        return session.client(
            "bedrock-agent-runtime", endpoint_url=self.endpoint_url, config=config
        )

    @property
    def client(self) -> Any:
        """The botocore client, created on first use (importing boto3 takes a second)."""
        with self._lock:
            if self._client is None:
                try:
                    self._client = self._client_factory()
                except Exception as exc:
                    raise self._translate(exc) from exc
            return self._client

    def _translate(self, exc: BaseException) -> RetrieverError:
        return errors.translate(
            exc,
            source=self.name,
            knowledge_base_id=self.knowledge_base_id,
            region=self.region,
            profile=self.profile,
        )

    # --- retrieval ----------------------------------------------------------------

    def build_request(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        try:
            return mapping.build_request(
                self.knowledge_base_id,
                query,
                k * self.overfetch,
                filters,
                search_type=self.search_type,
            )
        except mapping.FilterError as exc:
            raise RetrieverError(self.name, f"cannot apply filter: {exc}") from None

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = self.client.retrieve(**request)
        return response

    async def _call_with_backoff(self, request: dict[str, Any], deadline: float) -> Any:
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            attempt += 1
            self.attempts = attempt
            try:
                return await asyncio.to_thread(self._call, request)
            except RetrieverError:
                raise
            except Exception as exc:
                code = errors.client_error_code(exc)
                if code not in errors.THROTTLE_CODES:
                    raise self._translate(exc) from exc
                delay = self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random() / 2)
                if attempt >= self.max_attempts or loop.time() + delay >= deadline:
                    raise RetrieverError(
                        self.name,
                        (
                            f"Bedrock knowledge base {self.knowledge_base_id} kept throttling "
                            f"requests ({code}) after {attempt} attempt(s); lower the request "
                            f"rate or ask AWS for a higher quota"
                        ),
                    ) from exc
                await asyncio.sleep(delay)

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        if k <= 0 or not query.strip():
            return []
        request = self.build_request(query, k, filters)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        try:
            response = await asyncio.wait_for(
                self._call_with_backoff(request, deadline), timeout=self.timeout
            )
        except asyncio.TimeoutError:
            raise RetrieverTimeout(
                self.name,
                (
                    f"Bedrock knowledge base {self.knowledge_base_id} did not answer within "
                    f"{self.timeout:g}s (raise `timeout` under [knowledge_bases.{self.name}])"
                ),
            ) from None
        return mapping.to_hits(
            response.get("retrievalResults") or [],
            source=self.name,
            knowledge_base_id=self.knowledge_base_id,
            k=k,
        )

    async def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None and hasattr(client, "close"):
            client.close()
