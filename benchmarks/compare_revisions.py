"""Run one benchmark under two checkouts, interleaved, and print a before/after table.

Each checkout is a directory with its own ``.venv`` (the package installed editable
from that directory); the benchmark is ``<checkout>/benchmarks/<name>.py`` run with
``--json`` plus the arguments after ``--``. Runs alternate (before, after, before, ...)
under ``nice`` so a shared machine's changing load weighs on both alike; every numeric
figure of the JSON output is reduced to its median over the rounds and compared as an
after/before ratio. Quality figures (nDCG, recall) are deterministic: one round does.

    python benchmarks/compare_revisions.py bench_context --before ../base --after . \
        --rounds 3 --after-extra="--grown-sizes ''" -- --sizes 1000,10000 --turns 15
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

Figures = dict[str, float]


def flatten(value: object, prefix: str = "") -> Figures:
    """Every numeric leaf of a JSON value, keyed by its dotted path (booleans left out)."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, int | float):
        return {prefix: float(value)}
    items: list[tuple[str, object]] = []
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(str(i), v) for i, v in enumerate(value)]
    out: Figures = {}
    for key, item in items:
        out.update(flatten(item, f"{prefix}.{key}" if prefix else key))
    return out


def run_once(checkout: Path, name: str, args: list[str], niceness: int) -> Figures:
    """One run of ``name`` in ``checkout``: its JSON output, flattened."""
    python = checkout / ".venv" / "bin" / "python"
    script = checkout / "benchmarks" / f"{name}.py"
    if not python.exists() or not script.exists():
        raise SystemExit(f"{checkout}: needs {python} and {script}; make the checkout's venv")
    command = ["nice", "-n", str(niceness), str(python), str(script), "--json", *args]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    lines = done.stdout.splitlines()
    first = next((i for i, line in enumerate(lines) if line[:1] in "{["), None)
    if first is None:
        raise SystemExit(f"{' '.join(command)} printed no JSON:\n{done.stdout[-2000:]}")
    return flatten(json.loads("\n".join(lines[first:])))


def compare(runs: dict[str, list[Figures]]) -> list[dict[str, object]]:
    """Per figure: each side's runs and median, and after/before (None where a side lacks it)."""
    keys = sorted({k for side in runs.values() for run in side for k in run})
    rows: list[dict[str, object]] = []
    for key in keys:
        values = {side: [r[key] for r in found if key in r] for side, found in runs.items()}
        medians = {side: statistics.median(v) if v else None for side, v in values.items()}
        before, after = medians["before"], medians["after"]
        ratio = round(after / before, 3) if before and after is not None else None
        rows.append(
            {
                "figure": key,
                "before": before,
                "after": after,
                "after_over_before": ratio,
                "runs": values,
            }
        )
    return rows


def markdown(rows: list[dict[str, object]], labels: tuple[str, str]) -> str:
    """The rows as a markdown table."""
    lines = [f"| figure | {labels[0]} | {labels[1]} | after/before |", "| --- | --- | --- | --- |"]
    for row in rows:
        cells = [row["before"], row["after"], row["after_over_before"]]
        shown = [
            "-" if c is None else f"{c:.4g}" if isinstance(c, float) else str(c) for c in cells
        ]
        lines.append(f"| `{row['figure']}` | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("benchmark", help="a file name in benchmarks/, without .py")
    parser.add_argument("--before", type=Path, required=True, help="the older checkout")
    parser.add_argument("--after", type=Path, required=True, help="the newer checkout")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each checkout")
    parser.add_argument("--nice", type=int, default=5)
    for side in ("before", "after"):
        parser.add_argument(
            f"--{side}-extra",
            default="",
            help=f"more arguments for the {side} run only (an option the other lacks)",
        )
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    bench_args = argv[split + 1 :]
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    extra = {"before": shlex.split(args.before_extra), "after": shlex.split(args.after_extra)}
    runs: dict[str, list[Figures]] = {"before": [], "after": []}
    for round_no in range(args.rounds):
        for side, checkout in sides.items():
            print(f"round {round_no + 1}/{args.rounds}: {side} ({checkout})", file=sys.stderr)
            runs[side].append(
                run_once(checkout, args.benchmark, bench_args + extra[side], args.nice)
            )
    rows = compare(runs)
    labels = (sides["before"].name, sides["after"].name)
    report = {
        "benchmark": args.benchmark,
        "args": bench_args,
        "extra_args": extra,
        "rounds": args.rounds,
        "checkouts": {k: str(v) for k, v in sides.items()},
        "load_average": list(os.getloadavg()),
        "rows": rows,
    }
    print(json.dumps(report, indent=2))
    print(markdown(rows, labels))


if __name__ == "__main__":
    main()
