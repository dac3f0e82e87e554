"""The session protocol's edges: limits, clearing, refusals, and items Kairox cannot store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest
from agents import TResponseInputItem
from agents.memory import Session, SessionSettings
from oai_helpers import event_types, open_kairox

from kairox_core.tokens import TokenCounter
from kairox_openai_agents import KairoxSession, KairoxSessionError


def items(*raw: dict[str, Any]) -> list[TResponseInputItem]:
    return cast(list[TResponseInputItem], list(raw))


USER = {"role": "user", "content": "hello"}
REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "hi there", "annotations": []}],
}


async def test_implements_the_sdk_protocol(tmp_path: Path) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p1")
        assert isinstance(session, Session)
        assert session.session_id == "p1" and session.kairox_session_id == "p1"
        assert await session.get_items() == []


async def test_add_then_get_in_order_with_limit(tmp_path: Path) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p2")
        for i in range(3):
            await session.add_items(items({"role": "user", "content": f"q{i}"}))
            await session.add_items(
                items({**REPLY, "content": [{"type": "output_text", "text": f"a{i}"}]})
            )
        everything = await session.get_items()
        assert [i["content"] for i in everything] == ["q0", "a0", "q1", "a1", "q2", "a2"]  # type: ignore[typeddict-item]
        assert await session.get_items(limit=2) == everything[-2:]
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=50) == everything
        assert await session.get_items(limit=-1) == everything  # as SQLiteSession
        session.session_settings = SessionSettings(limit=3)
        assert await session.get_items() == everything[-3:]
        assert await session.get_items(limit=1) == everything[-1:]  # an explicit limit wins


async def test_pop_item_refuses_and_says_why(tmp_path: Path) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p3")
        await session.add_items(items(USER, REPLY))
        with pytest.raises(KairoxSessionError, match="append-only"):
            await session.pop_item()
        assert len(await session.get_items()) == 2  # nothing was removed


async def test_clear_session_starts_fresh_and_keeps_the_audit(tmp_path: Path) -> None:
    marked = (
        'ok <memory scope="user" key="lang">Writes Rust</memory>'
        '<memory scope="session">s-only</memory>'
    )
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p4")
        await session.add_items(
            items(USER, {**REPLY, "content": [{"type": "output_text", "text": marked}]})
        )
        kx.approvals.accept(kx.approvals.pending()[0].id)
        before = event_types(kx, "p4")

        await session.clear_session()
        assert session.session_id == "p4" and session.kairox_session_id == "p4::2"
        assert event_types(kx, "p4") == before  # nothing deleted
        contents = [str(i.get("content")) for i in await session.get_items()]
        assert any("Writes Rust" in c for c in contents)  # user memory carries over
        assert not any("s-only" in c or "hello" in c for c in contents)

        await session.add_items(items({"role": "user", "content": "after"}, REPLY))
        await session.clear_session()
        assert session.kairox_session_id == "p4::3"
        # a new object finds the newest generation
        assert KairoxSession(kx, "p4").kairox_session_id == "p4::3"


async def test_clear_session_aborts_an_unfinished_turn(tmp_path: Path) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p5")
        await session.add_items(items(USER))
        await session.clear_session()
        assert not session.kairox_session.busy
        assert kx.session(session_id="p5").busy is False


async def test_a_run_left_open_is_closed_by_the_next_user_message(tmp_path: Path) -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "rain"}
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p6")
        await session.add_items(items(USER, call, output))  # a run that ended on a tool
        await session.add_items(items({"role": "user", "content": "next"}, REPLY))
        types = event_types(kx, "p6")
        assert types.count("AssistantMessageCompleted") == 2
        assert "ToolInvocationCompleted" in types
        # a run that recorded nothing but the prompt is aborted, not given a reply
        await session.add_items(items({"role": "user", "content": "lost"}))
        await session.add_items(items({"role": "user", "content": "again"}, REPLY))
        assert event_types(kx, "p6").count("AssistantMessageCompleted") == 3


async def test_consecutive_user_items_are_one_prompt(tmp_path: Path) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p7")
        await session.add_items(
            items(
                {"role": "user", "content": "first"},
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "second"}],
                },
                REPLY,
            )
        )
        users = [e.text for e in kx.events("p7") if e.type == "UserMessageAdded"]  # type: ignore[attr-defined]
        assert users == ["first\n\nsecond"]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"type": "reasoning", "id": "rs_1", "summary": []}, "skip_item_types"),
        ({"role": "system", "content": "be nice"}, "Agent\\(instructions"),
        ({"role": "developer", "content": "be nice"}, "system side"),
        (
            {"role": "user", "content": [{"type": "input_image", "image_url": "data:,x"}]},
            "'input_image' part",
        ),
        ({"type": "web_search_call", "id": "ws", "status": "completed"}, "web_search_call"),
        ({"type": "function_call_output", "call_id": "nope", "output": "x"}, "no function call"),
        ({"role": "tool", "content": "x"}, "role 'tool'"),
    ],
)
async def test_items_kairox_cannot_store_are_refused_before_writing(
    tmp_path: Path, item: dict[str, Any], message: str
) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p8")
        before = event_types(kx, "p8")
        with pytest.raises(KairoxSessionError, match=message) as caught:
            await session.add_items(items(USER, item, REPLY))
        assert "#1" in str(caught.value)  # where it is
        assert event_types(kx, "p8") == before  # nothing of the batch was written
        assert not session.kairox_session.busy


async def test_items_without_a_user_message_first_are_refused(tmp_path: Path) -> None:
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p9")
        with pytest.raises(KairoxSessionError, match="no user message"):
            await session.add_items(items(REPLY))


async def test_skip_item_types_drops_what_the_caller_named(tmp_path: Path) -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    with open_kairox(tmp_path) as kx:
        session = KairoxSession(kx, "p10", skip_item_types={"reasoning"})
        await session.add_items(items(USER, reasoning, REPLY))
        assert [i.get("content") for i in await session.get_items()] == ["hello", "hi there"]


def test_a_session_id_with_the_generation_separator_is_refused(tmp_path: Path) -> None:
    with open_kairox(tmp_path) as kx, pytest.raises(KairoxSessionError, match="::"):
        KairoxSession(kx, "a::2")


async def test_a_resumed_session_in_another_workspace_is_a_clear_error(tmp_path: Path) -> None:
    from kairox_core import KairoxUserError

    with open_kairox(tmp_path) as kx:
        KairoxSession(kx, "p11", workspace="alpha")
        with pytest.raises(KairoxUserError, match="workspace 'alpha'"):
            KairoxSession(kx, "p11", workspace="beta")


async def test_get_items_fills_the_budget_with_older_turns_past_compaction(
    tmp_path: Path,
) -> None:
    """With no question known yet, the room recall would take goes to older messages,
    verbatim, newest first, back past what compaction summarised: a turn compaction took
    out of the history comes back while the budget holds it, and the context never
    opens on a reply whose user message did not fit."""
    with open_kairox(tmp_path, window=700) as kx:
        session = KairoxSession(kx, "p12")

        async def exchange(prompt: str, reply: str) -> None:
            await session.add_items(items({"role": "user", "content": prompt}))
            await session.add_items(
                items({**REPLY, "content": [{"type": "output_text", "text": reply}]})
            )

        await exchange("The code for the blue door is 4417.", "Noted, the blue door code is 4417.")
        for i in range(14):
            await exchange(f"Status of shipment {i}? " + "pallets " * 15, f"Shipment {i} is ok.")
        assert [e for e in event_types(kx, "p12") if e == "CompactionSummary"]

        preview = await asyncio.to_thread(session.kairox_session.preview_sync, "")
        held = [str(m.get("content")) for m in preview.messages]
        assert "Shipment 0 is ok." not in held  # compacted away
        got = [str(i.get("content")) for i in await session.get_items()]
        assert "Shipment 0 is ok." in got  # back, verbatim
        assert got.index("Shipment 0 is ok.") < got.index("Shipment 13 is ok.")
        assert "Shipment 13 is ok." in got  # the newest is there as well

        for i in range(14, 40):
            await exchange(f"Status of shipment {i}? " + "pallets " * 15, f"Shipment {i} is ok.")
        listed = await session.get_items()
        got = [str(i.get("content")) for i in listed]
        assert "Shipment 0 is ok." not in got  # the budget no longer reaches it
        first = next(i for i in listed if i.get("role") in ("user", "assistant"))
        assert first.get("role") == "user"
        counter = TokenCounter("o200k_base")
        sent = [{"role": str(i.get("role")), "content": str(i.get("content"))} for i in listed]
        assert counter.count_messages(sent) <= 700

        # the summaries' room went to verbatim turns; keep_summaries keeps them instead
        def summaries(listed: list[TResponseInputItem]) -> list[str]:
            texts = [str(i.get("content")) for i in listed]
            return [t for t in texts if t.startswith("<kairox:summaries>")]

        preview = await asyncio.to_thread(session.kairox_session.preview_sync, "")
        assert summaries(cast(list[TResponseInputItem], preview.messages))
        assert not summaries(listed)
        keeping = KairoxSession(kx, "p12", keep_summaries=True)
        kept = await keeping.get_items()
        assert summaries(kept)
        assert len([i for i in kept if i.get("role") == "user"]) < len(
            [i for i in listed if i.get("role") == "user"]
        )
