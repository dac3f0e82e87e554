"""boto3/botocore failures -> Kairox retriever errors that name the knowledge base and cause."""

from __future__ import annotations

from kairox_core.retrieval.base import (
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
)

THROTTLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ThrottledException",
        "RequestLimitExceeded",
    }
)
AUTH_CODES = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "ExpiredTokenException",
        "ExpiredToken",
        "InvalidSignatureException",
        "IncompleteSignature",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "MissingAuthenticationToken",
        "MissingAuthenticationTokenException",
        "RequestExpired",
    }
)
EXPIRED_CODES = frozenset({"ExpiredTokenException", "ExpiredToken", "RequestExpired"})
SERVER_CODES = frozenset(
    {
        "InternalServerException",
        "BadGatewayException",
        "DependencyFailedException",
        "ServiceUnavailableException",
        "ServiceUnavailable",
        "InternalFailure",
    }
)


def client_error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def _message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        msg = response.get("Error", {}).get("Message")
        if msg:
            return str(msg)
    return str(exc) or type(exc).__name__


def translate(
    exc: BaseException,
    *,
    source: str,
    knowledge_base_id: str,
    region: str | None,
    profile: str | None,
) -> RetrieverError:
    """The Kairox error for a boto3 failure while querying ``knowledge_base_id``."""
    from botocore import exceptions as bx

    where = f"Bedrock knowledge base {knowledge_base_id}" + (f" in {region}" if region else "")
    creds = f"AWS profile '{profile}'" if profile else "the AWS credentials in use"
    code = client_error_code(exc)
    msg = _message(exc)
    if code is not None:
        if code in EXPIRED_CODES:
            return RetrieverAuthError(
                source,
                (
                    f"{creds} have expired ({code}: {msg}); refresh them "
                    f"(e.g. `aws sso login{' --profile ' + profile if profile else ''}`)"
                ),
            )
        if code == "AccessDeniedException":
            return RetrieverAuthError(
                source,
                (
                    f"access denied to {where} ({code}: {msg}); the identity needs "
                    f"bedrock:Retrieve on that knowledge base"
                ),
            )
        if code in AUTH_CODES:
            return RetrieverAuthError(source, f"AWS refused {creds} ({code}: {msg})")
        if code == "ResourceNotFoundException":
            return RetrieverConfigError(
                source, (f"{where} was not found ({msg}); check knowledge_base_id and region")
            )
        if code in THROTTLE_CODES:
            return RetrieverError(source, f"{where} is throttling requests ({code}: {msg})")
        if code in SERVER_CODES:
            return RetrieverUnavailable(source, f"{where} failed on AWS's side ({code}: {msg})")
        if code == "ValidationException":
            return RetrieverError(source, f"{where} rejected the request ({code}: {msg})")
        return RetrieverError(source, f"{where}: {code}: {msg}")
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return RetrieverAuthError(
            source,
            (
                f"no usable AWS credentials for {where} ({msg}); set `profile` in the knowledge "
                "base or configure credentials (AWS_PROFILE, ~/.aws/credentials, SSO)"
            ),
        )
    if isinstance(
        exc,
        bx.CredentialRetrievalError
        | bx.TokenRetrievalError
        | bx.SSOTokenLoadError
        | bx.UnauthorizedSSOTokenError,
    ):
        return RetrieverAuthError(source, f"{creds} could not be loaded ({msg})")
    if isinstance(exc, bx.ProfileNotFound):
        return RetrieverConfigError(source, f"AWS profile '{profile}' does not exist ({msg})")
    if isinstance(exc, bx.NoRegionError):
        return RetrieverConfigError(
            source, ("no AWS region: set `region` in the knowledge base (or AWS_DEFAULT_REGION)")
        )
    if isinstance(exc, bx.ReadTimeoutError | bx.ConnectTimeoutError):
        return RetrieverTimeout(source, f"{where} did not answer in time ({msg})")
    if isinstance(
        exc,
        bx.EndpointConnectionError
        | bx.ConnectionClosedError
        | bx.ProxyConnectionError
        | bx.HTTPClientError,
    ):
        return RetrieverUnavailable(source, f"cannot reach {where} ({msg})")
    if isinstance(exc, bx.ParamValidationError):
        return RetrieverConfigError(source, f"invalid request for {where}: {msg}")
    return RetrieverError(source, f"{where}: {type(exc).__name__}: {msg}")
