"""Pytest fixtures for Kairox and its plugins (and the hypothesis profile, see profiles.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kairox_core.plugins import PluginHost, get_plugins, reset_plugins
from kairox_core.testing.profiles import load_hypothesis_profile

_ENV_VARS = (
    "KAIROX_CONFIG",
    "KAIROX_DB",
    "KAIROX_LOAD_PLUGINS",
    "KAIROX_DISABLE_PLUGINS",
    "KAIROX_STRICT_PLUGINS",
    "KAIROX_TRACE_PLUGINS",
)


def pytest_configure(config: pytest.Config) -> None:
    """Every suite that loads these fixtures runs hypothesis derandomized under CI."""
    load_hypothesis_profile()


@pytest.fixture
def kairox_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Isolate a test from the user's Kairox: no env overrides, data and config under tmp."""
    for var in _ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "kairox-home"
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.chdir(tmp_path)
    reset_plugins()
    yield home
    reset_plugins()


@pytest.fixture
def kairox_plugins() -> Iterator[PluginHost]:
    """A freshly loaded plugin host for this test (env vars re-read), reset afterwards."""
    reset_plugins()
    yield get_plugins()
    reset_plugins()


@pytest.fixture
def register_plugin() -> Iterator[Callable[[object, str], PluginHost]]:
    """``register_plugin(obj, name)`` registers a plugin for this test only."""
    names: list[str] = []

    def add(plugin: object, name: str) -> PluginHost:
        host = get_plugins()
        host.add(plugin, name)
        names.append(name)
        return host

    yield add
    host = get_plugins()
    for name in names:
        host.remove(name)
