"""kill -9 inside `kairox kb index` (sqlite_fts): the rows and their FTS index commit in
one transaction, so the killed run leaves the previous, consistent pair (issue 13)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kairox_core.store.connection import connect

pytestmark = pytest.mark.slow

# The child: `kairox kb index`, stopped (and killed by the test) once the rows are
# written and the FTS index is about to be rebuilt.
CHILD = """
import sys, time
from pathlib import Path
from kairox_core.cli import main
from kairox_core.retrieval.sqlite_fts import SqliteFtsRetriever

build = SqliteFtsRetriever._build_fts

def stalled(self, conn):
    print("rows written", flush=True)
    time.sleep(3600)
    build(self, conn)

SqliteFtsRetriever._build_fts = stalled
main(["--config", sys.argv[1], "kb", "index", "notes", sys.argv[2]])
"""


def kb_index(conf: Path, docs: Path) -> None:
    from kairox_core.cli import main

    try:
        main(["--config", str(conf), "kb", "index", "notes", str(docs)])
    except SystemExit as exc:
        assert not exc.code


def test_kill_9_inside_kb_index_leaves_a_consistent_fts_index(
    kairox_home: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("the volcano erupted with lava")
    db = tmp_path / "kb.db"
    conf = tmp_path / "kairox.toml"
    conf.write_text(f'[knowledge_bases.notes]\nkind = "sqlite_fts"\npath = "{db}"\n')
    kb_index(conf, docs)
    (docs / "a.md").write_text("the tides came in over the flats, a much longer text now")

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(conf), str(docs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    # the child's lines until it says it stalled (or it exits: end of its output)
    if not any(line.strip() == "rows written" for line in child.stdout):
        pytest.fail(f"the child never reached the FTS rebuild: {child.communicate()[1][-2000:]}")
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=240)

    conn = connect(db, vec=False)
    try:
        conn.execute("INSERT INTO documents_fts(documents_fts) VALUES ('integrity-check')")
        for word in ("volcano", "tides"):
            rows = conn.execute(
                "SELECT d.text FROM documents_fts JOIN documents d ON d.rowid = "
                "documents_fts.rowid WHERE documents_fts MATCH ?",
                (word,),
            ).fetchall()
            assert all(word in r[0] for r in rows), (word, [r[0] for r in rows])
    finally:
        conn.close()
    kb_index(conf, docs)  # the next run finishes the job
    conn = connect(db, vec=False)
    try:
        hits = conn.execute(
            "SELECT d.text FROM documents_fts JOIN documents d ON d.rowid = documents_fts.rowid "
            "WHERE documents_fts MATCH 'tides'"
        ).fetchall()
        assert [r[0][:9] for r in hits] == ["the tides"]
    finally:
        conn.close()
