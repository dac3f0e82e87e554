"""``kairox mcp serve`` driven by the official MCP client over stdio: initialize, list
the tools, call each; a proposal made over MCP waits in ``kairox memory pending``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is the extra kairox-core[mcp]")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow

TOOLS = {
    "list_memories",
    "search_memories",
    "propose_memory",
    "search_workspace",
    "search_longterm",
    "preview_context",
}


def kairox(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kairox_core", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def text_of(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def test_every_tool_over_stdio_and_proposals_wait_for_approval(
    tmp_path: Path, kairox_home: Path
) -> None:
    config = tmp_path / "kairox.toml"
    config.write_text(f'[kairox]\ndatabase = "{tmp_path / "k.db"}"\n')
    env = {**os.environ, "KAIROX_CONFIG": str(config)}
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text("Deploys go out on Tuesdays through the blue pipeline.\n")
    kairox(env, "memory", "add", "uses the helix editor", "--scope", "user", "--key", "editor")
    kairox(env, "longterm", "add", "The quarterly report is due in March.", "--scope", "global")
    kairox(env, "index", str(docs))

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kairox_core", "mcp", "serve"], env=env
    )
    async with asyncio.timeout(90):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            init = await mcp.initialize()
            assert init.server_info.name == "kairox"
            listed = await mcp.list_tools()
            assert {t.name for t in listed.tools} == TOOLS

            memories = text_of(await mcp.call_tool("list_memories", {"scope": "user"}))
            assert [m["body"] for m in memories["memories"]] == ["uses the helix editor"]
            found = text_of(await mcp.call_tool("search_memories", {"query": "which editor?"}))
            assert found["memories"][0]["key"] == "editor"

            hits = text_of(await mcp.call_tool("search_workspace", {"query": "deploys tuesday"}))
            assert any("blue pipeline" in h["text"] for h in hits["hits"])
            chunks = text_of(
                await mcp.call_tool(
                    "search_longterm", {"query": "when is the quarterly report due"}
                )
            )
            assert any("March" in c["text"] for c in chunks["chunks"])
            preview = text_of(await mcp.call_tool("preview_context", {"prompt": "my editor?"}))
            assert preview["trace"]["budget"] > 0
            assert "helix" in json.dumps(preview["messages"])

            proposed = text_of(
                await mcp.call_tool(
                    "propose_memory", {"scope": "user", "key": "tea", "body": "drinks green tea"}
                )
            )
            assert proposed["status"] == "pending"
            bad = await mcp.call_tool(
                "propose_memory", {"scope": "session", "key": "x", "body": "sneaky"}
            )
            assert bad.is_error and "scope must be one of user, workspace" in bad.content[0].text

            pending = json.loads(kairox(env, "memory", "pending", "--json"))
            assert [(p["id"], p["body"]) for p in pending] == [
                (proposed["proposal_id"], "drinks green tea")
            ]
            # nothing durable until a person approves it
            memories = text_of(await mcp.call_tool("list_memories", {}))
            assert "drinks green tea" not in json.dumps(memories)
            kairox(env, "memory", "approve", proposed["proposal_id"])
            memories = text_of(await mcp.call_tool("list_memories", {"scope": "user"}))
            assert "drinks green tea" in [m["body"] for m in memories["memories"]]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_http_serve_is_reachable_by_the_kairox_client(
    tmp_path: Path, kairox_home: Path
) -> None:
    from kairox_core.config import parse_config
    from kairox_core.mcp.client import McpToolbox

    config = tmp_path / "kairox.toml"
    config.write_text(f'[kairox]\ndatabase = "{tmp_path / "k.db"}"\n')
    env = {**os.environ, "KAIROX_CONFIG": str(config)}
    kairox(env, "memory", "add", "prefers dark roast", "--scope", "user", "--key", "coffee")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kairox_core", "mcp", "serve", "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    box = McpToolbox.for_profile(
        parse_config({"mcp_servers": {"kx": {"url": url, "timeout": 5}}}), "default"
    )
    try:
        import socket

        # until uvicorn listens; the bound (5 min) only stops a broken build from hanging
        for _ in range(1500):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                await asyncio.sleep(0.2)
        tools, notes = await box.tools()
        assert not notes, notes
        by_name = {t.name: t for t in tools}
        assert set(by_name) == {f"kx__{name}" for name in TOOLS}
        assert by_name["kx__list_memories"].source == "mcp:kx"
        listed = json.loads(await by_name["kx__list_memories"].call({"scope": "user"}))
        assert [m["body"] for m in listed["memories"]] == ["prefers dark roast"]
        # DNS rebinding: a page whose name resolves to 127.0.0.1 sends its own Host
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        async with httpx.AsyncClient() as web:
            for name in ("127.0.0.1.evil.example", "127.evil.example", "127.0.0.1.nip.io"):
                r = await web.post(url, json=init, headers={"Host": f"{name}:{port}"})
                assert r.status_code == 421, name
            r = await web.post(url, json=init, headers={"Host": f"127.0.0.1:{port + 1}"})
            assert r.status_code == 421
            r = await web.post(url, content=b"{}", headers={"Content-Type": "text/plain"})
            assert r.status_code == 415
    finally:
        await box.aclose()
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


async def wait_listening(port: int) -> None:
    import socket

    for _ in range(100):  # until uvicorn listens (bounded: 20 s)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            await asyncio.sleep(0.2)


async def test_http_serve_with_a_token_refuses_requests_without_it(
    tmp_path: Path, kairox_home: Path
) -> None:
    from kairox_core.config import parse_config
    from kairox_core.mcp.client import McpToolbox

    token = "mcp-token-for-the-tests-0123"
    config = tmp_path / "kairox.toml"
    config.write_text(f'[kairox]\ndatabase = "{tmp_path / "k.db"}"\n')
    env = {**os.environ, "KAIROX_CONFIG": str(config), "KX_TEST_MCP_TOKEN": token}
    port = free_port()
    args = ["mcp", "serve", "--http", "--port", str(port), "--token", "$env:KX_TEST_MCP_TOKEN"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kairox_core", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    servers = {
        "kx": {"url": url, "timeout": 5, "headers": {"Authorization": f"Bearer {token}"}},
        "nokey": {"url": url, "timeout": 5},
    }
    box = McpToolbox.for_profile(parse_config({"mcp_servers": servers}), "default")
    try:
        await wait_listening(port)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        async with httpx.AsyncClient() as web:
            r = await web.post(url, json=init)
            assert r.status_code == 401 and "token" in r.json()["detail"]
        tools, notes = await box.tools()
        assert {t.name for t in tools} == {f"kx__{name}" for name in TOOLS}
        assert len(notes) == 1 and "nokey" in notes[0]
    finally:
        await box.aclose()
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_mcp_tools_lists_servers_and_fails_for_a_broken_one(
    tmp_path: Path, kairox_home: Path
) -> None:
    from kairox_core.testing import mcp_servers

    stub = mcp_servers.stub()
    config = tmp_path / "kairox.toml"
    config.write_text(
        f"[mcp_servers.stub]\ncommand = {json.dumps(stub[0])}\nargs = {json.dumps(stub[1:])}\n"
    )
    env = {**os.environ, "KAIROX_CONFIG": str(config)}
    out = kairox(env, "mcp", "tools")
    assert "stub (stdio" in out and "stub__echo" in out and "stub__big" in out
    config.write_text(config.read_text() + '[mcp_servers.dead]\ncommand = "false"\n')
    done = subprocess.run(
        [sys.executable, "-m", "kairox_core", "mcp", "tools", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    rows = {r["server"]: r for r in json.loads(done.stdout)}
    assert rows["stub"]["ok"] and not rows["dead"]["ok"]
    assert "did it exit" in rows["dead"]["error"]
    usage = subprocess.run(
        [sys.executable, "-m", "kairox_core", "mcp", "serve", "--port", "9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert usage.returncode == 2 and "--port needs --http" in usage.stderr


async def test_a_lone_surrogate_in_tool_arguments_gets_an_error_not_silence(
    tmp_path: Path, kairox_home: Path
) -> None:
    """The SDK's client cannot even send one (it encodes UTF-8), so this speaks the
    protocol itself: JSON can carry ``\\ud800`` as an escape."""
    config = tmp_path / "kairox.toml"
    config.write_text(f'[kairox]\ndatabase = "{tmp_path / "k.db"}"\n')
    env = {**os.environ, "KAIROX_CONFIG": str(config)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kairox_core",
        "mcp",
        "serve",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None

    async def call(message: dict[str, Any]) -> dict[str, Any] | None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")  # ensure_ascii: \ud800 escapes
        await proc.stdin.drain()
        if "id" not in message:
            return None
        return dict(json.loads(await proc.stdout.readline()))

    def tool(ident: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments}
        return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}

    try:
        async with asyncio.timeout(90):
            init = await call(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "probe", "version": "1"},
                    },
                }
            )
            assert init is not None and "result" in init
            await call({"jsonrpc": "2.0", "method": "notifications/initialized"})
            bad = await call(tool(2, "search_memories", {"query": "x\ud800"}))
            assert bad is not None and bad["id"] == 2
            assert bad["error"]["message"] == (
                "params.arguments.query: a string with a lone surrogate is not valid Unicode text"
            )
            bad = await call(
                tool(3, "propose_memory", {"scope": "user", "key": "k", "body": "\udfff"})
            )
            assert bad is not None and "params.arguments.body" in bad["error"]["message"]
            spaced = await call(
                tool(4, "propose_memory", {"scope": "user", "key": "my key", "body": "b"})
            )
            assert spaced is not None and spaced["result"]["isError"]
            assert "no spaces or markup" in spaced["result"]["content"][0]["text"]
            good = await call(tool(5, "list_memories", {}))
            assert good is not None and not good["result"]["isError"]  # still serving
    finally:
        proc.kill()
        await proc.wait()
