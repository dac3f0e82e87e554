"""Fuzzing config loading: whatever kairox.toml holds, the loader returns a config or
raises ``ConfigError`` (which the CLI prints as an exit-2 error), nothing else.

Three generators: arbitrary text and bytes; TOML documents shaped like a real config
(the real section and key names) holding values of the wrong type or range; and deep
nesting. A loaded config must also survive what every command does with it next."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    KairoxSection,
    KnowledgeBaseConfig,
    MemorySection,
    ProfileConfig,
    ProviderConfig,
    RetrievalSection,
    load_config_file,
    parse_config,
)
from kairox_core.errors import ConfigError

FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- a TOML writer small enough to trust (every value as an inline value) -------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON escapes are valid TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def toml_document(data: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in data.items())


# --- values and documents --------------------------------------------------------------

TEXT = st.text(
    st.characters(blacklist_categories=("Cs",)),  # TOML text is UTF-8: no lone surrogates
    max_size=20,
)
PATHISH = st.sampled_from(
    ["k.db", "~/k.db", "~nosuchuser-kx/k.db", "a\0b", "/", "", ".", "../x", "\n", "~"]
)
URLS = st.sampled_from(
    [
        "http://127.0.0.1:8080/v1",
        "not a url",
        "http://",
        "ftp://x",
        "http://h:port/",
        "https://[::1",
    ]
)
SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
    PATHISH,
    URLS,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


def keys_of(model: Any, extra: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    names = [n for n in model.model_fields if n not in ("id", "source")]
    return st.sampled_from([*names, *extra]) | TEXT


def section(model: Any, extra: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    body = st.dictionaries(keys_of(model, extra), VALUES, max_size=6)
    return body | VALUES  # now and then a section that is not a table at all


def named(model: Any, extra: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["default", "only", "gpt", "k"]) | TEXT
    return st.dictionaries(names, section(model, extra), max_size=3) | VALUES


KB_EXTRA = ("path", "table", "text_columns")
PROVIDER_EXTRA = ("base_url", "api_key", "max_retries")
SECTIONS: dict[str, st.SearchStrategy[Any]] = {
    "kairox": section(KairoxSection),
    "profiles": named(ProfileConfig),
    "knowledge_bases": named(KnowledgeBaseConfig, KB_EXTRA),
    "providers": named(ProviderConfig, PROVIDER_EXTRA),
    "memory": section(MemorySection),
    "retrieval": section(RetrievalSection, ("dimension",)),
    "compaction": section(CompactionSection),
}


@st.composite
def config_documents(draw: st.DrawFn) -> dict[str, Any]:
    chosen = draw(st.sets(st.sampled_from([*SECTIONS, "memroy", "source"]), max_size=5))
    data = {name: draw(SECTIONS.get(name, VALUES)) for name in sorted(chosen)}
    if "retrieval" in data and isinstance(data["retrieval"], dict) and draw(st.booleans()):
        data["retrieval"]["backend_options"] = {"dimension": draw(VALUES)}
    return data


# --- the invariant ---------------------------------------------------------------------


def load_or_config_error(path: Path) -> KairoxConfig | None:
    """The one allowed failure is ConfigError; a config that loads must also dump, find
    its database and resolve its default profile without anything else escaping."""
    try:
        config = load_config_file(path)
        json.dumps(config.redacted())
        config.database_path()
        config.resolve_profile()
    except ConfigError as exc:
        assert str(exc).startswith(str(path)), str(exc)  # every error names the file
        assert len(str(exc)) < 20_000
        return None
    return config


@FUZZ
@given(text=st.text(max_size=300))
def test_random_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kairox.toml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    load_or_config_error(path)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_random_bytes(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "kairox.toml"
    path.write_bytes(raw)
    load_or_config_error(path)


@pytest.mark.slow
@FUZZ
@given(data=config_documents())
def test_config_shaped_documents_with_wrong_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: dict[str, Any]
) -> None:
    monkeypatch.delenv("KAIROX_DB", raising=False)
    path = tmp_path / "kairox.toml"
    path.write_text(toml_document(data), encoding="utf-8")
    load_or_config_error(path)
    with contextlib.suppress(ConfigError):  # the same data handed over in Python
        parse_config(data, source="<fuzz>")


@pytest.mark.slow
@FUZZ
@given(
    depth=st.integers(min_value=1, max_value=20_000),
    opener=st.sampled_from(["[", "{a=", "[{a=", "{a.b="]),
    where=st.sampled_from(["a", "retrieval.backend_options", "profiles.default.aliases"]),
)
def test_deep_nesting(tmp_path: Path, depth: int, opener: str, where: str) -> None:
    path = tmp_path / "kairox.toml"
    closer = {"[": "]", "{a=": "}", "[{a=": "}]", "{a.b=": "}"}[opener]
    path.write_text(f"{where} = {opener * depth}1{closer * depth}\n", encoding="utf-8")
    load_or_config_error(path)


def test_the_writer_round_trips_through_tomllib() -> None:
    """The fuzz documents are the data the test thinks they are."""
    import tomllib

    data = {"a": {"b": [1, 2.5, "x\0y", {"c": True}], "d": float("inf")}, "e": "~"}
    assert tomllib.loads(toml_document(data)) == data


def test_a_wrong_value_is_named_not_echoed_at_length(tmp_path: Path) -> None:
    """A huge wrong value must not flood the terminal with its repr."""
    path = tmp_path / "kairox.toml"
    path.write_text(toml_document({"profiles": {"default": {"context_window": ["x" * 50] * 400}}}))
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert "profiles.default.context_window" in str(info.value)
    assert len(str(info.value)) < 2_000
