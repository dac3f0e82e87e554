"""Item conversion, property-based: Kairox's messages -> SDK items -> what a turn records."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_openai_agents.items import (
    AssistantText,
    KairoxSessionError,
    Op,
    ToolCall,
    ToolOutput,
    UserText,
    messages_to_items,
    parse_items,
)

text = st.text(min_size=1, max_size=40)
ident = st.text(alphabet="abcdefghijk_0123456789", min_size=1, max_size=8)


@st.composite
def exchanges(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[Op]]:
    """Chat messages as Kairox renders a turn, and the ops they must come back as."""
    messages: list[dict[str, Any]] = []
    ops: list[Op] = []
    for n in range(draw(st.integers(1, 4))):
        prompt = draw(text)
        messages.append({"role": "user", "content": prompt})
        ops.append(UserText(prompt))
        for k in range(draw(st.integers(0, 2))):
            call = ToolCall(f"c{n}_{k}", draw(ident), json.dumps({"q": draw(text)}))
            result = draw(text)
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call.call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call.call_id, "content": result})
            ops += [call, ToolOutput(call.call_id, result)]
        reply = draw(text)
        messages.append({"role": "assistant", "content": reply})
        ops.append(AssistantText(reply))
    return messages, ops


@settings(deadline=None)  # no wall-clock bound: the machine may be loaded
@given(exchanges())
def test_kairox_history_round_trips_through_sdk_items(
    case: tuple[list[dict[str, Any]], list[Op]],
) -> None:
    messages, ops = case
    assert parse_items(messages_to_items(messages)) == ops


@settings(deadline=None)  # no wall-clock bound: the machine may be loaded
@given(st.text(max_size=30), st.lists(st.text(max_size=10), max_size=4))
def test_text_parts_join_in_order(prefix: str, parts: list[str]) -> None:
    item = {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "output_text", "text": p, "annotations": []} for p in [prefix, *parts]
        ],
    }
    assert parse_items([item]) == [AssistantText("".join([prefix, *parts]))]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
item_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            [
                "message",
                "function_call",
                "function_call_output",
                "custom_tool_call",
                "reasoning",
                "x",
            ]
        ),
        "role": st.sampled_from(["user", "assistant", "system", "tool"]),
        "content": json_values,
        "call_id": json_values,
        "name": json_values,
        "arguments": json_values,
        "output": json_values,
    },
)


@settings(deadline=None)  # no wall-clock bound: the machine may be loaded
@given(st.lists(item_like, max_size=4))
def test_any_item_is_parsed_or_refused_clearly(raw: list[dict[str, Any]]) -> None:
    try:
        ops = parse_items(raw)
    except KairoxSessionError as exc:
        assert "item #" in str(exc) or "must be a dict" in str(exc)
    else:
        assert len(ops) == len(raw)


def test_a_kairox_image_attachment_becomes_an_input_image() -> None:
    content = [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
    ]
    assert messages_to_items([{"role": "user", "content": content}]) == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,AA==",
                    "detail": "auto",
                },
            ],
        }
    ]
