"""External MCP servers as tools of a turn (``[mcp_servers.<id>]``).

Each server is started on first use (``McpToolbox.tools()``) in a task of its own that
holds the SDK's transport and session open (anyio contexts must be left by the task
that entered them) until ``aclose()``. A server that fails to start, exits at once or
does not answer within its ``timeout`` becomes a note for the trace, and the turn goes
on with the other servers' tools. Results are returned as text for the tool loop,
which treats them as untrusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from kairox_core.config import KairoxConfig, McpServerConfig
from kairox_core.errors import KairoxError
from kairox_core.mcp import require_sdk, tool_name
from kairox_core.toolloop import Tool, ToolError

#: how long ``aclose`` waits for a server's task to wind down before abandoning it
STOP_WAIT = 5.0
#: characters of a server's stderr quoted when it failed
STDERR_TAIL = 300


@dataclass(frozen=True)
class McpToolInfo:
    """One tool of a server as listed: its own name, the name offered to the model."""

    server: str
    name: str
    offered_as: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class McpServer:
    """One configured server and its connection (started on first ``start()``)."""

    config: McpServerConfig
    tools: list[McpToolInfo] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    started_ms: float = 0.0

    def __post_init__(self) -> None:
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._errlog: TextIO | None = None
        self._started = False
        self._cancelling = False

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def source(self) -> str:
        return f"mcp:{self.id}"

    async def start(self) -> None:
        """Connect, initialize and list tools, within the server's ``timeout``; a
        failure is kept in ``error``, never raised."""
        if self._started:
            return
        self._started = True
        begun = time.perf_counter()
        try:
            require_sdk()
            # the server's stderr, quoted when it fails (closed in aclose)
            errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            self._errlog = cast(TextIO, errlog)
            self._task = asyncio.create_task(self._run(), name=f"mcp:{self.id}")
            await asyncio.wait_for(self._ready.wait(), self.config.timeout)
        except TimeoutError:
            self.error = (
                f"did not answer within {self.config.timeout:g} s "
                f"([mcp_servers.{self.id}] timeout){self._stderr_tail()}"
            )
            self._cancel()  # the SDK stops the process in the background; aclose waits
        except KairoxError as exc:
            self.error = str(exc)
        self.started_ms = (time.perf_counter() - begun) * 1000

    async def _run(self) -> None:
        from mcp.client.session import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=self.config.timeout)
                )
                await session.initialize()
                self.tools = await self._list(session)
                self._session = session
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the SDK raises exception groups
            if self.error is None:
                cause = _describe(exc)
                if "Connection closed" in cause and not self._ready.is_set():
                    cause = "the server closed the connection while starting (did it exit?)"
                self.error = f"{cause}{self._stderr_tail()}"
        finally:
            self._session = None
            self._ready.set()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        cfg = self.config
        if cfg.command is not None:
            from mcp.client.stdio import (
                StdioServerParameters,
                get_default_environment,
                stdio_client,
            )

            env = {**get_default_environment(), **cfg.resolved_env()}
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env)
            return stdio_client(params, errlog=self._errlog or open(os.devnull, "w"))
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert cfg.url is not None
        client = create_mcp_http_client(headers=cfg.resolved_headers() or None)
        return streamable_http_client(cfg.url, http_client=client)

    async def _list(self, session: Any) -> list[McpToolInfo]:
        from mcp.types import PaginatedRequestParams

        listed: list[Any] = []
        cursor: str | None = None
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await session.list_tools(params=params)
            listed.extend(result.tools)
            cursor = result.next_cursor
            if not cursor:
                break
        allow = self.config.tools
        names = {t.name for t in listed}
        if allow is not None:
            self.notes.extend(
                f"mcp server {self.id}: allow-listed tool {n!r} not offered by the server"
                for n in allow
                if n not in names
            )
        return [
            McpToolInfo(
                self.id,
                t.name,
                tool_name(self.id, t.name),
                t.description or "",
                dict(t.input_schema or {}),
            )
            for t in listed
            if allow is None or t.name in allow
        ]

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call one tool; the result's text parts joined (structured content as JSON)."""
        session = self._session
        if session is None:
            raise ToolError(f"mcp server {self.id} is not running{self._stderr_tail()}")
        try:
            result = await session.call_tool(
                name, arguments, read_timeout_seconds=self.config.timeout
            )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the SDK raises exception groups
            raise ToolError(f"mcp server {self.id}: {_describe(exc)}") from None
        text = _result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(f"mcp server {self.id}: {text}")
        return text

    def as_tools(self) -> list[Tool]:
        def bind(info: McpToolInfo) -> Tool:
            async def call(args: dict[str, Any]) -> str:
                return await self.call(info.name, args)

            return Tool(
                info.offered_as,
                f"[{self.source}] {info.description}".strip(),
                info.input_schema,
                call,
                source=self.source,
            )

        return [bind(info) for info in self.tools] if self._session is not None else []

    def _stderr_tail(self) -> str:
        if self._errlog is None:
            return ""
        try:
            self._errlog.flush()
            self._errlog.seek(0)
            text = " ".join(self._errlog.read().split())
        except (OSError, ValueError):
            return ""
        return f"; stderr: {text[-STDERR_TAIL:]}" if text else ""

    def _cancel(self, task: asyncio.Task[None] | None = None) -> None:
        task = task or self._task
        if task is not None and not self._cancelling:
            self._cancelling = True
            task.cancel()

    async def aclose(self) -> None:
        """Stop the server (closing stdio ends it; the SDK terminates one that lingers)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            # A server still starting (hung) is cancelled at once; a running one first
            # gets its stdin closed. One cancel only: a second would interrupt the SDK
            # while it terminates the process, leaving the process behind.
            if self._session is None:
                self._cancel(task)
            done, _ = await asyncio.wait({task}, timeout=STOP_WAIT)
            if not done:
                self._cancel(task)
                await asyncio.wait({task}, timeout=STOP_WAIT)
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: never "exception was never retrieved"
        if self._errlog is not None:
            with contextlib.suppress(OSError):
                self._errlog.close()
            self._errlog = None


class McpToolbox:
    """The MCP servers a profile sees, started together on the first ``tools()``."""

    def __init__(self, servers: Sequence[McpServerConfig]) -> None:
        self.servers = [McpServer(cfg) for cfg in servers]
        self._started = False
        self._lock = asyncio.Lock()

    @classmethod
    def for_profile(cls, config: KairoxConfig, profile: str) -> McpToolbox:
        return cls(config.mcp_servers_for(profile))

    async def start(self) -> None:
        async with self._lock:
            if not self._started:
                self._started = True
                await asyncio.gather(*(s.start() for s in self.servers))

    async def tools(self) -> tuple[list[Tool], list[str]]:
        """The tools of every server that runs, and a note for each that does not."""
        await self.start()
        tools: list[Tool] = []
        notes: list[str] = []
        for server in self.servers:
            notes.extend(server.notes)
            if server.error is not None:
                notes.append(f"mcp server {server.id} unavailable: {server.error}")
            elif server._session is None:
                notes.append(f"mcp server {server.id} stopped; its tools are not offered")
            else:
                tools.extend(server.as_tools())
        return tools, notes

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.servers))


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for item in getattr(result, "content", None) or ():
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(str(item.text))
        elif kind == "resource" and hasattr(getattr(item, "resource", None), "text"):
            parts.append(str(item.resource.text))
        else:
            parts.append(f"[{kind or 'content'} not shown]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)


def _describe(exc: BaseException) -> str:
    """The innermost causes of an exception (group), in one line."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        subs = getattr(e, "exceptions", None)
        if subs:
            for sub in subs:
                walk(sub)
        else:
            leaves.append(e)

    walk(exc)
    text = "; ".join(f"{type(e).__name__}: {e}".rstrip(": ") for e in leaves[:3])
    if isinstance(exc, FileNotFoundError) or any(isinstance(e, FileNotFoundError) for e in leaves):
        text += " (is the command installed and on PATH?)"
    return text or type(exc).__name__
