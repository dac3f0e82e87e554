"""``kairox_core.usage``: tokens per session, compaction spend included, from the events."""

from __future__ import annotations

from pathlib import Path

from kairox_core import Kairox
from kairox_core.config import parse_config
from kairox_core.usage import usage


def kairox_with(tmp_path: Path, strategy: str) -> Kairox:
    config = parse_config(
        {
            "providers": {"chat": {"kind": "scripted", "replies": ["a short summary line"]}},
            "profiles": {"default": {"provider": "chat"}},
            "compaction": {"strategy": strategy, "keep_recent_exchanges": 1},
        }
    )
    return Kairox.open(tmp_path / "kx.db", config)


async def test_usage_adds_turns_and_model_compaction(kairox_home: Path, tmp_path: Path) -> None:
    kx = kairox_with(tmp_path, "model")
    s = kx.session(workspace="w")
    for i in range(3):
        turn = await s.begin_turn(f"question {i}")
        await turn.complete(
            f"answer {i}", usage={"prompt_tokens": 100 + i, "completion_tokens": 10}
        )
    other = kx.session(workspace="w")
    await other.run_turn("no usage reported", "fine")  # a provider that reports nothing
    result = await s.compact()
    assert result.ok, result
    (mine,) = usage(kx, s.id)
    assert (mine.turns, mine.chat_prompt_tokens, mine.chat_completion_tokens) == (3, 303, 30)
    assert mine.compactions == 1
    assert mine.compaction_prompt_tokens > 0 and mine.compaction_completion_tokens > 0
    assert (
        mine.total_tokens == 333 + mine.compaction_prompt_tokens + mine.compaction_completion_tokens
    )
    assert mine.as_dict()["total_tokens"] == mine.total_tokens
    everyone = {u.session_id: u for u in usage(kx)}
    assert everyone[s.id] == mine
    assert everyone[other.id].turns == 1 and everyone[other.id].total_tokens == 0
    await kx.aclose()


async def test_extractive_compaction_spends_nothing(kairox_home: Path, tmp_path: Path) -> None:
    kx = kairox_with(tmp_path, "extractive")
    s = kx.session(workspace="w")
    for i in range(3):
        await s.run_turn(f"Alice picked plan {i} on 3 May", f"Plan {i} noted.")
    assert (await s.compact()).ok
    (mine,) = usage(kx, s.id)
    assert mine.compactions == 1
    assert mine.compaction_prompt_tokens == mine.compaction_completion_tokens == 0
    await kx.aclose()
