"""Contract tests for ``Storage.longterm`` (kairox_core/longterm/store.py).

A backend's suite subclasses ``LongTermStoreContract`` and implements ``make_storage``
(a fresh, empty database per test; ``tests/test_longterm_contract.py`` does so for
SQLite, kairox-postgres for PostgreSQL)::

    class TestMyLongTerm(LongTermStoreContract):
        def make_storage(self, tmp_path):
            return MyStorage(url_of_a_fresh_database)

The checks: chunk rows round-trip, filters and insertion order, the vector space and
re-embedding, exact cosine k-NN confined to the partitions asked for (Hypothesis,
against a plain model), personal packs and activations, ``atomic()`` with the events,
and ``kx.longterm`` / ``kx.packs`` / the long-term engine through ``Kairox`` on top.
"""

from __future__ import annotations

import math
import struct
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kairox_core.config import KairoxConfig
from kairox_core.events import UserMessageAdded
from kairox_core.longterm.chunks import Chunk
from kairox_core.longterm.store import Activation, LongTermStore, PackRow
from kairox_core.store.protocol import Storage

DIM = 3


def _chunk(
    cid: str | None = None,
    *,
    scope: str = "project",
    text: str = "a fact",
    session_id: str | None = None,
    workspace_id: str | None = "w",
    at: float = 1000.0,
    source_seq: int | None = None,
) -> Chunk:
    return Chunk(
        id=cid or f"lt-{uuid.uuid4().hex[:12]}",
        scope=scope,
        text=text,
        session_id=session_id,
        workspace_id=workspace_id,
        created_at=at,
        updated_at=at,
        source_seq=source_seq,
    )


def _f32(vector: Sequence[float]) -> tuple[float, ...]:
    return struct.unpack(f"{len(vector)}f", struct.pack(f"{len(vector)}f", *vector))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _refuse(texts: Sequence[str]) -> list[list[float]]:
    raise AssertionError("nothing should be re-embedded here")


vectors = st.lists(st.integers(-3, 3), min_size=DIM, max_size=DIM).map(
    lambda v: [float(x) for x in v]
)
nonzero = vectors.filter(any)
placed = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), vectors), max_size=12)
pack_ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "activate", "deactivate"]),
        st.sampled_from(["rules", "Style", "style", "née", "a-b"]),
        st.sampled_from(["", "w1", "w2"]),  # the text, or the workspace of an activation
        st.integers(0, 9).map(float),
    ),
    max_size=20,
)


class LongTermStoreContract:
    """What ``kx.longterm`` and ``kx.packs`` rely on from a storage's ``longterm``."""

    def make_storage(self, tmp_path: Path) -> Storage:
        raise NotImplementedError

    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[Storage]:
        s = self.make_storage(tmp_path)
        yield s
        s.close()

    @pytest.fixture
    def store(self, storage: Storage) -> LongTermStore:
        lt = storage.longterm
        lt.use_space("test", DIM, _refuse)  # empty: nothing to re-embed
        return lt

    # --- chunks ----------------------------------------------------------------------

    def test_has_the_protocols_shape(self, storage: Storage) -> None:
        lt = storage.longterm
        assert isinstance(lt, LongTermStore)
        assert lt.vector_space() is None
        assert lt.chunk_counts() == (0, 0) and lt.list_chunks() == []
        assert lt.list_packs() == [] and lt.activations() == []

    def test_chunk_rows_round_trip(self, store: LongTermStore) -> None:
        one = _chunk("lt-1", scope="session", text="Ünïcode ✓ 日本", session_id="s1", at=1.5)
        two = _chunk("lt-2", scope="global", workspace_id=None, source_seq=42, at=2.25)
        store.insert_chunks([(one, "s:s1", [1.0, 0.0, 0.0]), (two, "g", [0.0, 1.0, 0.0])])
        assert store.get_chunk("lt-1") == one and store.get_chunk("lt-2") == two
        assert store.get_chunk("nope") is None
        assert store.chunk_counts() == (2, 2)
        with pytest.raises(Exception):  # noqa: B017  # each backend its own integrity error
            store.insert_chunks([(one, "s:s1", [1.0, 0.0, 0.0])])
        assert store.chunk_counts() == (2, 2)
        exported = list(store.export_chunks())
        assert [(e.chunk, e.owner, e.vector) for e in exported] == [
            (one, "s:s1", (1.0, 0.0, 0.0)),
            (two, "g", (0.0, 1.0, 0.0)),
        ]

    def test_a_vector_of_another_dimension_is_refused(self, store: LongTermStore) -> None:
        with pytest.raises(Exception):  # noqa: B017
            store.insert_chunks([(_chunk(), "w:w", [1.0, 0.0])])
        assert store.chunk_counts() == (0, 0)
        store.insert_chunks([(_chunk(), "w:w", [1.0, 0.0, 0.0])])
        with pytest.raises(Exception):  # noqa: B017
            store.nearest_chunks([1.0, 0.0], ["w:w"], 3)

    def test_update_and_delete(self, store: LongTermStore) -> None:
        c = _chunk("lt-1", text="before")
        store.insert_chunks([(c, "w:w", [1.0, 0.0, 0.0])])
        assert store.update_chunk("lt-1", "after", 2000.0, [0.0, 0.0, 1.0])
        assert not store.update_chunk("nope", "x", 2000.0, [0.0, 0.0, 1.0])
        got = store.get_chunk("lt-1")
        assert got is not None and (got.text, got.updated_at, got.created_at) == (
            "after",
            2000.0,
            1000.0,
        )
        hits = store.nearest_chunks([0.0, 0.0, 1.0], ["w:w"], 1)
        assert [(h.id, round(s, 6)) for h, s in hits] == [("lt-1", 1.0)]
        assert store.delete_chunk("lt-1") and not store.delete_chunk("lt-1")
        assert store.chunk_counts() == (0, 0)
        assert store.nearest_chunks([0.0, 0.0, 1.0], ["w:w"], 1) == []

    def test_lists_filter_and_keep_insertion_order(self, store: LongTermStore) -> None:
        rows = [
            (_chunk("lt-z", scope="session", session_id="s1", workspace_id="w1"), "s:s1"),
            (_chunk("lt-a", scope="project", session_id="s1", workspace_id="w1"), "w:w1"),
            (_chunk("lt-m", scope="project", workspace_id="w2"), "w:w2"),
            (_chunk("lt-b", scope="global", workspace_id=None), "g"),
        ]
        store.insert_chunks([(c, o, [1.0, 1.0, 0.0]) for c, o in rows])

        def ids(chunks: list[Chunk]) -> list[str]:
            return [c.id for c in chunks]

        assert ids(store.list_chunks()) == ["lt-z", "lt-a", "lt-m", "lt-b"]
        assert ids(store.list_chunks(scope="project")) == ["lt-a", "lt-m"]
        assert ids(store.list_chunks(scope="project", workspace_id="w2")) == ["lt-m"]
        assert ids(store.list_chunks(session_id="s1")) == ["lt-z", "lt-a"]
        assert ids(store.list_chunks(owners=["g", "s:s1"])) == ["lt-z", "lt-b"]
        assert store.list_chunks(owners=[]) == []

    def test_a_new_space_re_embeds_every_chunk(self, store: LongTermStore) -> None:
        store.insert_chunks(
            [(_chunk(f"lt-{i}", text="x" * (i + 1)), "w:w", [1.0, 0.0, 0.0]) for i in range(3)]
        )
        assert store.use_space("test", DIM, _refuse) == 0
        seen: list[str] = []

        def embed(texts: Sequence[str]) -> list[list[float]]:
            seen.extend(texts)
            return [[float(len(t)), 1.0, 0.0, 0.5] for t in texts]

        assert store.use_space("other", 4, embed) == 3
        assert seen == ["x", "xx", "xxx"]
        assert store.vector_space() == ("other", 4)
        assert [e.vector for e in store.export_chunks()] == [
            _f32([float(n), 1.0, 0.0, 0.5]) for n in (1, 2, 3)
        ]
        assert store.chunk_counts() == (3, 3)
        hits = store.nearest_chunks([3.0, 1.0, 0.0, 0.5], ["w:w"], 1)
        assert [h.id for h, _ in hits] == ["lt-2"]
        with pytest.raises(Exception):  # noqa: B017  # the old dimension is gone
            store.insert_chunks([(_chunk(), "w:w", [1.0, 0.0, 0.0])])

    def test_knn_ties_go_oldest_first_and_zero_vectors_are_left_out(
        self, store: LongTermStore
    ) -> None:
        store.insert_chunks(
            [
                (_chunk("lt-first"), "w:w", [0.0, 2.0, 0.0]),
                (_chunk("lt-zero"), "w:w", [0.0, 0.0, 0.0]),
                (_chunk("lt-second"), "g", [0.0, 1.0, 0.0]),
                (_chunk("lt-far"), "w:w", [0.0, -1.0, 0.0]),
            ]
        )
        hits = store.nearest_chunks([0.0, 1.0, 0.0], ["w:w", "g"], 10)
        assert [(c.id, round(s, 6)) for c, s in hits] == [
            ("lt-first", 1.0),
            ("lt-second", 1.0),
            ("lt-far", -1.0),
        ]
        assert store.nearest_chunks([0.0, 1.0, 0.0], ["w:w", "g"], 0) == []
        assert store.nearest_chunks([0.0, 1.0, 0.0], [], 3) == []

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(rows=placed, query=nonzero, asked=st.sets(st.sampled_from("abc")), k=st.integers(1, 6))
    # a zero vector (no cosine) ranked first must not hide the real nearest neighbour
    @example(
        rows=[("a", [0.0, 0.0, 0.0]), ("a", [0.0, 0.0, 1.0])],
        query=[0.0, 0.0, 1.0],
        asked={"a"},
        k=1,
    )
    def test_knn_is_exact_cosine_within_the_partitions_asked(
        self,
        store: LongTermStore,
        rows: list[tuple[str, list[float]]],
        query: list[float],
        asked: set[str],
        k: int,
    ) -> None:
        run = uuid.uuid4().hex[:8]  # the store lives across examples: partitions of our own
        placed_rows = [
            (_chunk(f"lt-{run}-{i}"), f"{run}:{part}", vec) for i, (part, vec) in enumerate(rows)
        ]
        store.insert_chunks(placed_rows)
        owners = [f"{run}:{p}" for p in sorted(asked)]
        model = sorted(
            (
                (-_cosine(_f32(vec), _f32(query)), i, c.id)
                for i, (c, owner, vec) in enumerate(placed_rows)
                if owner in owners and any(vec)
            ),
        )[:k]
        hits = store.nearest_chunks(query, owners, k)
        assert len(hits) == len(model)
        for (_, sim), (neg, _, _) in zip(hits, model, strict=True):
            assert abs(sim + neg) < 1e-5  # the same cosine: a threshold means the same
        in_model = {cid for _, _, cid in model}
        for chunk, sim in hits:  # a tie at the k-th place may pick either chunk
            assert chunk.id in in_model or abs(sim + model[-1][0]) < 1e-5
        sims = [s for _, s in hits]
        assert sims == sorted(sims, reverse=True)

    # --- packs -----------------------------------------------------------------------

    def test_personal_packs_round_trip(self, storage: Storage) -> None:
        lt = storage.longterm
        b = PackRow("b-rules", "Be brief.", False, 1.0, 1.0)
        a = PackRow("a-style", "British English ✓", True, 2.0, 2.0)
        lt.insert_pack(b)
        lt.insert_pack(a)
        lt.insert_pack(PackRow("B-upper", "x", False, 3.0, 3.0))
        assert [p.name for p in lt.list_packs()] == ["B-upper", "a-style", "b-rules"]  # binary
        assert lt.get_pack("a-style") == a and lt.get_pack("none") is None
        with pytest.raises(Exception):  # noqa: B017
            lt.insert_pack(b)
        assert lt.update_pack("a-style", "Oxford commas.", False, 5.0)
        assert not lt.update_pack("none", "x", False, 5.0)
        assert lt.get_pack("a-style") == PackRow("a-style", "Oxford commas.", False, 2.0, 5.0)
        assert lt.delete_pack("b-rules") and not lt.delete_pack("b-rules")
        assert [p.name for p in lt.list_packs()] == ["B-upper", "a-style"]

    def test_activations(self, storage: Storage) -> None:
        lt = storage.longterm
        lt.activate_pack("w1", "style", 3.0)
        lt.activate_pack("", "rules", 2.0)
        lt.activate_pack("w2", "other", 1.0)
        lt.activate_pack("w1", "style", 9.0)  # idempotent: keeps its time
        lt.activate_pack("w1", "rules", 2.0)
        assert lt.activations("w1") == [
            Activation("", "rules", 2.0),
            Activation("w1", "rules", 2.0),
            Activation("w1", "style", 3.0),
        ]
        assert [a.name for a in lt.activations("")] == ["rules"]
        assert [a.name for a in lt.activations()] == ["other", "rules", "rules", "style"]
        lt.deactivate_pack("w1", "style")
        lt.delete_activations("rules")
        assert lt.activations() == [Activation("w2", "other", 1.0)]

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(ops=pack_ops)
    def test_packs_and_activations_match_a_model(
        self, storage: Storage, ops: list[tuple[str, str, str, float]]
    ) -> None:
        lt = storage.longterm
        for row in lt.list_packs():  # the storage lives across examples: start empty
            lt.delete_pack(row.name)
            lt.delete_activations(row.name)
        for a in lt.activations():
            lt.delete_activations(a.name)
        packs: dict[str, PackRow] = {}
        active: dict[tuple[str, str], float] = {}
        for op, name, text, at in ops:
            if op == "put" and name not in packs:
                packs[name] = PackRow(name, text, at > 5, at, at)
                lt.insert_pack(packs[name])
            elif op == "put":
                assert lt.update_pack(name, text, False, at)
                packs[name] = PackRow(name, text, False, packs[name].created_at, at)
            elif op == "delete":
                assert lt.delete_pack(name) == (packs.pop(name, None) is not None)
            elif op == "activate":
                lt.activate_pack(text, name, at)
                active.setdefault((text, name), at)
            else:
                lt.deactivate_pack(text, name)
                active.pop((text, name), None)
        assert lt.list_packs() == sorted(packs.values(), key=lambda r: r.name.encode())
        for ws in (None, "", "w1", "w2"):
            expected = sorted(
                (Activation(w, n, at) for (w, n), at in active.items() if ws in (None, w) or not w),
                key=lambda a: (a.activated_at, a.name.encode(), a.workspace_id),
            )
            got = lt.activations(ws)  # time, then name; '' and ws tie either way
            assert [(a.activated_at, a.name) for a in got] == [
                (a.activated_at, a.name) for a in expected
            ]
            assert sorted(got, key=lambda a: (a.activated_at, a.name.encode(), a.workspace_id)) == (
                expected
            )

    # --- transactions and the whole flow ---------------------------------------------

    def test_atomic_spans_chunks_packs_and_events(self, storage: Storage) -> None:
        lt = storage.longterm
        lt.use_space("test", DIM, _refuse)
        with pytest.raises(RuntimeError), storage.atomic():
            lt.insert_chunks([(_chunk("lt-lost"), "w:w", [1.0, 0.0, 0.0])])
            lt.insert_pack(PackRow("lost", "x", False, 1.0, 1.0))
            lt.activate_pack("", "lost", 1.0)
            storage.events.append(
                UserMessageAdded(session_id="s", turn_id="t", text="lost", tokens=1)
            )
            raise RuntimeError("undo all of it")
        assert lt.chunk_counts() == (0, 0) and lt.get_pack("lost") is None
        assert lt.activations() == [] and storage.events.read("s") == []
        with lt.atomic(), storage.atomic():  # nests, one transaction
            lt.insert_chunks([(_chunk("lt-kept"), "w:w", [1.0, 0.0, 0.0])])
        assert lt.get_chunk("lt-kept") is not None

    def test_longterm_and_packs_through_kairox(self, storage: Storage, tmp_path: Path) -> None:
        from kairox_core.facade import Kairox
        from kairox_core.longterm.engine import LongTermEngine

        config = KairoxConfig.model_validate(
            {"retrieval": {"workspace_index": False}, "packs": {"dir": str(tmp_path / "packs")}}
        )
        kx = Kairox(storage, config)
        session = kx.session(workspace="docs")
        fact = "The staging database password rotates every Monday at 9am."
        chunk = kx.longterm.add(fact, scope="project", session_id=session.id)
        mine = kx.longterm.add("I like green tea.", session_id=session.id)
        assert chunk.workspace_id == "docs" and mine.workspace_id == "docs"
        hits = kx.longterm.search(
            "When does the staging database password rotate?",
            session_id=session.id,
            workspace_id="docs",
        )
        assert [h.chunk.id for h in hits] == [chunk.id] and 0 < hits[0].similarity <= 1
        other = kx.session(workspace="elsewhere")
        assert kx.longterm.list(session_id=other.id, workspace_id="elsewhere") == []
        assert kx.longterm.edit(chunk.id, fact.replace("Monday", "Friday")).text.count("Friday")

        kx.packs.create("house-rules", text="Answer in British English.")
        kx.packs.activate("house-rules", workspace_id="docs")
        draft = kx.packs.promote([mine.id])
        assert draft.draft and draft.text == "I like green tea."
        published = kx.packs.publish(draft.name, level="team", by="ada")
        assert published.level == "team" and published.published_by == "ada"
        assert [(p.name, p.level) for p in kx.packs.list()] == [
            ("house-rules", "personal"),
            (draft.name, "team"),
        ]
        context = LongTermEngine(kx.engine_context).context_for(
            session, "Which day does the staging password rotate?"
        )
        assert [p.name for p in context.packs] == ["house-rules"]
        assert [c.id for c in context.recall.chunks] == [chunk.id]
        kx.longterm.delete(mine.id)
        assert kx.longterm.store.rows.chunk_counts() == (1, 1)

        types = [e.type for e in kx.events(session.id)]
        for expected in ("LongTermChunkAdded", "LongTermChunkEdited", "LongTermChunkDeleted"):
            assert expected in types
        pack_types = [e.type for e in kx.events("_packs")]
        assert pack_types == [
            "PackCreated",
            "PackActivated",
            "PackCreated",
            "PackPromoted",
            "PackPublished",
        ]
        kx.close()
