"""weaviate-client exceptions -> Kairox retriever errors that name the knowledge base.

The client wraps gRPC failures in ``WeaviateQueryError`` and keeps the original
``AioRpcError`` only as the implicit ``__context__``, so the status code is recovered
by walking the exception chain rather than by parsing messages where possible.
"""

from __future__ import annotations

from typing import Any

from kairox_core.retrieval.base import (
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _grpc_code(exc: BaseException) -> tuple[str, str] | None:
    """(status name, details) of the first gRPC error in the chain, if any."""
    for item in _chain(exc):
        code = getattr(item, "code", None)
        details = getattr(item, "details", None)
        if callable(code) and callable(details) and type(item).__module__.startswith("grpc"):
            status: Any = code()
            return str(getattr(status, "name", status)), str(details() or "")
    return None


def _root_cause(exc: BaseException) -> str:
    """The innermost non-Weaviate error's text, e.g. httpx's 'All connection attempts failed'."""
    for item in reversed(_chain(exc)):
        text = str(item).strip()
        if text and not type(item).__module__.startswith("weaviate"):
            return text.splitlines()[0]
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _config_cause(message: str, collection: str) -> str | None:
    lowered = message.lower()
    if "could not find class" in lowered or "not present in schema" in lowered:
        return f"collection '{collection}' does not exist ({message})"
    if "tenant" in lowered:
        return f"tenant problem: {message}"
    if "named vector" in lowered or "target vector" in lowered:
        return f"target vector problem: {message}"
    if "no such prop" in lowered or ("property" in lowered and "not found" in lowered):
        return f"property problem: {message}"
    return None


def translate(exc: BaseException, *, source: str, where: str, collection: str) -> RetrieverError:
    """The Kairox error for a failure talking to Weaviate at ``where``."""
    from weaviate import exceptions as wx

    if isinstance(exc, RetrieverError):
        return exc
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    grpc = _grpc_code(exc)
    if grpc is not None:
        status, details = grpc
        if status == "UNAUTHENTICATED":
            return RetrieverAuthError(
                source,
                f"Weaviate at {where} refused the API key "
                f"(gRPC UNAUTHENTICATED: {details}); check api_key",
            )
        if status == "PERMISSION_DENIED":
            return RetrieverAuthError(
                source,
                f"the API key may not read collection "
                f"'{collection}' (gRPC PERMISSION_DENIED: {details})",
            )
        if status == "DEADLINE_EXCEEDED":
            return RetrieverTimeout(source, f"Weaviate at {where} did not answer in time")
        if status == "UNAVAILABLE":
            return RetrieverUnavailable(
                source, f"Weaviate gRPC at {where} is unavailable ({details})"
            )
        cause = _config_cause(details, collection)
        if cause:
            return RetrieverConfigError(source, cause)
        return RetrieverError(source, f"Weaviate search failed: {details or status}")
    if isinstance(exc, wx.UnexpectedStatusCodeError):
        code = exc.status_code
        if code in (401, 403):
            verb = "refused the API key" if code == 401 else "denied access with this API key"
            return RetrieverAuthError(
                source, f"Weaviate at {where} {verb} (HTTP {code}); check api_key"
            )
        if code == 404:
            return RetrieverConfigError(source, f"not found at {where} (HTTP 404): {message}")
        return RetrieverError(source, f"Weaviate at {where} answered HTTP {code}: {message}")
    if isinstance(exc, wx.AuthenticationFailedError):
        return RetrieverAuthError(source, f"Weaviate at {where} needs credentials: set api_key")
    if isinstance(exc, wx.WeaviateTimeoutError):
        return RetrieverTimeout(source, f"Weaviate at {where} did not answer in time")
    if isinstance(exc, wx.WeaviateStartUpError) and "not supported" in message:
        return RetrieverConfigError(source, message)
    if isinstance(
        exc,
        (
            wx.WeaviateConnectionError,
            wx.WeaviateGRPCUnavailableError,
            wx.WeaviateRetryError,
            wx.WeaviateClosedClientError,
            wx.WeaviateStartUpError,
        ),
    ):
        return RetrieverUnavailable(
            source,
            f"cannot reach Weaviate at {where} "
            f"({_root_cause(exc)}); is it running, and is "
            f"knowledge_bases.{source}.url right?",
        )
    if isinstance(exc, wx.WeaviateQueryError):
        cause = _config_cause(message, collection)
        if cause:
            return RetrieverConfigError(source, cause)
        return RetrieverError(source, f"Weaviate search failed: {message}")
    if isinstance(exc, (TimeoutError,)):
        return RetrieverTimeout(source, f"Weaviate at {where} did not answer in time")
    if isinstance(exc, OSError):
        return RetrieverUnavailable(source, f"cannot reach Weaviate at {where}: {message}")
    if isinstance(exc, wx.WeaviateBaseError):
        return RetrieverError(source, f"Weaviate error: {message}")
    return RetrieverError(source, f"unexpected {type(exc).__name__}: {message}")
