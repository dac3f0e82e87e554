"""Benchmark: ``KairoxMemory`` beside LlamaIndex's own ``Memory`` in a LlamaIndex agent's
memory calls, per turn, and evidence recall on LoCoMo at the same token budget.

Per-turn time (``--sizes 1000,10000``): the synthetic session of ``bench_context.py``
(same generator and seed: user, assistant, tool calls and results of mixed lengths) is
loaded into both, then each side is driven exactly as ``FunctionAgent`` drives its
memory in one run without tools: ``aput(user message)``, ``aget()`` (the model's input),
``aput_messages([reply])``, ``aget()`` (it reads the memory again after the reply, for
structured output). No model call: what is timed is the memory.

- Kairox: ``KairoxMemory`` over the session in the default configuration (recall of
  past turns on, compaction off as in ``bench_context.py``: the synthetic session is
  over the trigger on purpose), window 128k, reserve 4,096; the ~300-token reply carries
  a session ``<memory>`` tag, routed as in any turn. The bare session API (``begin_turn``,
  ``complete``, ``preview``) is timed too: the difference is the adapter's cost
  (converting the context to LlamaIndex ``ChatMessage``s).
- LlamaIndex: ``Memory.from_defaults(token_limit=<the same budget>)`` (its default
  SQLAlchemy chat store, in-memory aiosqlite; no memory blocks; tokenizer o200k from
  Kairox's offline files, so counts match). The session is loaded in the state its own
  waterfall leaves: the newest messages within ``token_limit * chat_history_token_ratio``
  active, the older ones archived (putting 10k messages through the waterfall re-counts
  the whole queue after every flush, minutes of setup for the same end state).

Warm turns (median, p90) and the first turn, the three sides' turns interleaved so the
machine's load falls on all alike; ratios are LlamaIndex's time over Kairox's. (Kairox's
recall indexes a finished turn in the background a moment later, so some of that work
overlaps the next side's turn; back to back, the next Kairox turn would absorb it.)

Evidence recall (``--locomo``): each LoCoMo conversation of ``/work/shared/data/locomo``
is replayed as in ``benchmarks/locomo.py`` (Kairox: the same replay, settings and
turn-end compaction; the LoCoMo recall backend ``--backend``, default ``hashing``), then
each question (categories 1-4) is the ``input`` of ``KairoxMemory.aget``, and we count
the evidence turns whose text is in what it returns. LlamaIndex's ``Memory`` gets the same
messages and ``aget()``; its default (``chat_history_token_ratio=0.7``) and the whole
budget for history (1.0) are both reported.

    python benchmarks/bench_llamaindex.py [--sizes 1000,10000] [--turns 9] [--json]
        [--locomo] [--budget 4000] [--backend hashing|sentence-transformers]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context import RESERVE, WINDOW, build_session, reply_deltas, synthetic, words
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus

from kairox_core import Kairox
from kairox_core.tokens import get_encoding
from kairox_llamaindex import KairoxMemory

BUDGET = WINDOW - RESERVE
SYSTEM = "You are a helpful assistant for the bench project."


def o200k() -> Any:
    enc = get_encoding("o200k_base")
    return lambda text: enc.encode(text, disallowed_special=())


def to_llamaindex(items: list[tuple[str, dict[str, Any]]]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for kind, f in items:
        if kind == "user":
            out.append(ChatMessage(role=MessageRole.USER, content=f["text"]))
        elif kind == "assistant":
            out.append(ChatMessage(role=MessageRole.ASSISTANT, content=f["text"]))
        else:
            call = ToolCallBlock(
                tool_call_id=f["tool_call_id"],
                tool_name=f["tool_name"],
                tool_kwargs=json.loads(f["arguments"]),
            )
            out.append(ChatMessage(role=MessageRole.ASSISTANT, blocks=[call]))
            out.append(
                ChatMessage(
                    role=MessageRole.TOOL,
                    content=f["result"],
                    additional_kwargs={"tool_call_id": f["tool_call_id"]},
                )
            )
    return out


async def load_llamaindex(messages: list[ChatMessage], token_limit: int, ratio: float) -> Memory:
    """A ``Memory`` holding ``messages`` as its waterfall leaves them: the newest within
    its history limit active (starting on a user message), the rest archived."""
    memory = Memory.from_defaults(
        session_id="bench",
        token_limit=token_limit,
        tokenizer_fn=o200k(),
        chat_history_token_ratio=ratio,
    )
    limit = token_limit * ratio
    used, start = 0, len(messages)
    while start > 0:
        cost = memory._estimate_token_count(messages[start - 1])
        if used + cost > limit:
            break
        used += cost
        start -= 1
    while start < len(messages) and messages[start].role != MessageRole.USER:
        start += 1
    store = memory.sql_store
    if start:
        await store.add_messages("bench", messages[:start], status=MessageStatus.ARCHIVED)
    await store.add_messages("bench", messages[start:], status=MessageStatus.ACTIVE)
    return memory


async def agent_turn(memory: Any, prompt: str, reply: str) -> tuple[float, int]:
    """One run of a tool-less FunctionAgent, as far as its memory sees it (it reads the
    memory again after storing the reply, for structured output)."""
    t0 = time.perf_counter()
    await memory.aput(ChatMessage(role=MessageRole.USER, content=prompt))
    context = await memory.aget()
    await memory.aput_messages([ChatMessage(role=MessageRole.ASSISTANT, content=reply)])
    await memory.aget()
    return time.perf_counter() - t0, len(context)


async def session_turn(session: Any, prompt: str, reply: str) -> tuple[float, int]:
    """The same through the session API: the adapter's cost is the difference."""
    t0 = time.perf_counter()
    turn = await session.begin_turn(prompt)
    n = len(turn.messages)
    await turn.complete(reply)
    await session.preview("")
    return time.perf_counter() - t0, n


def summary(first: float, times: list[float], context_messages: int) -> dict[str, Any]:
    times = sorted(times)
    return {
        "turn_ms": round(statistics.median(times) * 1000, 2),
        "p90_ms": round(times[min(len(times) - 1, int(0.9 * len(times)))] * 1000, 2),
        "first_turn_ms": round(first * 1000, 2),
        "context_messages": context_messages,
    }


def bench_size(n: int, turns: int, workdir: Path) -> dict[str, Any]:
    """Both memories loaded, then their turns interleaved (Kairox through the adapter,
    the bare session, LlamaIndex, in turn), so a change in the machine's load falls on
    all three alike."""
    from bench_context import bench_config

    db = workdir / f"li-{n}.db"
    t0 = time.perf_counter()
    session_id, n_events, _, _ = build_session(db, n, SYSTEM)
    build = time.perf_counter() - t0

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        llamaindex = await load_llamaindex(to_llamaindex(synthetic(n)), BUDGET, 0.7)
        load = time.perf_counter() - t0
        async with Kairox.open(db, bench_config()) as kx:
            memory = KairoxMemory(kx.session(session_id=session_id, system_prompt=SYSTEM))
            sides = {
                "kairox_memory": (memory, agent_turn),
                "kairox_session": (memory.session, session_turn),
                "llamaindex_memory": (llamaindex, agent_turn),
            }
            rng = random.Random(n)
            reply = "".join(reply_deltas(rng))
            times: dict[str, list[float]] = {name: [] for name in sides}
            firsts: dict[str, float] = {}
            sizes: dict[str, int] = {}
            for i in range(turns + 1):
                prompt = f"question {i}: {words(rng, 5, 40)}" if i else "what is the deadline?"
                for name, (target, step) in sides.items():
                    elapsed, sizes[name] = await step(target, prompt, reply)
                    if i:
                        times[name].append(elapsed)
                    else:
                        firsts[name] = elapsed
        out = {name: summary(firsts[name], times[name], sizes[name]) for name in sides}
        out["llamaindex_memory"]["load_s"] = round(load, 2)
        return out

    sides = asyncio.run(run())
    kairox, bare, li = sides["kairox_memory"], sides["kairox_session"], sides["llamaindex_memory"]
    return {
        "messages": n,
        "events": n_events,
        "kairox_build_s": round(build, 2),
        **sides,
        "ratio_llamaindex_over_kairox": round(li["turn_ms"] / kairox["turn_ms"], 2),
        "ratio_llamaindex_over_kairox_first": round(
            li["first_turn_ms"] / kairox["first_turn_ms"], 2
        ),
        "adapter_overhead": round(kairox["turn_ms"] / bare["turn_ms"], 2),
    }


# --- evidence recall on LoCoMo ---------------------------------------------------------


def chat_text(messages: list[ChatMessage]) -> str:
    return "\n".join(m.content or "" for m in messages)


def present(text: str, by_id: dict[str, str]) -> Any:
    """Is an evidence turn's message in ``text`` verbatim (as benchmarks/locomo.py counts)."""
    return lambda dia_id: by_id[dia_id] in text


async def recall_run(
    path: str, budget: int, backend: str, llamaindex: bool = True
) -> dict[str, Any]:
    import locomo

    settings = dataclasses.replace(locomo.Settings(), backend=backend)
    kairox, li_default, li_whole = locomo.Score(), locomo.Score(), locomo.Score()
    seconds: dict[str, float] = {"kairox": 0.0, "llamaindex": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        for conv in locomo.load(path):
            by_id = {t.dia_id: t.message for t in conv.turns}
            async with Kairox.open(Path(tmp) / f"{conv.name}.db", settings.config(budget)) as kx:
                memory = KairoxMemory(await locomo.replay(kx, conv))
                t0 = time.perf_counter()
                for question, category, evidence in conv.questions:
                    text = chat_text(await memory.aget(question))
                    kairox.add(category, evidence, present(text, by_id))
                seconds["kairox"] += time.perf_counter() - t0
            messages = [
                ChatMessage(role=MessageRole(t.role), content=t.message) for t in conv.turns
            ]
            for ratio, score in ((0.7, li_default), (1.0, li_whole)) if llamaindex else ():
                t0 = time.perf_counter()
                for question, category, evidence in conv.questions:
                    # what a FunctionAgent's model gets: the question put, then aget()
                    li = await load_llamaindex(messages, budget, ratio)
                    await li.aput(ChatMessage(role=MessageRole.USER, content=question))
                    text = chat_text(await li.aget())
                    score.add(category, evidence, present(text, by_id))
                seconds["llamaindex"] += time.perf_counter() - t0
    return {
        "budget": budget,
        "backend": backend,
        "kairox_memory": kairox.as_dict(),
        "llamaindex_memory_default": li_default.as_dict(),
        "llamaindex_memory_ratio_1": li_whole.as_dict(),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument("--locomo", action="store_true", help="also measure evidence recall")
    parser.add_argument("--locomo-only", action="store_true")
    parser.add_argument("--data", default="/work/shared/data/locomo/locomo_dev3.json")
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--backend", default="hashing")
    parser.add_argument(
        "--kairox-only", action="store_true", help="recall: skip LlamaIndex (it needs no backend)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"turns": [], "recall": None}
    if not args.locomo_only:
        with tempfile.TemporaryDirectory() as tmp:
            for n in (int(s) for s in args.sizes.split(",")):
                row = bench_size(n, args.turns, Path(tmp))
                out["turns"].append(row)
                print(
                    f"{n:>6} messages: KairoxMemory {row['kairox_memory']['turn_ms']:.1f} ms "
                    f"(first {row['kairox_memory']['first_turn_ms']:.1f}), bare session "
                    f"{row['kairox_session']['turn_ms']:.1f} ms, LlamaIndex Memory "
                    f"{row['llamaindex_memory']['turn_ms']:.1f} ms "
                    f"(first {row['llamaindex_memory']['first_turn_ms']:.1f}): "
                    f"LlamaIndex/Kairox {row['ratio_llamaindex_over_kairox']}x",
                    file=sys.stderr,
                    flush=True,
                )
    if args.locomo or args.locomo_only:
        out["recall"] = asyncio.run(
            recall_run(args.data, args.budget, args.backend, not args.kairox_only)
        )
        print(json.dumps(out["recall"]), file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
