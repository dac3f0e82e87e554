"""The plugin host: built-ins, entry points, failures, duplicates, env controls, tracing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kairox_core import hookimpl
from kairox_core.errors import DuplicateRegistrationError, PluginError, UnknownNameError
from kairox_core.plugins import PluginHost, get_plugins, reset_plugins


class RetrieverPlugin:
    @hookimpl
    def kairox_register_retrievers(self, register: Callable[..., None]) -> None:
        register("fake-kind", lambda kb: ("retriever-for", kb))


class OtherRetrieverPlugin:
    @hookimpl
    def kairox_register_retrievers(self, register: Callable[..., None]) -> None:
        register("fake-kind", lambda kb: None)


def test_builtins_are_listed_as_plugins(kairox_home: Path) -> None:
    infos = {i.name: i for i in get_plugins().plugin_infos()}
    core = infos["kairox_core.default_plugins.core_commands"]
    assert core.builtin and core.distribution == "kairox-core"
    assert "kairox_register_commands" in core.hooks
    assert all(i.error is None for i in infos.values() if i.builtin)


def test_registered_plugin_is_visible_and_removed_after(
    kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    host = register_plugin(RetrieverPlugin(), "fake")
    reg = host.get("retrievers", "fake-kind")
    assert reg.plugin == "fake"
    assert reg.factory("kb") == ("retriever-for", "kb")
    info = {i.name: i for i in host.plugin_infos()}["fake"]
    assert info.registers == {"retrievers": ["fake-kind"]}
    assert info.hooks == ["kairox_register_retrievers"]


def test_fixture_cleanup_left_nothing(kairox_home: Path) -> None:
    assert "fake-kind" not in get_plugins().names("retrievers")


def test_same_name_twice_is_an_error_naming_both(
    kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    register_plugin(RetrieverPlugin(), "first")
    host = register_plugin(OtherRetrieverPlugin(), "second")
    with pytest.warns(RuntimeWarning, match="registered twice"):
        infos = {i.name: i for i in host.plugin_infos()}
    assert infos["second"].error is not None
    assert "'first'" in infos["second"].error and "'second'" in infos["second"].error
    assert host.get("retrievers", "fake-kind").plugin == "first"


def test_same_name_twice_is_fatal_when_strict(
    kairox_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAIROX_STRICT_PLUGINS", "1")
    host = PluginHost(load_entry_points=False)
    host.add(RetrieverPlugin(), "first")
    host.add(OtherRetrieverPlugin(), "second")
    with pytest.raises(DuplicateRegistrationError, match=r"'first'.*'second'"):
        host.registry("retrievers")


def test_unknown_hook_name_is_rejected(kairox_home: Path) -> None:
    class Typo:
        @hookimpl
        def kairox_register_retreivers(self, register: Any) -> None:  # typo on purpose
            pass

    host = PluginHost(load_entry_points=False)
    with pytest.raises(PluginError, match="unknown hook"), pytest.warns(RuntimeWarning):
        host.add(Typo(), "typo")
    assert host.pm.get_plugin("typo") is None


def test_unknown_kind_names_the_distribution_to_install(
    kairox_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "")  # as if kairox-pinecone were not installed
    reset_plugins()
    with pytest.raises(UnknownNameError, match="pip install kairox-pinecone"):
        get_plugins().get("retrievers", "pinecone")
    with pytest.raises(UnknownNameError, match="no installed plugin provides"):
        get_plugins().get("retrievers", "nonesuch")


def test_observer_that_raises_never_stops_the_caller(
    kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    seen: list[Any] = []

    class Good:
        @hookimpl
        def kairox_on_event(self, event: Any) -> None:
            seen.append(event)

    class Bad:
        @hookimpl
        def kairox_on_event(self, event: Any) -> None:
            raise RuntimeError("observer bug")

    register_plugin(Good(), "good")
    host = register_plugin(Bad(), "bad")
    with pytest.warns(RuntimeWarning, match="observer bug"):
        host.emit("an-event")
    assert seen == ["an-event"]


# --- entry points, through a real installed distribution --------------------------------


def _install_fake_dist(site: Path, dist: str, module: str, source: str) -> None:
    """Lay out a distribution exactly as pip installs it: package + dist-info with entry points."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[kairox]\n{module} = {module}\n")
    (info / "RECORD").write_text("")


GOOD_PLUGIN = """
from kairox_core import hookimpl

@hookimpl
def kairox_register_retrievers(register):
    register("good-kind", lambda kb: None)

@hookimpl
def kairox_register_commands(cli):
    import click

    @cli.command("hello-plugin")
    def hello():
        "Say hello from a plugin."
        click.echo("hello from the plugin")
"""
BROKEN_PLUGIN = """
import a_module_that_does_not_exist
"""


@pytest.fixture
def site_with_plugins(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    _install_fake_dist(site, "kairox-goodplug", "kairox_goodplug", GOOD_PLUGIN)
    _install_fake_dist(site, "kairox-brokenplug", "kairox_brokenplug", BROKEN_PLUGIN)
    return site


def _kairox(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(site), **env}
    for var in ("KAIROX_LOAD_PLUGINS", "KAIROX_DISABLE_PLUGINS", "KAIROX_STRICT_PLUGINS"):
        if var not in env:
            full_env.pop(var, None)
    return subprocess.run(
        [sys.executable, "-c", "from kairox_core.cli import main; main()", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_entry_point_plugins_show_up_and_broken_ones_are_reported(site_with_plugins: Path) -> None:
    out = _kairox(site_with_plugins, "plugins", "--json")
    assert out.returncode == 0, out.stderr
    infos = {i["name"]: i for i in json.loads(out.stdout)}
    good = infos["kairox_goodplug"]
    assert good["distribution"] == "kairox-goodplug" and good["version"] == "1.2.3"
    assert good["registers"] == {"retrievers": ["good-kind"]}
    assert set(good["hooks"]) == {"kairox_register_retrievers", "kairox_register_commands"}
    broken = infos["kairox_brokenplug"]
    assert "a_module_that_does_not_exist" in broken["error"]
    assert "failed to load" in out.stderr  # the warning
    # The CLI still works, and the plugin's command is there.
    hello = _kairox(site_with_plugins, "hello-plugin")
    assert hello.returncode == 0 and "hello from the plugin" in hello.stdout


@pytest.mark.slow
def test_strict_mode_makes_a_broken_plugin_fatal(site_with_plugins: Path) -> None:
    out = _kairox(site_with_plugins, "plugins", KAIROX_STRICT_PLUGINS="1")
    assert out.returncode != 0
    assert "kairox_brokenplug" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_load_and_disable_lists(site_with_plugins: Path) -> None:
    ours = {"kairox_goodplug", "kairox_brokenplug"}

    def names(**env: str) -> set[str]:
        # Only our two: the environment may hold real plugins too (a developer's venv).
        out = _kairox(site_with_plugins, "plugins", "--json", **env)
        assert out.returncode == 0, out.stderr
        return {i["name"] for i in json.loads(out.stdout) if i["name"] in ours}

    assert names() == {"kairox_goodplug", "kairox_brokenplug"}
    out = _kairox(site_with_plugins, "plugins", "--json", KAIROX_LOAD_PLUGINS="")
    assert [i["name"] for i in json.loads(out.stdout) if not i["builtin"]] == []
    assert names(KAIROX_LOAD_PLUGINS="kairox-goodplug") == {"kairox_goodplug"}
    assert names(KAIROX_DISABLE_PLUGINS="kairox-brokenplug") == {"kairox_goodplug"}


@pytest.mark.slow
def test_trace_prints_hook_calls(site_with_plugins: Path) -> None:
    out = _kairox(
        site_with_plugins,
        "plugins",
        "--json",
        KAIROX_TRACE_PLUGINS="1",
        KAIROX_LOAD_PLUGINS="kairox-goodplug",
    )
    assert out.returncode == 0
    assert "kairox-trace: kairox_register_retrievers -> kairox_goodplug" in out.stderr
    assert "kairox_register_commands" in out.stderr
