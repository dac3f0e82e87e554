"""The tool loop of one turn: offer tools, run the calls the model makes, ask again.

Used by the chat engine and by any front end that drives turns itself (the HTTP API):
``await run_model_turn(turn, provider, tools=..., ...)`` streams the model's reply
through ``turn.feed``; when the model calls tools instead of answering, each call runs
(with a timeout), its result is recorded with ``turn.add_tool_result`` (the call and its
result kept together), the context is rebuilt with ``turn.reassemble()`` and the model
is called again. After ``[tools] max_rounds`` rounds the model is called once more with
no tools offered, so a turn always ends with an answer. The caller then completes the
turn (``turn.complete``).

Tool results are untrusted text: they never go through the marker parser (only the
model's own text is fed to the turn), and a proposal whose body echoes one is tainted
(``Turn.complete`` checks). A tool that fails, hangs or returns too much text gives the
model a short error or a cut result, and the trace a note: the turn always goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kairox_core.capabilities import tool_limitation as declared_limitation
from kairox_core.capabilities import verify
from kairox_core.context.errors import ContextBudgetExceeded
from kairox_core.context.trace import LayerTrace, TraceItem
from kairox_core.errors import KairoxError
from kairox_core.providers.base import ModelProvider, ToolCall

if TYPE_CHECKING:
    from kairox_core.turn import Turn

#: the trace layer that lists this turn's tool calls and their sources
TRACE_LAYER = "tools"

ToolFunction = Callable[[dict[str, Any]], Awaitable[str]]


class ToolError(KairoxError):
    """A tool could not run; the message goes back to the model as the result."""


@dataclass(frozen=True)
class Tool:
    """One function the model may call. ``source`` names where it comes from
    (``mcp:<server>``) for the trace; ``call`` takes the parsed arguments and returns
    the result text (raise ``ToolError`` for a failure the model should read)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    call: ToolFunction
    source: str = "local"

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters) or {"type": "object", "properties": {}},
            },
        }


@dataclass(frozen=True)
class ToolStep:
    """One call as a front end shows it: a line for the call, a line for the result."""

    round: int
    call_id: str
    name: str
    arguments: str
    result: str
    source: str
    ok: bool
    ms: float
    truncated: bool = False
    tokens: int = 0  # what the call and its result cost in the context
    seq: int | None = None  # the ToolInvocationCompleted event

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for an HTTP front end."""
        return {
            "round": self.round,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "source": self.source,
            "ok": self.ok,
            "ms": round(self.ms, 1),
            "truncated": self.truncated,
            "tokens": self.tokens,
            "seq": self.seq,
        }

    def call_line(self, width: int = 100) -> str:
        return _one_line(f"tool {self.name}({self.arguments})", width)

    def result_line(self, width: int = 100) -> str:
        status = "" if self.ok else "failed: "
        cut = " [cut]" if self.truncated else ""
        return _one_line(
            f"-> {status}{self.result} ({len(self.result)} chars, {self.ms:.0f} ms){cut}", width
        )


@dataclass
class ToolLoopResult:
    """What the loop did: the usage of the last call, whether text arrived, the steps,
    the notes it left in the trace, and an error that ended the model calls."""

    usage: dict[str, int] | None = None
    fed: bool = False
    rounds: int = 0
    steps: list[ToolStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None


def accepts_tools(provider: ModelProvider) -> bool:
    """Whether the provider declares ``tools`` (a ``ToolCallingProvider``; the claim is
    checked once per class: kairox_core/capabilities.py). A provider handed in directly,
    not built through the registry, is checked here: a clear error, not an AttributeError."""
    return verify(provider, f"model provider {provider.name!r}").capabilities.tools


async def tool_limitation(provider: ModelProvider) -> str | None:
    """Why the provider's model cannot call tools, None when it can.

    A provider whose ``stream`` takes no ``tools=`` cannot. One that takes them may
    still depend on its model (a local model's chat template): it declares the
    ``tool_limitation`` capability and says why (kairox-llamacpp does)."""
    if not accepts_tools(provider):
        return f"provider {provider.name} cannot call tools"
    limited = declared_limitation(provider)
    return None if limited is None else await limited.tool_limitation()


async def run_model_turn(
    turn: Turn,
    provider: ModelProvider,
    *,
    tools: Sequence[Tool] = (),
    max_rounds: int = 8,
    max_result_chars: int = 16_000,
    timeout: float = 30.0,
    max_tokens: int | None = None,
    on_text: Callable[[str], None] | None = None,
    on_tool: Callable[[ToolStep], None] | None = None,
    notes: Sequence[str] = (),
) -> ToolLoopResult:
    """Stream the model's answer into ``turn``, running its tool calls in between.

    ``notes`` (e.g. an MCP server that failed to start) go into the trace's ``tools``
    layer with the loop's own. Model errors end the loop and come back in ``.error``
    (the caller decides between ``turn.abort()`` and ``turn.complete()``)."""
    out = ToolLoopResult(notes=list(notes))
    try:
        refused = await tool_limitation(provider) if tools else None
    except KairoxError as exc:  # the model cannot start: the same error the call would give
        out.error = str(exc)
        return out
    offered = list(tools) if tools and refused is None else []
    if refused is not None:
        out.notes.append(f"{refused}; {len(tools)} tool(s) not offered")
    by_name = {t.name: t for t in offered}
    schemas = [t.schema() for t in offered]
    _annotate(turn, out, offered)
    while True:
        use_tools = bool(schemas) and out.rounds < max_rounds
        calls: tuple[ToolCall, ...] = ()
        kwargs: dict[str, Any] = {"max_tokens": max_tokens}
        if use_tools:
            kwargs["tools"] = schemas
        try:
            async for chunk in provider.stream(turn.messages, **kwargs):
                if chunk.usage is not None:
                    # a local count says so (kairox usage marks it estimated)
                    out.usage = chunk.usage.as_dict() | (
                        {"estimated": 1} if chunk.usage.estimated else {}
                    )
                if chunk.text:
                    out.fed = True
                    visible = turn.feed(chunk.text)
                    if visible and on_text is not None:
                        on_text(visible)
                calls += chunk.tool_calls
        except KairoxError as exc:
            out.error = str(exc)
        except Exception as exc:  # a provider bug must not lose the turn's record
            out.error = f"model call failed: {type(exc).__name__}: {exc}"
        if out.error or not calls:
            break
        if not use_tools:
            out.notes.append(
                f"the model called {len(calls)} tool(s) after the last tool round; ignored"
            )
            break
        out.rounds += 1
        for call in calls:
            step = await _run_call(call, by_name, out.rounds, timeout, max_result_chars)
            stored = turn.add_tool_result(call.id, call.name, call.arguments, step.result)
            step = dataclasses.replace(step, tokens=stored.tokens or 0, seq=stored.seq)
            out.steps.append(step)
            if not step.ok:
                out.notes.append(f"tool {call.name} ({step.source}) failed: {step.result}")
            if on_tool is not None:
                on_tool(step)
        if out.rounds >= max_rounds:
            out.notes.append(
                f"tool rounds bound reached ({max_rounds}, [tools] max_rounds): "
                f"the model answers without tools"
            )
        try:
            await turn.reassemble()
        except ContextBudgetExceeded as exc:
            out.error = f"tool results no longer fit the context: {exc}"
            break
        _annotate(turn, out, offered)
    _annotate(turn, out, offered)
    return out


async def _run_call(
    call: ToolCall, tools: Mapping[str, Tool], round_no: int, timeout: float, limit: int
) -> ToolStep:
    started = time.perf_counter()
    tool = tools.get(call.name)
    source = tool.source if tool is not None else "unknown"
    ok = False
    try:
        if tool is None:
            raise ToolError(f"no tool named {call.name!r}; available: {', '.join(sorted(tools))}")
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON: {exc}") from None
        if not isinstance(args, dict):
            raise ToolError("arguments must be a JSON object")
        try:
            text = await asyncio.wait_for(tool.call(args), timeout)
        except TimeoutError:
            raise ToolError(f"timed out after {timeout:g} s") from None
        ok = True
    except ToolError as exc:
        text = f"error: {exc}"
    except Exception as exc:  # a tool's bug is the model's (and the trace's) to read
        text = f"error: {type(exc).__name__}: {exc}"
    truncated = len(text) > limit
    if truncated:
        text = text[:limit] + f"\n[cut: the result had {len(text)} characters, limit {limit}]"
    ms = (time.perf_counter() - started) * 1000
    return ToolStep(round_no, call.id, call.name, call.arguments, text, source, ok, ms, truncated)


def _annotate(turn: Turn, out: ToolLoopResult, offered: Sequence[Tool]) -> None:
    """Put the tools layer into the turn's current trace (a reassembly builds a new one)."""
    trace = turn.trace
    if trace is None or not (offered or out.notes or out.steps):
        return
    layer = trace.layers.setdefault(TRACE_LAYER, LayerTrace(TRACE_LAYER))
    layer.included = [
        TraceItem(
            f"seq {s.seq}" if s.seq else s.call_id,
            _one_line(f"{s.name}: {s.result}", 80),
            s.tokens,
            source=s.source,
        )
        for s in out.steps
    ]
    sources = sorted({t.source for t in offered})
    layer.notes = [f"{len(offered)} tool(s) offered from {', '.join(sources)}"] if offered else []
    layer.notes.extend(out.notes)


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "\u2026"
