"""Configuration: discovery, validation, secrets, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.cli import main
from kairox_core.config import (
    KairoxConfig,
    find_config_path,
    load_config,
    parse_config,
    user_config_path,
)
from kairox_core.errors import ConfigError
from kairox_core.plugins import reset_plugins


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_embedded_default_works(kairox_home: Path) -> None:
    config = load_config()
    assert config.source is None
    name, profile = config.resolve_profile()
    assert name == "default" and profile.budget == profile.context_window - profile.reserve
    assert config.database_path().name == "kairox.db"
    assert str(kairox_home) in str(config.database_path())  # under the platform data dir


def test_discovery_order(
    kairox_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = write(user_config_path(), "[kairox]\ndefault_workspace = 'from-user-dir'\n")
    assert find_config_path() == user
    cwd = write(tmp_path / "kairox.toml", "[kairox]\ndefault_workspace = 'from-cwd'\n")
    assert find_config_path() == cwd
    env = write(tmp_path / "env.toml", "[kairox]\ndefault_workspace = 'from-env'\n")
    monkeypatch.setenv("KAIROX_CONFIG", str(env))
    assert load_config().kairox.default_workspace == "from-env"
    explicit = write(tmp_path / "x.toml", "[kairox]\ndefault_workspace = 'explicit'\n")
    assert load_config(explicit).kairox.default_workspace == "explicit"


FULL = """
[kairox]
default_profile = "gpt"

[profiles.gpt]
model = "gpt-4o"
context_window = 128000
reserve = 4096
compaction_trigger = 0.8
instructions = "Be brief."
aliases = ["fast", "4o"]

[profiles.local]
model = "smollm2"
context_window = 8192
reserve = 512

[knowledge_bases.docs]
kind = "sqlite_fts"
profiles = ["fast"]
path = "docs.db"
table = "pages"

[knowledge_bases.everyone]
kind = "sqlite_fts"
path = "all.db"

[knowledge_bases.off]
kind = "sqlite_fts"
enabled = false
path = "off.db"

[providers.openai]
kind = "openai"
model = "gpt-4o"
api_key = "$env:OPENAI_API_KEY"

[compaction]
strategy = "extractive"
provider = "openai"
"""


def test_full_config_parses_into_typed_objects(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "kairox.toml", FULL))
    assert config.profiles["gpt"].compaction_trigger == 0.8
    assert config.profiles["local"].compaction_trigger == 0.7  # default
    assert config.resolve_profile("4o")[0] == "gpt"
    docs = config.knowledge_bases["docs"]
    # a relative path is relative to the config file
    assert docs.id == "docs"
    assert docs.options == {"path": str(tmp_path / "docs.db"), "table": "pages"}
    assert [kb.id for kb in config.knowledge_bases_for("gpt")] == ["docs", "everyone"]
    assert [kb.id for kb in config.knowledge_bases_for("local")] == ["everyone"]


def test_env_secrets_resolve_at_use_and_never_print(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(write(tmp_path / "kairox.toml", FULL))
    provider = config.providers["openai"]
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        provider.secret("api_key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-value")
    secret = provider.secret("api_key")
    assert secret is not None and secret.get_secret_value() == "sk-very-secret-value"
    assert "sk-very-secret-value" not in repr(secret) + str(secret)
    assert "sk-very-secret-value" not in str(config.redacted())


def test_literal_secret_is_redacted_in_dumps_and_errors(tmp_path: Path) -> None:
    text = '[providers.p]\nkind = "openai"\napi_key = "sk-literal-123"\n'
    config = load_config(write(tmp_path / "kairox.toml", text))
    assert "sk-literal-123" not in str(config.redacted())
    bad = '[providers.p]\nkind = 5\napi_key = "sk-literal-123"\n'
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "bad.toml", bad))
    assert "sk-literal-123" not in str(info.value)


@pytest.mark.parametrize(
    ("toml", "key", "hint"),
    [
        (
            "[profiles.default]\ncontext_windw = 8000\n",
            "profiles.default.context_windw",
            "did you mean 'context_window'",
        ),
        (
            "[profiles.default]\ncontext_window = 128000\nreserve = 200000\n",
            "profiles.default.reserve",
            "must be smaller than context_window",
        ),
        ("[memroy]\n", "memroy", "did you mean 'memory'"),
        (
            "[profiles.default]\ncontext_window = 'big'\n",
            "profiles.default.context_window",
            "valid integer",
        ),
        (
            "[profiles.a]\naliases = ['b']\n[profiles.b]\n[kairox]\ndefault_profile = 'a'\n",
            "",
            "clashes with profile",
        ),
        (
            "[knowledge_bases.k]\nkind = 'sqlite_fts'\nprofiles = ['nope']\n",
            "",
            "not a profile or alias",
        ),
        ("[knowledge_bases.k]\nenabled = true\n", "knowledge_bases.k.kind", "missing"),
        ("[profiles.default\n", "", "not valid TOML"),
    ],
)
def test_bad_input_names_file_key_and_fix(tmp_path: Path, toml: str, key: str, hint: str) -> None:
    path = write(tmp_path / "kairox.toml", toml)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert key in message
    assert hint in message


def test_cli_exits_2_with_one_screen_error_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kairox_home: Path
) -> None:
    path = write(
        tmp_path / "bad.toml", "[profiles.default]\ncontext_window = 128000\nreserve = 200000\n"
    )
    code, _out, err = run_main(["--config", str(path), "config", "check"], capsys)
    assert code == 2
    assert str(path) in err and "profiles.default.reserve" in err
    assert "Traceback" not in err and len(err.splitlines()) <= 10


def test_a_missing_env_secret_names_the_file_and_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kairox_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Secrets resolve at use, long after the file was read: the error still says where."""
    import io

    monkeypatch.delenv("KX_TEST_NO_SUCH_KEY", raising=False)
    path = write(
        tmp_path / "kairox.toml",
        '[profiles.default]\nmodel = "gpt-4o"\n'
        'provider = "remote"\n[providers.remote]\nkind = "openai"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key = "$env:KX_TEST_NO_SUCH_KEY"\n',
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    code, _out, err = run_main(
        ["--config", str(path), "--db", str(tmp_path / "k.db"), "chat", "--plain"], capsys
    )
    assert code == 2 and "Traceback" not in err
    assert (
        f"{path}, key 'providers.remote.api_key': environment variable "
        "KX_TEST_NO_SUCH_KEY is not set" in err
    )
    assert "fix: export KX_TEST_NO_SUCH_KEY=" in err


def test_missing_kind_names_the_distribution(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kairox_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "")  # as if kairox-pinecone were not installed
    reset_plugins()
    path = write(tmp_path / "k.toml", "[knowledge_bases.vec]\nkind = 'pinecone'\n")
    code, _, err = run_main(["--config", str(path), "config", "check"], capsys)
    assert code == 2
    assert "knowledge_bases.vec.kind" in err and "pip install kairox-pinecone" in err


def test_config_show_redacts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kairox_home: Path
) -> None:
    path = write(tmp_path / "k.toml", '[providers.p]\nkind = "openai"\napi_key = "sk-lit-9"\n')
    code, out, _ = run_main(["--config", str(path), "config", "show", "--json"], capsys)
    assert code == 0 and "sk-lit-9" not in out and '"***"' in out


def test_database_path_relative_to_config(tmp_path: Path, kairox_home: Path) -> None:
    config = load_config(write(tmp_path / "conf" / "kairox.toml", "[kairox]\ndatabase='k.db'\n"))
    assert config.database_path() == tmp_path / "conf" / "k.db"


@given(st.integers(min_value=1, max_value=10**7), st.integers(min_value=0, max_value=10**7))
def test_reserve_must_be_below_window(window: int, reserve: int) -> None:
    data = {"profiles": {"default": {"context_window": window, "reserve": reserve}}}
    if reserve < window:
        assert parse_config(data).profiles["default"].budget == window - reserve
    else:
        with pytest.raises(ConfigError, match="reserve"):
            parse_config(data)


def test_default_config_is_frozen() -> None:
    config = KairoxConfig()
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError
        config.kairox.default_profile = "x"  # type: ignore[misc]


def test_kb_list_reports_a_missing_kind_instead_of_failing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kairox_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "")
    path = write(tmp_path / "k.toml", "[knowledge_bases.vec]\nkind = 'tantivy'\n")
    code, out, _ = run_main(["--config", str(path), "kb", "list", "--json"], capsys)
    assert code == 0
    assert "missing" in out and "pip install kairox-tantivy" in out
    code, _, err = run_main(["--config", str(path), "config", "check"], capsys)
    assert code == 2 and "pip install kairox-tantivy" in err


def test_unknown_profile_suggests_and_lists_aliases(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "kairox.toml", FULL))
    with pytest.raises(ConfigError) as info:
        config.resolve_profile("locl")
    message = str(info.value)
    assert "did you mean 'local'" in message and "fast" in message and "4o" in message
