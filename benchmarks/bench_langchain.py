"""Benchmark: a turn through kairox-langchain vs LangChain's own default memory.

For each session size (1k and 10k chat messages by default) the synthetic conversation
of ``bench_context.py`` is written to a fresh database (the event store's batch API,
recall indexed in bulk), and the same messages are loaded into LangChain's default,
``InMemoryChatMessageHistory``. Then, in the same run, with the same fake chat model
(langchain-core's ``GenericFakeChatModel``, a ~300-token reply) and the same budget:

- ``KairoxChat``: ``chat.invoke(prompt)``: Kairox assembles the context (memories,
  recalled turns, retrieval, history newest first under the budget), the model streams
  through the turn, ``complete`` records it (sync twins, as a LangGraph sync node).
- ``KairoxChatMessageHistory``: the same turn recorded through the history
  (``add_messages([human, ai])``: ``begin_turn``'s assembly and ``complete``), with the
  model called on the context Kairox assembled (``session.preview`` is not used).
- LangChain's default: ``history.add_message(human)``, ``trim_messages(history.messages,
  strategy="last", token_counter=<tiktoken o200k counter>, max_tokens=budget)``, the
  model on the trimmed list, ``history.add_message(reply)``.
- The model alone (``model.invoke``), so its share of each figure is visible.

Prints per-turn medians and the ratios (LangChain default / Kairox).

``--locomo``: evidence recall on the shared LoCoMo conversations at one token budget
(``benchmarks/locomo.py``'s data, settings and scoring). Each conversation is replayed
through ``KairoxChatMessageHistory`` (each exchange a real turn: assembly, approval
routing, the turn-end compaction check and recall indexing; consecutive messages of
one speaker joined into one), then each question's context is what ``KairoxChat``
would send (``session.preview``: the same assembly as ``begin_turn``, recording
nothing, converted to LangChain messages). Beside it, in the same run: LangChain's
default at the same budget (``trim_messages(strategy="last")``, locomo.py's
``recency``) and Kairox replayed directly (locomo.py's ``kairox_score``).

Needs ``pip install -e plugins/kairox-langchain``.

    python benchmarks/bench_langchain.py [--sizes 1000,10000] [--turns 7] [--json]
    python benchmarks/bench_langchain.py --locomo [--budget 4000] [--backend hashing]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_context as bc

from kairox_core import Kairox

SYSTEM = "You are a helpful assistant for the bench project."


def fake_model(replies: int, seed: int) -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    rng = random.Random(seed)
    texts = [bc.words(rng, 200, 230) for _ in range(replies)]
    return GenericFakeChatModel(messages=iter(texts))


def kairox_chat_turns(db: Path, session_id: str, turns: int) -> list[float]:
    from kairox_langchain import KairoxChat

    rng = random.Random(1)
    with Kairox.open(db, bc.bench_config()) as kx:
        session = kx.session(session_id=session_id, system_prompt=SYSTEM)
        chat = KairoxChat(fake_model(turns + 1, 11), session)
        chat.invoke("what is the deadline?")  # the cold first turn, not in the figure
        times = []
        for i in range(turns):
            prompt = f"question {i}: {bc.words(rng, 5, 40)}"
            t0 = time.perf_counter()
            chat.invoke(prompt)
            times.append(time.perf_counter() - t0)
    return times


def kairox_history_turns(db: Path, session_id: str, turns: int) -> list[float]:
    from langchain_core.messages import HumanMessage

    from kairox_langchain import KairoxChatMessageHistory

    rng = random.Random(2)
    model = fake_model(turns + 1, 12)
    with Kairox.open(db, bc.bench_config()) as kx:
        history = KairoxChatMessageHistory(kx, session_id)
        history.session.system_prompt = SYSTEM
        history.add_user_message("what is the deadline?")  # cold turn, not timed
        history.add_message(model.invoke("x"))
        times = []
        for i in range(turns):
            prompt = f"question {i}: {bc.words(rng, 5, 40)}"
            t0 = time.perf_counter()
            history.add_message(HumanMessage(prompt))  # begin_turn: assembles the context
            reply = model.invoke(history._turn.messages if history._turn else [])
            history.add_message(reply)  # complete: markers routed, engines run
            times.append(time.perf_counter() - t0)
    return times


def langchain_default_turns(n: int, turns: int) -> tuple[list[float], int]:
    from langchain_core.chat_history import InMemoryChatMessageHistory
    from langchain_core.messages import HumanMessage, trim_messages

    rng = random.Random(3)
    model = fake_model(turns + 1, 13)
    counter = bc.tiktoken_counter()
    history = InMemoryChatMessageHistory(messages=bc.to_langchain(bc.synthetic(n), SYSTEM))
    counter(history.messages[:2])  # load the encoding outside the timing
    budget = bc.WINDOW - bc.RESERVE
    times, kept = [], 0
    for i in range(turns + 1):
        prompt = f"question {i}: {bc.words(rng, 5, 40)}"
        t0 = time.perf_counter()
        history.add_message(HumanMessage(prompt))
        window = trim_messages(
            history.messages,
            max_tokens=budget,
            strategy="last",
            token_counter=counter,
            include_system=True,
            start_on="human",
        )
        history.add_message(model.invoke(window))
        if i:  # the first turn warms caches, as Kairox's cold turn is left out
            times.append(time.perf_counter() - t0)
        kept = len(window)
    return times, kept


def model_alone(turns: int) -> list[float]:
    model = fake_model(turns, 14)
    times = []
    for _ in range(turns):
        t0 = time.perf_counter()
        model.invoke("q")
        times.append(time.perf_counter() - t0)
    return times


def ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


def bench_size(n: int, turns: int, workdir: Path) -> dict[str, Any]:
    db = workdir / f"lc-{n}.db"
    session_id, n_events, build, index = bc.build_session(db, n, SYSTEM)
    chat = ms(kairox_chat_turns(db, session_id, turns))
    hist = ms(kairox_history_turns(db, session_id, turns))
    base_times, kept = langchain_default_turns(n, turns)
    base = ms(base_times)
    alone = ms(model_alone(turns))
    return {
        "messages": n,
        "events": n_events,
        "build_seconds": round(build, 1),
        "index_seconds": round(index, 1),
        "kairox_chat_turn_ms": chat,
        "kairox_history_turn_ms": hist,
        "langchain_default_turn_ms": base,
        "langchain_default_kept_messages": kept,
        "model_alone_ms": alone,
        "ratio_default_over_kairox_chat": round(base / chat, 2),
        "ratio_default_over_kairox_history": round(base / hist, 2),
        "ratio_without_model": round((base - alone) / max(chat - alone, 1e-6), 2),
    }


def adapter_replay(kx: Kairox, conv: Any) -> Any:
    """A LoCoMo conversation through KairoxChatMessageHistory: speaker_a's messages
    are the user's, speaker_b's the replies; a run of one speaker's messages is joined
    (a turn is one user message and one reply)."""
    from langchain_core.messages import AIMessage, HumanMessage

    from kairox_langchain import KairoxChatMessageHistory

    history = KairoxChatMessageHistory(kx, workspace=f"locomo-{conv.name}", profile="bench")
    runs: list[tuple[str, list[str]]] = []
    for t in conv.turns:
        if runs and runs[-1][0] == t.role:
            runs[-1][1].append(t.message)
        else:
            runs.append((t.role, [t.message]))
    if runs and runs[0][0] == "assistant":  # a reply needs a user message before it
        runs.insert(0, ("user", ["(the conversation starts)"]))
    for role, texts in runs:
        cls = HumanMessage if role == "user" else AIMessage
        history.add_messages([cls("\n".join(texts))])
    history.close()
    return history.session


def locomo_recall(budget: int, backend: str, data: str) -> dict[str, Any]:
    import asyncio

    import locomo as lm

    from kairox_langchain.messages import ContextConverter

    settings = lm.Settings(backend=backend)
    conversations = lm.load(data)
    adapter, direct, recency = lm.Score(), lm.Score(), lm.Score()
    costs = lm.Costs()
    stats: dict[str, Any] = {}
    seconds = {"adapter_replay": 0.0, "adapter_questions": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        for conv in conversations:
            print(f"  locomo {conv.name}: {len(conv.turns)} turns", file=sys.stderr)
            by_id = {t.dia_id: t for t in conv.turns}
            with Kairox.open(Path(tmp) / f"a-{conv.name}.db", settings.config(budget)) as kx:
                t0 = time.perf_counter()
                session = adapter_replay(kx, conv)
                seconds["adapter_replay"] += time.perf_counter() - t0
                convert = ContextConverter()
                t0 = time.perf_counter()
                for question, category, evidence in conv.questions:
                    sent = convert(session.preview_sync(question).messages)
                    text = "\n".join(m.text for m in sent)
                    adapter.add(
                        category,
                        evidence,
                        lambda e, text=text, by_id=by_id: by_id[e].message in text,
                    )
                seconds["adapter_questions"] += time.perf_counter() - t0
            asyncio.run(
                lm.kairox_score(
                    conv, settings, budget, Path(tmp) / f"d-{conv.name}.db", direct, stats
                )
            )
            for question, category, evidence in conv.questions:
                kept = lm.recency(conv, question, budget, costs)
                recency.add(category, evidence, kept.__contains__)
    return {
        "budget": budget,
        "backend": backend,
        "conversations": [c.name for c in conversations],
        "questions": sum(len(c.questions) for c in conversations),
        "kairox_langchain_adapter": adapter.as_dict(),
        "langchain_default_trim_messages": recency.as_dict(),
        "kairox_direct_replay": direct.as_dict(),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--turns", type=int, default=7, help="timed turns per size and path")
    parser.add_argument("--json", action="store_true", help="print only JSON")
    parser.add_argument("--locomo", action="store_true", help="LoCoMo evidence recall instead")
    parser.add_argument("--budget", type=int, default=4000, help="--locomo: token budget")
    parser.add_argument("--backend", default="hashing", help="--locomo: [retrieval] backend")
    parser.add_argument("--data", default="/work/shared/data/locomo/locomo_dev3.json")
    args = parser.parse_args(argv)
    try:
        import kairox_langchain  # noqa: F401
    except ImportError:
        print("bench_langchain: needs `pip install -e plugins/kairox-langchain`", file=sys.stderr)
        return 2
    if args.locomo:
        print(json.dumps(locomo_recall(args.budget, args.backend, args.data), indent=2))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        bench_size(50, 1, Path(tmp))  # imports, encodings, tables: outside the figures
        for n in (int(s) for s in args.sizes.split(",") if s):
            results.append(bench_size(n, args.turns, Path(tmp)))
            if not args.json:
                print(f"  {n} messages done", file=sys.stderr)
    summary = {"window": bc.WINDOW, "reserve": bc.RESERVE, "sizes": results}
    if not args.json:
        for r in results:
            print(
                f"{r['messages']:>7,} messages: KairoxChat {r['kairox_chat_turn_ms']} ms, "
                f"history {r['kairox_history_turn_ms']} ms, LangChain default "
                f"{r['langchain_default_turn_ms']} ms (model alone {r['model_alone_ms']} ms): "
                f"default/KairoxChat {r['ratio_default_over_kairox_chat']}x",
                file=sys.stderr,
            )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
