"""Tool calls a small model writes as plain JSON instead of its template's format.

Qwen2.5-Coder's chat template asks for ``<tool_call>{...}</tool_call>``, which
llama.cpp parses into OpenAI ``tool_calls``; the 0.5B model, with Kairox's system
prompt before the tool list, writes the same JSON object in a ```json fence instead,
and llama.cpp passes it on as text. When tools were offered and the whole reply is
such a call to one of them, it is the call: ``CallCatcher`` holds a reply back while
it can still be one (it starts with ``{``, ``[`` or a fence) and gives the text through
unchanged otherwise. A reply that names no offered tool stays text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from kairox_core.providers.base import ChatChunk, ToolCall

_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)
_TAGS = re.compile(r"^<tool_call>\s*(.*?)\s*</tool_call>$", re.DOTALL)
_OPENERS = ("{", "[", "`", "<tool_call>")


def calls_in_text(text: str, names: Iterable[str]) -> tuple[ToolCall, ...]:
    """The calls a reply consisting only of JSON call objects makes (``{"name",
    "arguments"}``: one, a list, or one per line; bare, fenced or in ``<tool_call>``
    tags), each to an offered tool; () when the reply is anything else."""
    offered = set(names)
    body = text.strip()
    for pattern in (_FENCE, _TAGS):
        match = pattern.match(body)
        if match:
            body = match.group(1)
    items = _json_values(body)
    if len(items) == 1 and isinstance(items[0], list):
        items = items[0]
    calls = []
    if not items:
        return ()
    for n, item in enumerate(items):
        if not isinstance(item, dict) or item.get("name") not in offered:
            return ()
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return ()
        if not isinstance(arguments, dict):
            return ()
        calls.append(ToolCall(f"call_text_{n}", str(item["name"]), json.dumps(arguments)))
    return tuple(calls)


def _json_values(text: str) -> list[Any]:
    """The JSON values the text consists of, one after another (the 0.5B model writes
    several calls as JSON lines); [] when anything else is in it."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    at = 0
    while at < len(text):
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            return []
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values


class CallCatcher:
    """Streams a reply's chunks through, holding them back while the reply may still be
    a call written as text; ``finish()`` gives what is held (as a call or as text)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(names)
        self.held: list[str] = []
        self.holding = True

    def feed(self, chunk: ChatChunk) -> list[ChatChunk]:
        if not self.holding or chunk.tool_calls:  # a call the template parsed: as it is
            return [*self._release(), chunk]
        if chunk.text:
            self.held.append(chunk.text)
        start = "".join(self.held).lstrip()
        if start and not any(start.startswith(o) or o.startswith(start) for o in _OPENERS):
            return [*self._release(), *_metadata(chunk)]
        if chunk.usage is not None or chunk.finish_reason is not None:
            return [self._last(chunk)]
        return []

    def _last(self, chunk: ChatChunk) -> ChatChunk:
        text = "".join(self.held)
        self.held, self.holding = [], False
        calls = calls_in_text(text, self.names)
        if calls:
            return ChatChunk(usage=chunk.usage, finish_reason="tool_calls", tool_calls=calls)
        return ChatChunk(text, chunk.usage, chunk.finish_reason)

    def _release(self) -> list[ChatChunk]:
        text = "".join(self.held)
        self.held, self.holding = [], False
        return [ChatChunk(text)] if text else []

    def finish(self) -> list[ChatChunk]:
        """What is still held when the stream ended without a final chunk."""
        if not self.holding or not self.held:
            return []
        return [self._last(ChatChunk())]


def _metadata(chunk: ChatChunk) -> list[ChatChunk]:
    """The chunk without its text (released with the held text), if anything is left."""
    if chunk.usage is None and chunk.finish_reason is None:
        return []
    return [ChatChunk(usage=chunk.usage, finish_reason=chunk.finish_reason)]
