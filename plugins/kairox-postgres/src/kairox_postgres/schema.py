"""Versioned schema migrations, one numbered list per component, like the SQLite ones.

``migrate`` applies the steps not yet recorded in ``kx_schema_versions``, all in one
transaction under a transaction-level advisory lock, so two processes opening a fresh
database at once never both apply a step (the second waits, then finds nothing to do).
A database newer than this plugin is refused rather than written with an old schema.
"""

from __future__ import annotations

from typing import Any

from kairox_postgres.db import PgDatabase, PostgresConfigError

_MIGRATION_LOCK = 0x6B78_5067  # "kxPg": the advisory lock key for schema changes

EVENTS: tuple[str, ...] = (
    """
    CREATE TABLE events (
        id BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL CHECK (seq > 0),
        type TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        data JSONB NOT NULL,
        UNIQUE (session_id, seq)
    );
    CREATE INDEX events_by_type ON events (session_id, type, seq);
    CREATE FUNCTION kx_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'the event store is append-only'; END $$;
    CREATE TRIGGER events_no_update BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION kx_events_append_only();
    CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION kx_events_append_only();
    -- one row per session; its row lock is what serialises appenders to a session
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        workspace_id TEXT,
        profile TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        last_seq BIGINT NOT NULL DEFAULT 0,
        event_count BIGINT NOT NULL DEFAULT 0,
        archived_at DOUBLE PRECISION
    );
    CREATE INDEX sessions_by_workspace ON sessions (workspace_id, created_at);
    CREATE TABLE recall_progress (
        session_id TEXT PRIMARY KEY,
        last_seq BIGINT NOT NULL,
        low_seq BIGINT
    );
    """,
)

MEMORY: tuple[str, ...] = (
    """
    CREATE TABLE memories (
        n BIGSERIAL UNIQUE,
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
        owner TEXT NOT NULL,
        key TEXT CHECK (key IS NOT NULL OR scope = 'session'),
        body TEXT NOT NULL,
        workspace_id TEXT,
        session_id TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        approved_at DOUBLE PRECISION,
        prov_session_id TEXT,
        prov_turn_id TEXT,
        prov_raw TEXT NOT NULL DEFAULT ''
    );
    CREATE UNIQUE INDEX memories_by_key ON memories (scope, owner, key) WHERE key IS NOT NULL;
    CREATE INDEX memories_by_workspace ON memories (workspace_id, scope);
    CREATE INDEX memories_by_session ON memories (session_id, scope);
    CREATE TABLE memory_history (
        id BIGSERIAL PRIMARY KEY,
        memory_id TEXT NOT NULL,
        scope TEXT NOT NULL,
        owner TEXT NOT NULL,
        key TEXT,
        body TEXT NOT NULL,
        valid_from DOUBLE PRECISION NOT NULL,
        replaced_at DOUBLE PRECISION NOT NULL,
        ended TEXT NOT NULL CHECK (ended IN ('replaced', 'edited', 'deleted')),
        approved_at DOUBLE PRECISION,
        prov_session_id TEXT,
        prov_turn_id TEXT,
        prov_raw TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX memory_history_by_key ON memory_history (scope, owner, key, id);
    CREATE INDEX memory_history_by_memory ON memory_history (memory_id, id);
    """,
)

PROPOSALS: tuple[str, ...] = (
    """
    CREATE TABLE memory_proposals (
        n BIGSERIAL UNIQUE,
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
        owner TEXT NOT NULL,
        key TEXT,
        body TEXT NOT NULL,
        workspace_id TEXT,
        session_id TEXT NOT NULL,
        turn_id TEXT,
        raw TEXT NOT NULL DEFAULT '',
        tainted BOOLEAN NOT NULL DEFAULT FALSE,
        source TEXT NOT NULL DEFAULT 'assistant',
        created_at DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'accepted', 'rejected', 'superseded')),
        resolved_at DOUBLE PRECISION,
        reason TEXT,
        supersedes TEXT,
        superseded_by TEXT,
        memory_id TEXT,
        final_body TEXT
    );
    CREATE UNIQUE INDEX memory_proposals_one_pending
        ON memory_proposals (scope, owner, key) WHERE status = 'pending';
    CREATE INDEX memory_proposals_by_status ON memory_proposals (status, created_at);
    """,
)

LEASES: tuple[str, ...] = (
    """
    -- one compaction per session at a time across hosts; an expired lease is free
    CREATE TABLE compaction_leases (
        session_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        acquired_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    """,
    """
    -- 2: the core's LeaseStore (kairox_core/store/leases.py): any name, the holder's pid
    -- and host, so a dead holder on this host is displaced at once
    CREATE TABLE kairox_leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        acquired_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    """,
    """
    -- 3: the compactor takes its lease in kairox_leases (storage.leases); the first
    -- table, behind a plugin-only API nothing called, goes
    DROP TABLE compaction_leases;
    """,
)

RETRIEVAL: tuple[str, ...] = (
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    -- SQLite's FTS5 tokenizer is 'porter unicode61': English stemming, no stop words.
    -- The same here: a snowball dictionary without a stop-word list.
    CREATE TEXT SEARCH DICTIONARY kx_stem (TEMPLATE = snowball, Language = english);
    CREATE TEXT SEARCH CONFIGURATION kx_english (COPY = simple);
    ALTER TEXT SEARCH CONFIGURATION kx_english ALTER MAPPING
        FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH kx_stem;
    CREATE TABLE rag_spaces (
        workspace_id TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE rag_documents (
        id BIGSERIAL PRIMARY KEY,
        workspace_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        doc_type TEXT NOT NULL,
        path TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        metadata JSONB NOT NULL DEFAULT '{}',
        content_hash TEXT NOT NULL,
        mtime DOUBLE PRECISION,
        size BIGINT,
        updated_at DOUBLE PRECISION NOT NULL,
        UNIQUE (workspace_id, doc_id)
    );
    -- the space's dimension is its backend's: an untyped vector column (HNSW: step 2)
    CREATE TABLE rag_chunks (
        id BIGSERIAL PRIMARY KEY,
        document_id BIGINT NOT NULL REFERENCES rag_documents(id) ON DELETE CASCADE,
        workspace_id TEXT NOT NULL,
        ord INTEGER NOT NULL,
        text TEXT NOT NULL,
        heading TEXT NOT NULL DEFAULT '',
        tokens INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        context TEXT NOT NULL DEFAULT '',
        tsv TSVECTOR GENERATED ALWAYS AS
            (to_tsvector('kx_english'::regconfig, heading || ' ' || text)) STORED,
        embedding VECTOR
    );
    CREATE INDEX rag_chunks_document ON rag_chunks (document_id);
    CREATE INDEX rag_chunks_hash ON rag_chunks (workspace_id, content_hash);
    CREATE INDEX rag_chunks_tsv ON rag_chunks USING gin (tsv);
    """,
    """
    -- 2: keywords rank by FTS5's bm25 over postings (kairox_core/retrieval/fts5_terms.py
    -- cuts the terms with FTS5's own tokenizer), and each vector dimension in use gets an
    -- HNSW index (cosine, the distance searched). ts_rank and its tsvector go.
    DROP INDEX rag_chunks_tsv;
    ALTER TABLE rag_chunks DROP COLUMN tsv;
    -- tokens as bm25 counts the row; NULL: terms not cut yet (rows of version 1)
    ALTER TABLE rag_chunks ADD COLUMN kw_len INTEGER;
    CREATE INDEX rag_chunks_kw_pending ON rag_chunks (workspace_id) WHERE kw_len IS NULL;
    CREATE TABLE rag_terms (
        id BIGSERIAL PRIMARY KEY,
        workspace_id TEXT NOT NULL,
        term TEXT NOT NULL,
        df BIGINT NOT NULL DEFAULT 0,  -- the space's chunks holding it
        UNIQUE (workspace_id, term)
    );
    -- one row per (term, chunk): a query reads only its terms' postings (index only)
    CREATE TABLE rag_postings (
        term_id BIGINT NOT NULL REFERENCES rag_terms(id) ON DELETE CASCADE,
        chunk_id BIGINT NOT NULL REFERENCES rag_chunks(id) ON DELETE CASCADE,
        document_id BIGINT NOT NULL,
        tf INTEGER NOT NULL,
        dl INTEGER NOT NULL,
        PRIMARY KEY (term_id, chunk_id) INCLUDE (document_id, tf, dl)
    );
    CREATE INDEX rag_postings_chunk ON rag_postings (chunk_id);
    CREATE TABLE rag_kw_spaces (
        workspace_id TEXT PRIMARY KEY,
        chunks BIGINT NOT NULL DEFAULT 0,
        tokens BIGINT NOT NULL DEFAULT 0
    );
    -- the statistics follow the rows whatever writes them (the index, a copy, a cascade)
    CREATE FUNCTION kx_rag_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE rag_terms t SET df = t.df + a.n
        FROM (SELECT term_id, count(*) AS n FROM added GROUP BY term_id) a WHERE t.id = a.term_id;
        RETURN NULL;
    END $$;
    CREATE FUNCTION kx_rag_postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE rag_terms t SET df = t.df - r.n
        FROM (SELECT term_id, count(*) AS n FROM removed GROUP BY term_id) r
        WHERE t.id = r.term_id;
        RETURN NULL;
    END $$;
    CREATE TRIGGER rag_postings_ai AFTER INSERT ON rag_postings REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION kx_rag_postings_added();
    CREATE TRIGGER rag_postings_ad AFTER DELETE ON rag_postings REFERENCING OLD TABLE AS removed
        FOR EACH STATEMENT EXECUTE FUNCTION kx_rag_postings_removed();
    CREATE FUNCTION kx_rag_kw_count(rows_delta BIGINT, tokens_delta BIGINT, space TEXT)
        RETURNS void LANGUAGE sql AS $$
        INSERT INTO rag_kw_spaces AS s (workspace_id, chunks, tokens)
        VALUES (space, rows_delta, tokens_delta)
        ON CONFLICT (workspace_id) DO UPDATE
        SET chunks = s.chunks + excluded.chunks, tokens = s.tokens + excluded.tokens
    $$;
    CREATE FUNCTION kx_rag_chunks_added() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM kx_rag_kw_count(count(*), sum(kw_len), workspace_id)
        FROM added WHERE kw_len IS NOT NULL GROUP BY workspace_id;
        RETURN NULL;
    END $$;
    CREATE FUNCTION kx_rag_chunks_removed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM kx_rag_kw_count(-count(*), -sum(kw_len), workspace_id)
        FROM removed WHERE kw_len IS NOT NULL GROUP BY workspace_id;
        RETURN NULL;
    END $$;
    CREATE FUNCTION kx_rag_chunks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN  -- only a change of kw_len (terms cut at last) moves the counts
        PERFORM kx_rag_kw_count(sum(n)::BIGINT, sum(t)::BIGINT, ws) FROM (
            SELECT workspace_id AS ws, 1 AS n, kw_len AS t FROM added WHERE kw_len IS NOT NULL
            UNION ALL
            SELECT workspace_id, -1, -kw_len FROM removed WHERE kw_len IS NOT NULL
        ) x GROUP BY ws HAVING sum(n) <> 0 OR sum(t) <> 0;
        RETURN NULL;
    END $$;
    CREATE TRIGGER rag_chunks_ai AFTER INSERT ON rag_chunks REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION kx_rag_chunks_added();
    CREATE TRIGGER rag_chunks_ad AFTER DELETE ON rag_chunks REFERENCING OLD TABLE AS removed
        FOR EACH STATEMENT EXECUTE FUNCTION kx_rag_chunks_removed();
    CREATE TRIGGER rag_chunks_au AFTER UPDATE ON rag_chunks
        REFERENCING OLD TABLE AS removed NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION kx_rag_chunks_changed();
    -- HNSW needs a fixed dimension and the column is untyped: one partial expression
    -- index per dimension, made when a space of that dimension is first written
    CREATE FUNCTION kx_rag_hnsw(dim INTEGER) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN  -- two hosts making the same one queue: the second finds it made
        PERFORM pg_advisory_xact_lock(hashtextextended('rag_hnsw', dim));
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS rag_chunks_hnsw_%s ON rag_chunks USING hnsw '
            '((embedding::vector(%s)) vector_cosine_ops) WHERE vector_dims(embedding) = %s',
            dim, dim, dim);
    END $$;
    SELECT kx_rag_hnsw(dimension) FROM (SELECT DISTINCT dimension FROM rag_spaces) d;
    """,
)

LONGTERM: tuple[str, ...] = (
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    -- long-term chunks (kairox_core/longterm/): one row per chunk with its vector, in the
    -- space recorded in longterm_backend (an untyped vector column: its backend's dimension)
    CREATE TABLE longterm_chunks (
        n BIGSERIAL UNIQUE,
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'project', 'global')),
        owner TEXT NOT NULL,
        text TEXT NOT NULL,
        session_id TEXT,
        workspace_id TEXT,
        source_seq BIGINT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        embedding VECTOR
    );
    CREATE INDEX longterm_chunks_owner ON longterm_chunks (owner, n);
    CREATE TABLE longterm_backend (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        backend TEXT NOT NULL,
        dimension INTEGER NOT NULL
    );
    """,
)

PACKS: tuple[str, ...] = (
    """
    -- personal context packs (team and org packs are Markdown files, on no database)
    CREATE TABLE packs_personal (
        name TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        draft BOOLEAN NOT NULL DEFAULT FALSE,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE pack_activations (
        workspace_id TEXT NOT NULL,  -- '' = every workspace
        name TEXT NOT NULL,
        activated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (workspace_id, name)
    );
    """,
)

COMPONENTS: dict[str, tuple[str, ...]] = {
    "events": EVENTS,
    "memory": MEMORY,
    "memory_proposals": PROPOSALS,
    "compaction_leases": LEASES,
    "retrieval": RETRIEVAL,
    "longterm": LONGTERM,
    "packs": PACKS,
}


def versions(db: PgDatabase) -> dict[str, int]:
    """The version in force per component (0: never migrated)."""
    exists = db.execute("SELECT to_regclass('kx_schema_versions') IS NOT NULL AS present")
    if not exists[0]["present"]:
        return dict.fromkeys(COMPONENTS, 0)
    rows = db.execute("SELECT component, version FROM kx_schema_versions")
    found = {r["component"]: int(r["version"]) for r in rows}
    return {name: found.get(name, 0) for name in COMPONENTS}


def migrate(db: PgDatabase) -> dict[str, tuple[int, int]]:
    """Bring every component up to date; ``{component: (before, after)}``."""
    done: dict[str, tuple[int, int]] = {}
    with db.atomic() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS kx_schema_versions ("
            " component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        for component, steps in COMPONENTS.items():
            before = _current(conn, component)
            if before > len(steps):
                raise PostgresConfigError(
                    f"database schema for {component} is version {before}, newer than this "
                    f"kairox-postgres ({len(steps)}); upgrade kairox-postgres"
                )
            for version in range(before + 1, len(steps) + 1):
                conn.execute(steps[version - 1])
                conn.execute(
                    "INSERT INTO kx_schema_versions(component, version) VALUES (%s, %s) "
                    "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                    (component, version),
                )
            done[component] = (before, len(steps))
    return done


def _current(conn: Any, component: str) -> int:
    row = conn.execute(
        "SELECT version FROM kx_schema_versions WHERE component = %s", (component,)
    ).fetchone()
    return int(row["version"]) if row else 0


__all__ = ["COMPONENTS", "migrate", "versions"]
