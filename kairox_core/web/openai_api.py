"""``/v1/chat/completions`` and ``/v1/models``: any OpenAI client gains Kairox's memory
without code.

The request's last user message is the prompt of a Kairox turn in one session; the
turn runs exactly as the web app's and the terminal chat's (assembly, the configured
upstream provider, ``<memory>`` markers stripped, proposals queued for approval,
compaction). The session is the ``X-Kairox-Session`` header, else the request's
``user`` field, else one derived from the conversation itself (``derived_session_id``):
a stock chat UI resends the whole conversation every turn, and its system message and
first user message stay the same, so each of its conversations keeps one session.
Earlier messages of the request are not replayed (Kairox keeps the conversation
itself); the client's system message is sent as instructions inside Kairox's budget,
and the trace shows it. ``model`` picks the profile (``GET /v1/models`` lists them;
``kairox`` means the session's own). Images and files in the prompt's content parts
are the turn's attachments (openai_parts.py). Errors come back in OpenAI's shape
(``OpenAIErrorShape``). Kairox's extra facts (session id, proposals waiting) ride in
a ``kairox`` field that OpenAI clients ignore.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kairox_core.errors import KairoxUserError
from kairox_core.web.openai_parts import PartError, attachments_of, check_types, part_text
from kairox_core.web.turns import engine_for, stream_turn

if TYPE_CHECKING:
    from kairox_core.facade import Kairox

router = APIRouter(prefix="/v1")

DEFAULT_MODEL = "kairox"  # the session's own profile
STARTED = time.time()  # a model's ``created``: when the server loaded its profiles
SYSTEM_ROLES = ("system", "developer")  # "developer": OpenAI's newer name for it


class ModelNotFoundError(KairoxUserError):
    """The request's ``model`` is no profile of this configuration."""


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, top_p, ...: the profile decides

    model: str = DEFAULT_MODEL
    messages: list[ChatMessage] = Field(..., min_length=1)
    stream: bool = False
    user: str | None = Field(None, max_length=200)


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return part_text(message.content or [])


def _prompt(request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """The last user message with text: its text, and the images and files its content
    parts carry (earlier messages are not replayed, so neither are their parts)."""
    for i, message in enumerate(request.messages):
        if isinstance(message.content, list):
            check_types(message.content, f"messages[{i}]")
    for i in reversed(range(len(request.messages))):
        message = request.messages[i]
        if message.role == "user" and _text(message).strip():
            parts = message.content if isinstance(message.content, list) else []
            return _text(message), attachments_of(parts, f"messages[{i}]")
    raise KairoxUserError(
        "the request has no user message with text: nothing to answer (an image or a "
        "file goes with a text part saying what to do with it)"
    )


def _instructions(request: ChatRequest) -> list[str]:
    """The client's system (or developer) messages, in order."""
    return [_text(m) for m in request.messages if m.role in SYSTEM_ROLES and _text(m).strip()]


def derived_session_id(request: ChatRequest, workspace: str | None) -> str:
    """``oai-`` and a hash of the conversation's opening: the client's system messages
    and its first user message (and the workspace). Every later request of the same
    conversation resends them unchanged, so it lands in the same session; a new
    conversation (or an edited first message) starts another."""
    first_user = next((_text(m) for m in request.messages if m.role == "user"), "")
    opening = {"workspace": workspace or "", "system": _instructions(request), "user": first_user}
    digest = hashlib.sha256(json.dumps(opening, ensure_ascii=False).encode()).hexdigest()
    return f"oai-{digest[:20]}"


def _profile(kx: Kairox, model: str) -> str | None:
    """The profile ``model`` names (None: the session's own)."""
    if model in ("", DEFAULT_MODEL):
        return None
    try:
        name, _ = kx.config.resolve_profile(model)
    except KairoxUserError:
        known = ", ".join([DEFAULT_MODEL, *kx.config.profiles])
        raise ModelNotFoundError(
            f"the model '{model}' does not exist here: Kairox's models are its profiles "
            f"({known}); GET /v1/models lists them"
        ) from None
    return str(name)


def _session(request: Request, body: ChatRequest) -> Any:
    kx = request.app.state.kx
    workspace = request.headers.get("x-kairox-workspace")
    profile = _profile(kx, body.model)
    sid = request.headers.get("x-kairox-session") or body.user
    sid = sid or derived_session_id(body, workspace)
    if kx.events_store.get_session(sid) is None:
        return kx.session(workspace=workspace, profile=profile, session_id=sid)
    return kx.session(session_id=sid, profile=profile)


def _extra(
    session_id: str, proposals: list[dict[str, Any]], trace: dict[str, Any] | None
) -> dict[str, Any]:
    """What Kairox adds: the session, the proposals waiting, the turn's context trace."""
    return {"session_id": session_id, "proposals": proposals, "trace": trace}


def error_body(
    message: str, status: int, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape: clients (the ``openai`` package) show ``message``."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
}
ERROR_CODES = {"ContextBudgetExceeded": "context_length_exceeded"}


def _turn_error(data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A turn that failed before any text: 400 when the request cannot fit, the
    database's status when it could not be recorded (503, 507), else 502."""
    code = ERROR_CODES.get(str(data.get("kind", "")))
    status = 400 if code else int(data.get("status", 502))
    return status, error_body(str(data["message"]), status, code=code)


@router.get("/models", summary="The profiles, as OpenAI models")
async def list_models(request: Request) -> dict[str, Any]:
    return {"object": "list", "data": [_model(request, name) for name in _model_names(request)]}


@router.get("/models/{model_id}", summary="One profile, as an OpenAI model")
async def get_model(request: Request, model_id: str) -> Any:
    if model_id not in _model_names(request):
        try:
            _profile(request.app.state.kx, model_id)  # an alias: its profile
        except ModelNotFoundError as exc:
            return _model_not_found(exc)
        model_id = _profile(request.app.state.kx, model_id) or DEFAULT_MODEL
    return _model(request, model_id)


def _model_not_found(exc: ModelNotFoundError) -> JSONResponse:
    return JSONResponse(
        error_body(str(exc), 404, param="model", code="model_not_found"), status_code=404
    )


def _model_names(request: Request) -> list[str]:
    return [*request.app.state.kx.config.profiles, DEFAULT_MODEL]


def _model(request: Request, name: str) -> dict[str, Any]:
    config = request.app.state.kx.config
    created = int(STARTED)  # the profiles were loaded then
    if name == DEFAULT_MODEL:
        info = {"profile": None, "note": "the session's own profile"}
    else:
        profile = config.profiles[name]
        info = {"profile": name, "model": profile.model, "context_window": profile.context_window}
    return {"id": name, "object": "model", "created": created, "owned_by": "kairox", "kairox": info}


@router.post("/chat/completions", summary="OpenAI-compatible chat completions, with memory")
async def chat_completions(request: Request, body: ChatRequest) -> Any:
    kx = request.app.state.kx
    try:
        prompt, attachments = _prompt(body)
    except PartError as exc:
        return JSONResponse(error_body(str(exc), 400, param=exc.param), status_code=400)
    try:
        session = _session(request, body)
    except ModelNotFoundError as exc:
        return _model_not_found(exc)
    session.system_prompt = request.app.state.system_prompt
    engine = engine_for(kx, request.app.state.providers, session)
    engine.staged = attachments  # recorded on the turn's UserMessageAdded
    instructions = _instructions(body)
    cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
    created = int(time.time())
    model = body.model if body.model != DEFAULT_MODEL else session.profile

    if not body.stream:
        text: list[str] = []
        proposals: list[dict[str, Any]] = []
        trace = None
        async for name, data in stream_turn(engine, prompt, instructions=instructions):
            if name == "delta":
                text.append(data["text"])
            elif name == "proposal":
                proposals.append(data)
            elif name == "trace":
                trace = data
            elif name == "error" and (not text or "status" in data):  # not recorded: no 200
                status, err = _turn_error(data)
                return JSONResponse(err, status_code=status)
        return {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(text)},
                    "finish_reason": "stop",
                }
            ],
            "usage": _usage(kx, session.id),
            "kairox": _extra(session.id, proposals, trace),
        }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    async def events() -> Any:
        yield chunk({"role": "assistant", "content": ""})
        proposals: list[dict[str, Any]] = []
        trace = None
        async for name, data in stream_turn(engine, prompt, instructions=instructions):
            if name == "delta":
                yield chunk({"content": data["text"]})
            elif name == "proposal":
                proposals.append(data)
            elif name == "trace":
                trace = data
            elif name == "error":
                _, err = _turn_error(data)
                yield f"data: {json.dumps(err, ensure_ascii=False)}\n\n"
        yield chunk({}, "stop", kairox=_extra(session.id, proposals, trace))
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _usage(kx: Kairox, session_id: str) -> dict[str, int]:
    """The last turn's usage as the upstream reported it (zeros when it did not)."""
    from kairox_core.events import AssistantMessageCompleted

    last = kx.events_store.read(session_id, types=["AssistantMessageCompleted"])
    usage = last[-1].usage if last and isinstance(last[-1], AssistantMessageCompleted) else None
    prompt = int((usage or {}).get("prompt_tokens", 0))
    completion = int((usage or {}).get("completion_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class OpenAIErrorShape:
    """Rewrites ``{"detail": ...}`` error answers under ``/v1/`` into OpenAI's
    ``{"error": {"message", "type", "param", "code"}}``, whoever wrote them (the
    security guard, FastAPI's validation, Kairox's error handler): the ``openai``
    package shows only "Error code: 400" for any other shape."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body = b""

        async def rewriting_send(message: Message) -> None:
            nonlocal start, body
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message  # held until the body is whole
                return
            if start is None:
                await send(message)
                return
            body += message.get("body", b"")
            if message.get("more_body", False):
                return
            status = int(start["status"])
            status = 400 if status == 422 else status  # OpenAI answers 400 to a bad body
            new = _rewritten(body, status)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != _LENGTH]
            if new is not None:
                body = new
                headers = [(k, v) for k, v in headers if k.lower() != b"content-type"]
                headers.append((b"content-type", b"application/json"))
            headers.append((_LENGTH, str(len(body)).encode()))
            await send({**start, "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, rewriting_send)


_LENGTH = b"content-length"


def _rewritten(body: bytes, status: int) -> bytes | None:
    """The OpenAI-shaped body for an error answer; None to leave it as it is."""
    try:
        data = json.loads(body or b"null")
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return None  # already OpenAI's
    param = None
    if isinstance(data, dict) and isinstance(data.get("detail"), list):  # validation
        problems = [p for p in data["detail"] if isinstance(p, dict)]
        where = [".".join(str(x) for x in p.get("loc", ()) if x != "body") for p in problems]
        param = where[0] if where else None
        message = "; ".join(
            f"{w or 'body'}: {p.get('msg', '')}" for w, p in zip(where, problems, strict=True)
        )
    elif isinstance(data, dict) and "detail" in data:
        message = str(data["detail"])
        param = data["param"] if isinstance(data.get("param"), str) else None
    else:
        message = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
    return json.dumps(error_body(message, status, param=param)).encode()
