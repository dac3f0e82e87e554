"""pinecone SDK failures -> Kairox retriever errors that name the knowledge base and cause."""

from __future__ import annotations

from kairox_core.retrieval.base import (
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
)


def _detail(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(message).strip()


def translate(exc: BaseException, *, source: str, host: str, namespace: str) -> RetrieverError:
    """The Kairox error for a failed call to the index at ``host``."""
    from pinecone import errors as pe

    where = f"Pinecone index {host}" + (f" (namespace '{namespace}')" if namespace else "")
    msg = _detail(exc)
    if isinstance(exc, pe.UnauthorizedError):
        return RetrieverAuthError(
            source,
            (
                f"{where} refused the API key (401: {msg}); check api_key "
                f'(e.g. `api_key = "$env:PINECONE_API_KEY"`)'
            ),
        )
    if isinstance(exc, pe.ForbiddenError):
        return RetrieverAuthError(source, f"{where} forbids this request (403: {msg})")
    if isinstance(exc, pe.NotFoundError):
        return RetrieverConfigError(source, f"{where} was not found (404: {msg}); check host")
    if isinstance(exc, pe.RateLimitError):
        return RetrieverError(source, f"{where} is rate-limiting requests (429: {msg})")
    if isinstance(exc, pe.ServiceError):
        status = getattr(exc, "status_code", "5xx")
        return RetrieverUnavailable(source, f"{where} failed on Pinecone's side ({status}: {msg})")
    if isinstance(exc, pe.ApiError):
        status = getattr(exc, "status_code", "?")
        if "dimension" in msg.lower():
            return RetrieverConfigError(
                source,
                (
                    f"{where} rejected the query vector ({status}: {msg}); the embedding backend "
                    "must make vectors of the index's dimension (embedding_backend / "
                    "embedding_options), or set integrated_inference = true"
                ),
            )
        return RetrieverError(source, f"{where} rejected the request ({status}: {msg})")
    if isinstance(exc, pe.PineconeTimeoutError):
        return RetrieverTimeout(source, f"{where} did not answer in time ({msg})")
    if isinstance(exc, pe.PineconeConnectionError):
        return RetrieverUnavailable(source, f"cannot reach {where} ({msg})")
    if isinstance(exc, pe.PineconeValueError | pe.PineconeTypeError):
        return RetrieverConfigError(source, f"invalid request for {where}: {msg}")
    return RetrieverError(source, f"{where}: {type(exc).__name__}: {msg}")
