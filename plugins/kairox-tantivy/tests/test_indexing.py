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
    (docs / "guide.md").write_text("# Deploying the service\n\nUse blue-green rollouts.\n\n"
                                   "Rollback takes one command.\n")
    (docs / "sub" / "faq.txt").write_text("Passwords rotate every ninety days.\n")
    (docs / "image.png").write_bytes(b"\x89PNG not text")
    (docs / ".hidden").mkdir()
    (docs / ".hidden" / "secret.md").write_text("rollouts hidden")
    return docs


def test_index_files_from_a_directory(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    seen: list[tuple[int, int]] = []
    report = retriever.index([docs], progress=lambda done, total: seen.append((done, total)))
    assert (report.files, report.documents, report.failed) == (2, 2, [])
    assert seen == [(1, 2), (2, 2)]
    hit = retriever.search("rollouts", 5)
    assert [h.metadata["title"] for h in hit] == ["Deploying the service"]
    assert hit[0].doc_id == str((docs / "guide.md").resolve())
    assert hit[0].chunk_id == hit[0].doc_id + "#0"
    assert retriever.search("passwords", 1)[0].metadata["title"] == "faq"
    # filter on the built-in path field
    faq = str((docs / "sub" / "faq.txt").resolve())
    assert retriever.search("rollouts passwords", 5, {"path": faq})[0].doc_id == faq


def test_reindexing_a_file_replaces_its_chunks(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    retriever.index([docs])
    (docs / "guide.md").write_text("# Deploying\n\nCanary releases only.\n")
    retriever.index([docs / "guide.md"])
    assert retriever.search("rollouts", 5) == []
    assert len(retriever.search("canary", 5)) == 1
    assert len(retriever.search("passwords", 5)) == 1  # other files untouched


def test_unreadable_file_is_reported_and_the_rest_indexed(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    (docs / "broken.txt").write_bytes(b"\xff\xfe\xfa not utf-8")
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    report = retriever.index([docs])
    assert report.files == 2 and len(report.failed) == 1
    assert report.failed[0][0].endswith("broken.txt")
    assert "1 files failed" in report.summary()
    assert retriever.search("rollouts", 1)


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx")))
    with pytest.raises(RetrieverError, match=r"'handbook'.*no such file"):
        retriever.index([tmp_path / "nope"])
    with pytest.raises(RetrieverError, match="nothing to index"):
        retriever.index([])


def test_jsonl_corpus_with_metadata_filters(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "1", "title": "Aspirin", "text": "Aspirin lowers fever.",
         "metadata": {"year": 2019, "tags": ["drug", "fever"]}},
        {"_id": "2", "title": "Ibuprofen", "text": "Ibuprofen lowers fever too.",
         "metadata": {"year": 2021, "tags": ["drug"]}},
        {"_id": "3", "title": "", "text": ""},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    retriever = TantivyRetriever(kb_config("pharma", path=str(tmp_path / "idx"),
                                           stored_fields=["year", "tags"]))
    assert retriever.index([corpus]).documents == 2
    assert {h.doc_id for h in retriever.search("fever", 5)} == {"1", "2"}
    assert [h.doc_id for h in retriever.search("fever", 5, {"year": 2021})] == ["2"]
    assert [h.doc_id for h in retriever.search("fever", 5, {"tags": "fever"})] == ["1"]
    assert retriever.search("fever", 5, {"year": 2021})[0].metadata["tags"] == ["drug"]


def test_source_paths_build_the_index_on_first_use(tmp_path: Path) -> None:
    docs = _write_docs(tmp_path)
    retriever = TantivyRetriever(kb_config("handbook", path=str(tmp_path / "idx"),
                                           source_paths=[str(docs)]))
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
    writer.add_document(tantivy.Document(url="https://a", heading="Comets",
                                         content="Comets have icy tails.", year=2001))
    writer.add_document(tantivy.Document(url="https://b", heading="Asteroids",
                                         content="Asteroids are rocky, unlike comets.",
                                         year=2005))
    writer.commit()
    writer.wait_merging_threads()
    retriever = TantivyRetriever(kb_config("space", path=str(tmp_path), id_field="url",
                                           doc_id_field="url", title_field="heading",
                                           body_field="content"))
    hits = retriever.search("comets", 5)
    assert [h.doc_id for h in hits] == ["https://a", "https://b"]
    assert hits[0].metadata == {"year": 2001, "title": "Comets",
                                "snippet": "Comets have icy tails"}
    assert [h.doc_id for h in retriever.search("comets", 5, {"year": 2005})] == ["https://b"]


def test_chunks_respect_paragraphs_and_size() -> None:
    text = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(20))
    chunks = chunk_text(text, 500)
    assert all(len(c) <= 500 for c in chunks)
    assert all(c.startswith("Paragraph") for c in chunks)
    assert " ".join(" ".join(chunks).split()) == " ".join(text.split())
    giant = "x" * 1200
    assert [len(c) for c in chunk_text(giant, 500)] == [500, 500, 200]
