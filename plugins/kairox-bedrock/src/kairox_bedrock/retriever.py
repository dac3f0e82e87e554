"""``BedrockRetriever``: one ``[knowledge_bases.<id>]`` of kind ``bedrock``.

boto3 is blocking, so each ``Retrieve`` call runs in a worker thread. Throttling is
retried by botocore itself (``Config(retries={"mode": "standard", ...})``: exponential
backoff with jitter, ``max_attempts`` in all); the caller waits at most the knowledge
base's ``timeout``. The worker is a daemon thread, so a call still retrying after the
caller gave up never delays the event loop's or the process's shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from kairox_bedrock import errors, mapping
from kairox_bedrock.options import BedrockOptions
from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval.base import RetrievalHit, RetrieverError, RetrieverTimeout

if TYPE_CHECKING:
    from kairox_core.config import KnowledgeBaseConfig

T = TypeVar("T")


class BedrockRetriever:
    """Queries an Amazon Bedrock knowledge base with ``bedrock-agent-runtime`` ``Retrieve``."""

    capabilities = RetrieverCapabilities()

    def __init__(
        self,
        name: str,
        options: BedrockOptions,
        *,
        timeout: float = 10.0,
        client_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.name = name
        self.options = options
        self.knowledge_base_id = options.knowledge_base_id
        self.region = options.region
        self.profile = options.profile
        self.timeout = float(timeout)
        self._client_factory = client_factory or self._make_client
        self._client: Any = None
        self._lock = threading.Lock()
        self.attempts = 0  # HTTP attempts of the last retrieve() (botocore's retries + 1)

    @classmethod
    def from_config(
        cls, kb: KnowledgeBaseConfig, options: BedrockOptions | None = None
    ) -> BedrockRetriever:
        """Build from a ``KnowledgeBaseConfig``; ``options`` as validated by the core."""
        if options is None:
            from kairox_core.plugin_options import knowledge_base_key, validate_options

            options = validate_options(BedrockOptions, kb.options, key=knowledge_base_key(kb))
        return cls(kb.id, options, timeout=kb.timeout)

    # --- the client ---------------------------------------------------------------

    def _make_client(self) -> Any:
        import boto3
        from botocore.config import Config

        session = boto3.Session(profile_name=self.profile, region_name=self.region)
        config = Config(
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
            # botocore's standard mode retries throttling and transient errors with
            # exponential backoff and jitter; max_attempts counts the first call
            retries={"total_max_attempts": self.options.max_attempts, "mode": "standard"},
            user_agent_extra="kairox-bedrock",
        )
        return session.client(
            "bedrock-agent-runtime", endpoint_url=self.options.endpoint_url, config=config
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
                k * self.options.overfetch,
                filters,
                search_type=self.options.search_type,
            )
        except mapping.FilterError as exc:
            raise RetrieverError(self.name, f"cannot apply filter: {exc}") from None

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            response: dict[str, Any] = self.client.retrieve(**request)
        except Exception as exc:
            self.attempts = _attempts(getattr(exc, "response", None))
            raise
        self.attempts = _attempts(response)
        return response

    def _translate_call_error(self, exc: BaseException) -> RetrieverError:
        if isinstance(exc, RetrieverError):
            return exc
        code = errors.client_error_code(exc)
        if code in errors.THROTTLE_CODES:
            return RetrieverError(
                self.name,
                (
                    f"Bedrock knowledge base {self.knowledge_base_id} kept throttling "
                    f"requests ({code}) after {self.attempts} attempt(s); lower the request "
                    f"rate or ask AWS for a higher quota"
                ),
            )
        return self._translate(exc)

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        if k <= 0 or not query.strip():
            return []
        request = self.build_request(query, k, filters)
        try:
            response = await asyncio.wait_for(
                _in_daemon_thread(self._call, request), timeout=self.timeout
            )
        except asyncio.TimeoutError:
            raise RetrieverTimeout(
                self.name,
                (
                    f"Bedrock knowledge base {self.knowledge_base_id} did not answer within "
                    f"{self.timeout:g}s (raise `timeout` under [knowledge_bases.{self.name}])"
                ),
            ) from None
        except Exception as exc:
            raise self._translate_call_error(exc) from exc
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


def _attempts(response: Any) -> int:
    """HTTP attempts botocore made for one call (its ``RetryAttempts`` plus the first)."""
    meta = response.get("ResponseMetadata", {}) if isinstance(response, dict) else {}
    return int(meta.get("RetryAttempts", 0)) + 1


async def _in_daemon_thread(fn: Callable[[T], Any], arg: T) -> Any:
    """``fn(arg)`` in a daemon thread: unlike ``asyncio.to_thread``, a call the caller
    stopped waiting for (timeout) is not joined when the loop or the process shuts down."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        try:
            result = fn(arg)
        except BaseException as exc:
            _call_soon(loop, settle, None, exc)
        else:
            _call_soon(loop, settle, result, None)

    threading.Thread(target=work, name="kairox-bedrock-retrieve", daemon=True).start()
    return await future


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed while the call still retried
        loop.call_soon_threadsafe(fn, *args)
