"""Benchmark: ``kairox serve``'s resident memory over many turns on one session.

Starts a real ``kairox serve`` (``kairox_core.testing.serve``: the ``scripted`` model,
so no model's memory is measured), opens one session and runs turns back to back
through ``POST /api/sessions/{id}/turns`` (the web app's path: assembly, streaming,
recording, compaction and recall indexing as configured by default), each with its own
prompt. The server's RSS (``/proc/PID/status`` VmRSS) is sampled every ``--every``
turns. Reported: RSS at the start and the end, and MB per 1,000 turns: the least-squares
slope of RSS over the samples after the first ``--warmup`` turns (caches filling,
allocator arenas growing) have passed, for ``VmRSS`` and for its heap part ``RssAnon``
(both sample lists are in the JSON, for other ranges). The goal (issue 27): flat over
10,000 turns; the figures: docs/web.md and docs/results.md.

    python benchmarks/bench_serve_memory.py [--turns 10000] [--every 250] [--warmup 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from kairox_core.testing.serve import Server, start_server, stop_server

REPLIES = [
    "Noted. Water the tomatoes in the morning, and mulch them once the soil is warm.",
    "The shady corner suits ferns and hostas; the fence gets the afternoon sun.",
    'I will keep that in mind. <memory scope="session" key="garden.row">row three</memory>',
]
TOPICS = ("tomatoes", "beans", "the shed", "compost", "the fence", "roses", "the pond")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """``field`` of ``/proc/PID/status`` in MB: ``VmRSS``, or its part ``RssAnon`` (the
    heap: what a leak grows; ``RssFile`` is mapped files, such as the ANN graph)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for pid {pid}")


def slope_per_1000(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of RSS (MB) over turns, per 1,000 turns."""
    if len(points) < 2:
        return float("nan")
    xs = [float(x) for x, _ in points]
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def run_turn(client: httpx.Client, server: Server, sid: str, i: int) -> None:
    prompt = f"turn {i}: what should I do about {TOPICS[i % len(TOPICS)]} in week {i // 7}?"
    with client.stream(
        "POST",
        f"{server.url}/api/sessions/{sid}/turns",
        json={"prompt": prompt},
        headers={"X-Kairox-CSRF": "1"},
    ) as r:
        r.raise_for_status()
        body = "".join(r.iter_text())
    if "event: done" not in body:
        raise RuntimeError(f"turn {i} did not finish: {body[-500:]}")


def bench(turns: int, every: int, warmup: int, workdir: Path) -> dict[str, Any]:
    server = start_server(workdir, REPLIES)
    pid = server.process.pid
    samples: list[tuple[int, float]] = []
    anon: list[tuple[int, float]] = []
    try:
        sid = server.api("POST", "/api/sessions", {})["session_id"]
        start_rss = rss_mb(pid)
        t0 = time.perf_counter()
        with httpx.Client(timeout=300) as client:
            for i in range(1, turns + 1):
                run_turn(client, server, sid, i)
                if i % every == 0:
                    samples.append((i, rss_mb(pid)))
                    anon.append((i, rss_mb(pid, "RssAnon")))
                    print(f"  {i} turns: {samples[-1][1]:.1f} MB", file=sys.stderr, flush=True)
        seconds = time.perf_counter() - t0
    finally:
        stop_server(server)
    steady = [(n, mb) for n, mb in samples if n > warmup]
    steady_anon = [(n, mb) for n, mb in anon if n > warmup]
    return {
        "turns": turns,
        "rss_start_mb": round(start_rss, 1),
        "rss_after_warmup_mb": round(steady[0][1], 1) if steady else None,
        "rss_end_mb": round(samples[-1][1], 1) if samples else None,
        "mb_per_1000_turns": round(slope_per_1000(steady), 2),
        "mb_per_1000_turns_all": round(slope_per_1000(samples), 2),
        "anon_mb_per_1000_turns": round(slope_per_1000(steady_anon), 2),
        "rss_anon_end_mb": round(anon[-1][1], 1) if anon else None,
        "seconds": round(seconds, 1),
        "samples": samples,
        "anon_samples": [(n, round(mb, 2)) for n, mb in anon],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=250, help="turns between RSS samples")
    parser.add_argument("--warmup", type=int, default=1000, help="turns left out of the slope")
    parser.add_argument("--json", action="store_true", help="print only JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = bench(args.turns, args.every, args.warmup, Path(tmp))
    if not args.json:
        print(
            f"RSS {result['rss_start_mb']} -> {result['rss_end_mb']} MB over "
            f"{result['turns']} turns; {result['mb_per_1000_turns']} MB per 1,000 turns "
            f"after {args.warmup} (all: {result['mb_per_1000_turns_all']})",
            file=sys.stderr,
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
