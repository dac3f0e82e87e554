"""The HTTP API under ``/api``: every route is one facade call (no second code path).

Everything is read from the database on each request, so a change made by another
process (the TUI, the CLI, a second server) shows on the next request. Routes are
``async def`` on purpose: they all run on the server's event loop, the loop that owns
the sessions' locks (see DEVELOPERS.md, "Sync twins run on one background loop").
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from kairox_core.errors import KairoxUserError
from kairox_core.events import (
    AssistantMessageCompleted,
    MemoryAccepted,
    ReplyFlagged,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.inputs import MAX_INT64
from kairox_core.longterm.service import MAX_SEARCH_K
from kairox_core.memory.records import MemoryNotFoundError, MemoryRecord
from kairox_core.summary_lines import line_of, numbered_lines
from kairox_core.turn_status import INTERRUPTED_NOTE, interrupted_turns
from kairox_core.usage import usage
from kairox_core.web.serialize import event_json, memory_json, plain, proposal_json
from kairox_core.web.turns import engine_for, sse, stream_turn

router = APIRouter(prefix="/api")
Scope = Literal["user", "workspace", "session"]
CONVERSATION = (UserMessageAdded, AssistantMessageCompleted, ToolInvocationCompleted)
Seq = Annotated[int, Path(ge=1, le=MAX_INT64)]  # what the event store's seqs can be


class NewSession(BaseModel):
    workspace: str | None = None
    profile: str | None = None
    session_id: str | None = Field(None, max_length=200)


class Upload(BaseModel):
    """A file sent with a prompt: its name and its bytes, base64."""

    filename: str = Field(..., min_length=1, max_length=255)
    data: str


class Prompt(BaseModel):
    prompt: str = Field(..., min_length=1)
    attachments: list[Upload] = Field(default_factory=list)  # read as attachments.from_bytes


class Decision(BaseModel):
    body: str | None = None  # accept: the edited body; absent: as proposed
    reason: str | None = None  # reject: why
    scope: str | None = None  # accept: the corrected scope; absent: as proposed
    key: str | None = Field(None, max_length=128)  # accept: the corrected key


class Body(BaseModel):
    body: str = Field(..., min_length=1)


class NewMemory(BaseModel):
    scope: Scope
    key: str | None = None
    body: str = Field(..., min_length=1)
    workspace: str | None = None
    session_id: str | None = None


class CompactRange(BaseModel):
    first_seq: int | None = Field(None, ge=1)
    last_seq: int | None = Field(None, ge=1)


class Text(BaseModel):
    text: str = Field(..., min_length=1)


class ChunkIndex(BaseModel):
    chunk: int = Field(..., ge=0)


class NewChunk(BaseModel):
    text: str = Field(..., min_length=1)
    scope: Literal["session", "project", "global"]
    session_id: str | None = None
    workspace: str | None = None


class NewPack(BaseModel):
    name: str = Field(..., min_length=1)
    level: Literal["personal", "team", "org"] = "personal"
    text: str = ""


class Promote(BaseModel):
    chunk_ids: list[str] = Field(..., min_length=1)
    pack: str | None = None


class Publish(BaseModel):
    level: Literal["team", "org"]


class Activate(BaseModel):
    workspace: str | None = None
    active: bool = True


def uploaded(upload: Upload) -> dict[str, Any]:
    """An upload as an attachment (image, PDF, text file), or a clear error."""
    from kairox_core.attachments import MAX_BYTES, AttachmentError, from_bytes

    try:
        data = base64.b64decode(upload.data, validate=True)
    except ValueError:
        raise AttachmentError(f"cannot attach {upload.filename}: its data is not base64") from None
    if len(data) > MAX_BYTES:
        raise AttachmentError(
            f"cannot attach {upload.filename}: {len(data):,} bytes is over the limit of "
            f"{MAX_BYTES:,}"
        )
    return from_bytes(upload.filename, data)


def kx_of(request: Request) -> Kairox:
    kx: Kairox = request.app.state.kx
    return kx


# --- sessions and turns ----------------------------------------------------------------


@router.get("/sessions", summary="Every session in the database, newest first")
async def list_sessions(request: Request) -> list[dict[str, Any]]:
    infos = kx_of(request).sessions()
    return [plain(i) for i in sorted(infos, key=lambda i: -i.created_at)]


@router.post("/sessions", summary="Start a session (or resume one by id)")
async def new_session(request: Request, spec: NewSession) -> dict[str, Any]:
    session = kx_of(request).session(
        workspace=spec.workspace, profile=spec.profile, session_id=spec.session_id
    )
    return {"session_id": session.id, "workspace": session.workspace_id, "profile": session.profile}


@router.get("/sessions/{session_id}/events", summary="The session's audit trail")
async def session_events(
    request: Request,
    session_id: str,
    after: Annotated[int, Query(ge=0, lt=MAX_INT64)] = 0,
    type: Annotated[list[str] | None, Query()] = None,
) -> list[dict[str, Any]]:
    kx = kx_of(request)
    kx.get_session(session_id)
    events = kx.events_store.read(session_id, first_seq=after + 1, types=type or None)
    return [event_json(e) for e in events if e.type != "ModelTokenDelta"]


@router.get(
    "/sessions/{session_id}/messages",
    summary=(
        "The conversation, as people see it (`interrupted` on a turn with no reply, "
        "`unsaved` on a reply that claimed to note something and saved nothing)"
    ),
)
async def session_messages(request: Request, session_id: str) -> list[dict[str, Any]]:
    kx = kx_of(request)
    kx.get_session(session_id)
    events = kx.events_store.read(session_id)
    out = [event_json(e) for e in events if isinstance(e, CONVERSATION)]
    # a turn whose reply was never recorded (its process died): its last message says so
    unfinished = {t.turn_id for t in interrupted_turns(events)}
    last_of: dict[str, dict[str, Any]] = {}
    for item in out:
        turn_id = item["payload"].get("turn_id")
        if turn_id in unfinished:
            last_of[turn_id] = item
    for item in last_of.values():
        item["interrupted"] = INTERRUPTED_NOTE
    # the warning shown under a reply when it was given, said again under it
    flags = {e.turn_id: e.note for e in events if isinstance(e, ReplyFlagged)}
    for item in out:
        if item["type"] == "AssistantMessageCompleted" and item["payload"]["turn_id"] in flags:
            item["unsaved"] = flags[item["payload"]["turn_id"]]
    return out


@router.get(
    "/sessions/{session_id}/messages/{seq}/attachments/{index}",
    summary="A message's attachment as it was sent (a download)",
)
async def message_attachment(
    request: Request, session_id: str, seq: Seq, index: Annotated[int, Path(ge=0, le=MAX_INT64)]
) -> Response:
    kx = kx_of(request)
    kx.get_session(session_id)
    found = kx.events_store.read(session_id, first_seq=seq, last_seq=seq)
    atts = found[0].attachments if found and isinstance(found[0], UserMessageAdded) else ()
    if not 0 <= index < len(atts):
        raise KairoxUserError(
            f"message {seq} of session {session_id} has no attachment {index}; "
            f"GET /api/sessions/{session_id}/messages lists messages and their attachments"
        )
    att = atts[index]
    name = str(att.get("filename") or "attachment")
    if isinstance(att.get("data"), str):  # the file as sent: an image, a PDF
        body, media_type = base64.b64decode(att["data"]), str(att.get("media_type"))
    else:  # a text file's text (or a document a caller passed as text only)
        body, media_type = str(att.get("text") or "").encode(), "text/plain; charset=utf-8"
    return Response(
        body,
        media_type=media_type,
        headers={
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
            "X-Content-Type-Options": "nosniff",
        },
    )


@router.post(
    "/sessions/{session_id}/turns",
    summary="Run a turn; the answer streams as server-sent events",
    description=(
        "Events: `delta` (cleaned text), `trace` (the context, layer by layer), "
        "`proposal` (a memory waiting for approval), `accepted` (session memories), "
        "`compaction`, `error`, `done`."
    ),
)
async def run_turn(request: Request, session_id: str, prompt: Prompt) -> Response:
    kx = kx_of(request)
    session = kx.get_session(session_id)
    engine = engine_for(kx, request.app.state.providers, session)
    session.system_prompt = request.app.state.system_prompt
    engine.staged = [uploaded(u) for u in prompt.attachments]  # a bad file: 400, no turn

    events = stream_turn(engine, prompt.prompt)
    first = await anext(events, None)  # the prompt is recorded before the first event
    if first is not None and first[0] == "error" and "status" in first[1]:
        return JSONResponse({"detail": first[1]["message"]}, status_code=first[1]["status"])

    async def body() -> Any:
        if first is not None:
            yield sse(*first)
        async for name, data in events:
            yield sse(name, data)

    return StreamingResponse(
        body(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
    )


@router.get("/sessions/{session_id}/context", summary="What the next turn would send")
async def session_context(request: Request, session_id: str, prompt: str = "") -> dict[str, Any]:
    session = kx_of(request).get_session(session_id)
    context = await session.preview(prompt)
    state = session.refresh_compaction()
    data: dict[str, Any] = context.as_dict()
    data["pinned"] = [plain(p) for p in state.pinned]
    data["summaries"] = [plain(s) for s in state.summaries]
    return data


# --- approvals ---------------------------------------------------------------------------


@router.get("/approvals", summary="Proposals waiting for a person")
async def pending(request: Request, workspace: str | None = None) -> list[dict[str, Any]]:
    approvals = kx_of(request).approvals
    found = approvals.pending(workspace_id=workspace) if workspace else approvals.pending()
    return [proposal_json(p) for p in found]


@router.post("/approvals/{proposal_id}/accept", summary="Accept (with `body`: edit, then accept)")
async def accept(request: Request, proposal_id: str, decision: Decision) -> dict[str, Any]:
    return memory_json(
        kx_of(request).approvals.accept(
            proposal_id, body=decision.body, scope=decision.scope, key=decision.key
        )
    )


@router.post("/approvals/{proposal_id}/reject", summary="Reject a proposal")
async def reject(request: Request, proposal_id: str, decision: Decision) -> dict[str, Any]:
    return proposal_json(kx_of(request).approvals.reject(proposal_id, reason=decision.reason))


# --- memories ----------------------------------------------------------------------------


@router.get("/memories", summary="Memories of every scope (or one); `q` searches key and body")
async def memories(
    request: Request,
    scope: Scope | None = None,
    workspace: str | None = None,
    session_id: str | None = None,
    q: str | None = None,
) -> list[dict[str, Any]]:
    records = kx_of(request).memories.list(scope, workspace_id=workspace, session_id=session_id)
    if q:
        needle = q.casefold()
        records = [r for r in records if needle in f"{r.key or ''}\n{r.body}".casefold()]
    return [memory_json(r) for r in records]


@router.post("/memories", summary="Add a memory of your own (accepted at once)")
async def add_memory(request: Request, spec: NewMemory) -> dict[str, Any]:
    record = kx_of(request).approvals.remember(
        spec.scope,
        spec.key,
        spec.body,
        workspace_id=spec.workspace,
        session_id=spec.session_id,
    )
    return memory_json(record)


def _memory(kx: Kairox, memory_id: str) -> MemoryRecord:
    record = kx.memories.get_by_id(memory_id)
    if record is None:
        raise MemoryNotFoundError(f"no memory '{memory_id}'; GET /api/memories lists them")
    return record


@router.get("/memories/{memory_id}", summary="One memory")
async def get_memory(request: Request, memory_id: str) -> dict[str, Any]:
    return memory_json(_memory(kx_of(request), memory_id))


@router.put("/memories/{memory_id}", summary="Replace a memory's body (MemoryEdited)")
async def edit_memory(request: Request, memory_id: str, body: Body) -> dict[str, Any]:
    return memory_json(kx_of(request).approvals.edit_memory(memory_id, body.body))


@router.delete("/memories/{memory_id}", summary="Delete a memory (kept in its history)")
async def delete_memory(request: Request, memory_id: str) -> dict[str, Any]:
    return memory_json(kx_of(request).approvals.delete_memory(memory_id))


@router.get("/memories/{memory_id}/history", summary="Every body the memory's key has had")
async def memory_history(request: Request, memory_id: str) -> list[Any]:
    kx = kx_of(request)
    record = _memory(kx, memory_id)
    if record.key is None:  # a memory without a key has no versions (as `kairox memory show`)
        return []
    versions = kx.memories.history(
        record.scope, record.key, workspace_id=record.workspace_id, session_id=record.session_id
    )
    return [plain(v) for v in versions]


# --- compaction --------------------------------------------------------------------------


@router.post("/sessions/{session_id}/compact", summary="Compact now (or a seq range)")
async def compact(request: Request, session_id: str, spec: CompactRange) -> dict[str, Any]:
    session = kx_of(request).get_session(session_id)
    result = await session.compact(spec.first_seq, spec.last_seq)
    data: dict[str, Any] = result.as_dict()
    return data


@router.get("/sessions/{session_id}/summaries", summary="Active summaries with their originals")
async def summaries(request: Request, session_id: str) -> list[dict[str, Any]]:
    kx = kx_of(request)
    session = kx.get_session(session_id)
    out = []
    for item in session.refresh_compaction().summaries:
        originals = kx.events_store.read(
            session_id, first_seq=item.first_seq, last_seq=item.last_seq
        )
        stored = kx.events_store.read(session_id, first_seq=item.seq, last_seq=item.seq)
        out.append(
            {
                **plain(item),
                "created_at": stored[0].created_at if stored else None,  # when compacted
                "chunks": [c for c in item.text.split("\n") if c.strip()],
                # the one numbering (`kairox summary show`): drop, pin and keep take index
                "lines": [{"index": i, "text": c} for i, c in numbered_lines(item.text)],
                "originals": [event_json(e) for e in originals if isinstance(e, CONVERSATION)],
            }
        )
    return out


@router.put("/sessions/{session_id}/summaries/{seq}", summary="Replace a summary's text")
async def edit_summary(request: Request, session_id: str, seq: Seq, text: Text) -> dict[str, Any]:
    session = kx_of(request).get_session(session_id)
    return event_json(await session.edit_summary(seq, text.text))


@router.post("/sessions/{session_id}/summaries/{seq}/drop", summary="Drop one chunk (line)")
async def drop_chunk(
    request: Request, session_id: str, seq: Seq, chunk: ChunkIndex
) -> dict[str, Any]:
    session = kx_of(request).get_session(session_id)
    return event_json(await session.drop_chunk(seq, chunk.chunk))


class SummaryLine(BaseModel):
    line: int = Field(..., ge=0, le=MAX_INT64)  # as `kairox summary show` numbers it
    scope: Literal["session", "project", "global"] = "session"


@router.post("/sessions/{session_id}/summaries/{seq}/pin", summary="Pin one line of a summary")
async def pin_summary_line(
    request: Request, session_id: str, seq: Seq, spec: SummaryLine
) -> dict[str, Any]:
    session = kx_of(request).get_session(session_id)
    line = line_of(session.active_summary(seq), spec.line)
    return event_json(await session.pin_fact(line, source_seq=seq))


@router.post(
    "/sessions/{session_id}/summaries/{seq}/longterm",
    summary="Keep one line of a summary as a long-term chunk (scope session by default)",
)
async def keep_summary_line(
    request: Request, session_id: str, seq: Seq, spec: SummaryLine
) -> dict[str, Any]:
    kx = kx_of(request)
    kx.get_session(session_id)
    chunk = kx.longterm.pin_summary_line(session_id, seq, spec.line, scope=spec.scope)
    data: dict[str, Any] = chunk.as_dict()
    return data


@router.post("/sessions/{session_id}/pins", summary="Pin a fact: verbatim in every turn")
async def pin(request: Request, session_id: str, text: Text) -> dict[str, Any]:
    session = kx_of(request).get_session(session_id)
    return event_json(await session.pin_fact(text.text))


@router.delete("/sessions/{session_id}/pins/{fact_id}", summary="Release a pinned fact")
async def unpin(request: Request, session_id: str, fact_id: str) -> dict[str, Any]:
    session = kx_of(request).get_session(session_id)
    return event_json(await session.unpin_fact(fact_id))


# --- usage -------------------------------------------------------------------------------


@router.get("/usage", summary="Tokens per session, compaction spend included")
async def usage_all(request: Request, session_id: str | None = None) -> list[dict[str, Any]]:
    kx = kx_of(request)
    if session_id is not None:
        kx.get_session(session_id)
    rows = []
    for session in usage(kx, session_id).sessions:
        t = session.totals
        rows.append(
            {
                "session_id": session.session_id,
                "turns": t.turns,
                "chat_prompt_tokens": t.prompt_tokens,
                "chat_completion_tokens": t.completion_tokens,
                "compactions": t.compactions,
                "compaction_prompt_tokens": t.compaction_prompt_tokens,
                "compaction_completion_tokens": t.compaction_completion_tokens,
                "total_tokens": t.total_tokens,
                "estimated": t.estimated,
            }
        )
    return rows


# --- long-term chunks and packs ------------------------------------------------------------


@router.get("/longterm", summary="Long-term chunks")
async def longterm_list(
    request: Request,
    scope: Literal["session", "project", "global"] | None = None,
    session_id: str | None = None,
    workspace: str | None = None,
) -> list[dict[str, Any]]:
    chunks = kx_of(request).longterm.list(scope, session_id=session_id, workspace_id=workspace)
    return [c.as_dict() for c in chunks]


@router.get("/longterm/search", summary="Chunks similar to a query, above the threshold")
async def longterm_search(
    request: Request,
    q: str,
    session_id: str,
    workspace: str | None = None,
    k: Annotated[int | None, Query(ge=0, le=MAX_SEARCH_K)] = None,
) -> list[dict[str, Any]]:
    hits = kx_of(request).longterm.search(q, session_id=session_id, workspace_id=workspace, k=k)
    return [{**h.chunk.as_dict(), "similarity": h.similarity} for h in hits]


@router.post("/longterm", summary="Add a long-term chunk")
async def longterm_add(request: Request, spec: NewChunk) -> dict[str, Any]:
    chunk = kx_of(request).longterm.add(
        spec.text, scope=spec.scope, session_id=spec.session_id, workspace_id=spec.workspace
    )
    data: dict[str, Any] = chunk.as_dict()
    return data


class RememberThis(BaseModel):
    text: str = Field(..., min_length=1)
    scope: Literal["session", "project", "global"] = "session"
    source_seq: int | None = Field(
        None, ge=1, le=MAX_INT64
    )  # the message; None: the newest that says it


@router.post(
    "/sessions/{session_id}/remember",
    summary="Remember this: a message, or part of one, as a long-term chunk",
    description=(
        "`source_seq` names the message; without it, the newest message of the session "
        "that contains `text` (a selection in a message streamed before it had a seq)."
    ),
)
async def remember_this(request: Request, session_id: str, spec: RememberThis) -> dict[str, Any]:
    kx = kx_of(request)
    kx.get_session(session_id)
    said = [
        e
        for e in kx.events_store.read(
            session_id, types=["UserMessageAdded", "AssistantMessageCompleted"]
        )
        if isinstance(e, UserMessageAdded | AssistantMessageCompleted)
    ]
    seq = spec.source_seq
    if seq is None:
        needle = " ".join(spec.text.split())
        seq = next((e.seq for e in reversed(said) if needle in " ".join(e.text.split())), None)
    elif not any(e.seq == seq for e in said):
        raise KairoxUserError(
            f"seq {seq} of session {session_id} is not a message; "
            f"GET /api/sessions/{session_id}/messages lists them with their seqs"
        )
    chunk = kx.longterm.add(spec.text, scope=spec.scope, session_id=session_id, source_seq=seq)
    data: dict[str, Any] = chunk.as_dict()
    return data


@router.put("/longterm/{chunk_id}", summary="Replace a chunk's text")
async def longterm_edit(request: Request, chunk_id: str, text: Text) -> dict[str, Any]:
    data: dict[str, Any] = kx_of(request).longterm.edit(chunk_id, text.text).as_dict()
    return data


@router.delete("/longterm/{chunk_id}", summary="Delete a chunk")
async def longterm_delete(request: Request, chunk_id: str) -> dict[str, Any]:
    data: dict[str, Any] = kx_of(request).longterm.delete(chunk_id).as_dict()
    return data


@router.get("/packs", summary="Context packs (unusable files skipped: see /packs/problems)")
async def packs(request: Request) -> list[dict[str, Any]]:
    return [p.as_dict() for p in kx_of(request).packs.list()]


@router.get("/packs/problems", summary="Files in the pack directory that were skipped, and why")
async def pack_problems(request: Request) -> list[dict[str, str]]:
    return [p.as_dict() for p in kx_of(request).packs.scan()[1]]


@router.post("/packs", summary="Create a pack")
async def pack_create(request: Request, spec: NewPack) -> dict[str, Any]:
    data: dict[str, Any] = (
        kx_of(request).packs.create(spec.name, level=spec.level, text=spec.text).as_dict()
    )
    return data


@router.put("/packs/{name}", summary="Replace a pack's text")
async def pack_edit(request: Request, name: str, text: Text) -> dict[str, Any]:
    data: dict[str, Any] = kx_of(request).packs.edit(name, text.text).as_dict()
    return data


@router.delete("/packs/{name}", summary="Delete a pack")
async def pack_delete(request: Request, name: str) -> dict[str, Any]:
    data: dict[str, Any] = kx_of(request).packs.delete(name).as_dict()
    return data


@router.post("/packs/promote", summary="Promote long-term chunks into a draft personal pack")
async def pack_promote(request: Request, spec: Promote) -> dict[str, Any]:
    data: dict[str, Any] = kx_of(request).packs.promote(spec.chunk_ids, pack=spec.pack).as_dict()
    return data


@router.post("/packs/{name}/publish", summary="Publish a pack to team or org")
async def pack_publish(request: Request, name: str, spec: Publish) -> dict[str, Any]:
    data: dict[str, Any] = kx_of(request).packs.publish(name, level=spec.level).as_dict()
    return data


@router.post("/packs/{name}/activate", summary="Activate (or deactivate) a pack")
async def pack_activate(request: Request, name: str, spec: Activate) -> dict[str, Any]:
    packs_ = kx_of(request).packs
    data: dict[str, Any] = packs_.activate(
        name, workspace_id=spec.workspace, active=spec.active
    ).as_dict()
    return data


@router.get(
    "/sessions/{session_id}/proposals",
    summary="Every memory proposed in the session, decided or not (cards on reload)",
)
async def session_proposals(request: Request, session_id: str) -> list[dict[str, Any]]:
    kx = kx_of(request)
    kx.get_session(session_id)
    # an accepted card says where the memory went: an edit may have changed its scope and
    # key, which the proposal keeps as proposed (the live card reads the accept's answer)
    stored = {
        e.proposal_id: {"scope": e.scope, "key": e.key}
        for e in kx.events(session_id, types=["MemoryAccepted"])
        if isinstance(e, MemoryAccepted) and e.proposal_id
    }
    out = []
    for proposal in kx.approvals.proposals(session_id=session_id):
        item = proposal_json(proposal)
        if proposal.status == "accepted" and proposal.id in stored:
            item["accepted"] = stored[proposal.id]
        out.append(item)
    return out
