"""A small Weaviate on 127.0.0.1 for the real weaviate-client to talk to.

Shipped in the package (``kairox_weaviate.testing``) so the plugin's tests, the
cross-plugin integration tests and a user's own tests share one copy; nothing in the
plugin imports it (it imports grpc and the client's protobuf types).

REST (stdlib ``http.server``): the calls the client makes on connect and in use,
found by reading weaviate/connect/v4.py and logging requests: ``GET /v1/meta``,
``GET /v1/.well-known/{ready,live,openid-configuration}`` and ``GET /v1/schema[/<class>]``.
gRPC (grpcio): ``weaviate.v1.Weaviate/Search`` and ``grpc.health.v1.Health/Check``,
with the protobuf types that ship inside weaviate-client (``weaviate.proto.v1``).

Search does what Weaviate does, on a small scale: BM25F keyword scoring (k1=1.2,
b=0.75, word tokenisation, English stop words, ``prop^boost``), cosine distance over
stored (optionally named) vectors, hybrid fusion weighted by alpha (relativeScore or
ranked), property filters, tenants, and API-key checks on REST (Authorization: Bearer)
and gRPC (``authorization`` metadata) with Weaviate's status codes.
"""

from __future__ import annotations

import json
import math
import re
import struct
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import grpc
from weaviate.proto.v1 import (
    base_pb2,
    base_search_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    weaviate_pb2_grpc,
)

from kairox_core.testing.http_server import QuietHTTPServer

VERSION = "1.32.4"
K1, B = 1.2, 0.75
STOPWORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    )
)
Embed = Callable[[str], Sequence[float]]


def tokenize(text: str) -> list[str]:
    """Weaviate's ``word`` tokenisation: lower-case runs of letters and digits."""
    return re.findall(r"[0-9a-z]+", text.lower())


def cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        raise ValueError(f"vector lengths don't match: {len(a)} vs {len(b)}")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return 1.0 if na == 0 or nb == 0 else 1.0 - dot / (na * nb)


@dataclass
class FakeObject:
    properties: dict[str, Any]
    vectors: dict[str, list[float]]  # "default" for a collection without named vectors
    id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass
class FakeCollection:
    name: str
    objects: dict[str | None, list[FakeObject]]  # tenant (None: no multi-tenancy) -> objects
    named_vectors: tuple[str, ...] = ()
    vectorizer: Embed | None = None  # a server-side "text2vec" module for hybrid queries

    @property
    def multi_tenant(self) -> bool:
        return None not in self.objects

    def schema(self) -> dict[str, Any]:
        """The class JSON ``GET /v1/schema/<class>`` returns (trimmed to what matters)."""
        sample = next((o for objs in self.objects.values() for o in objs), None)
        props = []
        for key, value in (sample.properties if sample else {"text": ""}).items():
            kind = (
                "text[]"
                if isinstance(value, list)
                else "text"
                if isinstance(value, str)
                else "boolean"
                if isinstance(value, bool)
                else "int"
                if isinstance(value, int)
                else "number"
            )
            props.append(
                {
                    "name": key,
                    "dataType": [kind],
                    "indexFilterable": True,
                    "indexSearchable": kind.startswith("text"),
                    "tokenization": "word" if kind.startswith("text") else None,
                }
            )
        vectorizer = "text2vec-kairox" if self.vectorizer else "none"
        schema: dict[str, Any] = {
            "class": self.name,
            "properties": props,
            "invertedIndexConfig": {"bm25": {"b": B, "k1": K1}, "stopwords": {"preset": "en"}},
            "multiTenancyConfig": {"enabled": self.multi_tenant},
        }
        if self.named_vectors:
            schema["vectorConfig"] = {
                n: {
                    "vectorizer": {vectorizer: {}},
                    "vectorIndexType": "hnsw",
                    "vectorIndexConfig": {"distance": "cosine"},
                }
                for n in self.named_vectors
            }
        else:
            schema.update(
                vectorizer=vectorizer,
                vectorIndexType="hnsw",
                vectorIndexConfig={"distance": "cosine"},
            )
        return schema


class SearchError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class FakeWeaviate:
    """Both servers, their shared data and a log of what the client asked for."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        search_delay: float = 0.0,
        rest_checks_key: bool = True,
        denied: Iterable[str] = (),
    ) -> None:
        self.api_key = api_key
        self.denied = set(denied)  # collections the key may not read (RBAC)
        self.search_delay = search_delay
        self.rest_checks_key = rest_checks_key
        self.collections: dict[str, FakeCollection] = {}
        self.rest_log: list[tuple[str, str, str | None]] = []  # method, path, authorization
        self.grpc_log: list[tuple[str, dict[str, str], Any]] = []  # method, metadata, request
        self._stopping = threading.Event()
        self._http = QuietHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._http.daemon_threads = True
        self.http_port = self._http.server_address[1]
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        add_servicer = weaviate_pb2_grpc.add_WeaviateServicer_to_server  # generated, untyped
        add_servicer(_Servicer(self), self._grpc)  # type: ignore[no-untyped-call]
        self._grpc.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "grpc.health.v1.Health",
                    {
                        "Check": grpc.unary_unary_rpc_method_handler(
                            self._health,
                            request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
                            response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString,
                        )
                    },
                ),
            )
        )
        self.grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> FakeWeaviate:
        self._grpc.start()
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=None).wait(5)

    def add_collection(
        self,
        name: str,
        objects: Iterable[FakeObject] = (),
        *,
        tenants: Mapping[str, Iterable[FakeObject]] | None = None,
        named_vectors: Sequence[str] = (),
        vectorizer: Embed | None = None,
    ) -> FakeCollection:
        shards: dict[str | None, list[FakeObject]] = (
            {t: list(objs) for t, objs in tenants.items()}
            if tenants is not None
            else {None: list(objects)}
        )
        collection = FakeCollection(
            name[:1].upper() + name[1:], shards, tuple(named_vectors), vectorizer
        )
        self.collections[collection.name] = collection
        return collection

    # --- auth ----------------------------------------------------------------------

    def auth_error(self, authorization: str | None) -> str | None:
        """Weaviate's wording when a key is needed and missing or wrong; None if fine."""
        if self.api_key is None:
            return None
        if not authorization:
            return "anonymous access not enabled, please provide an auth scheme such as OIDC"
        if authorization != f"Bearer {self.api_key}":
            return "unauthorized: invalid api key"
        return None

    def forbidden(self, collection: str) -> str:
        return (
            f"forbidden: user 'kairox' has insufficient permissions to read_data "
            f"[Domain: data, Collection: {collection}]"
        )

    def _health(self, request: Any, context: grpc.ServicerContext) -> Any:
        return health_weaviate_pb2.WeaviateHealthCheckResponse(
            status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING
        )

    # --- search --------------------------------------------------------------------

    def search(self, req: Any) -> Any:
        collection = self.collections.get(req.collection)
        if collection is None:
            raise SearchError(
                grpc.StatusCode.UNKNOWN, f"could not find class {req.collection} in schema"
            )
        tenant = req.tenant or None
        if collection.multi_tenant and tenant is None:
            raise SearchError(
                grpc.StatusCode.UNKNOWN,
                f"class {collection.name}: has "
                f"multi-tenancy enabled, but request was without tenant",
            )
        if not collection.multi_tenant and tenant is not None:
            raise SearchError(
                grpc.StatusCode.UNKNOWN,
                f"class {collection.name}: has multi-tenancy disabled, but request was with tenant",
            )
        if tenant not in collection.objects:
            raise SearchError(grpc.StatusCode.UNKNOWN, f'tenant not found: "{tenant}"')
        objects = [
            o
            for o in collection.objects[tenant]
            if not req.HasField("filters") or _matches(req.filters, o.properties)
        ]
        limit = req.limit or 10
        scored: list[tuple[FakeObject, dict[str, Any]]]
        if req.HasField("bm25_search"):
            bm = req.bm25_search
            scored = [
                (o, {"score": s})
                for o, s in _bm25(objects, bm.query, list(bm.properties), collection)
            ]
        elif req.HasField("hybrid_search"):
            scored = self._hybrid(req.hybrid_search, objects, collection)
        elif req.HasField("near_vector"):
            nv = req.near_vector
            target = _target(collection, list(nv.target_vectors) or list(nv.targets.target_vectors))
            query_vector = _vector_of(nv)
            if query_vector is None:
                raise SearchError(grpc.StatusCode.UNKNOWN, "near_vector: no vector given")
            max_distance = nv.distance if nv.HasField("distance") else None
            scored = [
                (o, {"distance": d})
                for o, d in _vector_search(objects, query_vector, target, max_distance)
            ]
        else:
            scored = [(o, {}) for o in objects]
        return search_get_pb2.SearchReply(
            took=0.001,
            results=[_result(collection, o, meta, req) for o, meta in scored[req.offset :][:limit]],
        )

    def _hybrid(
        self, hy: Any, objects: list[FakeObject], collection: FakeCollection
    ) -> list[tuple[FakeObject, dict[str, Any]]]:
        alpha = hy.alpha_param if hy.use_alpha_param else hy.alpha
        target = _target(collection, list(hy.target_vectors) or list(hy.targets.target_vectors))
        query_vector = _vector_of(hy)
        if query_vector is None and hy.HasField("near_vector"):
            query_vector = _vector_of(hy.near_vector)
        if query_vector is None and collection.vectorizer is not None and hy.query:
            query_vector = list(collection.vectorizer(hy.query))
        max_distance = hy.vector_distance if hy.HasField("vector_distance") else None
        keyword = _bm25(objects, hy.query, list(hy.properties), collection) if alpha < 1 else []
        vector = (
            [(o, 1.0 - d) for o, d in _vector_search(objects, query_vector, target, max_distance)]
            if query_vector is not None and alpha > 0
            else []
        )
        weights = {"keyword": 1.0 - alpha, "vector": alpha}
        fused: dict[uuid.UUID, tuple[FakeObject, float, float]] = {}
        for label, results in (("keyword", keyword), ("vector", vector)):
            if not results:
                continue
            values = [s for _, s in results]
            top, bottom = max(values), min(values)
            for rank, (obj, value) in enumerate(results):
                if hy.fusion_type == base_search_pb2.Hybrid.FUSION_TYPE_RANKED:
                    part = weights[label] / (60 + rank)
                else:  # relativeScoreFusion, Weaviate's default since 1.24
                    part = weights[label] * (
                        (value - bottom) / (top - bottom) if top != bottom else 1.0
                    )
                _, previous, secondary = fused.get(obj.id, (obj, 0.0, value))
                fused[obj.id] = (obj, previous + part, max(secondary, value))
        ranked = sorted(fused.values(), key=lambda t: (-t[1], -t[2], str(t[0].id)))
        return [(o, {"score": s, "explain_score": f"hybrid alpha={alpha:g}"}) for o, s, _ in ranked]


# --- scoring helpers -------------------------------------------------------------


def _searchable(
    collection: FakeCollection, obj: FakeObject, wanted: list[str]
) -> list[tuple[str, float]]:
    fields: list[tuple[str, float]] = []
    for spec in wanted or [k for k, v in obj.properties.items() if isinstance(v, (str, list))]:
        name, _, boost = spec.partition("^")
        value = obj.properties.get(name)
        text = " ".join(value) if isinstance(value, list) else value
        if isinstance(text, str):
            fields.append((text, float(boost) if boost else 1.0))
    return fields


def _bm25(
    objects: list[FakeObject], query: str, wanted: list[str], collection: FakeCollection
) -> list[tuple[FakeObject, float]]:
    """BM25F over the chosen text properties; only documents with a query term score."""
    terms = [t for t in dict.fromkeys(tokenize(query)) if t not in STOPWORDS]
    docs = []
    for obj in objects:
        tf: dict[str, float] = {}
        length = 0
        for text, boost in _searchable(collection, obj, wanted):
            tokens = tokenize(text)
            length += len(tokens)
            for token in tokens:
                tf[token] = tf.get(token, 0.0) + boost
        docs.append((obj, tf, length))
    if not docs or not terms:
        return []
    avgdl = sum(length for _, _, length in docs) / len(docs) or 1.0
    n = len(docs)
    scored = []
    for obj, tf, length in docs:
        score = 0.0
        for term in terms:
            freq = tf.get(term, 0.0)
            if freq:
                df = sum(1 for _, other, _ in docs if term in other)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * freq * (K1 + 1) / (freq + K1 * (1 - B + B * length / avgdl))
        if score > 0:
            scored.append((obj, score))
    return sorted(scored, key=lambda t: (-t[1], str(t[0].id)))


def _target(collection: FakeCollection, requested: list[str]) -> str:
    available = "map[" + " ".join(f"{n}:{{}}" for n in collection.named_vectors) + "]"
    if not requested:
        if len(collection.named_vectors) > 1:
            raise SearchError(
                grpc.StatusCode.UNKNOWN,
                f"extract target vectors: class "
                f"{collection.name} has multiple vectors, but no target vectors "
                f"were provided",
            )
        return collection.named_vectors[0] if collection.named_vectors else "default"
    name = requested[0]
    if name not in collection.named_vectors:
        raise SearchError(
            grpc.StatusCode.UNKNOWN,
            f"extract target vectors: class "
            f"{collection.name} does not have named vector {name} configured. "
            f"Available named vectors {available}",
        )
    return name


def _floats(raw: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _vector_of(message: Any) -> list[float] | None:
    """The query vector in whichever field this client version filled."""
    for vectors in (getattr(message, "vectors", ()),):
        for vec in vectors:
            if vec.type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32:
                raise SearchError(grpc.StatusCode.UNKNOWN, "multi-vectors are not supported")
            return _floats(vec.vector_bytes)
    if getattr(message, "vector_bytes", b""):
        return _floats(message.vector_bytes)
    for target in getattr(message, "vector_for_targets", ()):
        return _floats(target.vectors[0].vector_bytes if target.vectors else target.vector_bytes)
    if len(getattr(message, "vector", ())):
        return list(message.vector)
    return None


def _vector_search(
    objects: list[FakeObject], query: Sequence[float], target: str, max_distance: float | None
) -> list[tuple[FakeObject, float]]:
    results = []
    for obj in objects:
        stored = obj.vectors.get(target)
        if stored is None:
            continue
        try:
            distance = cosine_distance(query, stored)
        except ValueError as exc:
            raise SearchError(grpc.StatusCode.UNKNOWN, f"vector search: {exc}") from None
        if max_distance is None or distance <= max_distance:
            results.append((obj, distance))
    return sorted(results, key=lambda t: (t[1], str(t[0].id)))


def _filter_values(f: Any) -> list[Any]:
    for name in (
        "value_text_array",
        "value_int_array",
        "value_number_array",
        "value_boolean_array",
    ):
        if f.HasField(name):
            return list(getattr(f, name).values)
    for name in ("value_text", "value_int", "value_number", "value_boolean"):
        if f.HasField(name):
            return [getattr(f, name)]
    return []


def _matches(f: Any, props: Mapping[str, Any]) -> bool:
    op = base_pb2.Filters
    if f.operator == op.OPERATOR_AND:
        return all(_matches(sub, props) for sub in f.filters)
    if f.operator == op.OPERATOR_OR:
        return any(_matches(sub, props) for sub in f.filters)
    if f.operator == op.OPERATOR_NOT:
        return not _matches(f.filters[0], props)
    prop = f.target.property or (f.on[0] if f.on else "")
    value = props.get(prop)
    wanted = _filter_values(f)
    if f.operator == op.OPERATOR_IS_NULL:
        return (value is None) == bool(wanted and wanted[0])
    if value is None:
        return False
    have = {t for v in value for t in _terms(v)} if isinstance(value, list) else _terms(value)
    if f.operator == op.OPERATOR_EQUAL:
        return (
            _terms(wanted[0]) <= have
            if isinstance(wanted[0], str)
            else wanted[0] in (value if isinstance(value, list) else [value])
        )
    if f.operator == op.OPERATOR_NOT_EQUAL:
        return not _terms(wanted[0]) <= have
    if f.operator == op.OPERATOR_CONTAINS_ANY:
        return any(_terms(w) <= have for w in wanted)
    if f.operator == op.OPERATOR_CONTAINS_ALL:
        return all(_terms(w) <= have for w in wanted)
    raise SearchError(
        grpc.StatusCode.UNKNOWN,
        f"operator {op.Operator.Name(f.operator)} is not supported by this fake",
    )


def _terms(value: Any) -> set[Any]:
    """Filter matching on ``word``-tokenised text, as Weaviate does; other types as-is."""
    return set(tokenize(value)) if isinstance(value, str) else {value}


def _value(value: Any) -> Any:
    pb = properties_pb2
    if isinstance(value, bool):
        return pb.Value(bool_value=value)
    if isinstance(value, int):
        return pb.Value(int_value=value)
    if isinstance(value, float):
        return pb.Value(number_value=value)
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return pb.Value(list_value=pb.ListValue(text_values=pb.TextValues(values=value)))
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            packed = struct.pack(f"<{len(value)}q", *value)
            return pb.Value(list_value=pb.ListValue(int_values=pb.IntValues(values=packed)))
        packed = struct.pack(f"<{len(value)}d", *map(float, value))
        return pb.Value(list_value=pb.ListValue(number_values=pb.NumberValues(values=packed)))
    return pb.Value(text_value=str(value))


def _result(collection: FakeCollection, obj: FakeObject, meta: dict[str, Any], req: Any) -> Any:
    wanted: list[str] | None = None
    if req.HasField("properties") and not req.properties.return_all_nonref_properties:
        wanted = list(req.properties.non_ref_properties)
    props = {k: v for k, v in obj.properties.items() if wanted is None or k in wanted}
    md = search_get_pb2.MetadataResult(id=str(obj.id), id_as_bytes=obj.id.bytes)
    asked = req.metadata
    if "score" in meta and asked.score:
        md.score, md.score_present = meta["score"], True
    if "explain_score" in meta and asked.explain_score:
        md.explain_score, md.explain_score_present = meta["explain_score"], True
    if "distance" in meta and asked.distance:
        md.distance, md.distance_present = meta["distance"], True
    if "distance" in meta and asked.certainty:
        md.certainty, md.certainty_present = 1 - meta["distance"] / 2, True
    return search_get_pb2.SearchResult(
        properties=search_get_pb2.PropertiesResult(
            target_collection=collection.name,
            non_ref_props=properties_pb2.Properties(
                fields={k: _value(v) for k, v in props.items() if v is not None}
            ),
        ),
        metadata=md,
    )


# --- transports --------------------------------------------------------------------


class _Servicer(weaviate_pb2_grpc.WeaviateServicer):
    def __init__(self, fake: FakeWeaviate) -> None:
        self.fake = fake

    def Search(self, request: Any, context: grpc.ServicerContext) -> Any:
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        self.fake.grpc_log.append(("Search", metadata, request))
        problem = self.fake.auth_error(metadata.get("authorization"))
        if problem:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f"extract auth: {problem}")
        if request.collection in self.fake.denied:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED, self.fake.forbidden(request.collection)
            )
        if self.fake.search_delay and self.fake._stopping.wait(self.fake.search_delay):
            context.abort(grpc.StatusCode.UNAVAILABLE, "server shutting down")
        try:
            return self.fake.search(request)
        except SearchError as exc:
            context.abort(exc.code, str(exc))


def _make_handler(fake: FakeWeaviate) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _send(self, status: int, body: Any = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            auth = self.headers.get("Authorization")
            fake.rest_log.append(("GET", path, auth))
            if path in ("/v1/.well-known/ready", "/v1/.well-known/live"):
                return self._send(200)
            if path == "/v1/.well-known/openid-configuration":
                return self._send(404)  # no OIDC configured
            problem = fake.auth_error(auth) if fake.rest_checks_key else None
            if problem:
                return self._send(401, {"code": 401, "message": problem})
            if path == "/v1/meta":
                return self._send(
                    200,
                    {
                        "hostname": "http://[::]:8080",
                        "modules": {},
                        "version": VERSION,
                        "grpcMaxMessageSize": 104858000,
                    },
                )
            if path == "/v1/schema":
                return self._send(200, {"classes": [c.schema() for c in fake.collections.values()]})
            if path.startswith("/v1/schema/"):
                name = path.rsplit("/", 1)[1]
                if name in fake.denied:
                    return self._send(403, {"error": [{"message": fake.forbidden(name)}]})
                collection = fake.collections.get(name)
                return self._send(200, collection.schema()) if collection else self._send(404)
            return self._send(404, {"code": 404, "message": f"path {path} was not found"})

    return Handler
