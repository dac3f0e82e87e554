"""``kairox index``, ``kairox search``, ``kairox kb``: the workspace index and knowledge bases."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kairox_core.capabilities import FileIndex, file_index, term_stats, verify
from kairox_core.cli.context import CliContext, FilePath, pass_cli
from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.base import IndexReport, RetrievalHit, indexable
from kairox_core.retrieval.composite import SourceReport
from kairox_core.sync import run_sync

_err = Console(stderr=True)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[item]}"),
        console=_err,
        transient=True,
    )


class _Steps:
    """Progress of long work on stderr: a bar on a terminal; elsewhere (a log, CI, a
    pipe) a plain line every ``every`` seconds, so a 20-minute rebuild is never silent."""

    def __init__(self, label: str, total: int, *, every: float = 5.0) -> None:
        self.label, self.total, self.every = label, total, every
        self.tty = _err.is_terminal
        self._bar: Progress | None = None
        self._task: Any = None
        self._last = time.monotonic()

    def __enter__(self) -> _Steps:
        if self.tty:
            self._bar = _progress()
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, item="")
        return self

    def update(self, done: int, item: str = "") -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, item=item)
            return
        now = time.monotonic()
        if now - self._last >= self.every and done < self.total:
            self._last = now
            share = f" ({done / self.total:.0%})" if self.total else ""
            click.echo(f"{self.label}: {done}/{self.total}{share}", err=True)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _summary(report: IndexReport, chunks_total: int | None = None, done: str = "embedded") -> str:
    parts = [
        f"{report.added} added",
        f"{report.updated} updated",
        f"{report.unchanged} unchanged",
        f"{report.removed} removed",
    ]
    skipped = []
    if report.skipped_binary:
        skipped.append(f"{report.skipped_binary} binary")
    if report.skipped_large:
        skipped.append(f"{report.skipped_large} too large")
    if report.errors:
        skipped.append(f"{len(report.errors)} unreadable")
    if report.skipped_outside:
        skipped.append(f"{len(report.skipped_outside)} links out of the folder")
    line = "files: " + ", ".join(parts)
    if skipped:
        line += "; skipped: " + ", ".join(skipped)
    chunks = f"chunks: {report.chunks} {done}"
    if chunks_total is not None:
        chunks += f", {chunks_total} in the index"
    return f"{line}\n{chunks}\ntime: {report.seconds:.2f}s"


def _print_hits(title: str, hits: Sequence[RetrievalHit], k: int | None = None) -> None:
    if not hits:
        click.echo(f"no hits ({title})")
        return
    Console().print(_hits_table(title, hits))
    asked = (
        f" (asked for {k}: only {len(hits)} distinct passages match)" if k and len(hits) < k else ""
    )
    click.echo(f"{len(hits)} hit{'s' if len(hits) != 1 else ''}{asked}")


def _hits_table(title: str, hits: Sequence[RetrievalHit]) -> Table:
    table = Table(title=title, show_lines=True)
    for column in ("#", "score", "source", "document", "text"):
        table.add_column(column, overflow="fold")
    for i, hit in enumerate(hits, start=1):
        text = hit.text if len(hit.text) <= 300 else hit.text[:297] + "..."
        # data, not markup: "[kairox]" in a document must print as written
        cells = (escape(hit.source), escape(hit.doc_id), escape(text))
        table.add_row(str(i), f"{hit.score:.4f}", *cells)
    return table


def _hit_dict(hit: RetrievalHit) -> dict[str, Any]:
    return {
        "doc_id": hit.doc_id,
        "score": hit.score,
        "source": hit.source,
        "chunk_id": hit.chunk_id,
        "text": hit.text,
        "metadata": json.loads(json.dumps(dict(hit.metadata), default=str)),
    }


# --- kairox index -------------------------------------------------------------------


def run_index(
    cli_ctx: CliContext, paths: Sequence[str], workspace: str | None, rebuild: bool
) -> tuple[IndexReport, int]:
    from kairox_core.retrieval.files import scan_files
    from kairox_core.retrieval.index import WorkspaceRagIndex

    config = cli_ctx.config
    ws = workspace or config.kairox.default_workspace
    started = time.perf_counter()
    report = IndexReport()
    database = cli_ctx.database
    storage = None
    index: FileIndex
    if cli_ctx.database_is_url:  # a storage URL: its backend's own index of the space
        from kairox_core.facade import open_storage

        storage = open_storage(database)
        space = verify(
            storage.workspace_index(config, ws), f"the {storage.name} storage's workspace index"
        )
        found = file_index(space)
        if found is None:
            space.close()
            storage.close()
            raise KairoxUserError(
                f"kairox index: the '{storage.name}' storage's index cannot index files; "
                "index them with a SQLite database (--db FILE)"
            )
        index = found
    else:
        index = WorkspaceRagIndex.from_config(config, database, ws)
    try:
        if rebuild:
            with _Steps("re-embedding", index.chunk_count()) as steps:
                n = index.rebuild(progress=lambda done, total: steps.update(done))
            report.chunks += n
            _err.print(f"re-embedded {n} chunks with '{index.backend.name}'")
        else:  # an unchanged file would hide a backend switch (and a changed one mix spaces)
            index.check_backend()
        if paths:
            scan = scan_files(paths, max_bytes=config.retrieval.max_file_bytes)
            report.skipped_binary = len(scan.skipped_binary)
            report.skipped_large = len(scan.skipped_large)
            report.errors.extend(scan.errors)
            report.skipped_outside.extend(scan.skipped_outside)
            before = index.embedded_chunks
            with _Steps("indexing", len(scan.files)) as steps:
                for done, path in enumerate(scan.files, start=1):
                    try:
                        status = index.add_file(path)
                    except (OSError, UnicodeError) as exc:
                        report.errors.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
                    else:
                        setattr(report, status, getattr(report, status) + 1)
                    steps.update(done, path.name)
            seen = {str(p) for p in scan.files}
            gone = [
                d.doc_id
                for d in index.documents(origin="file")
                if d.doc_id not in seen
                and any(Path(d.path) == r or r in Path(d.path).parents for r in scan.roots)
            ]
            report.removed = index.delete_many(gone)
            report.chunks += index.embedded_chunks - before
            if report.added + report.updated + report.removed > 100:
                index.optimize()
            stats = term_stats(index)  # SQLite's keyword counts, stored again once the
            if stats is not None and report.added + report.updated + report.removed:
                stats.refresh_term_stats()  # index has grown by a quarter
        total = index.chunk_count()
    finally:
        index.close()
        if storage is not None:
            storage.close()
    report.seconds = time.perf_counter() - started
    return report, total


@click.command("index")
@click.argument("paths", nargs=-1, type=FilePath(exists=True))
@click.option("--workspace", "-w", help="Workspace id (default: [kairox] default_workspace).")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Re-embed every chunk with the configured backend (after changing it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@pass_cli
def index_command(
    cli_ctx: CliContext, paths: tuple[str, ...], workspace: str | None, rebuild: bool, as_json: bool
) -> None:
    """Index files and folders into the workspace's retrieval index, incrementally.

    .gitignore is honoured; binary and huge files are skipped; files gone since the
    last run (under the given paths) are removed. The walk never leaves a PATH through
    a symbolic link: a link to anything outside it is skipped and listed; only regular
    files are read.
    """
    if not paths and not rebuild:
        raise KairoxUserError("kairox index: give at least one PATH to index (or --rebuild)")
    report, total = run_index(cli_ctx, paths, workspace, rebuild)
    for error in (*report.skipped_outside, *report.errors):
        click.echo(f"skipped: {error}", err=True)
    first = report.added and not (report.updated or report.unchanged or report.removed)
    hint = embedding_hint(cli_ctx.config.retrieval.backend)
    if first and total == report.chunks and hint:  # the first index of this workspace
        click.echo(hint, err=True)
    if as_json:
        click.echo(json.dumps({**report.as_dict(), "chunks_total": total}))
    else:
        click.echo(_summary(report, total))


def embedding_hint(backend: str) -> str:
    """What installing the sentence-transformers plugin would bring, and cost, when the
    built-in hashing backend is in use (empty otherwise). Figures: docs/recall.md."""
    from importlib.metadata import PackageNotFoundError, distribution

    from kairox_core.config import HASHING_BACKEND

    if backend != HASHING_BACKEND:
        return ""
    try:
        distribution("kairox-sentence-transformers")
    except PackageNotFoundError:
        step = (
            "pip install torch==2.13.0 ./plugins/kairox-sentence-transformers (torch's "
            "CPU build: ~190 MB to download, ~700 MB on disk; the MiniLM model ~90 MB), "
            "then set "
        )
    else:
        step = "the plugin is installed: set "
    return (
        "note: this index uses the built-in hashing backend, which has no model, so "
        "searches and recall match keywords (as BM25 does). For search by meaning, "
        f'{step}[retrieval] backend = "sentence-transformers" and run '
        "`kairox index --rebuild` (each chunk is embedded: indexing is slower, a query "
        "takes tens of milliseconds). On the LoCoMo benchmark (docs/recall.md) recall "
        "found 0.70 of the evidence with the defaults and 0.87 with MiniLM."
    )


# --- kairox search ------------------------------------------------------------------


def _print_reports(reports: Sequence[SourceReport]) -> None:
    for r in reports:
        status = "ok" if r.ok else f"FAILED: {r.error}"
        click.echo(  # what the source returned, before fusion merged shared passages
            f"{r.kind} '{r.name}': {status} ({r.hits} returned, {r.elapsed_ms:.0f} ms)", err=True
        )


@click.command("search")
@click.argument("query")
@click.option("--profile", "-p", help="Profile (or alias) whose knowledge bases to query.")
@click.option("--workspace", "-w", help="Workspace id (default: [kairox] default_workspace).")
@click.option(
    "--k",
    "k",
    type=click.IntRange(1, 1000),
    default=None,
    help="Hits to return (default: [retrieval] k).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (hits and per-source report).")
@pass_cli
def search_command(
    cli_ctx: CliContext,
    query: str,
    profile: str | None,
    workspace: str | None,
    k: int | None,
    as_json: bool,
) -> None:
    """Search as a turn would: the workspace index plus the profile's knowledge bases."""
    from kairox_core.retrieval.selection import retriever_for_profile

    config = cli_ctx.config
    pname, _ = config.resolve_profile(profile)
    ws = workspace or config.kairox.default_workspace
    database: Any = cli_ctx.database
    storage = None
    opened = time.perf_counter()
    if config.retrieval.workspace_index and cli_ctx.database_is_url:
        from kairox_core.facade import open_storage

        storage = database = open_storage(database)  # its backend's own index
    composite = retriever_for_profile(config, pname, database, workspace_id=ws)
    open_ms = (time.perf_counter() - opened) * 1000  # models load here, once per process

    async def go() -> tuple[Any, float]:
        try:
            started = time.perf_counter()
            found = await composite.search(query, k or config.retrieval.k)
            return found, (time.perf_counter() - started) * 1000
        finally:
            await composite.close()
            if storage is not None:
                storage.close()

    result, search_ms = run_sync(go())
    wanted = k or config.retrieval.k
    if as_json:
        click.echo(
            json.dumps(
                {
                    "profile": pname,
                    "workspace": ws,
                    "hits": [_hit_dict(h) for h in result.hits],
                    "sources": [s.as_dict() for s in result.sources],
                    "rerank": result.rerank.as_dict() if result.rerank else None,
                    "elapsed_ms": round(search_ms, 2),
                    "open_ms": round(open_ms, 2),
                },
                indent=2,
            )
        )
    else:
        _print_hits(f"search: {query}", result.hits, wanted)
        _print_reports(result.sources)
        if result.rerank is not None:
            r = result.rerank
            status = "ok" if r.ok else f"FAILED, fused order kept: {r.error}"
            click.echo(
                f"reranker '{r.name}': {status} ({r.reranked} reranked, {r.elapsed_ms:.0f} ms)",
                err=True,
            )
        click.echo(
            f"search time: {search_ms:.0f} ms (opening the sources, models included: "
            f"{open_ms:.0f} ms)",
            err=True,
        )
    if result.failed:
        raise SystemExit(1)


# --- kairox kb ----------------------------------------------------------------------


@click.group("kb")
def kb_group() -> None:
    """Knowledge bases: list them, search one, build one's index."""


def _kb(cli_ctx: CliContext, kb_id: str) -> Any:
    config = cli_ctx.config
    kb = config.knowledge_bases.get(kb_id)
    if kb is None:
        known = ", ".join(sorted(config.knowledge_bases)) or "none configured"
        raise KairoxUserError(
            f"no knowledge base '{kb_id}' in "
            f"{config.source or 'the embedded default config'}; "
            f"knowledge bases: {known}"
        )
    return kb


@kb_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def kb_list(cli_ctx: CliContext, as_json: bool) -> None:
    """List configured knowledge bases: id, kind, enabled, profiles, providing plugin."""
    from kairox_core.errors import UnknownNameError
    from kairox_core.plugins import RETRIEVERS, get_plugins

    rows: list[dict[str, Any]] = []
    for kb_id, kb in sorted(cli_ctx.config_unchecked.knowledge_bases.items()):
        try:
            reg = get_plugins().get(RETRIEVERS, kb.kind)
            provider = f"{reg.plugin} ({reg.distribution})"
        except UnknownNameError as exc:
            provider = f"missing: {exc}"
        rows.append(
            {
                "id": kb_id,
                "kind": kb.kind,
                "enabled": kb.enabled,
                "profiles": list(kb.profiles) or ["(all)"],
                "provided_by": provider,
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Knowledge bases")
    for column in ("id", "kind", "enabled", "profiles", "provided by"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["id"],
            row["kind"],
            "yes" if row["enabled"] else "no",
            ", ".join(row["profiles"]),
            row["provided_by"],
        )
    Console().print(table)


@kb_group.command("search")
@click.argument("kb_id", metavar="ID")
@click.argument("query")
@click.option(
    "--k", "k", type=click.IntRange(1, 1000), default=8, show_default=True, help="Hits to return."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def kb_search(cli_ctx: CliContext, kb_id: str, query: str, k: int, as_json: bool) -> None:
    """Search one knowledge base directly."""
    from kairox_core.retrieval.selection import build_knowledge_base

    retriever = build_knowledge_base(_kb(cli_ctx, kb_id))

    async def go() -> list[RetrievalHit]:
        try:
            return await retriever.retrieve(query, k)
        finally:
            await retriever.close()

    hits = run_sync(go())
    if as_json:
        click.echo(json.dumps([_hit_dict(h) for h in hits], indent=2))
    else:
        _print_hits(f"{kb_id}: {query}", hits)


@kb_group.command("index")
@click.argument("kb_id", metavar="ID")
@click.argument("paths", nargs=-1, type=FilePath(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@pass_cli
def kb_index(cli_ctx: CliContext, kb_id: str, paths: tuple[str, ...], as_json: bool) -> None:
    """Build or refresh a knowledge base's index from files (kinds that support it)."""
    from kairox_core.retrieval.selection import build_knowledge_base

    kb = _kb(cli_ctx, kb_id)
    built = build_knowledge_base(kb)
    retriever = indexable(built)
    if retriever is None:
        run_sync(built.close())
        raise KairoxUserError(
            f"knowledge base '{kb_id}' (kind '{kb.kind}') cannot be built by "
            f"kairox; index it with its own tools"
        )
    try:
        with _progress() as bar:
            task = bar.add_task(f"indexing {kb_id}", total=None, item="")
            report = retriever.index(
                list(paths),
                progress=lambda done, total, item: bar.update(
                    task, completed=done, total=total, item=Path(item).name
                ),
            )
    finally:
        run_sync(built.close())
    for error in (*report.skipped_outside, *report.errors):
        click.echo(f"skipped: {error}", err=True)
    # a knowledge base may or may not embed (sqlite_fts and tantivy do not)
    click.echo(json.dumps(report.as_dict()) if as_json else _summary(report, done="indexed"))


def register(cli: click.Group) -> None:
    cli.add_command(index_command)
    cli.add_command(search_command)
    cli.add_command(kb_group)
