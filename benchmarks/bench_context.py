"""Benchmark: a whole Kairox turn vs langchain-core ``trim_messages``, and scaling.

For each session size (chat messages: user, assistant, tool calls and results) a
synthetic session is written to a fresh database through the event store's batch API
and its turns indexed for recall in bulk (``Recall.index_all``, which also builds the
recall space's HNSW graph once it has 2,048 turns or more: retrieval/ann.py), then
timed in the same run:

- Kairox, the default configuration (recall of past turns on: a hybrid search over
  the session's own turns every turn, the finished turn indexed in the background): a
  whole turn through the public facade: ``begin_turn`` (record the user message,
  assemble under the budget: memories, recalled turns, retrieval, history
  newest-first), streaming a ~300-token reply in small deltas through ``turn.feed``,
  and ``complete()`` (reply and delta events written, markers routed). Turns run back
  to back, so the next turn's search indexes the last turn itself (the background
  indexing starts 0.25 s after a turn; with a model, its reply hides it). Median of
  several warm turns, and the cold first turn after opening (it reads the history
  window from the database and maps the graph file). The workspace
  index is on (the default), empty. The compaction engine's turn-end check is left
  out of the figure and timed apart (``turn_with_turn_end_hooks_ms``), with compaction
  disabled; the same session with recall off is timed for reference.
- Baseline: ``trim_messages(strategy="last", token_counter=<tiktoken o200k counter>)``
  over the same messages as LangChain messages, to the same budget.

Every timing reports the warm turns' median, p90 and max (``turn_p90_ms``,
``turn_max_ms``, ``p90_over_median``); the default configuration's also the CPU time of
a turn (``turn_cpu_ms``, ``turn_cpu_p90_ms``: ``time.process_time``, every thread of
the process), which a busy machine's scheduler does not stretch as it does wall time.

The default configuration as users get it (issue 27): compaction on as well, its
turn-end check inside the figure, over a session grown by real turns (``run_turn``
turn by turn, so compaction summaries, recall's incremental index and its ANN graph
are what a user's session has) and, in the same run, over the batch-built session of
the same size (``default_config`` in the JSON; ``--grown-sizes``, 1k and 10k messages
by default: growing 10k messages turn by turn takes minutes).

Goals (issues 4, 18, 27): at 10k messages a Kairox turn in the default configuration at
least 100x faster than the baseline, warm and cold; a turn at 100k messages within 2x of
one at 1k; the p90 within 2x of the median, turns back to back. Prints tables and JSON.

    python benchmarks/bench_context.py [--sizes 1000,10000,100000] [--turns 7]
        [--grown-sizes 1000,10000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.context.history import with_tokens
from kairox_core.events import (
    AssistantMessageCompleted,
    Event,
    ModelTokenDelta,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.recall.engine import recall_of
from kairox_core.tokens import get_encoding

WINDOW = 128_000
RESERVE = 4_096
BATCH = 5_000
_VOCABULARY = (
    "the a project deadline budget report meeting customer release server database "
    "query index memory context window token model agent tool result search file path "
    "error retry timeout cache latency throughput review plan decision owner task "
    "Monday Friday March 2026 42 17 3.5 ok yes no maybe because therefore however"
)
WORDS = tuple(_VOCABULARY.split())


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def synthetic(n_messages: int, seed: int = 7) -> list[tuple[str, dict[str, Any]]]:
    """(kind, fields) in order, ``n_messages`` chat messages long (a tool call and its
    result count as two). Mixed lengths: short chat, long answers, tool output."""
    rng = random.Random(seed)
    out: list[tuple[str, dict[str, Any]]] = []
    count, turn = 0, 0
    while count < n_messages:
        turn += 1
        tid = f"t{turn}"
        out.append(("user", {"turn_id": tid, "text": words(rng, 5, 120)}))
        count += 1
        if rng.random() < 0.2 and count + 2 < n_messages:
            out.append(
                (
                    "tool",
                    {
                        "turn_id": tid,
                        "tool_call_id": f"call-{turn}",
                        "tool_name": "search",
                        "arguments": json.dumps({"q": words(rng, 2, 6)}),
                        "result": words(rng, 20, 300),
                    },
                )
            )
            count += 2
        if count < n_messages:
            out.append(("assistant", {"turn_id": tid, "text": words(rng, 10, 250)}))
            count += 1
    return out


def to_events(
    session_id: str, items: list[tuple[str, dict[str, Any]]], counter: Any
) -> list[Event]:
    events: list[Event] = []
    for kind, f in items:
        if kind == "user":
            events.append(with_tokens(UserMessageAdded(session_id=session_id, **f), counter))
        elif kind == "tool":
            events.append(with_tokens(ToolInvocationCompleted(session_id=session_id, **f), counter))
        else:
            events.append(
                ModelTokenDelta(session_id=session_id, turn_id=f["turn_id"], delta=f["text"])
            )
            events.append(
                with_tokens(AssistantMessageCompleted(session_id=session_id, **f), counter)
            )
    return events


def to_langchain(items: list[tuple[str, dict[str, Any]]], system: str) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    msgs: list[Any] = [SystemMessage(system)]
    for kind, f in items:
        if kind == "user":
            msgs.append(HumanMessage(f["text"]))
        elif kind == "assistant":
            msgs.append(AIMessage(f["text"]))
        else:
            msgs.append(
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "id": f["tool_call_id"],
                            "name": f["tool_name"],
                            "args": json.loads(f["arguments"]),
                        }
                    ],
                )
            )
            msgs.append(ToolMessage(f["result"], tool_call_id=f["tool_call_id"]))
    return msgs


def tiktoken_counter() -> Any:
    """The token counter a LangChain user writes: o200k, OpenAI's per-message framing."""
    enc = get_encoding("o200k_base")

    def count(messages: list[Any]) -> int:
        total = 3
        for m in messages:
            total += 3 + len(enc.encode(m.type))
            if isinstance(m.content, str):
                total += len(enc.encode(m.content, disallowed_special=()))
            for call in getattr(m, "tool_calls", None) or []:
                total += len(enc.encode(json.dumps(call, sort_keys=True)))
        return total

    return count


def bench_baseline(messages: list[Any], budget: int, repeats: int) -> dict[str, Any]:
    from langchain_core.messages import trim_messages

    counter = tiktoken_counter()
    counter(messages[:2])  # load the encoding outside the timing, as Kairox's is loaded
    times, kept = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = trim_messages(
            messages,
            max_tokens=budget,
            strategy="last",
            token_counter=counter,
            include_system=True,
            start_on="human",
        )
        times.append(time.perf_counter() - t0)
        kept = len(out)
    return {"seconds": statistics.median(times), "kept_messages": kept, "runs": len(times)}


def reply_deltas(rng: random.Random) -> list[str]:
    text = words(rng, 200, 230) + (
        ' <memory scope="session" key="bench.note">turn noted</memory> done.'
    )
    return [text[i : i + 8] for i in range(0, len(text), 8)]  # ~2 tokens per delta


async def one_turn(session: Any, prompt: str, deltas: list[str]) -> dict[str, float]:
    c0 = time.process_time()
    t0 = time.perf_counter()
    turn = await session.begin_turn(prompt)
    t1 = time.perf_counter()
    for d in deltas:
        turn.feed(d)
    t2 = time.perf_counter()
    await turn.complete()
    t3 = time.perf_counter()
    return {
        "total": t3 - t0,
        "cpu": time.process_time() - c0,  # every thread of the process, the turn's and others'
        "begin": t1 - t0,
        "stream": t2 - t1,
        "complete": t3 - t2,
        "history_messages": turn.trace.layer("history").messages,
        "context_tokens": turn.trace.total,
    }


def bench_config(recall: bool = True) -> KairoxConfig:
    return KairoxConfig.model_validate(
        {
            "profiles": {
                "default": {"model": "gpt-4o", "context_window": WINDOW, "reserve": RESERVE}
            },
            # The synthetic session is over the compaction trigger on purpose (a full window):
            # compacting it is issue 7's benchmark, not this one's.
            "compaction": {"enabled": False},
            "recall": {"enabled": recall},
        }
    )


def build_session(db: Path, n: int, system: str) -> tuple[str, int, float, float]:
    """Write an ``n``-message session through the event store's batch API and index its
    turns for recall in bulk (``Recall.index_all``): (session id, events, seconds to
    append, seconds to index). Turn by turn this took 29 minutes at 10k messages."""
    kx = Kairox.open(db, bench_config())
    session = kx.session(workspace="bench", system_prompt=system)
    counter = session.assembler().counter
    t0 = time.perf_counter()
    events = to_events(session.id, synthetic(n), counter)
    for i in range(0, len(events), BATCH):
        kx.events_store.append_many(events[i : i + BATCH])
    build = time.perf_counter() - t0
    n_events = len(events)
    del events  # do not keep the whole session alive in this process while timing
    t0 = time.perf_counter()
    recall_of(kx).index_all(session)
    index = time.perf_counter() - t0
    kx.memories.put("user", "diet", "vegetarian")
    kx.memories.put("workspace", "deadline", "release is due Friday", workspace_id="bench")
    kx.close()
    return session.id, n_events, build, index


def time_turns(
    db: Path, session_id: str, system: str, turns: int, *, recall: bool, seed: int
) -> dict[str, Any]:
    """A fresh process-like start: open, resume the session, time the cold first turn,
    then ``turns`` warm ones; the compaction engine's turn-end check is timed apart."""
    kx = Kairox.open(db, bench_config(recall))
    session = kx.session(session_id=session_id, system_prompt=system)
    rng = random.Random(seed)
    engines = kx.engines
    hooks = [e for e in engines if e.name == "compaction"]
    kx.engines = tuple(e for e in engines if e.name != "compaction")

    async def drive() -> tuple[dict[str, float], list[dict[str, float]], list[float]]:
        first = await one_turn(session, "what is the deadline?", reply_deltas(rng))
        runs = [
            await one_turn(session, f"question {i}: {words(rng, 5, 40)}", reply_deltas(rng))
            for i in range(turns)
        ]
        kx.engines = engines
        hooked = (
            [
                (await one_turn(session, f"hooked {i}", reply_deltas(rng)))["total"]
                for i in range(max(3, turns // 3))
            ]
            if hooks
            else []
        )
        await kx.aclose()
        return first, runs, hooked

    first, runs, hooked = asyncio.run(drive())
    med = {
        k: statistics.median(r[k] for r in runs) for k in ("total", "begin", "stream", "complete")
    }
    out: dict[str, Any] = {
        "turn_ms": round(med["total"] * 1000, 3),
        **spread([r["total"] for r in runs]),
        "begin_ms": round(med["begin"] * 1000, 3),
        "stream_ms": round(med["stream"] * 1000, 3),
        "complete_ms": round(med["complete"] * 1000, 3),
        "first_turn_ms": round(first["total"] * 1000, 3),
        "first_begin_ms": round(first["begin"] * 1000, 3),  # reporting: the cold turn's parts
        "first_complete_ms": round(first["complete"] * 1000, 3),
        "history_messages_in_context": runs[-1]["history_messages"],
        "context_tokens": runs[-1]["context_tokens"],
        "turn_end_hooks": len(hooks),
    }
    if hooked:
        out["turn_with_turn_end_hooks_ms"] = round(statistics.median(hooked) * 1000, 3)
    return out


def spread(seconds: list[float]) -> dict[str, float]:
    """p90 and max of warm turns, and p90 over the median (the goal: within 2x)."""
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, -(-9 * len(ordered) // 10) - 1)]
    med = statistics.median(ordered)
    return {
        "turn_p90_ms": round(p90 * 1000, 3),
        "turn_max_ms": round(ordered[-1] * 1000, 3),
        "p90_over_median": round(p90 / med, 2) if med else float("nan"),
    }


def default_config() -> KairoxConfig:
    """The configuration users get (compaction and recall on), at the bench window."""
    return KairoxConfig.model_validate(
        {"profiles": {"default": {"model": "gpt-4o", "context_window": WINDOW, "reserve": RESERVE}}}
    )


def grow_session(db: Path, n: int, system: str) -> tuple[str, int, float]:
    """An ``n``-message session grown by real turns in the default configuration
    (``run_turn``: each turn assembled, recorded, its markers routed, compaction's
    turn-end check and recall's indexing run), as a user's session grows: (session id,
    events, seconds). The same message mix as ``synthetic``."""
    kx = Kairox.open(db, default_config())
    session = kx.session(workspace="bench", system_prompt=system)
    items = synthetic(n)
    t0 = time.perf_counter()

    async def grow() -> None:
        turn: dict[str, Any] = {}
        for kind, f in [*items, ("user", {})]:
            if kind == "user" and turn:
                await session.run_turn(
                    turn["prompt"], turn.get("reply", ""), tool_results=turn.get("tools", [])
                )
                turn = {}
            if kind == "user" and f:
                turn["prompt"] = f["text"]
            elif kind == "assistant":
                turn["reply"] = f["text"]
            elif kind == "tool":
                turn.setdefault("tools", []).append(
                    {k: f[k] for k in ("tool_call_id", "tool_name", "arguments", "result")}
                )
        await kx.aclose()

    asyncio.run(grow())
    seconds = time.perf_counter() - t0
    kx = Kairox.open(db, default_config())
    n_events = len(kx.events(session.id))
    kx.close()
    return session.id, n_events, seconds


def time_default_turns(
    db: Path, session_id: str, system: str, turns: int, *, seed: int
) -> dict[str, Any]:
    """Turns back to back in the default configuration, everything on (the turn-end
    hooks inside the figure, as a user waits for them): cold first, then warm."""
    kx = Kairox.open(db, default_config())
    session = kx.session(session_id=session_id, system_prompt=system)
    rng = random.Random(seed)

    async def drive() -> tuple[dict[str, float], list[dict[str, float]]]:
        first = await one_turn(session, "what is the deadline?", reply_deltas(rng))
        runs = [
            await one_turn(session, f"question {i}: {words(rng, 5, 40)}", reply_deltas(rng))
            for i in range(turns)
        ]
        await kx.aclose()
        return first, runs

    first, runs = asyncio.run(drive())
    return {
        "turn_ms": round(statistics.median(r["total"] for r in runs) * 1000, 3),
        **spread([r["total"] for r in runs]),
        "begin_ms": round(statistics.median(r["begin"] for r in runs) * 1000, 3),
        "complete_ms": round(statistics.median(r["complete"] for r in runs) * 1000, 3),
        "first_turn_ms": round(first["total"] * 1000, 3),
        "turn_cpu_ms": round(statistics.median(r["cpu"] for r in runs) * 1000, 3),
        "turn_cpu_p90_ms": spread([r["cpu"] for r in runs])["turn_p90_ms"],
    }


def bench_grown(n: int, turns: int, workdir: Path) -> dict[str, Any]:
    """The default configuration over a session grown by real turns, next to the same
    configuration over the batch-built session of the same size (same run)."""
    system = "You are a helpful assistant for the bench project."
    grown_db = workdir / f"grown-{n}.db"
    sid, n_events, seconds = grow_session(grown_db, n, system)
    grown = time_default_turns(grown_db, sid, system, turns, seed=n + 2)
    batch_db = workdir / f"batch-default-{n}.db"
    batch_sid, _, _, _ = build_session(batch_db, n, system)
    batch = time_default_turns(batch_db, batch_sid, system, turns, seed=n + 2)
    return {
        "messages": n,
        "grown_events": n_events,
        "grow_seconds": round(seconds, 1),
        "grown": grown,
        "batch_built": batch,
        "grown_over_batch": round(grown["turn_ms"] / batch["turn_ms"], 2),
    }


def bench_size(n: int, turns: int, baseline_repeats: int, workdir: Path) -> dict[str, Any]:
    """One session size: the default configuration (recall on) warm and cold, recall off
    for reference, and trim_messages over the same messages, all in this run."""
    system = "You are a helpful assistant for the bench project."
    db = workdir / f"bench-{n}.db"
    session_id, n_events, build, index = build_session(db, n, system)
    default = time_turns(db, session_id, system, turns, recall=True, seed=n)
    off = time_turns(db, session_id, system, turns, recall=False, seed=n + 1)

    lc = to_langchain(synthetic(n), system)  # the same messages (same seed)
    base = bench_baseline(lc, WINDOW - RESERVE, baseline_repeats) if baseline_repeats else None
    del lc
    result: dict[str, Any] = {
        "messages": n,
        "events": n_events,
        "build_seconds": round(build, 2),
        "index_seconds": round(index, 2),
        **default,
        "deltas_per_turn": len(reply_deltas(random.Random(0))),
        "recall_off_turn_ms": off["turn_ms"],
        "recall_off_first_turn_ms": off["first_turn_ms"],
        "recall_off_first_begin_ms": off["first_begin_ms"],
        "recall_off_first_complete_ms": off["first_complete_ms"],
    }
    if base is not None:
        secs = base["seconds"]
        result["trim_messages_ms"] = round(secs * 1000, 1)
        result["trim_messages_kept"] = base["kept_messages"]
        result["speedup_vs_trim_messages"] = round(secs * 1000 / default["turn_ms"], 1)
        result["speedup_cold_vs_trim_messages"] = round(secs * 1000 / default["first_turn_ms"], 1)
        result["speedup_recall_off"] = round(secs * 1000 / off["turn_ms"], 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--turns", type=int, default=15, help="timed turns per size")
    parser.add_argument(
        "--baseline-repeats", type=int, default=3, help="trim_messages calls per size (0: skip)"
    )
    parser.add_argument(
        "--grown-sizes",
        default="1000,10000",
        help="sizes also grown by real turns and timed in the default configuration "
        "(compaction on), next to the batch-built session ('' to skip)",
    )
    parser.add_argument("--json", action="store_true", help="print only JSON")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    grown_sizes = [int(s) for s in args.grown_sizes.split(",") if s]
    results = []
    grown = []
    with tempfile.TemporaryDirectory() as tmp:
        # One-time process start-up (imports, encodings, index tables) outside the figures.
        bench_size(50, 1, 0, Path(tmp))
        for n in sizes:
            repeats = args.baseline_repeats if n <= 10_000 else min(args.baseline_repeats, 1)
            results.append(bench_size(n, args.turns, repeats, Path(tmp)))
            if not args.json:
                print(f"  {n} messages done", file=sys.stderr)
        for n in grown_sizes:
            grown.append(bench_grown(n, args.turns, Path(tmp)))
            if not args.json:
                print(f"  {n} messages grown by turns done", file=sys.stderr)
    by_n = {r["messages"]: r for r in results}
    summary: dict[str, Any] = {
        "window": WINDOW,
        "reserve": RESERVE,
        "sizes": results,
        "default_config": grown,
    }
    if 10_000 in by_n and "speedup_vs_trim_messages" in by_n[10_000]:
        s = by_n[10_000]["speedup_vs_trim_messages"]
        cold = by_n[10_000]["speedup_cold_vs_trim_messages"]
        summary["speedup_at_10k"] = s
        summary["speedup_cold_at_10k"] = cold
        summary["speedup_goal_met"] = s >= 100 and cold >= 100
    if 1_000 in by_n and 100_000 in by_n:
        ratio = by_n[100_000]["turn_ms"] / by_n[1_000]["turn_ms"]
        summary["turn_100k_over_1k"] = round(ratio, 2)
        summary["flat_goal_met"] = ratio <= 2
    if not args.json:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"a whole turn, default config (recall on), {WINDOW // 1000}k window")
        for col in (
            "messages",
            "turn ms",
            "begin",
            "stream",
            "complete",
            "cold turn",
            "in context",
            "trim_messages ms",
            "speedup",
            "cold speedup",
            "p90",
            "max",
            "recall off ms",
        ):
            table.add_column(col, justify="right")
        for r in results:
            table.add_row(
                f"{r['messages']:,}",
                f"{r['turn_ms']:.2f}",
                f"{r['begin_ms']:.2f}",
                f"{r['stream_ms']:.2f}",
                f"{r['complete_ms']:.2f}",
                f"{r['first_turn_ms']:.2f}",
                f"{r['history_messages_in_context']:,}",
                f"{r.get('trim_messages_ms', float('nan')):.0f}",
                f"{r.get('speedup_vs_trim_messages', float('nan')):.1f}x",
                f"{r.get('speedup_cold_vs_trim_messages', float('nan')):.1f}x",
                f"{r['turn_p90_ms']:.2f}",
                f"{r['turn_max_ms']:.2f}",
                f"{r['recall_off_turn_ms']:.2f}",
            )
        Console(stderr=True).print(table)
        if grown:
            table = Table(title="default configuration (compaction on), turn-end hooks included")
            for col in ("messages", "session", "turn ms", "p90", "max", "p90/median", "cold"):
                table.add_column(col, justify="right")
            for g in grown:
                for label in ("grown", "batch_built"):
                    r = g[label]
                    table.add_row(
                        f"{g['messages']:,}",
                        label.replace("_", " "),
                        f"{r['turn_ms']:.2f}",
                        f"{r['turn_p90_ms']:.2f}",
                        f"{r['turn_max_ms']:.2f}",
                        f"{r['p90_over_median']:.2f}",
                        f"{r['first_turn_ms']:.2f}",
                    )
            Console(stderr=True).print(table)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
