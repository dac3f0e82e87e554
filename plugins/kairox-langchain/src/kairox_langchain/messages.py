"""Between LangChain messages and Kairox: text out of a message, the context Kairox
assembled (OpenAI-style dicts) as LangChain messages, a session's events as history."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)

from kairox_core import (
    AssistantMessageCompleted,
    Event,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_langchain.errors import UnsupportedMessageError

# The events a LangChain history is made of, in the order the event store keeps them.
HISTORY_EVENT_TYPES = (
    UserMessageAdded.__name__,
    AssistantMessageCompleted.__name__,
    ToolInvocationCompleted.__name__,
)


def message_text(message: BaseMessage) -> str:
    """The text of ``message``; content blocks other than text are an error (Kairox
    records text turns; attachments go through ``kairox_core.attachments``)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            kind = block.get("type", "?") if isinstance(block, dict) else type(block).__name__
            raise UnsupportedMessageError(
                f"a {type(message).__name__} with a '{kind}' content block cannot be stored "
                f"in a Kairox session: only text is recorded as a turn; pass images and "
                f"documents as attachments (kairox_core.attachments.from_path)"
            )
    return "".join(parts)


def tool_arguments(args: Any) -> str:
    """A tool call's arguments as Kairox stores them (JSON text)."""
    if isinstance(args, str):
        return args
    return json.dumps(args, sort_keys=True, ensure_ascii=False)


def _parsed_arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def history_messages(events: Iterable[Event]) -> list[BaseMessage]:
    """A session's conversation as LangChain messages: each user message, each reply
    (cleaned of ``<memory>`` markup), and a turn's tool calls as one ``AIMessage`` with
    ``tool_calls`` followed by a ``ToolMessage`` per result."""
    out: list[BaseMessage] = []
    calls: list[ToolInvocationCompleted] = []

    def flush_calls() -> None:
        if not calls:
            return
        out.append(
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": c.tool_name,
                        "args": _parsed_arguments(c.arguments),
                        "id": c.tool_call_id,
                    }
                    for c in calls
                ],
            )
        )
        out.extend(ToolMessage(content=c.result, tool_call_id=c.tool_call_id) for c in calls)
        calls.clear()

    for event in events:
        if isinstance(event, ToolInvocationCompleted):
            if calls and calls[-1].turn_id != event.turn_id:
                flush_calls()
            calls.append(event)
            continue
        flush_calls()
        if isinstance(event, UserMessageAdded):
            out.append(HumanMessage(content=event.text))
        elif isinstance(event, AssistantMessageCompleted):
            out.append(AIMessage(content=event.text))
    flush_calls()
    return out


def context_messages(messages: Sequence[dict[str, Any]]) -> list[BaseMessage]:
    """Kairox's assembled context (OpenAI chat format) as LangChain messages, for any
    chat model. Attachment parts (images, documents) keep OpenAI's block format."""
    return convert_to_messages([dict(m) for m in messages])


class ContextConverter:
    """``context_messages`` for one session's turns, reusing the messages of the last
    context: from turn to turn most of the history is the same, and building a
    LangChain message (a pydantic model) costs far more than looking one up."""

    def __init__(self) -> None:
        self._last: dict[tuple[Any, ...], BaseMessage] = {}

    def __call__(self, messages: Sequence[dict[str, Any]]) -> list[BaseMessage]:
        seen: dict[tuple[Any, ...], BaseMessage] = {}
        out: list[BaseMessage] = []
        for m in messages:
            key = _cache_key(m)
            if key is None:  # content parts (attachments): converted each time
                out.extend(convert_to_messages([dict(m)]))
                continue
            message = self._last.get(key) or seen.get(key)
            if message is None:
                message = convert_to_messages([dict(m)])[0]
            seen[key] = message
            out.append(message)
        self._last = seen
        return out


def _cache_key(m: dict[str, Any]) -> tuple[Any, ...] | None:
    content = m.get("content")
    if content is not None and not isinstance(content, str):
        return None
    calls = m.get("tool_calls")
    return (
        m.get("role"),
        content,
        m.get("tool_call_id"),
        m.get("name"),
        json.dumps(calls, sort_keys=True) if calls else None,
    )
