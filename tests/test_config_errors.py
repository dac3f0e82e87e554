"""Hostile or mistaken kairox.toml files: each one is an exit-2 error naming the file and
the key, found by `kairox config check` rather than later by the command that uses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.cli import main
from kairox_core.config import load_config, parse_config
from kairox_core.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(["--config", str(path), "config", "check"])
    return int(info.value.code or 0), capsys.readouterr().err


BAD = [
    pytest.param(
        "[retrieval]\nk = 3\nbackend_options = " + "[" * 5000 + "\n",
        "key 'retrieval.backend_options': line 3",
        "nested too deeply",
        id="deep-nesting",
    ),
    pytest.param(
        "[retrieval]\nbackend_options = {a = " + "[" * 40 + "]" * 40 + "}\n",
        "retrieval.backend_options.a",
        "nested more than 32 levels",
        id="deep-but-readable",
    ),
    pytest.param(
        '[kairox]\ndatabase = "~nosuchuser-kx/x.db"\n',
        "kairox.database",
        "no user 'nosuchuser-kx'",
        id="tilde-unknown-user",
    ),
    pytest.param(
        '[kairox]\ndatabase = "a\\u0000b.db"\n', "kairox.database", "NUL byte", id="nul-database"
    ),
    pytest.param(
        '[knowledge_bases.k]\nkind = "sqlite_fts"\npath = "d\\u0000.db"\n',
        "knowledge_bases.k.path",
        "NUL byte",
        id="nul-kb-path",
    ),
    pytest.param(
        "[retrieval]\nchunk_tokens = 64\nchunk_overlap = 32\n",
        "retrieval.chunk_overlap",
        "below half of chunk_tokens",
        id="overlap-half",
    ),
    pytest.param(
        '[providers.p]\nkind = "openai"\nbase_url = "not a url"\n',
        "providers.p.base_url",
        "http:// or https://",
        id="base-url-no-scheme",
    ),
    pytest.param(
        '[providers.p]\nkind = "openai"\nbase_url = "http://"\n',
        "providers.p.base_url",
        "no host",
        id="base-url-no-host",
    ),
    pytest.param(
        "[retrieval]\nbackend_options = {dimension = 100000000000}\n",
        "retrieval.backend_options.dimension",
        "at most 65536",
        id="absurd-dimension",
    ),
    pytest.param(
        '[retrieval]\nbackend_options = {dimension = "big"}\n',
        "retrieval.backend_options.dimension",
        "whole number",
        id="dimension-not-int",
    ),
]


@pytest.mark.parametrize(("toml", "key", "hint"), BAD)
def test_config_check_exits_2_naming_file_and_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kairox_home: Path,
    toml: str,
    key: str,
    hint: str,
) -> None:
    path = write(tmp_path / "kairox.toml", toml)
    code, err = check(path, capsys)
    assert code == 2, err
    assert "Traceback" not in err and len(err.splitlines()) <= 6, err
    assert str(path) in err
    assert key in err
    assert hint in err


def test_a_bad_database_given_on_the_command_line_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kairox_home: Path
) -> None:
    for db, hint in (("~nosuchuser-kx/k.db", "no user 'nosuchuser-kx'"), ("a\0b.db", "NUL byte")):
        with pytest.raises(SystemExit) as info:
            main(["--db", db, "sessions"])
        err = capsys.readouterr().err
        assert info.value.code == 2 and "Traceback" not in err, err
        assert "--db" in err and hint in err


def test_a_bad_config_path_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], kairox_home: Path
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--config", "~nosuchuser-kx/kairox.toml", "config", "check"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err, err
    assert "--config" in err and "no user 'nosuchuser-kx'" in err


def test_kb_relative_path_resolves_against_the_config_file(tmp_path: Path) -> None:
    conf = write(
        tmp_path / "conf" / "kairox.toml",
        '[knowledge_bases.near]\nkind = "sqlite_fts"\npath = "docs/handbook.db"\n'
        '[knowledge_bases.abs]\nkind = "sqlite_fts"\npath = "/srv/kb.db"\n',
    )
    config = load_config(conf)
    assert config.knowledge_bases["near"].options["path"] == str(
        tmp_path / "conf" / "docs" / "handbook.db"
    )
    assert config.knowledge_bases["abs"].options["path"] == "/srv/kb.db"
    # the same relative path in a config that is not a file stays as written
    assert parse_config(
        {"knowledge_bases": {"k": {"kind": "sqlite_fts", "path": "x.db"}}}
    ).knowledge_bases["k"].options == {"path": "x.db"}


def test_kb_path_with_a_home_directory_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    conf = write(tmp_path / "kairox.toml", '[knowledge_bases.k]\nkind = "x"\npath = "~/kb.db"\n')
    assert load_config(conf).knowledge_bases["k"].options["path"] == str(
        tmp_path / "home" / "kb.db"
    )


def test_kb_without_path_has_no_path_option() -> None:
    config = parse_config({"knowledge_bases": {"k": {"kind": "pinecone", "index": "i"}}})
    assert config.knowledge_bases["k"].options == {"index": "i"}
    assert "path" not in config.redacted()["knowledge_bases"]["k"]


def test_a_single_profile_is_the_default(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "kairox.toml", '[profiles.only]\nmodel = "x"\n'))
    assert config.resolve_profile()[0] == "only"
    assert config.kairox.default_profile == "only"


def test_an_explicit_default_profile_still_has_to_exist(tmp_path: Path) -> None:
    text = '[kairox]\ndefault_profile = "nope"\n[profiles.only]\nmodel = "x"\n'
    with pytest.raises(ConfigError, match="'nope' is not a profile"):
        load_config(write(tmp_path / "kairox.toml", text))


def test_two_profiles_and_no_default_say_how_to_choose(tmp_path: Path) -> None:
    text = "[profiles.a]\n[profiles.b]\n"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "kairox.toml", text))
    assert "default_profile" in str(info.value) and "a, b" in str(info.value)


def test_base_url_and_dimension_that_are_fine_pass() -> None:
    config = parse_config(
        {
            "providers": {"p": {"kind": "openai", "base_url": "http://127.0.0.1:8080/v1"}},
            "retrieval": {"backend_options": {"dimension": 384}, "chunk_tokens": 64},
        }
    )
    assert config.providers["p"].options["base_url"] == "http://127.0.0.1:8080/v1"
    # an unset overlap follows a small chunk_tokens down instead of failing at search
    assert config.retrieval.chunk_overlap == 31
