"""Messages between LlamaIndex (``ChatMessage`` and its content blocks) and Kairox.

Kairox stores a conversation as turns: a user message, the tool calls and results the
model made, and the assistant's reply. Anything else in a LlamaIndex message (a system
message, an image, audio) has no place in that record, and saying so beats dropping it:
``UnsupportedMessageError`` names the message, what was in it and what to do instead.
Going the other way, Kairox's assembled context is OpenAI-style dicts; they become
``ChatMessage``s with ``ToolCallBlock``s, which every LlamaIndex LLM class understands.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import (
    CachePoint,
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)

from kairox_core import KairoxUserError


class UnsupportedMessageError(KairoxUserError):
    """A LlamaIndex message Kairox cannot store: the role or a content block."""


# Roles some LLM integrations use for the assistant (Cohere "chatbot", Gemini "model").
ASSISTANT_ROLES = {MessageRole.ASSISTANT, MessageRole.CHATBOT, MessageRole.MODEL}
# Blocks that carry no conversation content: a provider's cache hint, a model's hidden
# reasoning (not part of the reply a user sees, and not replayed by Kairox).
SKIPPED_BLOCKS = (CachePoint, ThinkingBlock)


@dataclass(frozen=True)
class ToolCall:
    """One tool call an assistant message asked for."""

    id: str
    name: str
    arguments: str


def _where(message: ChatMessage, index: int | None) -> str:
    return f"{message.role.value} message" + (f" #{index}" if index is not None else "")


def message_text(message: ChatMessage, index: int | None = None) -> str:
    """The message's text (its text blocks joined); any other content is an error."""
    parts: list[str] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, (ToolCallBlock, *SKIPPED_BLOCKS)):
            continue
        else:
            kind = getattr(block, "block_type", type(block).__name__)
            raise UnsupportedMessageError(
                f"{_where(message, index)} holds a '{kind}' block, which Kairox cannot "
                f"store (it records the text of user messages, replies and tool results); "
                f"send the content as text, or keep it out of the agent's memory"
            )
    return "".join(parts)


def tool_calls(message: ChatMessage) -> list[ToolCall]:
    """The tool calls of an assistant message: ``ToolCallBlock``s, or the OpenAI-style
    ``additional_kwargs["tool_calls"]`` older integrations still set."""
    calls = [
        ToolCall(
            block.tool_call_id or f"call-{i}",
            block.tool_name,
            _arguments(block.tool_kwargs),
        )
        for i, block in enumerate(message.blocks)
        if isinstance(block, ToolCallBlock)
    ]
    if calls:
        return calls
    for i, raw in enumerate(message.additional_kwargs.get("tool_calls") or ()):
        data = raw.model_dump() if hasattr(raw, "model_dump") else raw
        function = data.get("function") or {}
        calls.append(
            ToolCall(
                data.get("id") or f"call-{i}",
                function.get("name") or "",
                _arguments(function.get("arguments") or {}),
            )
        )
    return calls


def _arguments(value: Mapping[str, Any] | str) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(dict(value), sort_keys=True, ensure_ascii=False)


def _kwargs(arguments: str) -> dict[str, Any] | str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return parsed if isinstance(parsed, dict) else arguments


def _content(content: Any) -> list[Any]:
    """OpenAI ``content`` (a string or a list of parts) as LlamaIndex blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    blocks: list[Any] = []
    for part in content:
        if part.get("type") == "text":
            blocks.append(TextBlock(text=part.get("text", "")))
        elif part.get("type") == "image_url":
            blocks.append(ImageBlock(url=part["image_url"]["url"]))
        else:
            blocks.append(TextBlock(text=json.dumps(part, ensure_ascii=False)))
    return blocks


def to_chat_message(message: Mapping[str, Any]) -> ChatMessage:
    """One message of Kairox's assembled context as a ``ChatMessage``."""
    role = MessageRole(message["role"])
    blocks = _content(message.get("content"))
    kwargs: dict[str, Any] = {}
    if role == MessageRole.ASSISTANT:
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            blocks.append(
                ToolCallBlock(
                    tool_call_id=call.get("id"),
                    tool_name=function.get("name", ""),
                    tool_kwargs=_kwargs(function.get("arguments") or "{}"),
                )
            )
    elif role == MessageRole.TOOL:
        kwargs["tool_call_id"] = message.get("tool_call_id")
    return ChatMessage(role=role, blocks=blocks, additional_kwargs=kwargs)


def to_chat_messages(messages: Sequence[Mapping[str, Any]]) -> list[ChatMessage]:
    return [to_chat_message(m) for m in messages]
