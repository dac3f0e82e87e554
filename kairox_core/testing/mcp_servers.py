"""Real MCP servers for tests: the npm ``@modelcontextprotocol/server-memory`` and
misbehaving commands (one that exits at once, one that never answers, one that never
answers a tool call).

``server_memory_command(folder)`` installs the npm package into ``folder`` (once) and
returns the command that runs it; ``KAIROX_MCP_NPM_DIR`` names a folder where it is
already installed (CI or a developer's cache), so a test run needs no ``npm install``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SERVER_MEMORY = "@modelcontextprotocol/server-memory"
NPM_TIMEOUT = 300


def node_missing() -> str | None:
    """Why the npm server cannot run here (None: node and npm are on PATH)."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not on PATH (apt-get install nodejs npm)" if missing else None


def server_memory_command(folder: Path) -> list[str]:
    """``[node, .../dist/index.js]`` of server-memory, installing it when needed."""
    base = Path(os.environ.get("KAIROX_MCP_NPM_DIR") or folder).resolve()
    entry = base / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if not entry.exists():
        base.mkdir(parents=True, exist_ok=True)
        npm = shutil.which("npm") or "npm"
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--silent", SERVER_MEMORY],
            cwd=base,
            check=True,
            timeout=NPM_TIMEOUT,
        )
    return [shutil.which("node") or "node", str(entry)]


def exits_at_once() -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; print('no config, bye', file=sys.stderr); sys.exit(3)",
    ]


def never_answers() -> list[str]:
    return [sys.executable, "-c", "import time; time.sleep(120)"]


# Speaks just enough MCP over stdio (initialize, tools/list) to offer one tool, then
# never answers a call. Plain Python with no SDK import: it starts in a fraction of the
# SDK stub's time, so a test can give it a short timeout for the call and still be sure
# the start fits in it on a busy machine.
HANGS_ON_CALL = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if "id" not in msg or method == "tools/call":
        continue  # a notification needs no answer; a call never gets one
    if method == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hangs-on-call", "version": "1"},
        }
    elif method == "tools/list":
        tool = {"name": "sleep", "description": "Never answers.", "inputSchema": {"type": "object"}}
        result = {"tools": [tool]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def hangs_on_call() -> list[str]:
    """A server that starts, lists a ``sleep`` tool and never answers a call."""
    return [sys.executable, "-c", HANGS_ON_CALL]


def stub() -> list[str]:
    """The SDK-built stub server (kairox_core/testing/mcp_stub.py)."""
    return [sys.executable, "-m", "kairox_core.testing.mcp_stub"]
