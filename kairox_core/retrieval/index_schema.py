"""The SQLite workspace index's tables (``WorkspaceRagIndex``): DDL and vector format.

Kept apart from the index so a copy into a SQLite file (kairox-postgres's ``kairox db
copy``, through ``kairox_core.store.indexing``) creates the same tables without loading
the index. Migrations only append: a database written by an older Kairox migrates.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kairox_core.retrieval import ann
from kairox_core.retrieval.keyword_terms import STATS_SCHEMA

COMPONENT = "retrieval"
VEC_MAX_K = 4096  # sqlite-vec's limit on k
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"  # rag_fts's tokenizer (migrations)

MIGRATIONS = [
    """
    CREATE TABLE rag_spaces (
        workspace_id TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE rag_documents (
        id INTEGER PRIMARY KEY,
        workspace_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        origin TEXT NOT NULL DEFAULT 'text',
        doc_type TEXT NOT NULL,
        path TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        metadata TEXT NOT NULL DEFAULT '{}',
        content_hash TEXT NOT NULL,
        mtime REAL,
        size INTEGER,
        updated_at REAL NOT NULL,
        UNIQUE (workspace_id, doc_id)
    );
    CREATE TABLE rag_chunks (
        id INTEGER PRIMARY KEY,
        document_id INTEGER NOT NULL REFERENCES rag_documents(id) ON DELETE CASCADE,
        workspace_id TEXT NOT NULL,
        ord INTEGER NOT NULL,
        text TEXT NOT NULL,
        heading TEXT NOT NULL DEFAULT '',
        tokens INTEGER NOT NULL,
        content_hash TEXT NOT NULL
    );
    CREATE INDEX rag_chunks_document ON rag_chunks(document_id);
    CREATE INDEX rag_chunks_hash ON rag_chunks(workspace_id, content_hash);
    CREATE VIRTUAL TABLE rag_fts USING fts5(
        text, heading, content='rag_chunks', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER rag_chunks_ai AFTER INSERT ON rag_chunks BEGIN
        INSERT INTO rag_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
    END;
    CREATE TRIGGER rag_chunks_ad AFTER DELETE ON rag_chunks BEGIN
        INSERT INTO rag_fts(rag_fts, rowid, text, heading)
        VALUES ('delete', old.id, old.text, old.heading);
    END;
    """,
    # 2: the workspace becomes an FTS5 term (column ws_token), so keyword search never
    # reads rows of other workspaces
    """
    DROP TRIGGER rag_chunks_ai;
    DROP TRIGGER rag_chunks_ad;
    DROP TABLE rag_fts;
    ALTER TABLE rag_chunks ADD COLUMN ws_token TEXT
        GENERATED ALWAYS AS ('kxws' || lower(hex(workspace_id))) VIRTUAL;
    CREATE VIRTUAL TABLE rag_fts USING fts5(
        text, heading, ws_token, content='rag_chunks', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    INSERT INTO rag_fts(rag_fts) VALUES ('rebuild');
    CREATE TRIGGER rag_chunks_ai AFTER INSERT ON rag_chunks BEGIN
        INSERT INTO rag_fts(rowid, text, heading, ws_token)
        VALUES (new.id, new.text, new.heading, new.ws_token);
    END;
    CREATE TRIGGER rag_chunks_ad AFTER DELETE ON rag_chunks BEGIN
        INSERT INTO rag_fts(rag_fts, rowid, text, heading, ws_token)
        VALUES ('delete', old.id, old.text, old.heading, old.ws_token);
    END;
    """,
    # 3: text embedded with a chunk but never shown or keyword-indexed (DocumentInput.context)
    "ALTER TABLE rag_chunks ADD COLUMN context TEXT NOT NULL DEFAULT '';",
    # 4: every vector write logged, so an ANN graph (retrieval/ann.py) catches up from it
    ann.LOG_SCHEMA,
    # 5: a chunk's document and space from a small covering index: the ANN's ~100 results
    # and the keyword ranking's rows are mapped to their documents by id every search
    # (from the table itself each lookup read a page of chunk text)
    "CREATE INDEX rag_chunks_owner ON rag_chunks(id, document_id, workspace_id);",
    # 6: the common keyword terms' counts, stored by bulk and background indexing so a
    # query does not count them (keyword_terms.py)
    STATS_SCHEMA,
]


def pack_vector(vector: Sequence[float]) -> bytes:
    """A vector as sqlite-vec stores it (float32, native order)."""
    return struct.pack(f"{len(vector)}f", *vector)
