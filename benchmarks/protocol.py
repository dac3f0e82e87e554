"""Benchmark: does a local model speak Kairox's ``<memory>`` protocol?

For each local model installed (kairox-llamacpp's catalog: the Qwen2.5-Coder models
and SmolLM2-135M), through the product's own path: the built-in system prompt
(``kairox_core.chat.prompt``), a real Kairox session assembling each turn's context,
the ``llamacpp`` provider (llama.cpp's server from xllamacpp) streaming at
temperature 0 with a fixed seed. Each model runs in its own process, so its peak
memory (VmHWM) is its own.

- 10 prompts that ask to remember something: a tag counts when
  ``extract_memory_markers`` accepts it with the expected scope, a key, and a body that
  holds the fact (not an example copied from the system prompt).
- 10 prompts that ask for nothing to be remembered: any ``<memory`` tag is a false tag.
- 10 recall questions: a memory approved beforehand ("the user's dog is called
  Biscuit") is in the context; the visible reply must hold the fact ("biscuit").
  Replies that also tag the fact again are counted apart (``recall_retagged``: a
  proposal a person has to reject when the body differs).

Each set's first five tuned the built-in prompt; the last five were held out (reported
apart as ``held_out``). Also reported: replies whose visible text (tags stripped) is
empty, tokens/s of generation, seconds to the first token, peak RSS. Goal (issue 18):
>= 4/5 tags, 0 false, recall right, streaming visibly on 2 cores.

The multi-turn mode (``--conversation``, issue 28) runs one 30-turn session per model
and history setting instead (``benchmarks/conversation.py`` says what it scores):

    nice python benchmarks/protocol.py [--models a,b] [--json] [--show]
    nice python benchmarks/protocol.py --conversation [--history-tags off,on] [--models a,b]
        [--scope-check off,on] [--set benchmark|trial|both] [--person careful|later|...]

``--set trial`` runs the new-user trial's held-out 25-turn conversation
(``prompts/trial_conversation.txt``) instead, ``both`` each in turn; the trial's
person is ``later`` (cards wait) unless ``--person`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

# (prompt, expected scopes, a word the stored body must contain: not an example copied)
REMEMBER = [
    ("Remember that my name is Dana.", {"user"}, "dana"),
    ("Please remember that I prefer short answers.", {"user"}, "short"),
    ("Remember this: the project uses PostgreSQL 16 as its database.", {"workspace"}, "postgres"),
    ("Keep in mind that I am allergic to peanuts.", {"user"}, "peanut"),
    ("Remember that our team deploys this repository every Friday.", {"workspace"}, "friday"),
    # held out: not seen while the built-in prompt was tuned
    ("Remember that I live in Lisbon.", {"user"}, "lisbon"),
    ("Please note that my favourite language is Rust.", {"user"}, "rust"),
    ("Remember: this repo's main branch is called trunk.", {"workspace"}, "trunk"),
    ("Don't forget that I have a meeting every Monday at 9.", {"user"}, "monday"),
    ("Remember that the staging server is staging.example.com.", {"workspace"}, "staging"),
]
PLAIN = [
    "What is 2 + 2?",
    "Write a haiku about autumn.",
    "How do I reverse a list in Python?",
    "What is the capital of Japan?",
    "Explain in one sentence what a database index is.",
    # held out
    "What is 7 times 6?",
    "Translate 'good morning' into French.",
    "Name three primary colours.",
    "What does HTTP stand for?",
    "Give me a synonym for happy.",
]
# (approved memory (scope, key, body), question, a word the visible answer must hold)
RECALL = [
    (("user", "dog-name", "The user's dog is called Biscuit."), "What's my dog's name?", "biscuit"),
    (("user", "locker-code", "My locker code is 4417"), "What is my locker code?", "4417"),
    (("user", "home-city", "The user lives in Porto."), "Where do I live?", "porto"),
    (
        ("workspace", "database", "The project uses PostgreSQL 16."),
        "Which database does this project use?",
        "postgres",
    ),
    (
        ("user", "favourite-colour", "Favourite colour: green"),
        "Do you remember my favourite colour?",
        "green",
    ),
    # held out
    (("user", "editor", "Uses Neovim as their editor."), "Which editor do I use?", "neovim"),
    (("user", "birthday", "Birthday is on 12 March."), "When is my birthday?", "march"),
    (("workspace", "ci", "CI runs on GitHub Actions."), "Where does our CI run?", "github"),
    (("user", "sister-name", "Has a sister called Mira."), "What's my sister's name?", "mira"),
    (
        ("user", "coffee", "Drinks coffee black, no sugar."),
        "Do you remember how I take my coffee?",
        "black",
    ),
]
TUNED = 5  # the first TUNED of each set tuned the built-in prompt; the rest are held out
MAX_TOKENS = 120


async def _turn(
    provider: Any,
    prompt: str,
    *,
    memory: tuple[str, str, str] | None,
    system: str | None,
    scope_check: bool = False,
    request_check: bool = False,
) -> dict[str, Any]:
    """One prompt in a fresh session: the real assembled context, a streamed reply
    (``scope_check``: each tag's scope then goes through the chat's scope check;
    ``request_check``: a tagged reply's prompt goes through the request check, and its
    tags are dropped when the check says it asked for no memory. With no history, the
    chat's second answer would read the same context, so none is asked for here)."""
    from kairox_core import Kairox
    from kairox_core.chat.prompt import system_prompt_for
    from kairox_core.config import parse_config
    from kairox_core.markers import extract_memory_markers

    with tempfile.TemporaryDirectory() as tmp:
        kx = Kairox.open(Path(tmp) / "kairox.db", config=parse_config({}))
        try:
            session = kx.session(workspace="bench", system_prompt=system_prompt_for(system))
            if memory is not None:
                scope, key, body = memory
                kx.approvals.remember(scope, key, body, workspace_id="bench")
            turn = await session.begin_turn(prompt)
            start = time.perf_counter()
            first: float | None = None
            parts: list[str] = []
            usage = None
            async for chunk in provider.stream(
                turn.messages, max_tokens=MAX_TOKENS, temperature=0.0
            ):
                if chunk.text:
                    first = first if first is not None else time.perf_counter()
                    parts.append(chunk.text)
                usage = chunk.usage or usage
            end = time.perf_counter()
            await turn.abort()
        finally:
            await kx.aclose()
    raw = "".join(parts)
    found = extract_memory_markers(raw)
    checked = list(found.markers)
    dropped = False
    if request_check and found.markers:
        from kairox_core.memory.request_check import provider_request_check

        verdict = await provider_request_check(provider, timeout=60.0)(prompt)
        dropped = verdict.drops
        checked = [] if dropped else checked
    if scope_check:
        from kairox_core.memory.scope_check import provider_check

        check = provider_check(provider, timeout=60.0)
        checked = [replace(m, scope=(await check(m)).scope) for m in checked]
    tokens = usage.completion_tokens if usage else 0
    gen = (end - first) if first is not None else 0.0
    return {
        "prompt": prompt,
        "raw": raw,
        "visible": found.visible.strip(),
        "markers": [(m.scope, m.key, m.body) for m in checked],  # after the check
        "written": [(m.scope, m.key, m.body) for m in found.markers],
        "invalid": [i.reason for i in found.invalid],
        "tags": 0 if dropped else raw.count("<memory"),
        "dropped": dropped,
        "first_token_s": (first - start) if first is not None else None,
        "tokens": tokens,
        "tokens_per_s": (tokens - 1) / gen if tokens > 1 and gen > 0 else None,
    }


async def run_model(
    name: str, system: str | None = None, scope_check: bool = False, request_check: bool = False
) -> dict[str, Any]:
    from kairox_core.config import ProviderConfig
    from kairox_llamacpp.provider import LlamaCppProvider

    provider = LlamaCppProvider.from_config(
        ProviderConfig(id="bench", kind="llamacpp", model=name, seed=0)
    )
    start = time.perf_counter()
    await provider.warm_up()
    load_s = time.perf_counter() - start
    try:
        remember = [
            await _turn(
                provider,
                p,
                memory=None,
                system=system,
                scope_check=scope_check,
                request_check=request_check,
            )
            for p, _, _ in REMEMBER
        ]
        plain = [
            await _turn(provider, p, memory=None, system=system, request_check=request_check)
            for p in PLAIN
        ]
        recall = [
            await _turn(provider, q, memory=m, system=system, request_check=request_check)
            for m, q, _ in RECALL
        ]
    finally:
        await provider.close()
    tag_hits, written_hits = (
        [
            any(scope in want and key and word in body.lower() for scope, key, body in r[field])
            for r, (_, want, word) in zip(remember, REMEMBER, strict=True)
        ]
        for field in ("markers", "written")
    )
    recall_hits = [
        word in r["visible"].lower() for r, (_, _, word) in zip(recall, RECALL, strict=True)
    ]
    false_tags = [r["tags"] for r in plain]
    everything = [*remember, *plain, *recall]
    rates = [r["tokens_per_s"] for r in everything if r["tokens_per_s"]]
    firsts = [r["first_token_s"] for r in everything if r["first_token_s"]]
    return {
        "model": name,
        "scope_check": scope_check,
        "request_check": request_check,
        "dropped": sum(r["dropped"] for r in everything),
        "dropped_remember": sum(r["dropped"] for r in remember),
        "tags_ok": sum(tag_hits),
        "tags_asked": len(REMEMBER),
        "written_ok": sum(written_hits),  # the same, with the scopes the model wrote
        "false_tags": sum(false_tags),
        "recall_ok": sum(recall_hits),
        "recall_asked": len(RECALL),
        "recall_retagged": sum(bool(r["tags"]) for r in recall),  # stored it again
        "held_out": {
            "tags_ok": sum(tag_hits[TUNED:]),
            "written_ok": sum(written_hits[TUNED:]),
            "false_tags": sum(false_tags[TUNED:]),
            "recall_ok": sum(recall_hits[TUNED:]),
            "of": len(REMEMBER) - TUNED,
        },
        "empty_visible_when_remembering": sum(not r["visible"] for r in remember),
        "tokens_per_s": round(sorted(rates)[len(rates) // 2], 1) if rates else None,
        "first_token_s": round(sorted(firsts)[len(firsts) // 2], 1) if firsts else None,
        "load_s": round(load_s, 1),
        "peak_rss_mb": _peak_rss_mb(),
        "replies": {"remember": remember, "plain": plain, "recall": recall},
    }


CONVERSATION_MAX_TOKENS = 80  # a reply in the conversation: a short answer or a tag


async def run_conversation(
    name: str,
    history_tags: bool,
    system: str | None,
    *,
    decided: bool | None = None,
    rejected: str | None = None,
    person: str | None = None,
    scope_check: bool | None = None,
    conversation_set: str = "benchmark",
    request_check: bool | None = None,
    restate: bool | None = None,
    untagged: str | None = None,
) -> dict[str, Any]:
    """One model, one history and scope-check setting: one conversation and its
    resumption (None: the built-in default; ``person`` None: the conversation's own)."""
    import conversation

    from kairox_core.config import ProviderConfig
    from kairox_llamacpp.provider import LlamaCppProvider

    def provider() -> Any:
        return LlamaCppProvider.from_config(
            ProviderConfig(id="bench", kind="llamacpp", model=name, seed=0, temperature=0.0)
        )

    config = conversation.chat_config(
        history_tags=history_tags,
        reserve=CONVERSATION_MAX_TOKENS,
        system_prompt=system,
        history_decided=decided,
        history_rejected=rejected,
        scope_check=scope_check,
        request_check=request_check,
        restate_tags=restate,
        untagged=untagged,
    )
    (conv,) = conversation.conversations(conversation_set)
    who = conv.person if person is None else person
    start = time.perf_counter()
    load = _load_average()
    with tempfile.TemporaryDirectory() as tmp:
        opener = conversation.engine_opener(config, Path(tmp) / "kairox.db", provider)
        records = await conversation.converse(
            opener,
            on_turn=lambda r: print(
                f"[{r.kind}] {r.prompt} -> {r.text!r} {r.tags} {r.checks}",
                file=sys.stderr,
                flush=True,
            ),
            person=who,  # type: ignore[arg-type]
            conv=conv,
        )
    return {
        "set": conv.name,
        "model": name,
        "history_tags": history_tags,
        "history_decided": config.memory.history_decided,
        "history_rejected": config.memory.history_rejected,
        "person": who,
        "scope_check": config.memory.scope_check,
        "request_check": config.memory.request_check,
        "restate_tags": config.memory.restate_tags,
        "request_check_untagged": config.memory.request_check_untagged,
        **conversation.score(records, conv),
        "seconds": round(time.perf_counter() - start),
        "load": [load, _load_average()],
        "peak_rss_mb": _peak_rss_mb(),
        "turns": conversation.records_json(records),
    }


def _request_setting(r: dict[str, Any]) -> str:
    """The request check as the table shows it: off, on, on+c (untagged replies too
    when cued by the message), on+u (every untagged reply)."""
    if not r.get("request_check"):
        return "off"
    untagged = r.get("request_check_untagged")
    if untagged is True:  # results recorded before "cued": a bool
        untagged = "always"
    return {"always": "on+u", "cued": "on+c"}.get(str(untagged), "on")


def _load_average() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _peak_rss_mb() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated model names (default: all installed)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--show", action="store_true", help="print every reply")
    parser.add_argument(
        "--prompt", help="a file holding another system prompt to compare (default: built-in)"
    )
    parser.add_argument(
        "--conversation", action="store_true", help="the 30-turn conversation mode (issue 28)"
    )
    parser.add_argument(
        "--history-tags",
        default="off,on",
        help="conversation mode: [memory] history_tags settings to run (off,on)",
    )
    parser.add_argument(
        "--decided",
        choices=("default", "on", "off"),
        default="default",
        help="conversation mode: [memory] history_decided (default: the built-in default)",
    )
    parser.add_argument(
        "--rejected",
        choices=("note", "hidden"),
        help="conversation mode: [memory] history_rejected (default: the built-in default)",
    )
    parser.add_argument(
        "--person",
        default="default",
        help="conversation mode: who decides the cards: careful, fixer, editor, later "
        "(default: the set's own: careful for benchmark, later for trial)",
    )
    parser.add_argument(
        "--set",
        dest="conversation_set",
        default="benchmark",
        choices=("benchmark", "trial", "both"),
        help="conversation mode: the 30-turn benchmark conversation, the held-out trial "
        "conversation (prompts/trial_conversation.txt), or both",
    )
    parser.add_argument(
        "--request-check",
        default="default",
        help="[memory] request_check: conversation mode, the settings to run (off,on; "
        "default: the built-in default); single prompts, on or off (default: off)",
    )
    parser.add_argument(
        "--scope-check",
        default="default",
        help="[memory] scope_check: conversation mode, the settings to run (off,on; default: "
        "the built-in default); single prompts, on or off (default: off)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one model
    parser.add_argument("--tags-on", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check", default="default", help=argparse.SUPPRESS)
    parser.add_argument("--request", default="default", help=argparse.SUPPRESS)
    parser.add_argument("--restate-one", default="default", help=argparse.SUPPRESS)
    parser.add_argument(
        "--untagged",
        choices=("default", "off", "cued", "always"),
        default="default",
        help="conversation mode: [memory] request_check_untagged (default: the built-in default)",
    )
    parser.add_argument(
        "--restate",
        default="default",
        help="conversation mode: [memory] restate_tags settings to run (off,on; default: "
        "the built-in default)",
    )
    args = parser.parse_args()
    system = Path(args.prompt).read_text() if args.prompt else None
    if args.one:
        if args.conversation:
            decided = None if args.decided == "default" else args.decided == "on"
            result = asyncio.run(
                run_conversation(
                    args.one,
                    args.tags_on,
                    system,
                    decided=decided,
                    rejected=args.rejected,
                    person=None if args.person == "default" else args.person,
                    scope_check={"on": True, "off": False}.get(args.check),
                    conversation_set=args.conversation_set,
                    request_check={"on": True, "off": False}.get(args.request),
                    restate={"on": True, "off": False}.get(args.restate_one),
                    untagged=None if args.untagged == "default" else args.untagged,
                )
            )
        else:
            result = asyncio.run(
                run_model(args.one, system, args.check == "on", args.request == "on")
            )
        print(json.dumps(result))
        return

    from kairox_llamacpp import models

    names = args.models.split(",") if args.models else [m.name for m in models.installed()]
    if args.conversation:
        converse_all(
            names,
            args.history_tags.split(","),
            args.person.split(","),
            args.prompt,
            args.json,
            args.show,
            args.decided,
            args.rejected,
            checks=args.scope_check.split(","),
            sets=["benchmark", "trial"]
            if args.conversation_set == "both"
            else [args.conversation_set],
            requests=args.request_check.split(","),
            restates=args.restate.split(","),
            untagged=args.untagged,
        )
        return
    results = []
    for name in names:
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                name,
                "--check",
                "on" if args.scope_check == "on" else "off",
                "--request",
                "on" if args.request_check == "on" else "off",
                *(["--prompt", args.prompt] * bool(args.prompt)),
            ],
            capture_output=True,
            text=True,
        )
        if child.returncode != 0:
            print(f"{name}: failed\n{child.stderr[-2000:]}", file=sys.stderr)
            continue
        results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{'model':30} {'tags':>5} {'written':>7} {'false':>5} {'recall':>6} {'retag':>5} "
        f"{'held out t(w)/f/r':>17} {'empty':>5} {'drop':>4} "
        f"{'tok/s':>6} {'1st s':>6} {'load s':>6} {'RSS MB':>6}"
    )
    held = "{tags_ok}({written_ok})/{false_tags}/{recall_ok} of {of}"
    for r in results:
        print(
            f"{r['model']:30} {r['tags_ok']:>2}/{r['tags_asked']:<2} "
            f"{r['written_ok']:>4}/{r['tags_asked']:<2} {r['false_tags']:>5} "
            f"{r['recall_ok']:>3}/{r['recall_asked']:<2} {r['recall_retagged']:>5} "
            f"{held.format(**r['held_out']):>17} "
            f"{r['empty_visible_when_remembering']:>5} {r['dropped']:>4} "
            f"{r['tokens_per_s'] or 0:>6} "
            f"{r['first_token_s'] or 0:>6} {r['load_s']:>6} {r['peak_rss_mb'] or 0:>6}"
        )
        if args.show:
            for kind, replies in r["replies"].items():
                for reply in replies if isinstance(replies, list) else [replies]:
                    print(f"  [{kind}] {reply['prompt']}\n    -> {reply['raw']!r}")


def converse_all(
    names: list[str],
    settings: list[str],
    persons: list[str],
    prompt: str | None,
    as_json: bool,
    show: bool,
    decided: str = "default",
    rejected: str | None = None,
    checks: Sequence[str] = ("default",),
    sets: Sequence[str] = ("benchmark",),
    requests: Sequence[str] = ("default",),
    restates: Sequence[str] = ("default",),
    untagged: str = "default",
) -> None:
    """Each (set, model, history setting, person, scope-check and request-check
    setting) in its own process; a table or JSON."""
    results = []
    for conv_set, name, setting, person, check, request, restate in itertools.product(
        sets, names, settings, persons, checks, requests, restates
    ):
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--conversation",
                "--one",
                name,
                *(["--tags-on"] * (setting == "on")),
                *(["--prompt", prompt] if prompt else []),
                "--decided",
                decided,
                "--person",
                person,
                *(["--rejected", rejected] if rejected else []),
                "--check",
                check,
                "--request",
                request,
                "--restate-one",
                restate,
                "--untagged",
                untagged,
                "--set",
                conv_set,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        if child.returncode != 0:
            print(
                f"{conv_set}: {name} (history_tags {setting}, {person}, check {check}, "
                f"request check {request}, restate {restate}): failed",
                file=sys.stderr,
            )
            continue
        results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    if as_json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{'set':9} {'model':30} {'history tags':>12} {'decided':>7} {'person':>7} "
        f"{'check':>5} {'req':>4} {'rst':>3} {'right':>6} {'as written':>10} {'moved':>5} "
        f"{'untagged':>8} {'unflagged':>9} {'false':>5} {'noted':>5} {'dropped':>7} {'again':>5} "
        f"{'recall':>6} {'resumed':>7} {'s':>5} {'load':>9}"
    )
    for r in results:
        load = "-".join(f"{x:.1f}" for x in r["load"] if x is not None)
        print(
            f"{r['set']:9} {r['model']:30} {'on' if r['history_tags'] else 'off':>12} "
            f"{'on' if r['history_decided'] else 'off':>7} {r['person']:>7} "
            f"{'on' if r.get('scope_check') else 'off':>5} "
            f"{_request_setting(r):>4} "
            f"{'on' if r.get('restate_tags') else 'off':>3} "
            f"{r['tags_ok']:>3}/{r['tags_asked']:<2} {r['written_ok']:>7}/{r['tags_asked']:<2} "
            f"{r['moved']:>5} {r['untagged']:>8} {r['unflagged']:>9} "
            f"{r['false_tags']:>5} {r.get('noted', '-'):>5} {r['dropped']:>7} "
            f"{r['answered_again']:>5} "
            f"{r['recall_ok']:>3}/{r['recall_asked']:<2} "
            f"{r['resumed_ok']:>4}/{r['resumed_asked']:<2} {r['seconds']:>5} {load:>9}"
        )
        if show:
            for t in r["turns"]:
                print(f"  [{t['kind']}] {t['prompt']}\n    -> {t['text']!r} {t['tags']}")


if __name__ == "__main__":
    main()
