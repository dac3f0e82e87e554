"""``POST /v1/chat/completions``: any OpenAI client gains Kairox's memory without code.

The request's last user message is the prompt of a Kairox turn in the chosen session
(``X-Kairox-Session`` header, else the request's ``user`` field, else a session
named after neither is refused); the turn runs exactly as the web app's and the
terminal chat's (assembly, the configured upstream provider, ``<memory>`` markers
stripped, proposals queued for approval, compaction). Earlier messages of the request
are not replayed: Kairox keeps the conversation itself, and a client resending its
whole history each call would otherwise double it. A session id not seen before starts
a session with that id (workspace from ``X-Kairox-Workspace``, else the default).
Kairox's extra facts (session id, proposals waiting) ride in a ``kairox`` field that
OpenAI clients ignore.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from kairox_core.errors import KairoxUserError
from kairox_core.web.turns import engine_for, stream_turn

router = APIRouter(prefix="/v1")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, top_p, ...: the profile decides

    model: str = "kairox"
    messages: list[ChatMessage] = Field(..., min_length=1)
    stream: bool = False
    user: str | None = Field(None, max_length=200)


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = message.content or []
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def _prompt(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user" and _text(message).strip():
            return _text(message)
    raise KairoxUserError("the request has no user message with text: nothing to answer")


def _session(request: Request, body: ChatRequest) -> Any:
    kx = request.app.state.kx
    sid = request.headers.get("x-kairox-session") or body.user
    if not sid:
        raise KairoxUserError(
            "choose the Kairox session: send the header X-Kairox-Session: ID or the "
            "request's `user` field (a new id starts a session)"
        )
    workspace = request.headers.get("x-kairox-workspace")
    if kx.events_store.get_session(sid) is None:
        return kx.session(workspace=workspace, session_id=sid)
    return kx.session(session_id=sid)


def _extra(kx: Any, session_id: str, proposals: list[dict[str, Any]]) -> dict[str, Any]:
    return {"session_id": session_id, "proposals": proposals}


@router.post("/chat/completions", summary="OpenAI-compatible chat completions, with memory")
async def chat_completions(request: Request, body: ChatRequest) -> Any:
    kx = request.app.state.kx
    session = _session(request, body)
    session.system_prompt = request.app.state.system_prompt
    engine = engine_for(kx, request.app.state.providers, session)
    prompt = _prompt(body)
    cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
    created = int(time.time())
    model = body.model

    if not body.stream:
        text: list[str] = []
        proposals: list[dict[str, Any]] = []
        async for name, data in stream_turn(engine, prompt):
            if name == "delta":
                text.append(data["text"])
            elif name == "proposal":
                proposals.append(data)
            elif name == "error" and not text:
                return JSONResponse(
                    {"error": {"message": data["message"], "type": "kairox_error"}},
                    status_code=502,
                )
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
            "kairox": _extra(kx, session.id, proposals),
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
        async for name, data in stream_turn(engine, prompt):
            if name == "delta":
                yield chunk({"content": data["text"]})
            elif name == "proposal":
                proposals.append(data)
            elif name == "error":
                err = {"error": {"message": data["message"], "type": "kairox_error"}}
                yield f"data: {json.dumps(err)}\n\n"
        yield chunk({}, "stop", kairox=_extra(kx, session.id, proposals))
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _usage(kx: Any, session_id: str) -> dict[str, int]:
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
