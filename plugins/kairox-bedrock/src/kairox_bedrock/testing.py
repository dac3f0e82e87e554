"""Test doubles for Bedrock: a computing botocore ``Stubber`` and a fake HTTP endpoint.

Shipped in the package (``kairox_bedrock.testing``) so the plugin's tests, the
cross-plugin integration tests and a user's own tests share one copy.

A botocore ``Stubber`` whose ``Retrieve`` answers are computed from a small corpus.

The plain Stubber answers from a queue filled in advance, which cannot know the query
the contract tests will send. ``KnowledgeBaseStubber`` fills the queue when the call
arrives: it computes the response for the call's own parameters (ranking the corpus,
applying the Bedrock filter, honouring numberOfResults) and queues it through the
Stubber's ``add_response``, so every response is still validated against AWS's
service model, and every request against the input shape by botocore. Errors queued
with ``add_client_error`` beforehand are served first, as with any Stubber.

A Stubber answers before botocore's retry handler runs, so retries are tested against
``FakeBedrockServer``: a real HTTP server speaking the ``bedrock-agent-runtime``
REST-JSON wire protocol (``POST /knowledgebases/{id}/retrieve``), answered by the same
``SimulatedKnowledgeBase``, with scripted AWS errors (``x-amzn-ErrorType``) first.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from botocore.stub import Stubber

from kairox_core.testing.contracts import ContractDoc
from kairox_core.testing.http_server import QuietHTTPServer

_WORD = re.compile(r"[a-z0-9]+")
DATA_SOURCE_ID = "DSKAIROX01"


def _terms(text: str) -> Counter[str]:
    return Counter(w for w in _WORD.findall(text.lower()) if len(w) > 2)


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    dot = sum(v * b[t] for t, v in a.items())
    if not dot:
        return 0.0
    return dot / math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))


def matches(flt: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Evaluate a Bedrock ``RetrievalFilter`` against one document's metadata."""
    ((op, arg),) = flt.items()  # the model allows exactly one member per filter
    if op == "andAll":
        return all(matches(f, metadata) for f in arg)
    if op == "orAll":
        return any(matches(f, metadata) for f in arg)
    key, value = arg["key"], arg["value"]
    have = metadata.get(key)
    checks: dict[str, Callable[[], bool]] = {
        "equals": lambda: have == value,
        "notEquals": lambda: have != value,
        "in": lambda: have in value,
        "notIn": lambda: have not in value,
        "greaterThan": lambda: have is not None and have > value,
        "greaterThanOrEquals": lambda: have is not None and have >= value,
        "lessThan": lambda: have is not None and have < value,
        "lessThanOrEquals": lambda: have is not None and have <= value,
        "startsWith": lambda: isinstance(have, str) and have.startswith(value),
        "stringContains": lambda: isinstance(have, str) and value in have,
        "listContains": lambda: isinstance(have, list) and value in have,
    }
    if op not in checks:
        raise AssertionError(f"unexpected filter operator {op!r}")
    return bool(checks[op]())


class SimulatedKnowledgeBase:
    """Ranks every document for any query, as a vector knowledge base does."""

    def __init__(self, docs: Sequence[ContractDoc], knowledge_base_id: str) -> None:
        self.docs = list(docs)
        self.knowledge_base_id = knowledge_base_id
        self.requests: list[dict[str, Any]] = []

    def respond(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self.requests.append(dict(params))
        assert params["knowledgeBaseId"] == self.knowledge_base_id, params
        query = _terms(params["retrievalQuery"]["text"])
        vector = params.get("retrievalConfiguration", {}).get("vectorSearchConfiguration", {})
        limit = vector.get("numberOfResults", 5)
        flt = vector.get("filter")
        scored = []
        for doc in self.docs:
            if flt is not None and not matches(flt, doc.metadata):
                continue
            score = _cosine(query, _terms(doc.title + " " + doc.text))
            scored.append((score, doc))
        scored.sort(key=lambda p: (-p[0], p[1].id))
        results = []
        for rank, (score, doc) in enumerate(scored[:limit]):
            results.append(
                {
                    "content": {"type": "TEXT", "text": doc.text},
                    "location": {"type": "CUSTOM", "customDocumentLocation": {"id": doc.id}},
                    "score": round(score, 6),
                    "metadata": {
                        **doc.metadata,
                        "title": doc.title,
                        "x-amz-bedrock-kb-source-uri": doc.id,
                        "x-amz-bedrock-kb-chunk-id": f"chunk-{rank}-{doc.id}",
                        "x-amz-bedrock-kb-data-source-id": DATA_SOURCE_ID,
                    },
                }
            )
        return {"retrievalResults": results}


class KnowledgeBaseStubber(Stubber):  # type: ignore[misc]  # botocore ships no types
    """A Stubber that answers ``retrieve`` from a ``SimulatedKnowledgeBase``."""

    def __init__(self, client: Any, kb: SimulatedKnowledgeBase) -> None:
        super().__init__(client)
        self.kb = kb

    def _assert_expected_params(self, model: Any, params: Any, context: Any, **kwargs: Any) -> Any:
        if model.name == "Retrieve" and not self._queue:
            self.add_response("retrieve", self.kb.respond(params))
        return super()._assert_expected_params(model, params, context, **kwargs)


class FakeBedrockServer:
    """``bedrock-agent-runtime`` on 127.0.0.1; use ``endpoint_url`` as the kb's endpoint.

    ``fail(code, status, times)`` queues AWS errors served before any answer (e.g.
    ``ThrottlingException``/429, which botocore's retry handler retries); ``calls``
    counts every HTTP request, retries included.
    """

    def __init__(self, kb: SimulatedKnowledgeBase) -> None:
        self.kb = kb
        self.calls = 0
        self._errors: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._server = QuietHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def fail(self, code: str, status: int, times: int = 1) -> None:
        with self._lock:
            self._errors.extend([(code, status)] * times)

    def __enter__(self) -> FakeBedrockServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, path: str, body: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self._lock:
            self.calls += 1
            error = self._errors.pop(0) if self._errors else None
        if error is not None:
            code, status = error
            return status, {"x-amzn-ErrorType": f"{code}:"}, {"message": f"{code} (fake)"}
        match = re.fullmatch(r"/knowledgebases/([^/]+)/retrieve", path)
        if match is None:
            return 404, {"x-amzn-ErrorType": "UnknownOperationException:"}, {"message": path}
        params = json.loads(body or b"{}")
        params["knowledgeBaseId"] = unquote(match.group(1))
        return 200, {}, self.kb.respond(params)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                status, headers, payload = fake._answer(self.path, self.rfile.read(length))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler
