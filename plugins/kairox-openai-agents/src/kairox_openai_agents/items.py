"""Between the Agents SDK's input items and what a Kairox turn records.

A Kairox turn holds user text, tool calls with their results and the assistant's reply;
the SDK's items are richer (images, reasoning, hosted tools). ``parse_items`` checks a
whole batch before anything is written, so an item Kairox cannot store is refused with
its position and a fix, never half-recorded or dropped unseen. ``messages_to_items``
turns Kairox's assembled context (OpenAI chat messages) back into SDK input items.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core import KairoxUserError


class KairoxSessionError(KairoxUserError):
    """The SDK asked for something a Kairox session cannot do (said with the fix)."""


class UnsupportedItemError(KairoxSessionError):
    """An input item Kairox cannot store: its position, its type and what to do."""


@dataclass(frozen=True)
class UserText:
    text: str


@dataclass(frozen=True)
class AssistantText:
    text: str


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolOutput:
    call_id: str
    output: str


Op = UserText | AssistantText | ToolCall | ToolOutput

# Tool calls whose result comes back as a separate item with the same call_id.
_CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


def as_mapping(item: object) -> Mapping[str, Any]:
    """An item as a mapping: SDK items are TypedDicts; pydantic models are dumped."""
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_unset=True)
        if isinstance(dumped, Mapping):
            return dumped
    raise UnsupportedItemError(
        f"a session item must be a dict (an SDK input item), not {type(item).__name__}"
    )


def parse_items(items: Iterable[object], *, skip_types: Collection[str] = ()) -> list[Op]:
    """What ``items`` ask Kairox to record, in order; raises on the first item Kairox
    cannot store. Types in ``skip_types`` are dropped (the caller's explicit choice)."""
    ops: list[Op] = []
    for index, raw in enumerate(items):
        item = as_mapping(raw)
        kind = item.get("type") or "message"
        if kind in skip_types:
            continue
        where = f"item #{index} (type {kind!r})"
        if kind == "message":
            ops.extend(_message(item, where))
        elif kind in _CALL_TYPES:
            args = item.get(_CALL_TYPES[kind])
            ops.append(
                ToolCall(
                    call_id=_required_str(item, "call_id", where),
                    name=_required_str(item, "name", where),
                    arguments=args if isinstance(args, str) else json.dumps(args or {}),
                )
            )
        elif kind in _OUTPUT_TYPES:
            output = _text_of(item.get("output"), where, "output")
            ops.append(ToolOutput(call_id=_required_str(item, "call_id", where), output=output))
        else:
            raise UnsupportedItemError(
                f"{where} cannot be stored in a Kairox session: its turns hold user text, "
                f"assistant text and function calls with their outputs. Pass "
                f"skip_item_types={{{kind!r}}} to KairoxSession to drop such items knowingly, "
                f"or give this agent another session"
            )
    return ops


def _message(item: Mapping[str, Any], where: str) -> list[Op]:
    role = item.get("role")
    if role == "user":
        return [UserText(_text_of(item.get("content"), where, "content"))]
    if role == "assistant":
        return [AssistantText(_text_of(item.get("content"), where, "content"))]
    if role in ("system", "developer"):
        raise UnsupportedItemError(
            f"{where} is a {role} message: Kairox builds the system side of every turn "
            f"itself (memories, packs, summaries), so it does not store one. Put standing "
            f"instructions in Agent(instructions=...) or KairoxSession(system_prompt=...)"
        )
    raise UnsupportedItemError(f"{where} has role {role!r}; expected 'user' or 'assistant'")


def _required_str(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise UnsupportedItemError(f"{where} has no {key!r} string")
    return value


def _text_of(content: object, where: str, field: str) -> str:
    """The text of a content field: a string, or a list of text parts (a refusal's
    text counts). An image, file or audio part is refused: Kairox stores text here."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        raise UnsupportedItemError(f"{where}: {field} is a {type(content).__name__}")
    texts: list[str] = []
    for part in content:
        part = as_mapping(part)
        ptype = part.get("type")
        if ptype in _TEXT_PARTS:
            texts.append(str(part.get("text") or ""))
        elif ptype == "refusal":
            texts.append(str(part.get("refusal") or ""))
        else:
            raise UnsupportedItemError(
                f"{where}: a {ptype!r} part in {field}; a Kairox session stores text "
                f"parts only (attach files to Kairox with kairox_core.attachments and "
                f"session.begin_turn instead)"
            )
    return "".join(texts)


# --- Kairox's context -> SDK items ---------------------------------------------------


def messages_to_items(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Kairox's assembled messages (OpenAI chat format) as SDK input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "tool":
            output = content if isinstance(content, str) else _chat_text(content)
            call_id = str(message.get("tool_call_id"))
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
        elif role == "assistant":
            text = content if isinstance(content, str) else _chat_text(content)
            if text:
                items.append({"role": "assistant", "content": text})
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": str(call.get("id")),
                        "name": str(function.get("name")),
                        "arguments": str(function.get("arguments") or "{}"),
                    }
                )
        elif role == "user":
            items.append({"role": "user", "content": _user_content(content)})
        else:  # system / developer: Kairox's layers (memories, packs, summaries, ...)
            text = content if isinstance(content, str) else _chat_text(content)
            items.append({"role": str(role), "content": text})
    return items


def _chat_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, Sequence) and not isinstance(content, str):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
    return str(content)


def _user_content(content: object) -> str | list[dict[str, Any]]:
    """A user message's content: a string, or chat parts as Responses input parts (an
    image Kairox attached becomes an ``input_image``)."""
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, Sequence) else ():
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            parts.append({"type": "input_text", "text": str(part.get("text") or "")})
        elif part.get("type") == "image_url":
            image = part.get("image_url") or {}
            parts.append(
                {
                    "type": "input_image",
                    "image_url": str(image.get("url")),
                    "detail": str(image.get("detail") or "auto"),
                }
            )
        else:
            raise KairoxSessionError(
                f"Kairox's context holds a {part.get('type')!r} part the Agents SDK has "
                f"no input item for; remove that attachment from the session's turns"
            )
    return parts
