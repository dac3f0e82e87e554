"""Tool calls written as plain JSON text become calls; every other reply stays text,
streamed unchanged (no model needed)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kairox_core.providers.base import ChatChunk, TokenUsage
from kairox_llamacpp.toolcalls import CallCatcher, calls_in_text

NAMES = ("memory__create_entities", "memory__search_nodes")
FENCED = '```json\n{\n  "name": "memory__search_nodes",\n  "arguments": {"query": "Ada"}\n}\n```'


def test_a_fenced_call_as_qwen_05b_writes_it_is_a_call() -> None:
    (call,) = calls_in_text(FENCED, NAMES)
    assert call.name == "memory__search_nodes"
    assert json.loads(call.arguments) == {"query": "Ada"}


def test_bare_tagged_listed_and_string_argument_calls() -> None:
    bare = '{"name": "memory__search_nodes", "arguments": {"query": "x"}}'
    assert len(calls_in_text(bare, NAMES)) == 1
    assert len(calls_in_text(f"<tool_call>\n{bare}\n</tool_call>", NAMES)) == 1
    assert len(calls_in_text(f"[{bare}, {bare}]", NAMES)) == 2
    assert len(calls_in_text(f"{bare}\n{bare}\n", NAMES)) == 2  # JSON lines, as 0.5B writes
    assert calls_in_text(f"{bare}\nand then", NAMES) == ()
    quoted = json.dumps({"name": "memory__search_nodes", "arguments": '{"query": "x"}'})
    assert json.loads(calls_in_text(quoted, NAMES)[0].arguments) == {"query": "x"}


def test_text_that_is_not_a_call_to_an_offered_tool_stays_text() -> None:
    assert calls_in_text('{"name": "rm_rf", "arguments": {}}', NAMES) == ()  # not offered
    assert calls_in_text('{"query": "Ada"}', NAMES) == ()  # JSON, not a call
    assert calls_in_text(f"Here you go: {FENCED}", NAMES) == ()  # words around it
    assert calls_in_text('{"name": "memory__search_nodes", "arguments": 3}', NAMES) == ()
    assert calls_in_text("```json\n{broken\n```", NAMES) == ()
    assert calls_in_text("", NAMES) == () and calls_in_text("[]", NAMES) == ()


def run(catcher: CallCatcher, pieces: list[str], usage: TokenUsage) -> list[ChatChunk]:
    out = [c for p in pieces for c in catcher.feed(ChatChunk(p))]
    out += catcher.feed(ChatChunk(usage=usage, finish_reason="stop"))
    return out + catcher.finish()


def test_a_streamed_fenced_call_is_held_back_and_ends_as_one_call() -> None:
    usage = TokenUsage(10, 5)
    pieces = [FENCED[i : i + 3] for i in range(0, len(FENCED), 3)]
    out = run(CallCatcher(NAMES), pieces, usage)
    assert [c.text for c in out] == [""]  # nothing shown to the person
    assert out[0].tool_calls[0].name == "memory__search_nodes"
    assert (out[0].usage, out[0].finish_reason) == (usage, "tool_calls")


@given(st.text(max_size=60), st.integers(1, 7))
def test_any_other_reply_streams_through_unchanged(text: str, size: int) -> None:
    usage = TokenUsage(3, 4)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    out = run(CallCatcher(NAMES), pieces, usage)
    if calls_in_text(text, NAMES):
        return
    assert "".join(c.text for c in out) == text
    assert not any(c.tool_calls for c in out)
    assert [c.usage for c in out if c.usage] == [usage]


def test_plain_text_is_released_at_once_not_at_the_end() -> None:
    catcher = CallCatcher(NAMES)
    assert catcher.feed(ChatChunk("Hel")) == [ChatChunk("Hel")]
    assert catcher.feed(ChatChunk("lo")) == [ChatChunk("lo")]
    assert catcher.feed(ChatChunk("{")) == [ChatChunk("{")]  # past the start: text
