"""The assembler plans and renders and does no I/O.

``tests/data/assembler_golden.json`` holds the messages and traces the assembler gave
for the scenarios below before it was split into plan and render (and before deferred
recall was settled by the session instead of inside ``assemble()``): the same inputs
must give the same prompt and trace. Regenerate it only for an intended change of
output: ``python tests/test_assembler_plan.py --write``.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox_core.config import ProfileConfig
from kairox_core.context import (
    ContextAssembler,
    ContextBudgetExceeded,
    ListHistory,
    MemoryItem,
    PinnedFact,
    SummaryItem,
)
from kairox_core.context.assembler import AssemblyInputs
from kairox_core.context.history import unit_from
from kairox_core.context.longterm import LongTermContext, LongTermItem, LongTermRecall, PackItem
from kairox_core.context.recalled import SOURCE, deferred_mark
from kairox_core.context.sources import HistoryUnit
from kairox_core.engines import Contribution
from kairox_core.retrieval.base import RetrievalHit

GOLDEN = Path(__file__).parent / "data" / "assembler_golden.json"
TOPICS = ("garden tomatoes", "boat trip", "violin lessons", "kitchen tiles", "marathon plan")


def profile(window: int, reserve: int = 200) -> ProfileConfig:
    return ProfileConfig(
        model="gpt-4o", encoding="o200k_base", context_window=window, reserve=reserve
    )


def history(
    assembler: ContextAssembler, exchanges: int, *, tools: bool = False
) -> list[HistoryUnit]:
    """Units oldest first: user, (a tool call + result), assistant, per exchange."""
    pc = assembler.counter
    units: list[HistoryUnit] = []
    seq = 0
    for i in range(exchanges):
        topic = TOPICS[i % len(TOPICS)]
        seq += 1
        units.append(
            unit_from(
                seq,
                "UserMessageAdded",
                {"text": f"Turn {i}: about the {topic}?", "turn_id": f"t{i}"},
                pc,
            )
        )
        if tools and i % 2:
            seq += 1
            payload = {
                "turn_id": f"t{i}",
                "tool_call_id": f"c{i}",
                "tool_name": "lookup",
                "arguments": json.dumps({"q": i}),
                "result": f"result {i}: {topic} " * 3,
            }
            units.append(unit_from(seq, "ToolInvocationCompleted", payload, pc))
        seq += 1
        units.append(
            unit_from(
                seq,
                "AssistantMessageCompleted",
                {"text": f"Sure, turn {i}: the {topic}, in some detail.", "turn_id": f"t{i}"},
                pc,
            )
        )
    return units


def turn_hit(seq: int, text: str, day: str = "2026-05-01") -> RetrievalHit:
    meta = {"seq": seq, "speaker": "user" if seq % 2 else "assistant", "date": day}
    return RetrievalHit(text, 1.0 / seq, SOURCE, f"turn:s:{seq}", meta)


class Within:
    """A history source answering ``within`` (as the session's cached history does)."""

    def __init__(self, units: Sequence[HistoryUnit]) -> None:
        self.units = list(units)[::-1]

    def newest_first(self) -> Iterator[HistoryUnit]:
        return iter(self.units)

    def within(self, room: int) -> tuple[list[HistoryUnit], HistoryUnit | None]:
        taken: list[HistoryUnit] = []
        used = 0
        for unit in self.units:
            if used + unit.tokens > room:
                return taken, unit
            taken.append(unit)
            used += unit.tokens
        return taken, None


Scenario = Callable[
    [Callable[[], Sequence[RetrievalHit]] | None], tuple[ContextAssembler, dict[str, Any]]
]


def everything_fits(_: Any) -> tuple[ContextAssembler, dict[str, Any]]:
    a = ContextAssembler(profile(8000), profile_name="p")
    return a, {
        "prompt": "what do I eat?",
        "system_prompt": "Be brief.",
        "instructions": ["Answer in English."],
        "memories": [MemoryItem("m-1", "user", "diet", "vegetarian", 5.0)],
        "pinned": [PinnedFact("f-1", "Launch is May 3")],
        "summaries": [SummaryItem(seq=9, first_seq=1, last_seq=8, text="We met.")],
        "hits": [
            RetrievalHit("chunk", 0.9, "workspace", "docs/a.md", chunk_id="3"),
            RetrievalHit("kb text", 0.5, "pinecone-docs", "doc-17"),
        ],
        "history": ListHistory(tuple(history(a, 6, tools=True))),
    }


def tight_memories(_: Any) -> tuple[ContextAssembler, dict[str, Any]]:
    a = ContextAssembler(profile(900), memory_share=0.3)
    memories = [
        MemoryItem(
            f"m-{i}",
            ("user", "workspace", "session")[i % 3],
            f"k.{TOPICS[i % 5].split()[0]}",
            f"memory {i} about the {TOPICS[i % 5]} " * 8,
            float(i),
        )
        for i in range(12)
    ]
    summaries = [
        SummaryItem(
            seq=40 + i, first_seq=1 + 10 * i, last_seq=9 + 10 * i, text=f"Summary {i}. " * 20
        )
        for i in range(3)
    ]
    return a, {
        "prompt": "the marathon plan and the garden?",
        "memories": memories,
        "summaries": summaries,
        "history": ListHistory(tuple(history(a, 12, tools=True))),
    }


def engines_and_recall(_: Any) -> tuple[ContextAssembler, dict[str, Any]]:
    a = ContextAssembler(profile(1600), retrieval_share=0.4, longterm_share=0.1)
    units = history(a, 40)
    recalled = [
        turn_hit(s, f"turn {s}: about the {TOPICS[s % 5]}", f"2026-05-0{1 + s % 3}")
        for s in (3, 78, 1, 79, 7, 12)
    ]
    lt = LongTermContext(
        packs=[PackItem("style", "team", "Write short sentences.")],
        recall=LongTermRecall(
            chunks=[
                LongTermItem("c-1", "user", "The user likes tea. " * 5, 0.7),
                LongTermItem("c-2", "workspace", "Deploys on Friday. " * 30, 0.5),
            ],
            left_out=[(LongTermItem("c-3", "user", "x", 0.2), "below the threshold")],
            notes=("2 chunks above 0.32",),
        ),
        pack_notes=("pack style active",),
    )
    contributions = [
        Contribution(
            "recall",
            "recalled",
            label="recalled turns",
            hits=tuple(recalled[3:]),
            notes=("engine note",),
        ),
        Contribution(
            "persona", "system", label="persona", text="You are careful.", notes=("persona on",)
        ),
        Contribution("rules", "mandatory", label="house rules", text="Never guess <dates>."),
    ]
    tail = [
        unit_from(
            81,
            "ToolInvocationCompleted",
            {
                "turn_id": "t",
                "tool_call_id": "c",
                "tool_name": "lookup",
                "arguments": "{}",
                "result": "42",
            },
            a.counter,
        )
    ]
    return a, {
        "prompt": "what about the violin lessons?",
        "system_prompt": "Be brief.",
        "hits": [RetrievalHit("doc text " * 10, 0.8, "workspace", "docs/b.md", chunk_id="1")],
        "history": Within(units),
        "recalled": recalled[:3],
        "contributions": contributions,
        "longterm": lt,
        "after_prompt": tail,
    }


def history_takes_recalled(_: Any) -> tuple[ContextAssembler, dict[str, Any]]:
    """Retrieval leaves room unused: history takes a recalled turn in, so it is left
    out of the retrieved block."""
    a = ContextAssembler(profile(1200), retrieval_share=0.6)
    units = history(a, 40)
    recalled = [turn_hit(s, f"turn {s}: about the {TOPICS[s % 5]}") for s in (2, 9, 40)]
    return a, {
        "prompt": "the boat trip?",
        "history": ListHistory(tuple(units)),
        "recalled": recalled,
    }


def deferred_held(
    exact: Callable[[], Sequence[RetrievalHit]] | None,
) -> tuple[ContextAssembler, dict[str, Any]]:
    """The unindexed turns are in the history: the mark goes, its hits stand."""
    assert exact is not None
    a = ContextAssembler(profile(1200), retrieval_share=0.4)
    units = history(a, 40)
    hits = [turn_hit(s, f"turn {s}: about the {TOPICS[s % 5]}") for s in (3, 5)]
    mark = deferred_mark(hits, (79, 80), exact)
    return a, {"prompt": "the kitchen?", "history": Within(units), "recalled": [*hits, mark]}


def deferred_not_held(
    exact: Callable[[], Sequence[RetrievalHit]] | None,
) -> tuple[ContextAssembler, dict[str, Any]]:
    """An unindexed turn is out of the history: the search done again replaces the
    mark's hits."""
    assert exact is not None
    a = ContextAssembler(profile(1000), retrieval_share=0.6)
    units = history(a, 40)
    hits = [turn_hit(s, f"turn {s}: about the {TOPICS[s % 5]}") for s in (3, 5)]
    mark = deferred_mark(hits, (2, 79), exact)
    extra = RetrievalHit("workspace text", 0.4, "workspace", "docs/c.md")
    return a, {
        "prompt": "the kitchen?",
        "history": ListHistory(tuple(units)),
        "recalled": [*hits, mark],
        "hits": [extra],
    }


SCENARIOS: dict[str, Scenario] = {
    "everything_fits": everything_fits,
    "tight_memories": tight_memories,
    "engines_and_recall": engines_and_recall,
    "history_takes_recalled": history_takes_recalled,
    "deferred_held": deferred_held,
    "deferred_not_held": deferred_not_held,
}


def exact_search() -> list[RetrievalHit]:
    """What the search done again finds (indexed first): the unindexed turn 2 first."""
    return [
        turn_hit(2, "turn 2: the locker code is 4417"),
        turn_hit(3, "turn 3: about the kitchen tiles"),
    ]


def outcome(
    assemble: Callable[[ContextAssembler, dict[str, Any]], Any], name: str
) -> dict[str, Any]:
    assembler, kwargs = SCENARIOS[name](exact_search)
    ctx = assemble(assembler, kwargs)
    return {"messages": ctx.messages, "trace": ctx.trace.as_dict()}


def settled(assembler: ContextAssembler, kwargs: dict[str, Any]) -> Any:
    """What the session does: plan, search again for the marks the plan names, plan
    again and render."""
    plan = assembler.plan(**kwargs)
    if plan.unsettled:
        for mark in plan.unsettled:
            mark.search()
        plan = assembler.plan(**kwargs)
    assert not plan.unsettled
    return assembler.render(plan)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_prompt_is_the_one_the_assembler_gave_before(name: str) -> None:
    want = json.loads(GOLDEN.read_text())[name]
    got = json.loads(json.dumps(outcome(settled, name)))
    assert got["messages"] == want["messages"]
    assert got["trace"] == want["trace"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_assemble_equals_plan_then_render(name: str) -> None:
    """Without a mark to settle (or with one settled), ``assemble`` is plan + render."""
    assembler, kwargs = SCENARIOS[name](exact_search)
    for mark in assembler.plan(**kwargs).unsettled:
        mark.search()
    assert assembler.assemble(**kwargs).messages == settled(assembler, kwargs).messages


def test_plan_refuses_when_the_mandatory_parts_exceed_the_budget() -> None:
    a = ContextAssembler(profile(300, reserve=100))
    with pytest.raises(ContextBudgetExceeded) as err:
        a.plan("x " * 400, pinned=[PinnedFact("f", "pinned " * 10)])
    assert set(err.value.parts) >= {"new prompt", "pinned facts", "system prompt"}


def test_assembly_inputs_name_every_keyword_of_plan() -> None:
    """``assemble``'s keywords are typed by ``AssemblyInputs``: it must not drift from
    ``plan``'s signature."""
    params = inspect.signature(ContextAssembler.plan).parameters
    keywords = {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(AssemblyInputs.__annotations__) == keywords


def refuse(*_: Any, **__: Any) -> list[RetrievalHit]:
    raise AssertionError("the assembler called back into the recall engine")


def test_planning_never_searches_and_names_the_marks_to_settle() -> None:
    """A mark whose unindexed turn the history lacks: the plan names it and calls
    nothing; ``assemble`` refuses (the caller must settle it first) without a search."""
    assembler, kwargs = deferred_not_held(refuse)
    plan = assembler.plan(**kwargs)
    (mark,) = plan.unsettled
    assert mark.unindexed == (2, 79)
    with pytest.raises(ValueError, match="settle"):
        assembler.render(plan)
    with pytest.raises(ValueError, match="settle"):
        assembler.assemble(**kwargs)
    held_assembler, held = deferred_held(refuse)
    assert not held_assembler.plan(**held).unsettled  # all held: nothing to search
    held_assembler.assemble(**held)


def write_golden() -> None:  # pragma: no cover - run by hand
    def assemble(assembler: ContextAssembler, kwargs: dict[str, Any]) -> Any:
        if hasattr(assembler, "plan"):
            return settled(assembler, kwargs)
        return assembler.assemble(**kwargs)  # the assembler before the split

    GOLDEN.parent.mkdir(exist_ok=True)
    data = {name: outcome(assemble, name) for name in sorted(SCENARIOS)}
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:  # pragma: no cover
    write_golden()
