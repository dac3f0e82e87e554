"""KairoxStore: LangGraph's BaseStore over Kairox memories and long-term chunks.

langchain-tests has no suite for LangGraph's store (its ``BaseStore`` suites are for
langchain-core's key-value store), so the keyed behaviour is checked against
LangGraph's own reference, ``InMemoryStore``, on the same random operations, sync and
async; similarity search is Kairox's k-NN with its threshold.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, Item
from langgraph.store.memory import InMemoryStore
from lc_helpers import make_config

from kairox_core import Kairox
from kairox_langchain import (
    KairoxStore,
    UnknownNamespaceError,
    UnsupportedValueError,
)

SESSION = "s-store-test"
NAMESPACES = [
    ("memories", "user"),
    ("memories", "workspace", "w1"),
    ("memories", "workspace", "w2"),
    ("memories", "session", SESSION),
]

keys = st.sampled_from(["editor", "food", "city", "tz"])
texts = (
    st.text(alphabet=st.characters(categories=("L", "N"), include_characters=" .-"), min_size=1)
    .map(str.strip)
    .filter(bool)
)
spaces = st.sampled_from(NAMESPACES)
prefixes = st.sampled_from(
    [("memories",), ("memories", "workspace"), ("memories", "user"), *NAMESPACES]
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), spaces, keys, texts),
        st.tuples(st.just("delete"), spaces, keys),
        st.tuples(st.just("get"), spaces, keys),
        st.tuples(st.just("search"), prefixes),
        st.tuples(st.just("namespaces"), prefixes),
    ),
    min_size=1,
    max_size=12,
)


def _shown(item: Item | None) -> tuple[Any, ...] | None:
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def _apply(store: BaseStore, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "put":
        return store.put(op[1], op[2], {"text": op[3]})
    if kind == "delete":
        return store.delete(op[1], op[2])
    if kind == "get":
        return _shown(store.get(op[1], op[2]))
    if kind == "search":
        return sorted(_shown(i) for i in store.search(op[1], limit=100))  # type: ignore[type-var]
    return sorted(ns for ns in store.list_namespaces(prefix=op[1]) if _holds(store, ns))


def _holds(store: BaseStore, ns: tuple[str, ...]) -> bool:
    """InMemoryStore keeps listing a namespace once a delete touched it, even empty;
    Kairox lists the namespaces that hold items (so this is True for every one)."""
    return isinstance(store, KairoxStore) or bool(store.search(ns, limit=1))


async def _aapply(store: BaseStore, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "put":
        return await store.aput(op[1], op[2], {"text": op[3]})
    if kind == "delete":
        return await store.adelete(op[1], op[2])
    if kind == "get":
        return _shown(await store.aget(op[1], op[2]))
    if kind == "search":
        found = await store.asearch(op[1], limit=100)
        return sorted(_shown(i) for i in found)  # type: ignore[type-var]
    listed = await store.alist_namespaces(prefix=op[1])
    return sorted(ns for ns in listed if _holds(store, ns))


def _fresh(tmp_path: Path) -> Kairox:
    kx = Kairox.open(tmp_path / f"kx-{uuid.uuid4().hex[:8]}.db", make_config())
    kx.session(workspace="w1", session_id=SESSION)
    return kx


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_keyed_items_behave_like_langgraphs_in_memory_store(
    kairox_home: Path, tmp_path: Path, ops: list[tuple[Any, ...]]
) -> None:
    reference = InMemoryStore()
    with _fresh(tmp_path) as kx:
        store = KairoxStore(kx)
        for op in ops:
            assert _apply(store, op) == _apply(reference, op), op


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_the_async_methods_behave_the_same(
    kairox_home: Path, tmp_path: Path, ops: list[tuple[Any, ...]]
) -> None:
    async def run() -> None:
        reference = InMemoryStore()
        with _fresh(tmp_path) as kx:
            store = KairoxStore(kx)
            for op in ops:
                assert await _aapply(store, op) == await _aapply(reference, op), op

    asyncio.run(run())


def test_memory_writes_are_kairox_memories_with_events(kx: Kairox) -> None:
    store = KairoxStore(kx)
    store.put(("memories", "workspace", "w1"), "deploy", {"text": "Deploys go out on Tuesdays"})
    record = kx.memories.get("workspace", "deploy", workspace_id="w1")
    assert record is not None and record.body == "Deploys go out on Tuesdays"
    # the next turn of a w1 session has it in its context
    turn = kx.session(workspace="w1").begin_turn_sync("when do we deploy?")
    assert any("Deploys go out on Tuesdays" in str(m["content"]) for m in turn.messages)
    turn.abort_sync()
    store.delete(("memories", "workspace", "w1"), "deploy")
    assert kx.memories.get("workspace", "deploy", workspace_id="w1") is None
    kinds = [type(e).__name__ for e in kx.events("_memory:w1")]
    assert "MemoryAccepted" in kinds and "MemoryDeleted" in kinds


def test_chunks_are_added_edited_found_and_deleted(kx: Kairox) -> None:
    store = KairoxStore(kx)
    ns = ("longterm", "project", "w1")
    launch = store.add(ns, "The launch is planned for March, on a Tuesday")
    other = store.add(ns, "Bananas ripen faster next to apples")
    assert launch.key.startswith("lt-") and kx.longterm.get(launch.key).scope == "project"
    assert store.get(ns, launch.key) == launch
    hits = store.search(ns, query="when is the launch planned")
    assert [h.key for h in hits] == [launch.key]  # the banana is under the threshold
    assert hits[0].score is not None and hits[0].score >= kx.config.longterm.threshold
    everything = KairoxStore(kx, threshold=-1.0).search(ns, query="when is the launch planned")
    assert [h.key for h in everything] == [launch.key, other.key]
    store.put(ns, launch.key, {"text": "The launch moved to April"})
    assert kx.longterm.get(launch.key).text == "The launch moved to April"
    store.delete(ns, launch.key)
    assert store.get(ns, launch.key) is None
    assert [i.key for i in store.search(ns)] == [other.key]


def test_a_prefix_search_ranks_every_scope_by_similarity(kx: Kairox) -> None:
    store = KairoxStore(kx, threshold=-1.0)
    near = store.add(("longterm", "global"), "Standup is at nine every morning")
    far = store.add(("longterm", "project", "w1"), "The office plants need water")
    session = kx.session(workspace="w1")
    mine = store.add(("longterm", "session", session.id), "Standup today moved to ten")
    other = kx.session(workspace="w2")
    theirs = store.add(("longterm", "session", other.id), "Standup for w2 is at eleven")
    hits = store.search(("longterm",), query="when is standup", limit=10)
    assert len(hits) == 4 and hits[-1].key == far.key
    assert {h.key for h in hits[:3]} == {near.key, mine.key, theirs.key}
    assert [h.score for h in hits] == sorted((h.score or 0.0 for h in hits), reverse=True)
    assert store.search(("longterm",), query="when is standup", limit=2, offset=1) == hits[1:3]
    only_mine = store.search(("longterm", "session", session.id), query="standup")
    assert [h.key for h in only_mine] == [mine.key]
    assert sorted(store.list_namespaces(prefix=("longterm", "session"))) == sorted(
        [("longterm", "session", session.id), ("longterm", "session", other.id)]
    )
    assert store.search(("longterm",), query="standup", filter={"text": far.value["text"]}) == [
        store.search(("longterm", "project", "w1"), query="standup")[0]
    ]


async def test_async_chunks(kx: Kairox) -> None:
    store = KairoxStore(kx)
    item = await store.aadd(("longterm", "global"), "Parking is on level minus two")
    found = await store.asearch(("longterm", "global"), query="where is parking")
    assert [f.key for f in found] == [item.key]
    await store.adelete(("longterm", "global"), item.key)
    assert await store.aget(("longterm", "global"), item.key) is None


@pytest.mark.parametrize(
    "namespace",
    [("users", "42"), ("memories",), ("memories", "team"), ("longterm", "project"), ("x",)],
)
def test_a_namespace_that_maps_to_no_scope_is_a_clear_error(
    kx: Kairox, namespace: tuple[str, ...]
) -> None:
    store = KairoxStore(kx)
    with pytest.raises(UnknownNamespaceError, match=r"maps to no Kairox scope; use .*longterm"):
        store.put(namespace, "k", {"text": "v"})
    with pytest.raises(UnknownNamespaceError):
        store.get(namespace, "k")


def test_a_search_prefix_that_maps_to_no_scope_is_a_clear_error(kx: Kairox) -> None:
    with pytest.raises(UnknownNamespaceError, match=r"prefix .*users"):
        KairoxStore(kx).search(("users", "42"))


def test_values_and_options_kairox_cannot_keep_are_clear_errors(kx: Kairox) -> None:
    store = KairoxStore(kx)
    user = ("memories", "user")
    with pytest.raises(UnsupportedValueError, match=r"\{'text': '...'\}, not \['food'\]"):
        store.put(user, "k", {"food": "pizza"})
    with pytest.raises(UnsupportedValueError, match="cannot be a Kairox memory key"):
        store.put(user, "a key with spaces", {"text": "v"})
    with pytest.raises(UnsupportedValueError, match="not embedded"):
        store.search(user, query="pizza")
    ns = ("longterm", "global")
    with pytest.raises(UnsupportedValueError, match="put\\(\\) only edits one"):
        store.put(ns, "my-own-key", {"text": "a fact"})
    chunk = store.add(ns, "a fact")
    with pytest.raises(UnsupportedValueError, match="embeds a long-term chunk"):
        store.put(ns, chunk.key, {"text": "another fact"}, index=False)
    with pytest.raises(UnsupportedValueError, match=r"operator '\$gt'"):
        store.search(ns, filter={"text": {"$gt": "a"}})
    with pytest.raises(UnsupportedValueError, match="add\\(\\) creates long-term chunks"):
        store.add(user, "x")


def test_list_namespaces_options_match_langgraphs(kx: Kairox) -> None:
    store, reference = KairoxStore(kx), InMemoryStore()
    session = kx.session(workspace="w1")
    for ns in [
        ("memories", "user"),
        ("memories", "workspace", "w1"),
        ("memories", "workspace", "w2"),
        ("memories", "session", session.id),
    ]:
        for s in (store, reference):
            s.put(ns, "k", {"text": "v"})
    cases: list[dict[str, Any]] = [
        {},
        {"prefix": ("memories", "*")},
        {"suffix": ("w2",)},
        {"prefix": ("memories",), "suffix": ("*",)},
        {"max_depth": 2},
        {"limit": 2, "offset": 1},
    ]
    for case in cases:
        assert store.list_namespaces(**case) == reference.list_namespaces(**case), case
