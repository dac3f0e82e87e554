"""Registers the ``llamacpp`` provider and ``kairox models``; llama.cpp loads only when used."""

from __future__ import annotations

from typing import Any

from kairox_core.hookspecs import ModelProviderRegistrar, hookimpl


def _create(config: Any) -> Any:
    from kairox_llamacpp.provider import LlamaCppProvider

    return LlamaCppProvider.from_config(config)


@hookimpl
def kairox_register_model_providers(register: ModelProviderRegistrar) -> None:
    register("llamacpp", _create)


@hookimpl
def kairox_register_commands(cli: Any) -> None:
    from kairox_llamacpp.commands import register

    register(cli)
