"""One deployment of every retrieval kind, for the cross-plugin tests.

The plugins' own test doubles are reused as they are, from the ``testing`` module each
plugin ships: the Pinecone data plane (``kairox_pinecone.testing``), the Weaviate REST +
gRPC server (``kairox_weaviate.testing``) and the computing botocore Stubber
(``kairox_bedrock.testing``). The
Stubber goes onto the client the Bedrock plugin creates (``BedrockRetriever._make_client``,
its seam), so ``kairox`` commands run in this process (``run_kairox``) reach a stubbed
Bedrock; the HTTP kinds also answer a ``kairox`` subprocess.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from corpus import (
    BEDROCK_DOCS,
    FAQ_FILES,
    NOTES,
    PINECONE_DOCS,
    WEAVIATE_DOCS,
)

from kairox_bedrock.testing import KnowledgeBaseStubber, SimulatedKnowledgeBase
from kairox_core.plugins import get_plugins, reset_plugins
from kairox_pinecone.testing import FakePinecone, bag_of_words
from kairox_weaviate.testing import FakeObject, FakeWeaviate

PINECONE_KEY = "pc-integration-key"
WEAVIATE_KEY = "wv-integration-key"
BEDROCK_KB_ID = "KAIROXINT1"
AWS_VARS = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
KAIROX_VARS = (
    "KAIROX_CONFIG",
    "KAIROX_DB",
    "KAIROX_LOAD_PLUGINS",
    "KAIROX_DISABLE_PLUGINS",
    "KAIROX_STRICT_PLUGINS",
    "KAIROX_TRACE_PLUGINS",
)

KAIROX_TOML = """\
[kairox]
default_profile = "default"

[profiles.default]
[profiles.research]
[profiles.support]
aliases = ["helpdesk"]

[retrieval]
workspace_index = false

[knowledge_bases.faq]
kind = "sqlite_fts"
path = "{root}/faq.db"
profiles = ["helpdesk"]

[knowledge_bases.handbook]
kind = "bedrock"
knowledge_base_id = "{bedrock_kb}"
region = "eu-west-1"
profiles = ["support"]

[knowledge_bases.notes]
kind = "tantivy"
path = "{root}/notes-index"
source_paths = ["{root}/notes.jsonl"]
profiles = ["research"]

[knowledge_bases.papers]
kind = "pinecone"
host = "{pinecone}"
api_key = "$env:KX_INT_PINECONE_KEY"
namespace = "papers"
profiles = ["research"]

[knowledge_bases.articles]
kind = "weaviate"
url = "{weaviate}"
grpc_port = {grpc_port}
collection = "Article"
api_key = "$env:KX_INT_WEAVIATE_KEY"
id_property = "slug"
alpha = 0.5
profiles = ["research"]
"""

# which knowledge bases each profile (or alias) must query
SEES = {
    "research": {"notes", "papers", "articles"},
    "support": {"faq", "handbook"},
    "helpdesk": {"faq", "handbook"},
    "default": set(),
}
KINDS = {
    "faq": "sqlite_fts",
    "handbook": "bedrock",
    "notes": "tantivy",
    "papers": "pinecone",
    "articles": "weaviate",
}


@dataclass
class Deployment:
    """The running services, the config that names them and what each was asked."""

    root: Path
    config: Path
    pinecone: FakePinecone
    weaviate: FakeWeaviate
    env: dict[str, str]
    bedrock: list[KnowledgeBaseStubber] = field(default_factory=list)

    def query_counts(self) -> dict[str, int]:
        """Search calls each remote service has seen so far."""
        return {
            "papers": sum(1 for path, _, _ in self.pinecone.requests if path == "/query"),
            "articles": sum(1 for method, _, _ in self.weaviate.grpc_log if method == "Search"),
            "handbook": sum(len(s.kb.requests) for s in self.bedrock),
        }


def run_kairox(*args: str) -> tuple[int, str, str]:
    """``kairox ARGS`` through its real entry point, in this process: (exit code, out, err)."""
    from kairox_core.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def _seed_pinecone(server: FakePinecone) -> None:
    """Upsert with the real SDK, vectors made by the ``hashing`` backend the KB queries with."""
    from pinecone import Pinecone

    backend = get_plugins().get("embedding_backends", "hashing").factory()
    index = Pinecone(api_key=PINECONE_KEY).Index(host=server.url)
    try:
        index.upsert(
            vectors=[
                {
                    "id": d.id,
                    "values": backend.embed_query(d.title + " " + d.text),
                    "metadata": {"text": d.text, "title": d.title, **d.metadata},
                }
                for d in PINECONE_DOCS
            ],
            namespace="papers",
        )
    finally:
        index.close()


def _seed_weaviate(server: FakeWeaviate) -> None:
    server.add_collection(
        "Article",
        [
            FakeObject(
                {"slug": d.id, "title": d.title, "text": d.text},
                {"default": bag_of_words(d.title + " " + d.text)},
            )
            for d in WEAVIATE_DOCS
        ],
        vectorizer=bag_of_words,
    )


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """Every service up, seeded and named in one kairox.toml; the CLI isolated from the user."""
    root = tmp_path_factory.mktemp("deployment")
    env = {
        "KX_INT_PINECONE_KEY": PINECONE_KEY,
        "KX_INT_WEAVIATE_KEY": WEAVIATE_KEY,
        "AWS_ACCESS_KEY_ID": "AKIAKAIROXINTEGRATE0",
        "AWS_SECRET_ACCESS_KEY": "kairox/integration/not/a/real/secret/000",
        "AWS_CONFIG_FILE": str(root / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(root / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "XDG_DATA_HOME": str(root / "xdg-data"),
        "XDG_CACHE_HOME": str(root / "xdg-cache"),
    }
    with pytest.MonkeyPatch.context() as mp:
        for var in (*AWS_VARS, *KAIROX_VARS):
            mp.delenv(var, raising=False)
        for var, value in env.items():
            mp.setenv(var, value)
        mp.chdir(root)
        reset_plugins()
        pinecone = FakePinecone(PINECONE_KEY)
        pinecone.start()
        weaviate = FakeWeaviate(api_key=WEAVIATE_KEY).start()
        try:
            _seed_pinecone(pinecone)
            _seed_weaviate(weaviate)
            (root / "notes.jsonl").write_text("".join(n + "\n" for n in NOTES))
            (root / "faq").mkdir()
            for name, text in FAQ_FILES.items():
                (root / "faq" / name).write_text(text)
            config = root / "kairox.toml"
            config.write_text(
                KAIROX_TOML.format(
                    root=root.as_posix(),
                    bedrock_kb=BEDROCK_KB_ID,
                    pinecone=pinecone.url,
                    weaviate=weaviate.url,
                    grpc_port=weaviate.grpc_port,
                )
            )
            dep = Deployment(root, config, pinecone, weaviate, env)
            _stub_bedrock(mp, dep)
            for kb, path in (("faq", root / "faq"), ("notes", root / "notes.jsonl")):
                code, _, err = run_kairox(
                    "--config",
                    str(config),
                    "--db",
                    str(root / "k.db"),
                    "kb",
                    "index",
                    kb,
                    str(path),
                )
                assert code == 0, err
            yield dep
        finally:
            pinecone.stop()
            weaviate.stop()
            reset_plugins()


def _stub_bedrock(mp: pytest.MonkeyPatch, dep: Deployment) -> None:
    """Every client the Bedrock plugin makes answers from the simulated knowledge base."""
    from kairox_bedrock.retriever import BedrockRetriever

    real: Callable[[BedrockRetriever], Any] = BedrockRetriever._make_client

    def make(self: BedrockRetriever) -> Any:
        client = real(self)
        stubber = KnowledgeBaseStubber(client, SimulatedKnowledgeBase(BEDROCK_DOCS, BEDROCK_KB_ID))
        stubber.activate()
        dep.bedrock.append(stubber)
        return client

    mp.setattr(BedrockRetriever, "_make_client", make)


@pytest.fixture
def kairox_cli(deployment: Deployment) -> Callable[..., tuple[int, str, str]]:
    """``kairox --config <deployment> --db <tmp> ARGS`` in this process."""

    def run(*args: str) -> tuple[int, str, str]:
        return run_kairox(
            "--config", str(deployment.config), "--db", str(deployment.root / "k.db"), *args
        )

    return run
