"""A real ``kairox serve`` subprocess, for tests of the HTTP API and the web app.

``start_server`` runs ``python -m kairox_core serve`` on a free loopback port with a
config whose model is the ``scripted`` provider, and waits until it answers; a test
then talks to it over real HTTP (or drives a real browser at it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

XSS = "<img src=x onerror=alert(1)>"
REPLIES = [
    'Hello! I will keep that in mind. <memory scope="user" key="editor">prefers helix</memory>',
    "Noted, answering from memory.",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, replies: list[str], *, summary: str | None = None) -> Path:
    """A kairox.toml whose chat model is ``scripted`` (the replies, cycled). With
    ``summary``, compaction uses the ``model`` strategy with a second scripted model that
    answers with it (so its usage is recorded); else the extractive one."""
    body = (
        "[profiles.default]\n"
        'provider = "demo"\n'
        "[providers.demo]\n"
        'kind = "scripted"\n'
        f"replies = {json.dumps(replies)}\n"
        "chunk_chars = 3\n"
        "[compaction]\n"
        "keep_recent_exchanges = 1\n"
    )
    if summary is not None:
        body += (
            'strategy = "model"\n'
            'provider = "summariser"\n'
            "[providers.summariser]\n"
            'kind = "scripted"\n'
            f"replies = {json.dumps([summary])}\n"
        )
    path.write_text(body, encoding="utf-8")
    return path


@dataclass
class Server:
    url: str
    config: Path
    db: Path
    process: subprocess.Popen[bytes]

    def api(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"X-Kairox-CSRF": "1"}
        r = httpx.request(method, self.url + path, json=body, headers=headers, timeout=30)
        r.raise_for_status()
        return r.json()


def kairox_cmd(config: Path, db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kairox_core", "--config", str(config), "--db", str(db), *args]


def start_server(
    tmp_path: Path,
    replies: list[str],
    *args: str,
    db: Path | None = None,
    summary: str | None = None,
) -> Server:
    """``kairox serve`` on a free port over ``db`` (default: a new one in ``tmp_path``)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = write_config(tmp_path / "kairox.toml", replies, summary=summary)
    db = db or tmp_path / "kairox.db"
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("KAIROX_SERVE_TOKEN", None)
    process = subprocess.Popen(
        kairox_cmd(config, db, "serve", "--port", str(port), *args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = process.stdout.read().decode() if process.stdout else ""
            raise RuntimeError(f"kairox serve exited {process.returncode}: {out}")
        try:
            httpx.get(url + "/openapi.json", timeout=2, headers={"Authorization": "Bearer x"})
            return Server(url, config, db, process)
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("kairox serve did not start within 60 s")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
