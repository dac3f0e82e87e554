"""The ``model`` strategy: any provider, its own ``[compaction] provider``, redaction, usage."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox_core.compaction.base import CompactionRequest
from kairox_core.compaction.model_strategy import SYSTEM_PROMPT, ModelStrategy, windows
from kairox_core.config import parse_config
from kairox_core.events import (
    CompactionSummary,
    ContextCompactionFailed,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.testing.compaction_contract import CompactionStrategyContract
from kairox_core.testing.fake_openai import Action, FakeOpenAIServer, serve
from kairox_core.tokens import TokenCounter

SUMMARY = (
    "Alice chose plan B on 3 May; the deploy key sk-proj-abcdefghijklmnopqrstuvwxyz0123 "
    "was shared; open task: invoice 1042."
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    yield from serve(reply=SUMMARY, models=("summary-model",))


def kairox_with(tmp_path: Path, server: FakeOpenAIServer) -> Kairox:
    config = parse_config(
        {
            "profiles": {
                "default": {
                    "model": "gpt-4o",
                    "provider": "chat",
                    "context_window": 700,
                    "reserve": 100,
                }
            },
            "providers": {
                "chat": {"kind": "scripted", "replies": ["chat reply"]},
                "summariser": {
                    "kind": "openai",
                    "base_url": server.base_url,
                    "model": "summary-model",
                    "retry_backoff": 0.0,
                },
            },
            "compaction": {
                "strategy": "model",
                "provider": "summariser",
                "keep_recent_exchanges": 1,
                "target_tokens": 100,
            },
        }
    )
    return Kairox.open(tmp_path / "kx.db", config)


async def test_model_strategy_over_http_with_its_own_provider(
    kairox_home: Path,
    tmp_path: Path,
    server: FakeOpenAIServer,
) -> None:
    kx = kairox_with(tmp_path, server)
    s = kx.session(workspace="w")
    for i in range(3):
        await s.run_turn(
            f"Alice asked about plan {i} and invoice {1040 + i}",
            f"Plan {i} noted, path /home/alice/plan{i}.txt",
        )
    result = await s.compact()
    assert result.ok, result
    summary = next(e for e in kx.events(s.id) if isinstance(e, CompactionSummary))
    assert summary.strategy == "model" and summary.model == "summary-model"
    assert "sk-proj-" not in summary.summary and "REDACTED" in summary.summary
    assert "Alice chose plan B on 3 May" in summary.summary
    assert summary.usage and summary.usage["prompt_tokens"] > 0
    assert summary.usage["completion_tokens"] > 0
    # one request, to the compaction provider (not the chat one), with the faithful prompt
    assert len(server.requests) == 1
    body = server.requests[0].body
    assert body["model"] == "summary-model"
    system, user = body["messages"]
    assert system["content"] == SYSTEM_PROMPT
    assert "secrets" in SYSTEM_PROMPT and "paths" in SYSTEM_PROMPT
    assert "Faithful" in SYSTEM_PROMPT or "faithful" in SYSTEM_PROMPT
    assert "User: Alice asked about plan 0 and invoice 1040" in user["content"]
    await kx.aclose()


@pytest.mark.slow
async def test_provider_failure_is_a_failed_compaction_and_the_session_goes_on(
    kairox_home: Path,
    tmp_path: Path,
    server: FakeOpenAIServer,
) -> None:
    kx = kairox_with(tmp_path, server)
    s = kx.session(workspace="w")
    for i in range(3):
        await s.run_turn(f"question {i}", f"answer {i}")
    server.script(Action(status=400, message="model overloaded with nonsense"))
    result = await s.compact()
    assert result.status == "failed" and "400" in result.reason
    failed = [e for e in kx.events(s.id) if isinstance(e, ContextCompactionFailed)]
    assert failed and failed[0].reason == result.reason
    await s.run_turn("still there?", "yes")
    assert (await s.compact()).ok  # the next attempt works
    await kx.aclose()


def request(events: Sequence[Any], previous: Sequence[str] = (), target: int = 50) -> Any:
    return CompactionRequest(
        events=list(events), previous_summaries=list(previous), target_tokens=target
    )


async def test_rolling_windows_carry_the_summary_so_far() -> None:
    calls: list[str] = []

    def reply(messages: Sequence[Any]) -> str:
        calls.append(messages[-1]["content"])
        return f"summary after call {len(calls)}"

    events = [
        UserMessageAdded(
            session_id="s", turn_id=f"t{i}", seq=i, text=f"message {i} " + "word " * 60
        )
        for i in range(12)
    ]
    strategy = ModelStrategy(provider=ScriptedProvider(reply), max_input_tokens=300)
    output = await strategy.summarize(request(events, ["older summary"]))
    assert len(calls) > 2  # the transcript did not fit one window
    assert calls[0].startswith("Summary so far:\nolder summary")
    assert "summary after call 1" in calls[1]  # each window sees the summary so far
    assert output.text == f"summary after call {len(calls)}"
    assert output.usage is not None and output.usage["prompt_tokens"] > 0
    assert "message 11" in calls[-1]


async def test_empty_reply_is_an_error() -> None:
    strategy = ModelStrategy(provider=ScriptedProvider(["   "]))
    events = [UserMessageAdded(session_id="s", turn_id="t", seq=1, text="hi")]
    with pytest.raises(ValueError, match="empty summary"):
        await strategy.summarize(request(events))


def test_windows_pack_lines_under_the_limit() -> None:
    counter = TokenCounter()
    lines = [f"line {i} " + "x " * (i % 7) * 10 for i in range(40)]
    packed = windows(lines, 120, counter)
    assert "\n".join(packed).split("\n") == lines  # nothing lost, order kept
    assert all(counter.count(w) <= 120 + 40 for w in packed)
    assert windows(["y " * 2000], 50, counter)[0].startswith("y y")  # a giant line is cut


class TestModelStrategyContract(CompactionStrategyContract):
    fits_target = True  # the model is asked for at most target_tokens (max_tokens)

    def make_strategy(self, summary: str) -> ModelStrategy:
        return ModelStrategy(provider=ScriptedProvider([summary]))
