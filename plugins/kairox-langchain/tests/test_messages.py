"""The context converter reuses messages between turns and gives what
``convert_to_messages`` gives, whatever the contexts."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import convert_to_messages

from kairox_langchain.messages import ContextConverter

texts = st.text(max_size=20)
plain = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["system", "user", "assistant"]),
    texts,
)
tool_call = st.builds(
    lambda cid, name: {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}
        ],
    },
    st.sampled_from(["c1", "c2"]),
    st.sampled_from(["f", "g"]),
)
tool_result = st.builds(
    lambda cid, text: {"role": "tool", "tool_call_id": cid, "content": text},
    st.sampled_from(["c1", "c2"]),
    texts,
)
parts = st.builds(lambda text: {"role": "user", "content": [{"type": "text", "text": text}]}, texts)
contexts = st.lists(st.one_of(plain, tool_call, tool_result, parts), max_size=8)


@given(st.lists(contexts, min_size=1, max_size=4))
def test_each_turn_converts_like_langchain(turns: list[list[dict[str, Any]]]) -> None:
    convert = ContextConverter()
    for messages in turns:
        assert convert(messages) == convert_to_messages([dict(m) for m in messages])


def test_an_unchanged_message_is_reused() -> None:
    convert = ContextConverter()
    first = convert([{"role": "user", "content": "hello"}])
    second = convert([{"role": "user", "content": "hello"}, {"role": "user", "content": "x"}])
    assert second[0] is first[0]
