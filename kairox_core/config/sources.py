"""``[knowledge_bases.<id>]`` and ``[providers.<id>]``: a kind's common keys; the
rest are the kind's own options (checked by the options model its plugin registered)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, model_validator

from kairox_core.config.base import expand_path, key_error, resolve_secret


class KnowledgeBaseConfig(BaseModel):
    """``[knowledge_bases.<id>]``: common keys; the rest are the kind's own options."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = ""
    kind: str
    enabled: bool = True
    profiles: tuple[str, ...] = ()  # empty: every profile sees it
    weight: float = Field(1.0, gt=0)
    timeout: float = Field(10.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _resolve_path(cls, data: Any, info: ValidationInfo) -> Any:
        """A relative ``path`` option is relative to the config file, like ``database``:
        the same file works from any directory."""
        if not isinstance(data, dict) or not isinstance(data.get("path"), str):
            return data
        try:
            path = expand_path(data["path"])
        except ValueError as exc:
            raise key_error("path", str(exc)) from None
        base = (info.context or {}).get("base_dir")
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        return {**data, "path": str(path)}

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def secret(self, name: str) -> SecretStr | None:
        return resolve_secret(self.options.get(name), where=f"knowledge_bases.{self.id}.{name}")


class ProviderConfig(BaseModel):
    """``[providers.<name>]``: a model provider; ``kind`` names the registered provider."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = ""
    kind: str
    model: str | None = None

    @model_validator(mode="after")
    def _base_url_is_http(self) -> ProviderConfig:
        """Checked here for every kind, so ``config check`` finds what chat would."""
        url = (self.model_extra or {}).get("base_url")
        if url is None:
            return self
        from urllib.parse import urlsplit

        if not isinstance(url, str):
            raise key_error("base_url", "must be a string such as 'http://127.0.0.1:8080/v1'")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError as exc:
            raise key_error("base_url", f"not a valid URL: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise key_error(
                "base_url", "must start with http:// or https://, e.g. 'http://127.0.0.1:8080/v1'"
            )
        if not parts.hostname:
            raise key_error("base_url", "has no host; e.g. 'http://127.0.0.1:8080/v1'")
        return self

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def secret(self, name: str) -> SecretStr | None:
        return resolve_secret(self.options.get(name), where=f"providers.{self.id}.{name}")
