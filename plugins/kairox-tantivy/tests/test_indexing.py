"""Building an index from files: chunking, JSONL corpora, re-indexing, failures, progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tantivy
from helpers import kb_config

from kairox_core.retrieval.base import RetrieverError
from kairox_tantivy.loader import chunk_text
from kairox_tantivy.retriever import TantivyRetriever


def _write_docs(root: Path) -> Path:
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "guide.md").write_text(
        "# Deploying the service\n\nUse blue-green rollouts.\n\nRollback takes one command.\n"
    )
    (docs / "sub" / "faq.txt").write_text("Passwords rotate every ninety days.\n")
    (docs / "image.png").write_bytes(b"\x89PNG not text")
    (docs / ".hidden").mkdir()
    (docs / ".hidden" / "secret.md").write_text("rollouts hidden")
    return docs


def test_index_files_from_a_directory(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    seen: list[tuple[int, int | None, str]] = []
    report = retriever.index([str(docs)], progress=lambda *args: seen.append(args))
    assert (report.added, report.chunks, report.errors) == (2, 2, [])
    assert report.skipped_binary == 1  # image.png; the hidden folder is not walked at all
    assert [(d, t) for d, t, _ in seen] == [(1, 2), (2, 2)]
    hit = retriever.search("rollouts", 5)
    assert [h.metadata["title"] for h in hit] == ["Deploying the service"]
    assert hit[0].doc_id == str((docs / "guide.md").resolve())
    assert hit[0].chunk_id == hit[0].doc_id + "#0"
    assert retriever.search("passwords", 1)[0].metadata["title"] == "faq"
    # filter on the built-in path field
    faq = str((docs / "sub" / "faq.txt").resolve())
    assert retriever.search("rollouts passwords", 5, {"path": faq})[0].doc_id == faq


def test_reindexing_adds_updates_skips_and_removes(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    retriever.index([str(docs)])
    again = retriever.index([str(docs)])
    assert (again.added, again.updated, again.unchanged, again.chunks) == (0, 0, 2, 0)
    (docs / "guide.md").write_text("# Deploying\n\nCanary releases only, no blue-green.\n")
    (docs / "sub" / "faq.txt").unlink()
    (docs / "new.md").write_text("Incidents page the on-call engineer.\n")
    report = retriever.index([str(docs)])
    assert (report.added, report.updated, report.removed, report.unchanged) == (1, 1, 1, 0)
    assert retriever.search("rollouts", 5) == []
    assert len(retriever.search("canary", 5)) == 1
    assert retriever.search("passwords", 5) == []
    assert len(retriever.search("incidents", 5)) == 1
    # a fresh retriever (another process) sees the same index and manifest
    fresh = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    assert fresh.index([str(docs)]).unchanged == 2


def test_unreadable_file_is_reported_and_the_rest_indexed(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    (docs / "broken.jsonl").write_text('{"_id": "1", "text": "fine"}\nnot json\n')
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    report = retriever.index([str(docs)])
    assert report.added == 2 and len(report.errors) == 1
    assert "broken.jsonl:2" in report.errors[0]
    assert retriever.search("rollouts", 1)
    assert retriever.search("fine", 1) == []  # nothing half-read from the broken file


def test_missing_path_and_nothing_to_index(tmp_path: Path) -> None:
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    report = retriever.index([str(tmp_path / "nope")])
    assert report.errors == [f"{tmp_path / 'nope'}: no such file or directory"]
    with pytest.raises(RetrieverError, match="nothing to index"):
        retriever.index([])


def test_a_failed_run_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    retriever.index([str(docs)])
    (docs / "guide.md").write_text("# Deploying\n\nCanary releases only.\n")

    def interrupt(done: int, total: int | None, item: str) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        retriever.index([str(docs)], progress=interrupt)
    fresh = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    assert len(fresh.search("rollouts", 5)) == 1 and fresh.search("canary", 5) == []


def test_jsonl_corpus_with_metadata_filters(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {
            "_id": "1",
            "title": "Aspirin",
            "text": "Aspirin lowers fever.",
            "metadata": {"year": 2019, "tags": ["drug", "fever"]},
        },
        {
            "_id": "2",
            "title": "Ibuprofen",
            "text": "Ibuprofen lowers fever too.",
            "metadata": {"year": 2021, "tags": ["drug"]},
        },
        {"_id": "3", "title": "", "text": ""},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    retriever = TantivyRetriever(
        kb_config("pharma", path=str(tmp_path / "idx"), stored_fields=["year", "tags"])
    )
    assert retriever.index([str(corpus)]).chunks == 2
    assert {h.doc_id for h in retriever.search("fever", 5)} == {"1", "2"}
    assert [h.doc_id for h in retriever.search("fever", 5, {"year": 2021})] == ["2"]
    assert [h.doc_id for h in retriever.search("fever", 5, {"tags": "fever"})] == ["1"]
    assert retriever.search("fever", 5, {"year": 2021})[0].metadata["tags"] == ["drug"]


def test_source_paths_build_the_index_on_first_use(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    retriever = TantivyRetriever(
        kb_config("handbook", path=str(tmp_path / "idx"), source_paths=[str(docs)])
    )
    assert retriever.search("rollback", 1)[0].metadata["title"] == "Deploying the service"
    assert (tmp_path / "idx" / "meta.json").is_file()


def test_an_index_built_elsewhere(tmp_path: Path) -> None:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("url", stored=True, tokenizer_name="raw")
    sb.add_text_field("heading", stored=True)
    sb.add_text_field("content", stored=True)
    sb.add_integer_field("year", stored=True, indexed=True)
    index = tantivy.Index(sb.build(), path=str(tmp_path))
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    writer.add_document(
        tantivy.Document(
            url="https://a", heading="Comets", content="Comets have icy tails.", year=2001
        )
    )
    writer.add_document(
        tantivy.Document(
            url="https://b",
            heading="Asteroids",
            content="Asteroids are rocky, unlike comets.",
            year=2005,
        )
    )
    writer.commit()
    writer.wait_merging_threads()
    retriever = TantivyRetriever(
        kb_config(
            "space",
            path=str(tmp_path),
            id_field="url",
            doc_id_field="url",
            title_field="heading",
            body_field="content",
        )
    )
    hits = retriever.search("comets", 5)
    assert [h.doc_id for h in hits] == ["https://a", "https://b"]
    assert hits[0].metadata == {"year": 2001, "title": "Comets", "snippet": "Comets have icy tails"}
    assert [h.doc_id for h in retriever.search("comets", 5, {"year": 2005})] == ["https://b"]


def test_chunks_respect_paragraphs_and_size() -> None:
    text = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(20))
    chunks = chunk_text(text, 500)
    assert all(len(c) <= 500 for c in chunks)
    assert all(c.startswith("Paragraph") for c in chunks)
    assert " ".join(" ".join(chunks).split()) == " ".join(text.split())
    giant = "x" * 1200
    assert [len(c) for c in chunk_text(giant, 500)] == [500, 500, 200]
