"""Nothing reaches for the network: LlamaIndex's tokenizer comes from Kairox's offline
tiktoken files, and an agent run touches only the local fake server."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_llamaindex_tokenizer_and_agent_run_with_only_loopback(tmp_path: Path) -> None:
    """In a fresh process whose tiktoken cache is empty (LlamaIndex would download
    cl100k_base there) and where any connection off 127.0.0.1 raises."""
    script = textwrap.dedent(
        """
        import asyncio, socket

        real_connect = socket.socket.connect

        def loopback_only(self, address):
            if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
                raise OSError(f"network access attempted: {address!r}")
            return real_connect(self, address)

        socket.socket.connect = loopback_only

        from kairox_core import Kairox
        from kairox_core.testing.fake_openai import FakeOpenAIServer
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.core.utils import get_tokenizer
        from llama_index.llms.openai_like import OpenAILike
        from kairox_llamaindex import KairoxMemory

        async def main():
            with FakeOpenAIServer(reply="Fine.") as server, Kairox.open("kx.db") as kx:
                memory = KairoxMemory.from_defaults(kx, workspace="w")
                llm = OpenAILike(model="fake-model", api_base=server.base_url, api_key="x",
                                 is_chat_model=True, is_function_calling_model=True)
                agent = FunctionAgent(tools=[], llm=llm)
                print(await agent.run("How are you?", memory=memory))
            print(len(get_tokenizer()("hello world")))

        asyncio.run(main())
        try:  # the guard itself works: a connection off loopback is refused
            socket.create_connection(("203.0.113.1", 443), timeout=5)
        except OSError as exc:
            print("guarded" if "network access attempted" in str(exc) else exc)
        """
    )
    cache = tmp_path / "empty-tiktoken-cache"
    cache.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TIKTOKEN_CACHE_DIR": str(cache),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["Fine.", "2", "guarded"]
    # the cl100k_base file LlamaIndex asked for was seeded from bpe-openai, not downloaded
    assert len(list(cache.iterdir())) >= 1
