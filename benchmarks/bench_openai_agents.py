"""Benchmark: ``kairox_openai_agents.KairoxSession`` beside the Agents SDK's ``SQLiteSession``.

Both are driven as ``Runner.run`` drives a session on a run with no tool call:
``get_items()`` (the history the model gets), then ``add_items([user message])`` and
``add_items([assistant message])`` (a ~200-word reply). No model is called: the figures
are the session's own cost per turn.

Per-turn time, for sessions of 1k and 10k chat messages (bench_context.py's synthetic
conversation: short and long turns, 20% with a tool call and its result):

- KairoxSession: the session written through the event store's batch API and indexed
  for recall in bulk (bench_context.build_session), then opened as a process would:
  ``get_items`` assembles Kairox's context with no question (memories, history
  newest-first under a 128k window, older messages backfilled into any room left),
  ``add_items`` records a whole Kairox turn (``begin_turn`` assembles for the real
  prompt, with recall; ``complete`` routes markers and runs the engines). Compaction
  off, recall on, as bench_context.py.
- SQLiteSession (file database, the SDK's default kind of session): the same messages
  as SDK items; ``get_items()`` returns them all (no limit: the SDK's default).

Medians of warm turns; the first turn after opening is reported apart (KairoxSession
reads the session's conversation once when its context has room to backfill). Ratios are
KairoxSession / SQLiteSession, measured in the same run.

Evidence recall (LoCoMo, /work/shared/data/locomo/locomo_dev3.json, categories 1-4),
at the same token budget (``--budget``, o200k_base): each conversation is replayed
through ``KairoxSession.add_items`` exchange by exchange (Kairox compacts and indexes as
it goes), and through ``SQLiteSession.add_items``. For each question, an evidence turn
counts when its text is in what the model would get:

- ``sqlite_session_recency``: the newest items that fit beside the question
  (``get_items(limit=k)``, the largest ``k`` that fits the budget);
- ``kairox_get_items``: ``KairoxSession.get_items()`` as the SDK calls it, before it
  hands over the question: Kairox's context assembled with no question, the room
  recall would take (and the summaries', when needed) spent on older messages verbatim,
  newest first (kairox_openai_agents/backfill.py);
- ``kairox_get_items_keep_summaries``: the same with ``keep_summaries=True``;
- ``kairox_no_query``: Kairox's context assembled with no query (memories, summaries,
  history under the budget; no recall, retrieval or backfill), for reference;
- ``kairox_model_input_filter``: what ``RunConfig(call_model_input_filter=
  session.model_input_filter)`` sends: Kairox's context assembled for the question
  (``preview`` of the question, which is the same assembly as the turn's).

The first speaker of each conversation plays the user (the SDK needs a user message
first; conv-30 opens with speaker_b). ``--backend`` is the recall embedder
(``hashing``: the default, no model; ``sentence-transformers``: MiniLM, needs that
plugin and torch).

    python benchmarks/bench_openai_agents.py [--sizes 1000,10000] [--turns 7]
        [--budget 4000] [--backend hashing] [--skip-recall] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_context as bc
import locomo as lc

from kairox_core import Kairox
from kairox_core.tokens import REPLY_PRIMING_TOKENS, TokenCounter

try:  # the adapter and its SDK are a plugin: `nox -s bench` may run without them
    from agents import TResponseInputItem
    from agents.memory import SQLiteSession

    from kairox_openai_agents import KairoxSession
except ImportError as exc:  # pragma: no cover - reported by main()
    MISSING: ImportError | None = exc
else:
    MISSING = None

SYSTEM = "You are a helpful assistant for the project team."


def user_item(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


def assistant_item(text: str, n: int) -> TResponseInputItem:
    """An assistant message as the SDK stores a model's output."""
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def sdk_items(synthetic: list[tuple[str, dict[str, Any]]]) -> list[TResponseInputItem]:
    items: list[TResponseInputItem] = []
    for n, (kind, f) in enumerate(synthetic):
        if kind == "user":
            items.append(user_item(f["text"]))
        elif kind == "assistant":
            items.append(assistant_item(f["text"], n))
        else:
            items.append(
                {
                    "type": "function_call",
                    "call_id": f["tool_call_id"],
                    "name": f["tool_name"],
                    "arguments": f["arguments"],
                }
            )
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": f["tool_call_id"],
                    "output": f["result"],
                }
            )
    return items


# --- per-turn time ---------------------------------------------------------------------


async def sdk_turn(session: Any, prompt: str, reply: str, n: int) -> dict[str, float]:
    t0 = time.perf_counter()
    items = await session.get_items()
    t1 = time.perf_counter()
    await session.add_items([user_item(prompt)])
    await session.add_items([assistant_item(reply, n)])
    t2 = time.perf_counter()
    return {"get": t1 - t0, "add": t2 - t1, "total": t2 - t0, "items": len(items)}


async def time_turns(session: Any, turns: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    first = await sdk_turn(session, "what is the deadline?", bc.words(rng, 200, 230), 0)
    runs = [
        await sdk_turn(session, f"question {i}: {bc.words(rng, 5, 40)}", bc.words(rng, 200, 230), i)
        for i in range(1, turns + 1)
    ]
    counter = TokenCounter("o200k_base")  # what the model would be sent, outside the timing
    tokens = sum(item_tokens(counter, i) for i in await session.get_items())
    return {
        "tokens_returned": tokens,
        "get_items_ms": round(statistics.median(r["get"] for r in runs) * 1000, 3),
        "add_items_ms": round(statistics.median(r["add"] for r in runs) * 1000, 3),
        "turn_ms": round(statistics.median(r["total"] for r in runs) * 1000, 3),
        "first_turn_ms": round(first["total"] * 1000, 3),
        "items_returned": int(runs[-1]["items"]),
    }


def bench_size(n: int, turns: int, workdir: Path) -> dict[str, Any]:
    db = workdir / f"kairox-{n}.db"
    sid, n_events, build_s, index_s = bc.build_session(db, n, SYSTEM)
    with Kairox.open(db, bc.bench_config()) as kx:
        session = KairoxSession(kx, sid, system_prompt=SYSTEM)
        kairox = asyncio.run(time_turns(session, turns, seed=n))

    sqlite = SQLiteSession("bench", workdir / f"sdk-{n}.db")
    items = sdk_items(bc.synthetic(n))

    async def fill_and_time() -> dict[str, Any]:
        for i in range(0, len(items), bc.BATCH):
            await sqlite.add_items(items[i : i + bc.BATCH])
        return await time_turns(sqlite, turns, seed=n)

    baseline = asyncio.run(fill_and_time())
    sqlite.close()
    ratio = {
        k: round(kairox[k] / baseline[k], 2) if baseline[k] else None
        for k in ("get_items_ms", "add_items_ms", "turn_ms", "first_turn_ms")
    }
    return {
        "messages": n,
        "kairox_events": n_events,
        "kairox_setup_s": {"write": round(build_s, 1), "recall_index": round(index_s, 1)},
        "kairox_session": kairox,
        "sqlite_session": baseline,
        "ratio_kairox_to_sqlite": ratio,
    }


# --- evidence recall -------------------------------------------------------------------


def exchanges(conv: lc.Conversation) -> list[tuple[list[lc.Turn], list[lc.Turn]]]:
    """(user turns, assistant turns) runs; the first speaker plays the user."""
    first = conv.turns[0].role
    out: list[tuple[list[lc.Turn], list[lc.Turn]]] = []
    for t in conv.turns:
        if t.role == first:
            if not out or out[-1][1]:
                out.append(([], []))
            out[-1][0].append(t)
        else:
            out[-1][1].append(t)
    return out


async def replay(ks: KairoxSession, sq: SQLiteSession, conv: lc.Conversation) -> None:
    for n, (users, replies) in enumerate(exchanges(conv)):
        batch = [user_item(t.message) for t in users]
        batch += [assistant_item(t.message, n) for t in replies]
        await ks.add_items(batch)
        await sq.add_items(batch)


def item_text(items: Sequence[Any]) -> str:
    """The text of SDK items (message contents, tool outputs), one item a line."""
    return "\n".join(_text(i.get("content", i.get("output", ""))) for i in items)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content)
    return str(content or "")


def item_tokens(counter: TokenCounter, item: Any) -> int:
    text = _text(item.get("content", item.get("output", "")))
    return counter.message_tokens({"role": str(item.get("role", "tool")), "content": text})


async def recency_items(
    sq: SQLiteSession, counter: TokenCounter, question: str, budget: int
) -> list[Any]:
    """The newest SQLiteSession items that fit beside the question (what
    ``SessionSettings(limit=k)`` gives for the largest ``k`` that fits)."""
    everything = await sq.get_items()
    left = budget - counter.message_tokens({"role": "user", "content": question})
    left -= REPLY_PRIMING_TOKENS
    k = 0
    for item in reversed(everything):
        cost = item_tokens(counter, item)
        if cost > left:
            break
        left -= cost
        k += 1
    return await sq.get_items(limit=k)


def contains(by_id: dict[str, lc.Turn], text: str) -> Callable[[str], bool]:
    """Whether an evidence turn's message is in ``text``, verbatim."""
    return lambda dia_id: by_id[dia_id].message in text


async def locomo_recall(data: str, budget: int, backend: str, workdir: Path) -> dict[str, Any]:
    settings = lc.Settings(backend=backend)
    names = ("sqlite", "deployed", "keep_summaries", "no_query", "filter")
    scores = {name: lc.Score() for name in names}
    counter = TokenCounter(lc.ENCODING)
    seconds = {"replay": 0.0, "questions": 0.0}
    conversations = lc.load(data)
    for conv in conversations:
        print(
            f"  {conv.name}: {len(conv.turns)} turns, {len(conv.questions)} questions",
            file=sys.stderr,
        )
        by_id = {t.dia_id: t for t in conv.turns}
        with Kairox.open(workdir / f"{conv.name}.db", settings.config(budget)) as kx:
            ks = KairoxSession(kx, conv.name, workspace=f"locomo-{conv.name}", profile="bench")
            sq = SQLiteSession(conv.name, workdir / f"{conv.name}-sdk.db")
            t0 = time.perf_counter()
            await replay(ks, sq, conv)
            seconds["replay"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            deployed = item_text(await ks.get_items())
            keeping = KairoxSession(kx, conv.name, keep_summaries=True)
            kept_summaries = item_text(await keeping.get_items())
            blank = await asyncio.to_thread(ks.kairox_session.preview_sync, "")
            no_query = lc.context_text(blank.messages)
            for question, category, evidence in conv.questions:
                kept = item_text(await recency_items(sq, counter, question, budget))
                scores["sqlite"].add(category, evidence, contains(by_id, kept))
                scores["deployed"].add(category, evidence, contains(by_id, deployed))
                scores["keep_summaries"].add(category, evidence, contains(by_id, kept_summaries))
                scores["no_query"].add(category, evidence, contains(by_id, no_query))
                context = await asyncio.to_thread(ks.kairox_session.preview_sync, question)
                text = lc.context_text(context.messages)
                scores["filter"].add(category, evidence, contains(by_id, text))
            seconds["questions"] += time.perf_counter() - t0
            sq.close()
    return {
        "data": data,
        "budget": budget,
        "backend": backend,
        "questions": sum(len(c.questions) for c in conversations),
        "evidence_recall": {
            "sqlite_session_recency": scores["sqlite"].as_dict(),
            "kairox_get_items": scores["deployed"].as_dict(),
            "kairox_get_items_keep_summaries": scores["keep_summaries"].as_dict(),
            "kairox_no_query": scores["no_query"].as_dict(),
            "kairox_model_input_filter": scores["filter"].as_dict(),
        },
        "categories": {str(c): lc.CATEGORY_NAMES[c] for c in lc.CATEGORIES},
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="session sizes in messages")
    parser.add_argument("--turns", type=int, default=7, help="warm turns timed per size")
    parser.add_argument("--budget", type=int, default=4000, help="LoCoMo token budget")
    parser.add_argument("--backend", default="hashing", help="recall embedder for LoCoMo")
    parser.add_argument("--data", default=lc.DEFAULT_DATA, help="LoCoMo JSON file")
    parser.add_argument("--skip-recall", action="store_true", help="per-turn time only")
    parser.add_argument("--skip-time", action="store_true", help="evidence recall only")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args(argv)
    if MISSING is not None:
        print(
            f"bench_openai_agents: not run: {MISSING}; install the adapter first: "
            f"pip install -e plugins/kairox-openai-agents",
            file=sys.stderr,
        )
        return 0
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    result: dict[str, Any] = {"load_average": [round(x, 1) for x in os.getloadavg()]}
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        if not args.skip_time:
            result["per_turn"] = []
            for n in (int(s) for s in args.sizes.split(",")):
                print(f"per-turn time at {n} messages", file=sys.stderr)
                result["per_turn"].append(bench_size(n, args.turns, Path(tmp)))
        if not args.skip_recall:
            print(f"LoCoMo evidence recall at {args.budget} tokens", file=sys.stderr)
            result["locomo"] = asyncio.run(
                locomo_recall(args.data, args.budget, args.backend, Path(tmp))
            )
    result["load_average_after"] = [round(x, 1) for x in os.getloadavg()]
    if not args.json:
        for row in result.get("per_turn", []):
            k, s, r = row["kairox_session"], row["sqlite_session"], row["ratio_kairox_to_sqlite"]
            print(
                f"{row['messages']:>6} messages: KairoxSession turn {k['turn_ms']} ms "
                f"(get {k['get_items_ms']}, add {k['add_items_ms']}; {k['items_returned']} "
                f"items, {k['tokens_returned']} tokens), SQLiteSession {s['turn_ms']} ms (get "
                f"{s['get_items_ms']}, add {s['add_items_ms']}; {s['items_returned']} items, "
                f"{s['tokens_returned']} tokens); ratio {r['turn_ms']}"
            )
        if "locomo" in result:
            for name, score in result["locomo"]["evidence_recall"].items():
                print(f"LoCoMo @ {args.budget}: {name}: {score}")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
