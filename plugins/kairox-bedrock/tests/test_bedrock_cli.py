"""`kairox kb search` from a kairox.toml, in process, with the Stubber behind the real client."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bedrock_helpers import BEDROCK_KB_ID, REGION

from kairox_bedrock.retriever import BedrockRetriever
from kairox_bedrock.testing import KnowledgeBaseStubber, SimulatedKnowledgeBase
from kairox_core.cli import main
from kairox_core.testing.contracts import CONTRACT_DOCS

pytestmark = pytest.mark.usefixtures("aws_env", "kairox_home")


@pytest.fixture
def stub_clients(monkeypatch: pytest.MonkeyPatch) -> list[KnowledgeBaseStubber]:
    """Every client the plugin makes gets a KnowledgeBaseStubber over the contract corpus."""
    stubbers: list[KnowledgeBaseStubber] = []
    real: Callable[[BedrockRetriever], Any] = BedrockRetriever._make_client

    def make(self: BedrockRetriever) -> Any:
        client = real(self)
        stubber = KnowledgeBaseStubber(client, SimulatedKnowledgeBase(CONTRACT_DOCS, BEDROCK_KB_ID))
        stubber.activate()
        stubbers.append(stubber)
        return client

    monkeypatch.setattr(BedrockRetriever, "_make_client", make)
    return stubbers


def run_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    (tmp_path / "kairox.toml").write_text(f"""
[knowledge_bases.handbook]
kind = "bedrock"
knowledge_base_id = "{BEDROCK_KB_ID}"
region = "{REGION}"
""")
    code = 0
    try:
        main(["--config", str(tmp_path / "kairox.toml"), "--db", str(tmp_path / "k.db"), *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_kb_search_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stub_clients: list[KnowledgeBaseStubber]
) -> None:
    code, out, err = run_cli(
        tmp_path, capsys, "kb", "search", "handbook", "magma lava volcano", "--k", "2", "--json"
    )
    assert code == 0, err
    hits = json.loads(out)
    assert hits[0]["doc_id"] == "doc-volcano" and hits[0]["source"] == "handbook"
    request = stub_clients[0].kb.requests[0]
    assert request["retrievalConfiguration"]["vectorSearchConfiguration"]["numberOfResults"] == 4


def test_kb_search_access_denied_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = BedrockRetriever._make_client

    def denied(self: BedrockRetriever) -> Any:
        client = real(self)
        stubber = KnowledgeBaseStubber(client, SimulatedKnowledgeBase((), BEDROCK_KB_ID))
        stubber.add_client_error(
            "retrieve",
            "AccessDeniedException",
            "User is not authorized to perform: bedrock:Retrieve",
            403,
        )
        stubber.activate()
        return client

    monkeypatch.setattr(BedrockRetriever, "_make_client", denied)
    code, _, err = run_cli(tmp_path, capsys, "kb", "search", "handbook", "anything")
    assert code != 0 and "Traceback" not in err
    assert err.startswith("kairox: error: knowledge base 'handbook': access denied")
