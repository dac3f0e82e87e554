"""Request shapes, result mapping and every error path through botocore's Stubber; throttling
retries (botocore's own) against a fake HTTP endpoint."""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from bedrock_helpers import BEDROCK_KB_ID, KB_NAME, REGION, build, stubbed
from botocore.stub import Stubber
from botocore.validate import validate_parameters
from conftest import closed_port
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_bedrock import mapping
from kairox_bedrock.options import BedrockOptions
from kairox_bedrock.retriever import BedrockRetriever
from kairox_bedrock.testing import FakeBedrockServer, SimulatedKnowledgeBase
from kairox_core.errors import ConfigError
from kairox_core.retrieval.base import (
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
)
from kairox_core.testing.contracts import CONTRACT_DOCS

pytestmark = pytest.mark.usefixtures("aws_env", "kairox_plugins")


def run(
    retriever: BedrockRetriever, query: str = "q", k: int = 3, filters: dict[str, Any] | None = None
) -> Any:
    async def go() -> Any:
        try:
            return await retriever.retrieve(query, k, filters)
        finally:
            await retriever.close()

    return asyncio.run(go())


def plain_stubber(retriever: BedrockRetriever) -> Stubber:
    stubber = Stubber(retriever.client)
    stubber.activate()
    return stubber


# --- requests ----------------------------------------------------------------------


def test_request_shape_with_filters_matches_the_service_model() -> None:
    retriever = build(search_type="hybrid")
    stubber = plain_stubber(retriever)
    expected = {
        "knowledgeBaseId": BEDROCK_KB_ID,
        "retrievalQuery": {"text": "refund policy"},
        "retrievalConfiguration": {
            "vectorSearchConfiguration": {
                "numberOfResults": 6,
                "overrideSearchType": "HYBRID",
                "filter": {
                    "andAll": [
                        {"in": {"key": "team", "value": ["ops", "sales"]}},
                        {"greaterThan": {"key": "year", "value": 2020}},
                    ]
                },
            }
        },
    }
    stubber.add_response("retrieve", {"retrievalResults": []}, expected)
    hits = run(
        retriever, "refund policy", 3, {"year": {"greaterThan": 2020}, "team": ["ops", "sales"]}
    )
    assert hits == []
    stubber.assert_no_pending_responses()


def test_single_filter_is_a_plain_equals_and_k_is_capped_at_100() -> None:
    retriever = build(overfetch=1)
    stubber = plain_stubber(retriever)
    stubber.add_response(
        "retrieve",
        {"retrievalResults": []},
        {
            "knowledgeBaseId": BEDROCK_KB_ID,
            "retrievalQuery": {"text": "x"},
            "retrievalConfiguration": {
                "vectorSearchConfiguration": {
                    "numberOfResults": 100,
                    "filter": {"equals": {"key": "lang", "value": "en"}},
                }
            },
        },
    )
    assert run(retriever, "x", 500, {"lang": "en"}) == []
    stubber.assert_no_pending_responses()


@functools.cache
def retrieve_input_shape() -> Any:
    import botocore.session

    model = botocore.session.get_session().get_service_model("bedrock-agent-runtime")
    return model.operation_model("Retrieve").input_shape


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=20),
        st.one_of(
            st.text(max_size=10),
            st.integers(-(10**6), 10**6),
            st.booleans(),
            st.lists(st.text(max_size=5), min_size=1, max_size=4),
            st.fixed_dictionaries({"greaterThan": st.integers()}),
            st.fixed_dictionaries({"notIn": st.lists(st.integers(), min_size=1, max_size=3)}),
        ),
        max_size=5,
    )
)
def test_every_kairox_filter_becomes_a_valid_bedrock_request(filters: dict[str, Any]) -> None:
    request = mapping.build_request(BEDROCK_KB_ID, "query", 5, filters)
    validate_parameters(request, retrieve_input_shape())
    flt = request["retrievalConfiguration"]["vectorSearchConfiguration"].get("filter")
    if not filters:
        assert flt is None
    elif len(filters) == 1:
        assert len(flt) == 1 and "andAll" not in flt
    else:
        assert len(flt["andAll"]) == len(filters)


@pytest.mark.parametrize(
    "filters, needle",
    [
        ({"team": []}, "empty list"),
        ({"team": {"near": 3}}, "unknown Bedrock filter operator 'near'"),
        ({"team": None}, "cannot compare"),
        ({"team": {"in": "ops"}}, "needs a list"),
    ],
)
def test_filters_bedrock_cannot_apply_fail_before_any_call(
    filters: dict[str, Any], needle: str
) -> None:
    retriever = build()
    plain_stubber(retriever)  # nothing queued: any call would fail the test differently
    with pytest.raises(RetrieverError) as info:
        run(retriever, "q", 3, filters)
    assert needle in str(info.value) and KB_NAME in str(info.value)


# --- results -----------------------------------------------------------------------

RESULTS: list[dict[str, Any]] = [
    {
        "content": {"type": "TEXT", "text": "Refunds are paid within 14 days."},
        "location": {"type": "S3", "s3Location": {"uri": "s3://handbook/refunds.pdf"}},
        "score": 0.71,
        "metadata": {
            "x-amz-bedrock-kb-source-uri": "s3://handbook/refunds.pdf",
            "x-amz-bedrock-kb-chunk-id": "c-2",
            "team": "sales",
        },
    },
    {
        "content": {"type": "TEXT", "text": "Our refund form lives online."},
        "location": {"type": "WEB", "webLocation": {"url": "https://example.com/refund"}},
        "score": 0.64,
        "metadata": {"x-amz-bedrock-kb-chunk-id": "c-9"},
    },
    {
        "content": {"type": "TEXT", "text": "Refund requests older than a year are refused."},
        "location": {"type": "S3", "s3Location": {"uri": "s3://handbook/refunds.pdf"}},
        "score": 0.93,
        "metadata": {
            "x-amz-bedrock-kb-source-uri": "s3://handbook/refunds.pdf",
            "x-amz-bedrock-kb-chunk-id": "c-7",
        },
    },
    {
        "content": {"type": "IMAGE", "byteContent": "aGVsbG8="},
        "location": {"type": "S3", "s3Location": {"uri": "s3://handbook/chart.png"}},
        "score": 0.99,
    },
    {
        "content": {
            "type": "ROW",
            "row": [
                {"columnName": "policy", "columnValue": "refund", "type": "STRING"},
                {"columnName": "days", "columnValue": "14", "type": "LONG"},
            ],
        },
        "location": {"type": "SQL", "sqlLocation": {"query": "SELECT * FROM policies"}},
        "score": 0.5,
    },
    {
        "content": {"type": "TEXT", "text": "Confluence page on refunds."},
        "location": {
            "type": "CONFLUENCE",
            "confluenceLocation": {"url": "https://wiki.example.com/refunds"},
        },
        "score": 0.4,
    },
    {
        "content": {"type": "TEXT", "text": "A custom document."},
        "documentId": "doc-77",
        "score": 0.3,
    },
]


def test_results_map_to_hits_best_chunk_per_document() -> None:
    retriever = build()
    stubber = plain_stubber(retriever)
    stubber.add_response("retrieve", {"retrievalResults": RESULTS})
    hits = run(retriever, "refund", 10)
    assert [h.doc_id for h in hits] == [
        "s3://handbook/refunds.pdf",
        "https://example.com/refund",
        "SELECT * FROM policies",
        "https://wiki.example.com/refunds",
        "doc-77",
    ]
    best = hits[0]
    assert best.text == "Refund requests older than a year are refused."
    assert best.score == pytest.approx(0.93)
    assert best.chunk_id == "c-7" and best.source == KB_NAME
    assert best.metadata["location_type"] == "S3"
    assert best.metadata["bedrock_knowledge_base_id"] == BEDROCK_KB_ID
    assert hits[2].text == "policy: refund\ndays: 14"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(run_limited(3)) == 3


def run_limited(k: int) -> Any:
    retriever = build()
    stubber = plain_stubber(retriever)
    stubber.add_response("retrieve", {"retrievalResults": RESULTS})
    return run(retriever, "refund", k)


# --- throttling --------------------------------------------------------------------


@pytest.fixture
def fake_bedrock() -> Iterator[FakeBedrockServer]:
    """A real HTTP endpoint: a Stubber answers before botocore's retry handler runs."""
    with FakeBedrockServer(SimulatedKnowledgeBase(CONTRACT_DOCS, BEDROCK_KB_ID)) as server:
        yield server


def test_throttling_is_retried_by_botocore_then_succeeds(fake_bedrock: FakeBedrockServer) -> None:
    fake_bedrock.fail("ThrottlingException", 429, times=2)
    retriever = build(endpoint_url=fake_bedrock.endpoint_url)
    hits = run(retriever, "magma lava volcano", 2)
    assert hits[0].doc_id == "doc-volcano"
    assert retriever.attempts == 3 and fake_bedrock.calls == 3
    assert len(fake_bedrock.kb.requests) == 1  # the third call reached the knowledge base


def test_persistent_throttling_gives_up_after_max_attempts(
    fake_bedrock: FakeBedrockServer,
) -> None:
    fake_bedrock.fail("ThrottlingException", 429, times=5)
    retriever = build(endpoint_url=fake_bedrock.endpoint_url, max_attempts=2)
    with pytest.raises(RetrieverError) as info:
        run(retriever)
    assert type(info.value) is RetrieverError
    message = str(info.value)
    assert KB_NAME in message and BEDROCK_KB_ID in message and "ThrottlingException" in message
    assert "after 2 attempt(s)" in message and fake_bedrock.calls == 2


def test_throttling_retries_never_outlive_the_timeout(fake_bedrock: FakeBedrockServer) -> None:
    fake_bedrock.fail("ThrottlingException", 429, times=50)
    retriever = build(endpoint_url=fake_bedrock.endpoint_url, max_attempts=50, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(RetrieverTimeout) as info:
        run(retriever)  # asyncio.run: the still-retrying daemon thread is not joined
    assert time.monotonic() - started < 1.5
    assert "did not answer within 1s" in str(info.value)


def test_stubbed_errors_are_not_retried() -> None:
    retriever, stubber = stubbed(CONTRACT_DOCS)
    stubber.add_client_error("retrieve", "ThrottlingException", "Rate exceeded", 429)
    with pytest.raises(RetrieverError, match="after 1 attempt"):
        run(retriever)


# --- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, status, error_type, needle",
    [
        ("AccessDeniedException", 403, RetrieverAuthError, "bedrock:Retrieve"),
        ("ExpiredTokenException", 403, RetrieverAuthError, "expired"),
        ("UnrecognizedClientException", 403, RetrieverAuthError, "refused"),
        ("ResourceNotFoundException", 404, RetrieverConfigError, "not found"),
        ("InternalServerException", 500, RetrieverUnavailable, "AWS's side"),
        ("ValidationException", 400, RetrieverError, "rejected"),
    ],
)
def test_service_errors_are_clear(
    code: str, status: int, error_type: type[RetrieverError], needle: str
) -> None:
    retriever, stubber = stubbed(())
    stubber.add_client_error("retrieve", code, f"{code} from AWS", status)
    with pytest.raises(RetrieverError) as info:
        run(retriever)
    assert type(info.value) is error_type
    message = str(info.value)
    assert KB_NAME in message and needle in message and code in message
    if code == "ResourceNotFoundException":
        assert BEDROCK_KB_ID in message and REGION in message


def test_no_credentials_is_an_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    retriever = build(endpoint_url=f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(RetrieverAuthError) as info:
        run(retriever)
    assert KB_NAME in str(info.value) and "credentials" in str(info.value)


def test_unknown_profile_is_a_config_error() -> None:
    retriever = build(profile="kairox-no-such-profile")
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever)
    assert "kairox-no-such-profile" in str(info.value) and KB_NAME in str(info.value)


def test_unreachable_endpoint_does_not_wait_for_the_timeout() -> None:
    retriever = build(endpoint_url=f"http://127.0.0.1:{closed_port()}", timeout=30)
    started = time.monotonic()
    with pytest.raises(RetrieverUnavailable) as info:
        run(retriever)
    assert time.monotonic() - started < 5
    assert "cannot reach" in str(info.value)


def test_slow_endpoint_times_out_within_the_timeout(silent_server: int) -> None:
    retriever = build(endpoint_url=f"http://127.0.0.1:{silent_server}", timeout=0.4)
    started = time.monotonic()
    with pytest.raises(RetrieverTimeout) as info:
        run(retriever)
    assert time.monotonic() - started < 2.0
    assert "0.4s" in str(info.value)


# --- configuration -----------------------------------------------------------------


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"knowledge_base_id": ""}, "knowledge_base_id': '' is not a Bedrock knowledge base id"),
        ({"knowledge_base_id": "my-kb"}, "not a Bedrock knowledge base id"),
        ({"search_type": "FUZZY"}, "search_type"),
        ({"regoin": "eu-west-1"}, "did you mean 'region'?"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"overfetch": "lots"}, "overfetch"),
    ],
)
def test_bad_configuration_names_the_knowledge_base(options: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(**options)
    assert needle in str(info.value) and f"knowledge_bases.{KB_NAME}" in str(info.value)


def test_arn_is_accepted_as_the_id() -> None:
    arn = f"arn:aws:bedrock:{REGION}:123456789012:knowledge-base/{BEDROCK_KB_ID}"
    retriever = build(knowledge_base_id=arn)
    stubber = plain_stubber(retriever)
    stubber.add_response(
        "retrieve",
        {"retrievalResults": []},
        {
            "knowledgeBaseId": arn,
            "retrievalQuery": {"text": "q"},
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 6}},
        },
    )
    assert run(retriever) == []


def test_empty_query_and_zero_k_make_no_call() -> None:
    retriever = build()
    plain_stubber(retriever)
    assert run(retriever, "   ", 3) == []
    assert run(build(), "q", 0) == []


def test_plugin_registers_without_importing_boto3() -> None:
    code = (
        "import sys\n"
        "from kairox_core.plugins import get_plugins\n"
        "assert 'bedrock' in get_plugins().names('retrievers')\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_region_anywhere_is_a_config_error() -> None:
    retriever = BedrockRetriever(KB_NAME, BedrockOptions(knowledge_base_id=BEDROCK_KB_ID))
    with pytest.raises(RetrieverConfigError) as info:
        run(retriever)
    assert "no AWS region" in str(info.value) and KB_NAME in str(info.value)
