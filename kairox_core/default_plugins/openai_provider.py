"""Built-in plugin: the ``openai`` provider (any OpenAI-compatible endpoint) and the
``scripted`` provider (fixed replies, for tests and demos)."""

from __future__ import annotations

from kairox_core.hookspecs import ModelProviderRegistrar, hookimpl


@hookimpl
def kairox_register_model_providers(register: ModelProviderRegistrar) -> None:
    from kairox_core.providers import openai_compat, scripted

    register("openai", openai_compat.create, options=openai_compat.OpenAIOptions)
    register("scripted", scripted.create, options=scripted.ScriptedOptions)
