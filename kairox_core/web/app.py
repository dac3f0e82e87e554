"""The ASGI app of ``kairox serve``: the API, the OpenAI endpoint and the web app.

``create_app(kx, ...)`` wraps one ``Kairox`` (the facade is the only path to data) in
FastAPI, maps Kairox's user errors to 4xx answers with their message (a database that
cannot be read or written to 503, a full disk to 507), serves the
single-page app from ``kairox_core/web/static`` (nothing fetched at run time) and puts
the security guard (security.py) in front of everything.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from kairox_core.errors import KairoxError, KairoxUserError, StorageError
from kairox_core.prompt import front_end_system_prompt
from kairox_core.web import api, openai_api
from kairox_core.web.security import DEFAULT_MAX_BODY, Guard
from kairox_core.web.turns import Providers

if TYPE_CHECKING:
    from kairox_core.facade import Kairox

STATIC = files("kairox_core.web") / "static"
# The app's own script and style only: no inline script, nothing from elsewhere.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def _status(exc: KairoxError) -> int:
    if isinstance(exc, StorageError):
        return exc.http_status  # 503 (damaged, read-only, locked, server away), 507 (full)
    name = type(exc).__name__
    if name.endswith(("NotFoundError", "UnknownSessionError")) or "NotFound" in name:
        return 404
    if name in ("TurnInProgress", "ProposalNotPendingError"):
        return 409
    return 400 if isinstance(exc, KairoxUserError) else 500


def validation_detail(exc: RequestValidationError) -> str:
    """A request that does not match a route's parameters, in one line per problem:
    where (``body.first_seq``, ``query.k``) and what (the input is never echoed: it may
    be what broke the default handler, a NaN or a lone surrogate)."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()))
        lines.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(lines) or "invalid request"


def validation_param(exc: RequestValidationError) -> str | None:
    """The first problem's field (``messages``, ``k``), for OpenAI's error ``param``."""
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path", "header"):
            loc = loc[1:]
        return ".".join(loc) or None
    return None


def create_app(
    kx: Kairox,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    max_body: int = DEFAULT_MAX_BODY,
) -> Any:
    """The guarded ASGI app over ``kx`` (closed with the app's lifespan by the caller)."""
    providers = Providers(kx.config)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await providers.aclose()

    app = FastAPI(
        lifespan=lifespan,
        title="Kairox",
        summary="Durable memory, retrieval and compaction over HTTP",
        version="0.1.0",
        docs_url=None,  # Swagger UI loads from a CDN: the schema is at /openapi.json
        redoc_url=None,
    )
    app.state.kx = kx
    app.state.providers = providers
    app.state.system_prompt = front_end_system_prompt(kx.config)
    app.include_router(api.router)
    app.include_router(openai_api.router)

    @app.exception_handler(KairoxError)
    async def kairox_error(request: Request, exc: KairoxError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=_status(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problem = {"detail": validation_detail(exc), "param": validation_param(exc)}
        return JSONResponse(problem, status_code=400)

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), headers={"Cache-Control": "no-store"})

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    # /v1/* errors in OpenAI's shape, the guard's refusals included
    guard = Guard(app, token=token, bind_host=host, port=port, max_body=max_body)
    return openai_api.OpenAIErrorShape(guard)
