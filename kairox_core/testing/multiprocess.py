"""Child processes for multi-process tests: several processes on one database and session.

Run as ``python -m kairox_core.testing.multiprocess turns DB SESSION N TAG``: opens the
database file, resumes (or starts) the session and runs N turns with a small window,
so compaction and recall's catch-up run on most turns, then prints one JSON line
``{"ok": n, "failed": [...]}``. ``... hang DB SESSION READY`` compacts the session
with the ``hang`` strategy, which creates the file READY from inside the run, prints
``inside the compaction`` and then sleeps, so a test can SIGKILL the process in the
middle of a compaction (reading the line blocks until then, no polling).
``... interrupt DB SESSION`` answers one turn, then begins another, streams part of
its reply, prints ``inside the reply`` and sleeps: killed there, the second turn has
a prompt and no reply (an interrupted turn). A storage plugin's suite can reuse them
with its own database URL.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kairox_core import hookimpl
from kairox_core.compaction.base import CompactionOutput, CompactionRequest
from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RecallSection,
    RetrievalSection,
)

HANG_READY = "inside the compaction"  # what ``hang`` prints from inside the run
REPLY_READY = "inside the reply"  # what ``interrupt`` prints in the middle of a reply
INTERRUPTED_PROMPT = "and what should we plant by the fence?"
FILLER = "we talked about the garden, the weather and what to plant next spring"


class Hang:
    """A strategy that signals it is inside a compaction, then never returns."""

    ready: Path | None = None

    def summarize(self, request: CompactionRequest) -> CompactionOutput:
        if Hang.ready is not None:
            Hang.ready.write_text(str(request.events[0].seq if request.events else 0))
        print(HANG_READY, flush=True)
        time.sleep(3600)
        return CompactionOutput("never")


class HangPlugin:
    @hookimpl
    def kairox_register_compaction_strategies(self, register: Callable[..., None]) -> None:
        register("hang", lambda **kw: Hang())


def config(strategy: str = "extractive", *, enabled: bool = True) -> KairoxConfig:
    """A small window: the turn-end check compacts every few turns (``enabled``)."""
    return KairoxConfig(
        profiles={"default": ProfileConfig(model="gpt-4o", context_window=900, reserve=100)},
        retrieval=RetrievalSection(backend="hashing"),
        compaction=CompactionSection(
            strategy=strategy,
            keep_recent_exchanges=1,
            target_tokens=40,
            enabled=enabled,
        ),
        recall=RecallSection(enabled=True),
    )


def run_turns(db: str, session_id: str, n: int, tag: str) -> dict[str, Any]:
    from kairox_core.facade import Kairox

    kx = Kairox.open(db, config())
    failed: list[str] = []
    ok = 0
    try:
        session = kx.session(workspace="w", session_id=session_id)
        for i in range(n):
            try:
                session.run_turn_sync(f"{tag} question {i}: {FILLER}", f"{tag} answer {i}.")
                ok += 1
            except Exception as exc:  # counted: the test asserts there are none
                failed.append(f"{type(exc).__name__}: {exc}")
    finally:
        kx.close()
    return {"ok": ok, "failed": failed}


def hang(db: str, session_id: str, ready: str) -> None:
    from kairox_core.facade import Kairox
    from kairox_core.plugins import get_plugins

    get_plugins().add(HangPlugin(), "test-hang")
    Hang.ready = Path(ready)
    kx = Kairox.open(db, config("hang"))
    kx.compact(session_id)  # killed inside the strategy


def interrupt(db: str, session_id: str) -> None:
    from kairox_core.facade import Kairox

    kx = Kairox.open(db, config())
    session = kx.session(workspace="w", session_id=session_id)
    session.run_turn_sync(f"first question: {FILLER}", "first answer.")
    turn = session.begin_turn_sync(INTERRUPTED_PROMPT)
    turn.feed("Sunflowers would")
    print(REPLY_READY, flush=True)
    time.sleep(3600)  # killed here, mid-reply


def kill_mid_reply(db: Path, session_id: str, *, timeout: float = 240) -> None:
    """Run ``interrupt`` in a child and kill it -9 once it is inside the reply: a
    database whose last turn a crash cut off. ``timeout`` is a hang guard for the
    child's exit, never a speed claim."""
    child = subprocess.Popen(
        [sys.executable, "-m", __name__, "interrupt", str(db), session_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    if not any(line.strip() == REPLY_READY for line in child.stdout):
        raise AssertionError(f"the child never reached the reply: {child.communicate()[1][-2000:]}")
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=timeout)


def main(argv: list[str]) -> int:
    if argv[0] == "turns":
        print(json.dumps(run_turns(argv[1], argv[2], int(argv[3]), argv[4])), flush=True)
        return 0
    if argv[0] == "hang":
        hang(argv[1], argv[2], argv[3])
        return 0
    if argv[0] == "interrupt":
        interrupt(argv[1], argv[2])
        return 0
    raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
