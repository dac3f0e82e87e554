"""Benchmark: can a local model use a configured MCP server's tools? (issue 28, item 4)

For each local model installed (kairox-llamacpp), through the chat engine the front ends
use, with the real npm ``@modelcontextprotocol/server-memory`` configured in
``[mcp_servers]`` (its 9 tools offered through llama.cpp's tool calls, in the model's
own chat template) at temperature 0, a scripted conversation of two turns:

1. ask to create an entity (Ada, a person who writes compilers): the add succeeds when
   a ``memory__create_entities`` call ran without error and the server's own memory
   file then holds Ada with that observation;
2. ask what the graph says about Ada: the search succeeds when a ``memory__search_nodes``
   (or ``open_nodes``) call returned her observation; ``answered`` when the visible
   reply holds it too.

A model whose template cannot call tools is not offered them: the chat's notice is
reported instead. Needs node and npm (server-memory is installed into
``$KAIROX_MCP_NPM_DIR``, or a temporary folder, on first use).

    nice python benchmarks/local_tools.py [--models a,b] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ADD = (
    "Use the memory tools to create an entity named Ada, of type person, with the "
    "observation 'writes compilers'."
)
SEARCH = "Use the memory tools to search for Ada, then tell me what Ada does."
FACT = "compilers"
MAX_TOKENS = 200  # a tool call's JSON arguments fit


def _stored(memory_file: Path) -> bool:
    if not memory_file.exists():
        return False
    for line in memory_file.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if str(row.get("name", "")).lower() == "ada" and any(
            FACT in str(o).lower() for o in row.get("observations", [])
        ):
            return True
    return False


def _steps(outcome: Any) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "arguments": s.arguments, "ok": s.ok, "result": s.result[:300]}
        for s in outcome.tool_steps
    ]


async def run_model(name: str, npm_dir: Path) -> dict[str, Any]:
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.config import ProviderConfig, parse_config
    from kairox_core.testing.mcp_servers import server_memory_command
    from kairox_llamacpp.provider import LlamaCppProvider

    command = server_memory_command(npm_dir)
    with tempfile.TemporaryDirectory() as tmp:
        memory_file = Path(tmp) / "graph.jsonl"
        config = parse_config(
            {
                "profiles": {"default": {"context_window": 8192, "reserve": MAX_TOKENS}},
                "mcp_servers": {
                    "memory": {
                        "command": command[0],
                        "args": command[1:],
                        "env": {"MEMORY_FILE_PATH": str(memory_file)},
                        "timeout": 120,
                    }
                },
            }
        )
        provider = LlamaCppProvider.from_config(
            ProviderConfig(id="bench", kind="llamacpp", model=name, seed=0, temperature=0.0)
        )
        engine = ChatEngine.open(config, Path(tmp) / "kairox.db", provider=provider)
        start = time.perf_counter()
        try:
            notice = await engine.tool_notice()
            add = await engine.run_turn(ADD, lambda _: None)
            added = any(s.ok and s.name.endswith("create_entities") for s in add.tool_steps)
            stored = _stored(memory_file)
            search = await engine.run_turn(SEARCH, lambda _: None)
            found = any(
                s.ok
                and s.name.endswith(("search_nodes", "open_nodes", "read_graph"))
                and FACT in s.result.lower()
                for s in search.tool_steps
            )
        finally:
            await engine.close()
    return {
        "model": name,
        "notice": notice,
        "offered": not notice,
        "add_ok": added and stored,
        "search_ok": found,
        "answered": FACT in search.text.lower(),
        "seconds": round(time.perf_counter() - start),
        "turns": [
            {"prompt": ADD, "text": add.text, "steps": _steps(add), "notes": add.tool_notes},
            {
                "prompt": SEARCH,
                "text": search.text,
                "steps": _steps(search),
                "notes": search.tool_notes,
            },
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated model names (default: all installed)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--show", action="store_true", help="print each turn")
    parser.add_argument("--npm-dir", default=None, help="where server-memory is installed")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one model
    args = parser.parse_args()
    npm_dir = Path(args.npm_dir or tempfile.gettempdir()) / "kairox-bench-npm"
    if args.one:
        print(json.dumps(asyncio.run(run_model(args.one, npm_dir))))
        return

    from kairox_llamacpp import models

    names = args.models.split(",") if args.models else [m.name for m in models.installed()]
    results = []
    for name in names:
        child = subprocess.run(
            [sys.executable, __file__, "--one", name, "--npm-dir", str(npm_dir.parent)],
            stdout=subprocess.PIPE,
            text=True,
        )
        if child.returncode != 0:
            print(f"{name}: failed", file=sys.stderr)
            continue
        results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'model':30} {'offered':>7} {'add':>4} {'search':>6} {'answer':>6} {'s':>5}")
    for r in results:
        print(
            f"{r['model']:30} {'yes' if r['offered'] else 'no':>7} "
            f"{'ok' if r['add_ok'] else '-':>4} {'ok' if r['search_ok'] else '-':>6} "
            f"{'ok' if r['answered'] else '-':>6} {r['seconds']:>5}"
        )
        if r["notice"]:
            print(f"  notice: {r['notice']}")
        if args.show:
            for t in r["turns"]:
                print(f"  {t['prompt']}\n    steps: {t['steps']}\n    -> {t['text']!r}")


if __name__ == "__main__":
    main()
