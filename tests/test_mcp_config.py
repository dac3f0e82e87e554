"""``[mcp_servers.<id>]`` validation, ``$env:`` secrets, profiles, and the missing-SDK error."""

from __future__ import annotations

import sys

import pytest

from kairox_core.config import parse_config
from kairox_core.errors import ConfigError
from kairox_core.mcp import McpUnavailable, require_sdk, tool_name


def test_exactly_one_transport_and_a_valid_url() -> None:
    with pytest.raises(ConfigError, match="exactly one of 'command'"):
        parse_config({"mcp_servers": {"x": {"command": "a", "url": "http://h/mcp"}}})
    with pytest.raises(ConfigError, match="exactly one of 'command'"):
        parse_config({"mcp_servers": {"x": {}}})
    with pytest.raises(ConfigError, match="http:// or https://"):
        parse_config({"mcp_servers": {"x": {"url": "ftp://h"}}})
    with pytest.raises(ConfigError, match="comand"):
        parse_config({"mcp_servers": {"x": {"comand": "a"}}})


def test_profiles_must_exist_and_select_servers() -> None:
    with pytest.raises(ConfigError, match="not a profile"):
        parse_config({"mcp_servers": {"x": {"command": "a", "profiles": ["nope"]}}})
    config = parse_config(
        {
            "profiles": {"small": {"aliases": ["s"]}, "big": {}},
            "kairox": {"default_profile": "small"},
            "mcp_servers": {
                "all": {"command": "a"},
                "only_big": {"command": "b", "profiles": ["big"]},
                "off": {"command": "c", "enabled": False},
                "via_alias": {"command": "d", "profiles": ["s"]},
            },
        }
    )
    assert [s.id for s in config.mcp_servers_for("small")] == ["all", "via_alias"]
    assert [s.id for s in config.mcp_servers_for("big")] == ["all", "only_big"]


def test_env_secrets_resolve_at_use(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config(
        {"mcp_servers": {"x": {"command": "a", "env": {"TOKEN": "$env:MY_MCP_TOKEN", "A": "1"}}}}
    )
    server = config.mcp_servers["x"]
    monkeypatch.delenv("MY_MCP_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="MY_MCP_TOKEN is not set"):
        server.resolved_env()
    monkeypatch.setenv("MY_MCP_TOKEN", "s3cret")
    assert server.resolved_env() == {"TOKEN": "s3cret", "A": "1"}
    assert "s3cret" not in str(config.redacted())


def test_tool_names_are_namespaced_in_openai_alphabet() -> None:
    assert tool_name("memory", "search_nodes") == "memory__search_nodes"
    assert tool_name("my server", "ä.b") == "my_server____b"
    assert len(tool_name("s" * 40, "t" * 40)) == 64


def test_a_missing_sdk_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(McpUnavailable, match=r"kairox-core\[mcp\]"):
        require_sdk()
