"""A local stand-in for a Pinecone index's data plane, for the real SDK to talk to.

Shipped in the package (``kairox_pinecone.testing``) so the plugin's tests, the
cross-plugin integration tests and a user's own tests share one copy; nothing in the
plugin imports it.

It serves the endpoints the SDK calls, with Pinecone's request and response JSON (API
reference, version 2026-07, and the SDK's own response models):

- ``POST /vectors/upsert``  ``{"vectors": [{"id", "values", "metadata"}], "namespace"}``
  -> ``{"upsertedCount": n}``
- ``POST /query``  ``{"topK", "vector" | "id", "namespace", "filter", "includeValues",
  "includeMetadata"}`` -> ``{"results": [], "matches": [{"id", "score", "values",
  "metadata"}], "namespace", "usage": {"readUnits"}}``
- ``POST /describe_index_stats`` -> ``{"namespaces": {ns: {"vectorCount"}}, "dimension",
  "indexFullness", "totalVectorCount", "metric", "vectorType"}``
- ``POST /records/namespaces/{ns}/upsert`` (NDJSON records) -> 201, and
  ``POST /records/namespaces/{ns}/search`` ``{"query": {"inputs": {"text"}, "top_k",
  "filter"}, "fields"}`` -> ``{"result": {"hits": [{"_id", "_score", "fields"}]},
  "usage": {"read_units", "embed_total_tokens"}}``: integrated inference, where the
  server embeds the record's ``field_map`` field itself.

Every request must carry the ``Api-Key`` header (401 with Pinecone's error JSON
otherwise) and ``X-Pinecone-Api-Version``. Similarity is real cosine similarity over
the stored vectors; metadata filters are evaluated ($eq $ne $gt $gte $lt $lte $in $nin
$exists $and $or). ``delay`` makes every answer late, for timeout tests.
"""

from __future__ import annotations

import json
import math
import re
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kairox_core.testing.http_server import QuietHTTPServer

Embed = Callable[[str], list[float]]
SEARCH_PATH = re.compile(r"^/records/namespaces/([^/]+)/(search|upsert)$")


def bag_of_words(text: str, dimension: int = 64) -> list[float]:
    """A tiny deterministic embedding: hashed lowercase words, L2-normalised, never zero."""
    vec = [0.0] * dimension
    vec[0] = 0.05
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if len(word) > 2:
            vec[1 + zlib.crc32(word.encode()) % (dimension - 1)] += 1.0
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def _compare(op: str, have: Any, want: Any) -> bool:
    if op == "$exists":
        return (have is not None) == bool(want)
    if op == "$eq":
        return have == want or (isinstance(have, list) and want in have)
    if op == "$ne":
        return bool(have != want)
    if op == "$in":
        return have in want or (isinstance(have, list) and any(h in want for h in have))
    if op == "$nin":
        return have not in want
    if have is None or isinstance(have, str | list):
        return False
    return bool(
        {"$gt": have > want, "$gte": have >= want, "$lt": have < want, "$lte": have <= want}[op]
    )


def matches_filter(flt: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    for key, cond in flt.items():
        if key == "$and":
            if not all(matches_filter(f, metadata) for f in cond):
                return False
        elif key == "$or":
            if not any(matches_filter(f, metadata) for f in cond):
                return False
        elif isinstance(cond, Mapping):
            for op, want in cond.items():
                if op not in {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"}:
                    raise ValueError(f"unsupported filter operator {op}")
                if not _compare(op, metadata.get(key), want):
                    return False
        elif not _compare("$eq", metadata.get(key), cond):
            return False
    return True


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, records_api: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.records_api = records_api


class FakePinecone:
    """State of one index; ``start()`` serves it on 127.0.0.1 until ``stop()``."""

    def __init__(
        self,
        api_key: str,
        *,
        dimension: int | None = None,
        delay: float = 0.0,
        embed: Embed | None = None,
        field_map: str = "text",
    ) -> None:
        self.api_key = api_key
        self.dimension = dimension
        self.delay = delay
        self.embed = embed  # set: the index has integrated inference
        self.field_map = field_map
        self.vectors: dict[str, dict[str, tuple[list[float], dict[str, Any]]]] = {}
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake.handle(self)

            def do_GET(self) -> None:
                fake.handle(self)

        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # --- HTTP -----------------------------------------------------------------------

    def handle(self, http: BaseHTTPRequestHandler) -> None:
        length = int(http.headers.get("Content-Length") or 0)
        raw = http.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in http.headers.items()}
        self.requests.append((http.path, headers, raw))
        if self.delay:
            self._stopping.wait(self.delay)
        try:
            if headers.get("api-key") != self.api_key:
                self._send(
                    http,
                    401,
                    {"code": 16, "message": "Invalid API Key", "details": []},
                    extra={"www-authenticate": "API key is missing or invalid"},
                )
                return
            if not headers.get("x-pinecone-api-version"):
                raise BadRequest("missing X-Pinecone-Api-Version header")
            status, body = self.route(http.command, http.path, raw)
            self._send(http, status, body)
        except BadRequest as exc:
            if exc.records_api:
                payload: Any = {
                    "error": {"code": "INVALID_ARGUMENT", "message": str(exc)},
                    "status": exc.status,
                }
            else:
                payload = {
                    "code": 3 if exc.status == 400 else 5,
                    "message": str(exc),
                    "details": [],
                }
            self._send(http, exc.status, payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(
        self,
        http: BaseHTTPRequestHandler,
        status: int,
        body: Any,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        try:
            http.send_response(status)
            http.send_header("Content-Type", "application/json")
            http.send_header("Content-Length", str(len(data)))
            http.send_header("x-pinecone-request-id", str(len(self.requests)))
            for key, value in (extra or {}).items():
                http.send_header(key, value)
            http.end_headers()
            http.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)

    def route(self, method: str, path: str, raw: bytes) -> tuple[int, Any]:
        if method != "POST":
            raise BadRequest(f"no route for {method} {path}", 404)
        records = SEARCH_PATH.match(path)
        if records:
            from urllib.parse import unquote

            namespace, action = unquote(records.group(1)), records.group(2)
            if action == "upsert":
                lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
                return self.upsert_records(namespace, lines)
            return 200, self.search_records(namespace, json.loads(raw or b"{}"))
        body = json.loads(raw or b"{}")
        if path == "/vectors/upsert":
            return 200, self.upsert(body)
        if path == "/query":
            return 200, self.query(body)
        if path == "/describe_index_stats":
            return 200, self.describe_index_stats()
        raise BadRequest(f"no route for POST {path}", 404)

    # --- the vector API --------------------------------------------------------------

    def _check_dimension(self, values: Sequence[float]) -> None:
        if self.dimension is None:
            self.dimension = len(values)
        if len(values) != self.dimension:
            raise BadRequest(
                f"Vector dimension {len(values)} does not match the dimension of "
                f"the index {self.dimension}"
            )
        if not any(values):
            raise BadRequest("Dense vectors must contain at least one non-zero value")

    def upsert(self, body: Mapping[str, Any]) -> dict[str, Any]:
        vectors = body.get("vectors")
        if not isinstance(vectors, list) or not vectors:
            raise BadRequest("vectors must be a non-empty list")
        namespace = body.get("namespace", "")
        with self._lock:
            store = self.vectors.setdefault(namespace, {})
            for vector in vectors:
                if not isinstance(vector.get("id"), str) or not vector["id"]:
                    raise BadRequest("every vector needs a string id")
                values = [float(x) for x in vector.get("values", [])]
                self._check_dimension(values)
                metadata = vector.get("metadata") or {}
                for key, value in metadata.items():
                    if not isinstance(value, str | int | float | bool | list):
                        raise BadRequest(
                            f"Metadata value for field {key} must be a string, "
                            "number, boolean or list of strings"
                        )
                store[vector["id"]] = (values, dict(metadata))
        return {"upsertedCount": len(vectors)}

    def query(self, body: Mapping[str, Any]) -> dict[str, Any]:
        top_k = body.get("topK")
        if not isinstance(top_k, int) or not 1 <= top_k <= 10000:
            raise BadRequest("topK must be an integer between 1 and 10000")
        namespace = body.get("namespace", "")
        store = self.vectors.get(namespace, {})
        if "vector" in body:
            vector = [float(x) for x in body["vector"]]
            if self.dimension is not None:
                self._check_dimension(vector)
        elif "id" in body:
            if body["id"] not in store:
                return {
                    "results": [],
                    "matches": [],
                    "namespace": namespace,
                    "usage": {"readUnits": 1},
                }
            vector = store[body["id"]][0]
        else:
            raise BadRequest("No query provided")
        flt = body.get("filter")
        scored = []
        for vid, (values, metadata) in store.items():
            if flt and not matches_filter(flt, metadata):
                continue
            scored.append((cosine(vector, values), vid, values, metadata))
        scored.sort(key=lambda s: (-s[0], s[1]))
        found = []
        for score, vid, values, metadata in scored[:top_k]:
            match: dict[str, Any] = {
                "id": vid,
                "score": round(score, 6),
                "values": values if body.get("includeValues") else [],
            }
            if body.get("includeMetadata") and metadata:
                match["metadata"] = metadata
            found.append(match)
        return {
            "results": [],
            "matches": found,
            "namespace": namespace,
            "usage": {"readUnits": 5 + len(store) // 1000},
        }

    def describe_index_stats(self) -> dict[str, Any]:
        counts = {ns: {"vectorCount": len(v)} for ns, v in self.vectors.items() if v}
        return {
            "namespaces": counts,
            "dimension": self.dimension or 0,
            "indexFullness": 0.0,
            "totalVectorCount": sum(c["vectorCount"] for c in counts.values()),
            "metric": "cosine",
            "vectorType": "dense",
        }

    # --- the records API (integrated inference) --------------------------------------

    def upsert_records(self, namespace: str, records: list[dict[str, Any]]) -> tuple[int, Any]:
        if self.embed is None:
            raise BadRequest(
                "Integrated inference is not configured for this index", records_api=True
            )
        with self._lock:
            store = self.vectors.setdefault(namespace, {})
            for record in records:
                fields = dict(record)
                rid = fields.pop("_id", None) or fields.pop("id", None)
                text = fields.get(self.field_map)
                if not rid or not isinstance(text, str):
                    raise BadRequest(
                        f"record needs _id and a '{self.field_map}' text field", records_api=True
                    )
                store[str(rid)] = (self.embed(text), fields)
        return 201, None

    def search_records(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.embed is None:
            raise BadRequest(
                "Integrated inference is not configured for this index", records_api=True
            )
        query = body.get("query") or {}
        top_k = query.get("top_k")
        text = (query.get("inputs") or {}).get("text")
        if not isinstance(top_k, int) or top_k < 1 or not isinstance(text, str):
            raise BadRequest("query needs top_k and inputs.text", records_api=True)
        vector = self.embed(text)
        flt = query.get("filter")
        wanted = body.get("fields")
        scored = []
        for rid, (values, fields) in self.vectors.get(namespace, {}).items():
            if flt and not matches_filter(flt, fields):
                continue
            scored.append((cosine(vector, values), rid, fields))
        scored.sort(key=lambda s: (-s[0], s[1]))
        hits = [
            {
                "_id": rid,
                "_score": round(score, 6),
                "fields": {k: v for k, v in fields.items() if wanted is None or k in wanted},
            }
            for score, rid, fields in scored[:top_k]
        ]
        return {
            "result": {"hits": hits},
            "usage": {"read_units": 6, "embed_total_tokens": len(text.split())},
        }
