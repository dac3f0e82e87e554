"""Built-in plugin: the ``openai`` provider (any OpenAI-compatible endpoint) and the
``scripted`` provider (fixed replies, for tests and demos)."""

from __future__ import annotations

from kairox_core.hookspecs import Register, hookimpl


@hookimpl
def kairox_register_model_providers(register: Register) -> None:
    from kairox_core.providers import openai_compat, scripted

    register("openai", openai_compat.create)
    register("scripted", scripted.create)
