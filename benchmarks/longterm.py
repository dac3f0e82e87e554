"""Long-term memory on LoCoMo: does the long-term block hold the fact a question needs,
and stay empty for prompts that need none? Plus k-NN speed over 100k chunks.

The labelled set is built at run time from the shared LoCoMo conversations (read from
/work/shared/data, never copied):
- *facts a person would have pinned*: LoCoMo's per-session ``observation`` lists
  ("Caroline attended an LGBTQ support group ..."), each tied to the dialogue turn(s)
  it came from; a person pinning one would note when it was said, so each chunk is
  ``"<session date>: <observation>"``. One workspace per conversation, scope project,
  written through ``kx.longterm.add``.
- *questions that need them*: the conversation's questions of categories 1-4 whose
  evidence turns have an observation; the needed chunks are those observations.
- *prompts that need none*: ``OFF_TOPIC`` below (requests unrelated to any
  conversation), and, harder, the questions of the *other* conversations (other people,
  similar topics) asked in this workspace.

Each prompt is searched once through ``kx.longterm.nearest`` (the engine's call); the
engine's rule (similarity >= threshold, at most k) is then applied for every threshold of
the sweep, and at the chosen threshold the block is checked through a real
``session.preview`` (assembler included). Reported: recall (a needed chunk is in the
block), precision (block chunks that are needed), and the share of unrelated prompts
whose block is empty.

Speed: 100k chunks in one workspace (synthetic text, hashing backend); the k-NN path
``ChunkStore.nearest_vector`` (one vec0 KNN per visible partition, then the rows) against
the raw ``SELECT rowid, distance FROM vec0 WHERE embedding MATCH ? AND k = ? AND owner =
?`` on the same table, interleaved rounds, medians.

    python benchmarks/longterm.py [--backend hashing|sentence-transformers] [--json]
        [--chunks 100000] [--threshold 0.35] [--skip-speed]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import DEFAULT_DATA, evidence_ids

from kairox_core import Kairox
from kairox_core.config import KairoxConfig

GOAL = 1.3
OFF_TOPIC = [
    "Write a Python function that reverses a linked list.",
    "What is the capital of Australia?",
    "Explain the difference between TCP and UDP.",
    "How do I center a div with CSS?",
    "Convert 72 degrees Fahrenheit to Celsius.",
    "Summarise the plot of Hamlet in three sentences.",
    "What does HTTP status 418 mean?",
    "Give me a regex that matches an IPv4 address.",
    "How many bytes are in a kibibyte?",
    "Translate 'good morning' into Japanese.",
    "What is the time complexity of quicksort?",
    "Draft an email asking my landlord to fix the heating.",
    "Why is the sky blue?",
    "List three sorting algorithms that are stable.",
    "How do I undo the last git commit but keep the changes?",
    "What is a monad, briefly?",
    "Write a haiku about autumn rain.",
    "What's the square root of 1764?",
    "Explain how a hash map handles collisions.",
    "Which planet has the most moons?",
    "How do I make a sourdough starter?",
    "What is the difference between a process and a thread?",
    "Recommend a name for a command-line tool that renames files.",
    "Explain the CAP theorem.",
    "How do vaccines train the immune system?",
    "Write a SQL query that finds duplicate emails in a users table.",
    "What year did the Berlin Wall fall?",
    "Describe the rules of chess castling.",
    "What is the boiling point of water at high altitude?",
    "How do I set an environment variable in PowerShell?",
    "Explain gradient descent to a beginner.",
    "What are the primary colours of light?",
    "Format this date as ISO 8601: March 5th 2024.",
    "What's a good stretching routine for the lower back?",
    "How does public-key cryptography work?",
    "Give me a packing list for a weekend in the mountains.",
    "What is the difference between affect and effect?",
    "How do I profile a slow Python script?",
    "What causes the seasons on Earth?",
    "Suggest a vegetarian dinner that takes 20 minutes.",
]


# --- the labelled set ----------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    text: str
    dia_ids: tuple[str, ...]


@dataclass
class Conv:
    name: str
    facts: list[Fact]
    questions: list[tuple[str, int, set[int]]]  # (question, category, needed fact indexes)


def load(path: str, *, dates: bool = True) -> list[Conv]:
    """The labelled set; ``dates=False`` keeps chunks without their session date."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    convs = []
    for n, item in enumerate(data):
        conv = item["conversation"]
        facts: list[Fact] = []
        for key, by_speaker in item["observation"].items():
            session = key.removesuffix("_observation")
            when = str(conv.get(f"{session}_date_time", "")).strip()
            for entries in by_speaker.values():
                for entry in entries:
                    text, ids = str(entry[0]).strip(), evidence_ids([entry[1]])
                    if text and ids:
                        facts.append(
                            Fact(f"{when}: {text}" if when and dates else text, tuple(ids))
                        )
        by_dia: dict[str, set[int]] = {}
        for i, f in enumerate(facts):
            for d in f.dia_ids:
                by_dia.setdefault(d, set()).add(i)
        questions = []
        for qa in item["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            needed = set().union(*(by_dia.get(d, set()) for d in evidence_ids(qa["evidence"])))
            if needed:
                questions.append((str(qa["question"]), int(qa["category"]), needed))
        convs.append(Conv(item.get("sample_id", f"conv-{n}"), facts, questions))
    return convs


# --- quality -------------------------------------------------------------------------


def config(backend: str, threshold: float, k: int) -> KairoxConfig:
    return KairoxConfig.model_validate(
        {
            "retrieval": {"workspace_index": False, "backend": backend},
            "recall": {"enabled": False},
            "longterm": {"threshold": threshold, "k": k},
        }
    )


def block(hits: Sequence[tuple[str, float]], threshold: float, k: int) -> list[str]:
    """The engine's rule: similarity >= threshold, at most k, best first."""
    return [cid for cid, sim in hits if sim >= threshold][:k]


def quality(
    data: str, backend: str, threshold: float, k: int, sweep: Sequence[float], dates: bool
) -> dict[str, Any]:
    convs = load(data, dates=dates)
    tmp = tempfile.TemporaryDirectory()
    with Kairox.open(Path(tmp.name) / "lt.db", config(backend, threshold, k)) as kx:
        ids: dict[str, list[str]] = {}
        started = time.perf_counter()
        for conv in convs:
            ids[conv.name] = [
                kx.longterm.add(f.text, scope="project", workspace_id=conv.name).id
                for f in conv.facts
            ]
        add_seconds = time.perf_counter() - started
        wide = k + 8

        def nearest(prompt: str, ws: str) -> list[tuple[str, float]]:
            hits = kx.longterm.nearest(prompt, session_id=None, workspace_id=ws, k=wide)
            return [(h.chunk.id, h.similarity) for h in hits]

        started = time.perf_counter()
        positives = []  # (hits, needed ids, category)
        for conv in convs:
            for q, cat, needed in conv.questions:
                positives.append((nearest(q, conv.name), {ids[conv.name][i] for i in needed}, cat))
        off_topic = [nearest(p, c.name) for c in convs for p in OFF_TOPIC]
        cross = [
            nearest(q, other.name)
            for conv in convs
            for other in convs
            if other is not conv
            for q, _, _ in conv.questions
        ]
        search_ms = (
            1000 * (time.perf_counter() - started) / (len(positives) + len(off_topic) + len(cross))
        )

        def score(t: float) -> dict[str, Any]:
            found = injected = useful = 0
            by_cat: dict[int, list[int]] = {}
            for hits, needed, cat in positives:
                chosen = block(hits, t, k)
                hit = bool(set(chosen) & needed)
                found += hit
                injected += len(chosen)
                useful += len(set(chosen) & needed)
                by_cat.setdefault(cat, []).append(int(hit))
            return {
                "threshold": t,
                "recall": round(found / len(positives), 3),
                "precision": round(useful / injected, 3) if injected else None,
                "recall_by_category": {
                    c: round(sum(v) / len(v), 3) for c, v in sorted(by_cat.items())
                },
                "off_topic_empty": round(
                    sum(1 for h in off_topic if not block(h, t, k)) / len(off_topic), 3
                ),
                "other_conversation_empty": round(
                    sum(1 for h in cross if not block(h, t, k)) / len(cross), 3
                ),
            }

        # the real path at the chosen threshold: what a turn's preview holds
        checked = agree = 0
        for conv in convs[:1]:
            session = kx.session(workspace=conv.name)
            for q, _, _ in conv.questions[:40]:
                ctx = session.preview_sync(q)
                got = [i.id for i in ctx.trace.layer("longterm").included]
                checked += 1
                agree += got == block(nearest(q, conv.name), threshold, k)
        result = {
            "backend": backend,
            "dated_chunks": dates,
            "k": k,
            "conversations": [c.name for c in convs],
            "chunks": sum(len(c.facts) for c in convs),
            "questions": len(positives),
            "off_topic_prompts": len(off_topic),
            "other_conversation_prompts": len(cross),
            "at_threshold": score(threshold),
            "sweep": [score(t) for t in sweep],
            "preview_agrees": f"{agree}/{checked}",
            "add_ms_per_chunk": round(1000 * add_seconds / max(1, sum(map(len, ids.values()))), 2),
            "search_ms_per_prompt": round(search_ms, 2),
        }
    tmp.cleanup()
    return result


# --- speed ---------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def speed(n: int, queries: int, rounds: int, k: int) -> dict[str, Any]:
    from kairox_core.longterm.chunks import Chunk, ChunkStore, visible_owners
    from kairox_core.longterm.sqlite_store import SqliteLongTermStore
    from kairox_core.retrieval.embeddings import HashingEmbedding
    from kairox_core.store.database import Database

    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = list({"".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(20_000)})
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))
    tmp = tempfile.TemporaryDirectory()
    db = Database.open(Path(tmp.name) / "speed.db")
    backend = HashingEmbedding()
    rows = SqliteLongTermStore(db)
    store = ChunkStore(rows, backend)
    started = time.perf_counter()
    now = time.time()
    for start in range(0, n, 2000):
        texts = [
            " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(8, 25)))
            for _ in range(min(2000, n - start))
        ]
        vectors = backend.embed_documents(texts)
        batch = [
            (Chunk(f"lt-{start + i}", "project", t, None, "bench", now, now), "w:bench")
            for i, t in enumerate(texts)
        ]
        with db.atomic():
            store.insert_many(batch, vectors)
    build = time.perf_counter() - started
    qtexts = [" ".join(rng.sample(vocab[100:5000], rng.randint(2, 5))) for _ in range(queries)]
    qvecs = [backend.embed_query(q) for q in qtexts]
    owners = visible_owners("s-bench", "bench")
    import struct

    blobs = [struct.pack(f"{len(v)}f", *v) for v in qvecs]
    raw_sql = (
        f"SELECT rowid, distance FROM {rows.table} "
        f"WHERE embedding MATCH ? AND k = ? AND owner = 'w:bench'"
    )
    conn = db.conn
    cases: dict[str, Callable[[], Any]] = {
        "longterm_knn": lambda: [store.nearest_vector(v, owners, k) for v in qvecs],
        "raw_vec0_knn": lambda: [conn.execute(raw_sql, (b, k)).fetchall() for b in blobs],
        "longterm_search_with_embedding": lambda: [store.nearest(q, owners, k) for q in qtexts],
    }
    for fn in cases.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            samples[name].append(timed(fn))
    ms = {name: 1000 * statistics.median(s) / queries for name, s in samples.items()}
    ratio = ms["longterm_knn"] / ms["raw_vec0_knn"]
    db.release()
    tmp.cleanup()
    return {
        "chunks": n,
        "queries": queries,
        "rounds": rounds,
        "k": k,
        "ms_per_query": {name: round(v, 3) for name, v in ms.items()},
        "knn_vs_raw": round(ratio, 3),
        "goal": GOAL,
        "within_goal": ratio <= GOAL,
        "build_seconds": round(build, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--backend", default="hashing")
    parser.add_argument("--threshold", type=float, default=None, help="default: the config's")
    parser.add_argument("--k", type=int, default=None, help="default: the config's")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--no-dates", action="store_true", help="chunks without their date")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    defaults = KairoxConfig().longterm
    threshold = defaults.threshold if args.threshold is None else args.threshold
    k = defaults.k if args.k is None else args.k
    sweep = [round(0.02 * i, 2) for i in range(5, 31)]
    result: dict[str, Any] = {}
    if not args.skip_quality:
        result["quality"] = quality(args.data, args.backend, threshold, k, sweep, not args.no_dates)
    if not args.skip_speed:
        result["speed"] = speed(args.chunks, args.queries, args.rounds, 10)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
