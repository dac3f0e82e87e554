"""Benchmark: <memory> marker extraction, whole text and streaming (issue 3).

A deterministic ~1 MB model response (prose paragraphs, inline code, fenced code
blocks, stray ``<`` and backticks, and 500 markers, about one in ten invalid) is
processed in the same run by:

- baseline: one ``re.sub`` pass removing ``<memory ...>...</memory>`` from the text;
- ``extract_memory_markers`` on the whole text (goal: within 3x of the baseline);
- ``MarkerStreamParser`` fed 4-token deltas (o200k_base, as ``TokenCounter`` counts)
  (goal: at least 20 MB/s), with microseconds per ``feed()``;
- plain deltas (no ``<`` or backtick) through ``feed()`` next to appending the same
  deltas to a list, to show the fast path costs about a string append;
- hostile replies of the same size (issue 13, item 3): ``<memory>`` openers, unclosed
  openers one per line, ``<`` then backtick runs, a reply made only of markers, 1,000
  markers in prose, one unclosed marker: each, whole and streamed, against the
  ordinary response per byte (goal: within 3x).

Times are the best of ``--repeat`` interleaved rounds, in CPU time of this process
(goals and ratios) and in wall time (reported too).

    python benchmarks/bench_markers.py [--size-mb 1] [--markers 500] [--repeat 15]
        [--hostile-repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
import time
from collections.abc import Callable

from kairox_core.markers import MarkerStreamParser, extract_memory_markers
from kairox_core.tokens import DEFAULT_ENCODING, get_encoding

VOCABULARY = (
    "the a we will need to check config file server request model memory context token "
    "budget user session answer because which value returns list error retry cache index "
    "database query latency should could might also then after before while during"
)
WORDS = VOCABULARY.split(" ")
BASELINE = re.compile(r"<memory\b[^>]*>.*?</memory>", re.S | re.I)


def sentence(rnd: random.Random) -> str:
    words = [rnd.choice(WORDS) for _ in range(rnd.randint(6, 18))]
    if rnd.random() < 0.3:
        words.insert(rnd.randrange(len(words)), f"`{rnd.choice(WORDS)}_{rnd.randint(0, 99)}()`")
    if rnd.random() < 0.05:
        words.insert(rnd.randrange(len(words)), "a < b")
    return " ".join(words).capitalize() + "."


def marker(rnd: random.Random, i: int) -> str:
    body = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 20)))
    kind = i % 10
    if kind == 0:
        return f'<memory scope="user">{body}</memory>'  # invalid: no key
    if kind < 4:
        return f'<memory scope="session">{body}</memory>'
    if kind < 7:
        return f'<memory scope="user" key="pref.{i}">{body} &amp; more</memory>'
    return f"<memory key='ws:{i}'\n  scope='workspace'>\n{body}\n</memory>"


def make_response(size: int, n_markers: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    paragraphs: list[str] = []
    total = 0
    while total < size:
        if rnd.random() < 0.08:
            code = "\n".join(
                f"    x_{j} = compute({rnd.choice(WORDS)!r}) if a < b else `y`" for j in range(8)
            )
            para = f"```python\n{code}\n```"
        else:
            para = " ".join(sentence(rnd) for _ in range(rnd.randint(2, 6)))
        paragraphs.append(para)
        total += len(para) + 2
    for i in range(n_markers):
        at = rnd.randrange(len(paragraphs))
        if rnd.random() < 0.5 and not paragraphs[at].startswith("```"):
            paragraphs[at] += " " + marker(rnd, i)
        else:
            paragraphs.insert(at, marker(rnd, i))
    return "\n\n".join(paragraphs)


def hostile(size: int) -> dict[str, str]:
    """The hostile shapes of issue 13, item 3, each about ``size`` characters."""
    rnd = random.Random(11)
    prose = make_response(size, 0, seed=3)
    cuts = sorted(rnd.randrange(len(prose)) for _ in range(1000))
    spread = "".join(
        prose[a:b] + f'<memory scope="session">fact {i}</memory>'
        for i, (a, b) in enumerate(itertools.pairwise([0, *cuts]))
    )
    return {
        "openers": "<memory>" * (size // 8),
        "unclosed_lines": '<memory scope="session">\n' * (size // 25),
        "backtick_runs": "<" + "x```" * (size // 4),
        "markers_only": '<memory scope="session">fact</memory>\n' * (size // 38),
        "markers_1000": spread + prose[cuts[-1] :],
        "unclosed_marker": '<memory scope="session">' + prose,
    }


def token_deltas(text: str, per_delta: int = 4) -> list[str]:
    enc = get_encoding(DEFAULT_ENCODING)
    tokens = enc.encode(text, disallowed_special=())
    _, offsets = enc.decode_with_offsets(tokens)
    cuts = [offsets[i] for i in range(per_delta, len(offsets), per_delta)]
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(text))), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds) for one run of ``fn``."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def best(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, tuple[float, float]]:
    """Best CPU and best wall time of each function over ``repeat`` rounds. The functions
    run interleaved, one after the other in every round, so a change in the load of a
    shared machine hits the baseline and the measured code alike; ratios use CPU time
    (``time.process_time``), which other processes do not inflate."""
    out = {name: (float("inf"), float("inf")) for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            cpu, wall = timed(fn)
            out[name] = (min(out[name][0], cpu), min(out[name][1], wall))
    return out


def stream(deltas: list[str]) -> MarkerStreamParser:
    parser = MarkerStreamParser()
    feed = parser.feed
    for d in deltas:
        feed(d)
    parser.finish()
    return parser


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=1.0)
    ap.add_argument("--markers", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--hostile-repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    args = ap.parse_args(argv)

    text = make_response(int(args.size_mb * 1_000_000), args.markers)
    mb = len(text.encode()) / 1e6
    deltas = token_deltas(text)

    whole = extract_memory_markers(text)
    streamed = stream(deltas)
    assert streamed.visible == whole.visible and streamed.markers == whole.markers
    assert streamed.invalid == whole.invalid
    assert len(whole.markers) + len(whole.invalid) == args.markers

    plain = [d for d in deltas if "<" not in d and "`" not in d and "~" not in d]

    def feed_plain() -> None:
        feed = MarkerStreamParser().feed
        for d in plain:
            feed(d)

    def append_plain() -> None:
        out: list[str] = []
        append = out.append
        for d in plain:
            append(d)

    t = best(
        {
            "re_sub": lambda: BASELINE.sub("", text),
            "whole": lambda: extract_memory_markers(text),
            "stream": lambda: stream(deltas),
            "plain_feed": feed_plain,
            "plain_append": append_plain,
        },
        args.repeat,
    )
    t_sub, t_whole, t_stream = t["re_sub"][0], t["whole"][0], t["stream"][0]
    t_plain, t_append = t["plain_feed"][0], t["plain_append"][0]

    result = {
        "response_mb": round(mb, 3),
        "markers": len(whole.markers),
        "invalid": len(whole.invalid),
        "re_sub_ms": round(t_sub * 1e3, 3),
        "re_sub_mb_s": round(mb / t_sub, 1),
        "whole_ms": round(t_whole * 1e3, 3),
        "whole_mb_s": round(mb / t_whole, 1),
        "whole_vs_re_sub": round(t_whole / t_sub, 2),
        "whole_goal_max_ratio": 3.0,
        "stream_deltas": len(deltas),
        "stream_ms": round(t_stream * 1e3, 2),
        "stream_mb_s": round(mb / t_stream, 1),
        "stream_goal_min_mb_s": 20.0,
        "stream_us_per_feed": round(t_stream / len(deltas) * 1e6, 3),
        "plain_feed_us": round(t_plain / len(plain) * 1e6, 3),
        "plain_append_us": round(t_append / len(plain) * 1e6, 3),
        "plain_feed_vs_append": round(t_plain / t_append, 1),
        "wall_ms": {name: round(w * 1e3, 3) for name, (_, w) in t.items()},
        "whole_vs_re_sub_wall": round(t["whole"][1] / t["re_sub"][1], 2),
        "stream_mb_s_wall": round(mb / t["stream"][1], 1),
        "repeat": args.repeat,
    }
    result["whole_ok"] = result["whole_vs_re_sub"] <= 3.0
    result["stream_ok"] = result["stream_mb_s"] >= 20.0

    per_byte_whole, per_byte_stream = t_whole / len(text), t_stream / len(text)
    adversarial: dict[str, dict[str, float]] = {}
    for name, shape in hostile(len(text)).items():
        shape_deltas = token_deltas(shape)
        assert stream(shape_deltas).visible == extract_memory_markers(shape).visible
        ts = best(
            {
                "whole": lambda s=shape: extract_memory_markers(s),
                "stream": lambda d=shape_deltas: stream(d),
            },
            args.hostile_repeat,
        )
        adversarial[name] = {
            "mb": round(len(shape.encode()) / 1e6, 3),
            "whole_ms": round(ts["whole"][0] * 1e3, 2),
            "stream_ms": round(ts["stream"][0] * 1e3, 2),
            "whole_vs_ordinary": round(ts["whole"][0] / len(shape) / per_byte_whole, 2),
            "stream_vs_ordinary": round(ts["stream"][0] / len(shape) / per_byte_stream, 2),
        }
    result["adversarial"] = adversarial
    result["adversarial_goal_max_ratio"] = 3.0
    result["adversarial_ok"] = all(
        a["whole_vs_ordinary"] <= 3.0 and a["stream_vs_ordinary"] <= 3.0
        for a in adversarial.values()
    )
    if not args.json:
        rows = [
            (
                "response",
                f"{mb:.2f} MB, {len(whole.markers)} markers + "
                f"{len(whole.invalid)} invalid, {len(deltas)} deltas of 4 tokens",
            ),
            ("re.sub baseline", f"{result['re_sub_ms']} ms ({result['re_sub_mb_s']} MB/s)"),
            (
                "extract_memory_markers",
                f"{result['whole_ms']} ms ({result['whole_mb_s']} MB/s)"
                f" = {result['whole_vs_re_sub']}x re.sub (goal <= 3x)",
            ),
            (
                "MarkerStreamParser",
                f"{result['stream_ms']} ms = {result['stream_mb_s']} MB/s "
                f"(goal >= 20), {result['stream_us_per_feed']} us/feed",
            ),
            (
                "plain feed() vs append",
                f"{result['plain_feed_us']} us vs {result['plain_append_us']} us per delta",
            ),
            (
                "wall clock",
                f"whole {result['whole_vs_re_sub_wall']}x re.sub, stream "
                f"{result['stream_mb_s_wall']} MB/s (loaded machine: see CPU)",
            ),
        ]
        for name, a in adversarial.items():
            rows.append(
                (
                    f"hostile: {name}",
                    f"whole {a['whole_ms']} ms = {a['whole_vs_ordinary']}x ordinary, "
                    f"stream {a['stream_ms']} ms = {a['stream_vs_ordinary']}x (goal <= 3x)",
                )
            )
        width = max(len(r[0]) for r in rows)
        for name, value in rows:
            print(f"{name:<{width}}  {value}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
