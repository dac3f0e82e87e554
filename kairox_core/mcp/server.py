"""``kairox mcp serve``: Kairox as an MCP server for Claude Desktop, Cursor, Codex...

Tools (all read-only but ``propose_memory``, whose proposal waits for a person's
approval in ``kairox memory pending`` like the model's own: an MCP client never writes
a durable memory by itself):

- ``list_memories(scope, workspace)`` and ``search_memories(query, scope, workspace)``:
  approved memories (user, the workspace's);
- ``propose_memory(scope, key, body, workspace)``: a ``user`` or ``workspace`` proposal;
- ``search_workspace(query, workspace, profile, k)``: the workspace index and the
  profile's knowledge bases, fused as a turn would see them;
- ``search_longterm(query, workspace, session, k)``: long-term chunks above the threshold;
- ``preview_context(prompt, workspace, profile, session)``: the layers and token counts a
  turn with that prompt would get; writes nothing.

Every answer is JSON text. Built on the SDK's ``MCPServer`` (stdio, or streamable HTTP
with ``--http``, behind the guard of ``kairox serve``: exact Host names without a token,
the token when set, JSON posts, a body limit; see ``http_app``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kairox_core.config import KairoxConfig
from kairox_core.errors import KairoxError, KairoxUserError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from kairox_core.facade import Kairox
    from kairox_core.session import Session

SCOPES = ("user", "workspace")
MAX_K = 50
INSTRUCTIONS = (
    "Kairox holds this person's durable memories, workspace documents and long-term "
    "notes. Search before asking them to repeat themselves. propose_memory only proposes: "
    "the person approves it later (kairox memory pending); never claim it is saved."
)


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, default=str)


def _terms(text: str) -> set[str]:
    return {t for t in re.findall(r"\w+", text.casefold()) if len(t) > 1}


class KairoxTools:
    """The tools' implementations over one open ``Kairox`` (one per served process)."""

    def __init__(self, kx: Kairox, config: KairoxConfig) -> None:
        self.kx = kx
        self.config = config
        self._previews: dict[tuple[str, str], Session] = {}

    def _workspace(self, workspace: str | None) -> str:
        return workspace or self.config.kairox.default_workspace

    def _scope(self, scope: str | None, *, allow_none: bool = True) -> str | None:
        if scope is None and allow_none:
            return None
        if scope not in SCOPES:
            raise KairoxUserError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        return scope

    def list_memories(self, scope: str | None = None, workspace: str | None = None) -> str:
        wanted = self._scope(scope)
        records = self.kx.memories.list(wanted, workspace_id=self._workspace(workspace))
        rows = [r.as_dict() for r in records if r.scope.value in SCOPES]
        return _dump({"memories": rows, "count": len(rows)})

    def search_memories(
        self, query: str, scope: str | None = None, workspace: str | None = None, k: int = 10
    ) -> str:
        """Memories sharing words with the query, most shared first (memories are few and
        short: a word match over key and body is what a person expects)."""
        wanted = _terms(query)
        if not wanted:
            raise KairoxUserError("query has no words to search for")
        records = self.kx.memories.list(self._scope(scope), workspace_id=self._workspace(workspace))
        scored = []
        for r in records:
            if r.scope.value not in SCOPES:
                continue
            shared = len(wanted & _terms(f"{r.key or ''} {r.body}"))
            if shared:
                scored.append((shared, r.updated_at, r))
        scored.sort(key=lambda t: (-t[0], -t[1]))
        rows = [{**r.as_dict(), "matched_words": n} for n, _, r in scored[: _k(k)]]
        return _dump({"memories": rows, "count": len(rows)})

    def propose_memory(self, scope: str, key: str, body: str, workspace: str | None = None) -> str:
        checked = self._scope(scope, allow_none=False)
        if not key.strip():
            raise KairoxUserError("a memory needs a key (a short name such as 'editor')")
        proposal = self.kx.approvals.propose_external(
            checked or "user", key.strip(), body, workspace_id=self._workspace(workspace)
        )
        if proposal is None:
            return _dump({"status": "unchanged", "detail": "already remembered or pending"})
        return _dump(
            {
                "status": "pending",
                "proposal_id": proposal.id,
                "detail": "waits for the person's approval (kairox memory pending); "
                "it is not saved until then",
            }
        )

    async def search_workspace(
        self,
        query: str,
        workspace: str | None = None,
        profile: str | None = None,
        k: int | None = None,
    ) -> str:
        name, _ = self.config.resolve_profile(profile)
        retriever = self.kx.retriever_for(name, self._workspace(workspace))
        try:
            result = await retriever.search(query, _k(k or self.config.retrieval.k))
        finally:
            await retriever.close()
        hits = [
            {"text": h.text, "score": h.score, "source": h.source, "doc_id": h.doc_id}
            for h in result.hits
        ]
        failed = [{"source": s.name, "error": s.error} for s in result.failed]
        return _dump({"hits": hits, "failed_sources": failed})

    def search_longterm(
        self,
        query: str,
        workspace: str | None = None,
        session: str | None = None,
        k: int | None = None,
    ) -> str:
        hits = self.kx.longterm.search(
            query,
            session_id=session,
            workspace_id=self._workspace(workspace),
            k=_k(k) if k else None,
        )
        return _dump({"chunks": [{**h.chunk.as_dict(), "similarity": h.similarity} for h in hits]})

    async def preview_context(
        self,
        prompt: str,
        workspace: str | None = None,
        profile: str | None = None,
        session: str | None = None,
    ) -> str:
        from kairox_core.prompt import front_end_system_prompt
        from kairox_core.session import Session

        system = front_end_system_prompt(self.config)
        if session is not None:
            handle = self.kx.get_session(session)
            handle.system_prompt = system
        else:  # a handle on no stored session: its history is empty and nothing is written
            ws, (pname, _) = self._workspace(workspace), self.config.resolve_profile(profile)
            cached = self._previews.get((ws, pname))
            if cached is None:
                cached = Session(
                    self.kx.session_services,
                    f"_mcp:preview:{ws}",
                    workspace_id=ws,
                    profile=pname,
                    system_prompt=system,
                )
                self._previews[(ws, pname)] = cached
            handle = cached
        context = await handle.preview(prompt, profile=profile)
        return _dump({"trace": context.trace.as_dict(), "messages": context.messages})


def _k(k: int | None) -> int:
    return max(1, min(int(k or 10), MAX_K))


@contextlib.contextmanager
def _as_tool_error() -> Iterator[None]:
    """A Kairox error (bad scope, unknown session...) as the SDK's ``ToolError``, whose
    message reaches the client; other exceptions stay crashes the SDK hides."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except (KairoxError, ValueError) as exc:
        raise ToolError(str(exc)) from exc


def http_app(
    server: MCPServer,
    *,
    host: str,
    port: int | None,
    token: str | None,
    max_body: int | None = None,
) -> Any:
    """The streamable HTTP app at ``/mcp``, behind ``kairox serve``'s guard
    (kairox_core/web/security.py) instead of the SDK's own check, which accepts any
    port and knows only the three loopback names."""
    from mcp.server.transport_security import TransportSecuritySettings

    from kairox_core.web.security import DEFAULT_MAX_BODY, Guard

    app = server.streamable_http_app(
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return Guard(
        app,
        token=token,
        bind_host=host,
        port=port,
        max_body=max_body or DEFAULT_MAX_BODY,
        json_only=("/mcp",),
    )


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def line_problem(line: str) -> tuple[str | None, Any]:
    """What makes one JSON-RPC line unusable as text (a lone surrogate, which JSON can
    carry as a ``\\ud800`` escape and the SDK's parser rejects without answering), and
    the request's id; ``(None, None)`` for a good line or one that is not JSON."""
    if _ESCAPED_SURROGATE.search(line) is None:
        return None, None
    try:
        message = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(message, dict):
        return None, None
    from kairox_core.inputs import json_problem

    problem = json_problem(message.get("params"), "params")
    return problem, message.get("id")


class CheckedLines:
    """stdin for the SDK's stdio transport, without the requests it could not parse:
    a request carrying a lone surrogate is answered here with an invalid-params error
    that says where (the SDK would drop it and the client would wait forever); a
    notification carrying one is passed on with U+FFFD in its place."""

    def __init__(self, source: Any) -> None:
        import anyio

        self.source = source
        self.reply: Any = None
        self.ready = anyio.Event()

    def attach(self, write_stream: Any) -> None:
        self.reply = write_stream
        self.ready.set()

    def __aiter__(self) -> Any:
        return self._lines()

    async def _lines(self) -> Any:
        import mcp_types
        from mcp.shared.message import SessionMessage

        from kairox_core.inputs import clean_text

        async for line in self.source:
            problem, ident = line_problem(line)
            if problem is None:
                yield line
            elif ident is None:
                yield json.dumps(_cleaned(json.loads(line)))
            else:
                await self.ready.wait()
                error = mcp_types.ErrorData(
                    code=mcp_types.INVALID_PARAMS, message=clean_text(problem)
                )
                await self.reply.send(
                    SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=ident, error=error))
                )


def _cleaned(value: Any) -> Any:
    from kairox_core.inputs import clean_text

    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


async def run_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, with stdin read through ``CheckedLines`` (the SDK's own
    ``run_stdio_async`` with its low-level server, given our stdin)."""
    import io
    import sys

    import anyio
    from mcp.server.stdio import stdio_server

    text = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    lines = CheckedLines(anyio.wrap_file(text))
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
        lines.attach(write_stream)
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def build_server(kx: Kairox, config: KairoxConfig) -> MCPServer:
    """The MCP server with Kairox's tools (the SDK is imported here, not before)."""
    from mcp.server.mcpserver import MCPServer

    tools = KairoxTools(kx, config)
    server: MCPServer = MCPServer("kairox", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    def list_memories(scope: str | None = None, workspace: str | None = None) -> str:
        """Approved memories: scope 'user' (the person's), 'workspace' (the workspace's,
        default workspace unless given), or both when scope is omitted."""
        with _as_tool_error():
            return tools.list_memories(scope, workspace)

    @server.tool()
    def search_memories(
        query: str, scope: str | None = None, workspace: str | None = None, k: int = 10
    ) -> str:
        """Approved memories that share words with the query, best first."""
        with _as_tool_error():
            return tools.search_memories(query, scope, workspace, k)

    @server.tool()
    def propose_memory(scope: str, key: str, body: str, workspace: str | None = None) -> str:
        """Propose a memory (scope 'user' or 'workspace', a short key, the fact). It is NOT
        saved: it waits for the person's approval (kairox memory pending)."""
        with _as_tool_error():
            return tools.propose_memory(scope, key, body, workspace)

    @server.tool()
    async def search_workspace(
        query: str, workspace: str | None = None, profile: str | None = None, k: int | None = None
    ) -> str:
        """Search the workspace's indexed documents and the profile's knowledge bases."""
        with _as_tool_error():
            return await tools.search_workspace(query, workspace, profile, k)

    @server.tool()
    def search_longterm(
        query: str, workspace: str | None = None, session: str | None = None, k: int | None = None
    ) -> str:
        """Long-term memory chunks similar to the query (above the configured threshold)."""
        with _as_tool_error():
            return tools.search_longterm(query, workspace, session, k)

    @server.tool()
    async def preview_context(
        prompt: str,
        workspace: str | None = None,
        profile: str | None = None,
        session: str | None = None,
    ) -> str:
        """The context a turn with this prompt would get: layers, token counts, what was
        left out, and the messages. Writes nothing."""
        with _as_tool_error():
            return await tools.preview_context(prompt, workspace, profile, session)

    return server
