"""``layer_texts``: the assembled messages split back into the trace's layers."""

from __future__ import annotations

import json

from kairox_core.config import ProfileConfig
from kairox_core.context import ContextAssembler, ListHistory, MemoryItem, PinnedFact, SummaryItem
from kairox_core.context.history import unit_from
from kairox_core.context.layers import content, layer_texts
from kairox_core.context.longterm import LongTermContext, LongTermItem, LongTermRecall, PackItem
from kairox_core.engines import Contribution
from kairox_core.retrieval.base import RetrievalHit


def test_every_layer_gets_its_own_messages_in_send_order() -> None:
    a = ContextAssembler(ProfileConfig(model="gpt-4o", context_window=8000, reserve=0))
    pc = a.counter
    history = [
        unit_from(5, "UserMessageAdded", {"text": "Where is the meeting?", "turn_id": "t1"}, pc),
        unit_from(6, "AssistantMessageCompleted", {"text": "Room 101.", "turn_id": "t1"}, pc),
    ]
    tool = unit_from(
        8,
        "ToolInvocationCompleted",
        {
            "turn_id": "t2",
            "tool_call_id": "c1",
            "tool_name": "lookup",
            "arguments": json.dumps({"q": "room"}),
            "result": "room 101: projector",
        },
        pc,
    )
    context = a.assemble(
        "Is there a projector?",
        system_prompt="You are helpful.",
        memories=[MemoryItem("m1", "user", "diet", "Vegetarian")],
        pinned=[PinnedFact("f1", "The budget is 400 EUR.")],
        summaries=[SummaryItem(4, 1, 3, "Alice booked room 101.")],
        hits=[RetrievalHit("Room 101 seats 12.", 1.0, "workspace", "rooms.md")],
        history=ListHistory(list(reversed(history))),
        after_prompt=[tool],
        contributions=[Contribution("notes", "mandatory", label="notes", text="Be brief.")],
        longterm=LongTermContext(
            packs=[PackItem("rules", "team", "Answer in English.")],
            recall=LongTermRecall(chunks=[LongTermItem("c1", "project", "We meet Mondays.", 0.9)]),
        ),
    )
    layers = layer_texts(context.messages, context.trace)
    names = [layer.name for layer in layers]
    assert names == [
        "system",
        "packs",
        "notes",
        "memories",
        "pinned",
        "summaries",
        "longterm",
        "retrieval",
        "history",
        "prompt",
    ]
    assert [m for layer in layers for m in layer.messages] == context.messages
    by = {layer.name: layer.text for layer in layers}
    expected = {
        "system": "You are helpful.",
        "packs": "Answer in English.",
        "notes": "Be brief.",
        "memories": "Vegetarian",
        "pinned": "The budget is 400 EUR.",
        "summaries": "Alice booked room 101.",
        "longterm": "We meet Mondays.",
        "retrieval": "Room 101 seats 12.",
        "history": "assistant: Room 101.",
        "prompt": "user: Is there a projector?",
    }
    for name, needle in expected.items():
        assert needle in by[name], (name, by[name])
        others = [n for n in by if n != name and needle in by[n]]
        assert not others, (needle, others)
    assert "room 101: projector" in by["prompt"] and "[tool call lookup(" in by["prompt"]


def test_counts_that_do_not_add_up_fall_back_to_one_layer() -> None:
    a = ContextAssembler(ProfileConfig(model="gpt-4o", context_window=4000, reserve=0))
    context = a.assemble("hi", system_prompt="sys")
    (whole,) = layer_texts([*context.messages, {"role": "user", "content": "extra"}], context.trace)
    assert whole.name == "messages" and "extra" in whole.text


def test_content_of_parts_and_missing_text() -> None:
    assert (
        content({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]})
        == "a\n[image_url]"
    )
    assert content({"role": "assistant", "content": None}) == ""
