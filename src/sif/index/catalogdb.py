"""The catalog's DuckDB file (split from :mod:`sif.index.duck`): its connection, the
mapping of DuckDB's errors, the schema's migrations applied or checked, and its WAL.

:func:`connect` opens ``catalog.duckdb`` (the writer's within :data:`CATALOG_MEMORY`)
and reads every table once; :func:`migrate` brings its schema to
:data:`SCHEMA_VERSION` (:mod:`sif.index.schema`), :func:`check_schema` refuses any
other for a reader; :func:`catalog_errors` is the one place where a DuckDB error
becomes a sif error.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

import duckdb

from sif.errors import IndexCorrupt, IndexUnusable
from sif.index.checks import corrupt
from sif.index.indexdir import CATALOG
from sif.index.schema import MIGRATIONS, SCHEMA_VERSION

#: DuckDB checkpoints the writer's WAL on its own once it holds this much (its
#: default), and the writer checkpoints whatever WAL is left when it closes: the catalog
#: is whole in its file after every run, and a WAL is left only by a writer killed, for
#: DuckDB's recovery (then at most this much and one commit), which the next writer
#: checkpoints as soon as it has opened the catalog. What the WAL holds DuckDB keeps in
#: memory (IN_MEMORY_TABLE, not evicted) within the catalog's :data:`CATALOG_MEMORY`
#: until a checkpoint. 4 MB made a fresh index of 300 k files 16.4 s (22.3 CPU s)
#: against 13.5 s (18.5) at 16 MB, and one of 1 M files 72 s against 53 s: each
#: checkpoint costs more as the catalog grows.
WAL_LIMIT = "16MB"


def wal_size(catalog: str) -> int:
    """The size of ``catalog``'s WAL (0: none)."""
    try:
        return os.path.getsize(catalog + ".wal")
    except OSError:
        return 0


#: The catalog's block size (DuckDB's default is 256 KiB), fixed when it is created. A
#: checkpoint writes each column of a row group in segments of at most a block, and
#: its cost goes with their number: with 16 KiB blocks (sif before 2026-12) each of
#: the WAL's checkpoints while a fresh index of 100 k files was built took 0.40 s,
#: with 64 KiB 0.19 s, with 256 KiB 0.11 s. The catalog's size (and the index's share
#: of the corpus): 16 KiB 12.2 MB, 64 KiB 9.1 MB, 256 KiB 11.5 MB at 100 k files;
#: 2.5 / 2.1 / 3.4 MB for 20,000 small files; 1.09 / 1.19 / 2.37 MB for the 7,773
#: files of Linux's fs/ and drivers/net/; 0.65 / 0.86 / 2.37 MB for the 4,199 of
#: /usr/share/doc; an index of one file is 0.49 MB against 0.17 MB (a large block is
#: mostly empty in a small catalog).
CATALOG_BLOCK = 64 << 10

#: DuckDB's memory limit for the writer's catalog connection (its cache and working
#: memory; a query that needs more spills into the index's ``tmp/``).
CATALOG_MEMORY = "32MB"

_NOT_DAMAGE = ("No space left", "Permission denied", "Read-only file system", "quota")


def write_refused(exc: duckdb.Error) -> str | None:
    """The line of DuckDB's ``exc`` that names a write the system refused (a full disk,
    a denied or read-only place, a quota), or ``None``. Any line: a failed checkpoint
    invalidates the database, and the next statement's error says that first, the
    cause after."""
    for line in str(exc).splitlines():
        if any(t in line for t in _NOT_DAMAGE):
            return line.strip()
    return None


@contextlib.contextmanager
def catalog_errors(path: str) -> Iterator[None]:
    """Map every DuckDB error to a sif error: the one place for it.

    Damage (a block whose checksum fails, an unreadable file) is
    :class:`IndexCorrupt`; a full disk, a denied write or memory running out
    are not damage and are :class:`IndexUnusable` naming the cause. An
    interrupt passes.
    """
    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        if _python_interrupt(exc):
            raise KeyboardInterrupt from exc
        cause = (str(exc).splitlines() or [type(exc).__name__])[0]
        refused = write_refused(exc)
        if refused and isinstance(exc, duckdb.IOException | duckdb.TransactionException):
            raise IndexUnusable(
                f"cannot write the index {os.path.dirname(path)}: {refused}; "
                "it keeps its last committed state"
            ) from exc
        if isinstance(exc, duckdb.OutOfMemoryException) or refused:
            raise IndexUnusable(f"{path}: {refused or cause}") from exc
        raise corrupt(path, cause) from exc


def _python_interrupt(exc: BaseException) -> bool:
    """Whether DuckDB's error is a Ctrl-C that reached Python code it was calling (while
    it converts a registered numpy array of objects, say): DuckDB 2.0 raises a plain
    ``duckdb.Error`` whose message is that Python traceback, which ends in
    ``KeyboardInterrupt`` (seen once in ~320 ``sif index -j 2`` runs interrupted at
    random moments: "index corrupt", exit 3, instead of exit 130)."""
    text = str(exc)
    if not text.startswith("Traceback (most recent call last):"):
        return False
    return any(line.startswith("KeyboardInterrupt") for line in text.splitlines())


#: A checkpoint of DuckDB "vacuums" tables whose rows were deleted: it rewrites row
#: groups together where they fit in fewer (windows of up to 3). After an incremental
#: run at 1 M files that changed 1% of them (10 k rows of ``files`` deleted, spread
#: over every row group) the closing checkpoint took 0.52 s vacuuming against 0.10 s
#: not, and the catalog's file was 135.6 MB against 121.9 MB (rewritten groups take new
#: blocks; the old ones are free for later writes), for 1,153 of the 10 k deleted rows
#: reclaimed. So a writer's checkpoints do not vacuum (``max_vacuum_tasks`` 0,
#: :func:`connect`) until a table's rows deleted but still stored are at least one in
#: :data:`VACUUM_SHARE` of the rows it stores, and :data:`VACUUM_MIN_ROWS`; then one
#: does (of every table: the setting is the database's). Simulated on a table of
#: 1 M rows like ``files`` (30 runs, each deleting 1% and appending as many): the
#: checkpoints took 0.03 s, but for two of 0.75 and 0.90 s (runs 14 and 21), which
#: took the deleted rows from 12-14% of those stored back to 7% and 3%; it never stored
#: more than 1.14 M rows.
VACUUM_SHARE = 8
#: ... and at least this many rows: a small table's deleted rows cost nothing worth a
#: vacuum of ``files`` (an incremental run deletes the merged rows of ``segments``,
#: 2 of 4, which opened the gate when it had no floor).
VACUUM_MIN_ROWS = 16384
#: DuckDB's own default for ``max_vacuum_tasks``: what a vacuuming checkpoint uses.
VACUUM_TASKS = 100
#: Tables emptied whole and filled again (``DELETE FROM`` every row: DuckDB drops row
#: groups deleted whole at any checkpoint, vacuum or not), left out of the count: the
#: pairs of ``sif similar`` (:mod:`sif.index.pairs`).
REWRITTEN_WHOLE = ("similar_pairs", "similar_runs")


def checkpoint(con: duckdb.DuckDBPyConnection) -> None:
    """Write what the WAL holds into the catalog's file (DuckDB then deletes the WAL);
    vacuum the deleted rows too when a table holds many (:data:`VACUUM_SHARE`)."""
    vacuum = any(
        d >= VACUUM_MIN_ROWS and d * VACUUM_SHARE >= n for d, n in deleted_rows(con).values()
    )
    if vacuum:
        con.execute(f"SET max_vacuum_tasks = {VACUUM_TASKS}")
    try:
        con.execute("CHECKPOINT")
    except BaseException:
        if vacuum:
            # After a failed checkpoint (a full disk) DuckDB refuses every statement:
            # the checkpoint's own error is the one to map, not this one's.
            with contextlib.suppress(duckdb.Error):
                con.execute("SET max_vacuum_tasks = 0")
        raise
    if vacuum:
        con.execute("SET max_vacuum_tasks = 0")


def deleted_rows(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    """For each table of the catalog (but :data:`REWRITTEN_WHOLE`): its rows deleted but
    still stored, and the rows it stores (a count of each: 8 ms for 1 M files)."""
    out: dict[str, tuple[int, int]] = {}
    tables = con.execute(
        "SELECT table_name, estimated_size FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = current_schema() "
        "AND NOT temporary"
    ).fetchall()
    for name, size in tables:
        if name in REWRITTEN_WHOLE:
            continue
        quoted = '"' + str(name).replace('"', '""') + '"'
        row = con.execute(f"SELECT count(*) FROM {quoted}").fetchone()
        stored = int(size or 0)
        out[name] = (max(0, stored - (int(row[0]) if row else 0)), stored)
    return out


def connect(root: str, directory: str, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """The catalog of ``root`` (the index at ``directory``, or a rebuild's stage in it),
    every table read once; :class:`IndexCorrupt` for one that is not sif's or damaged.
    A writer checkpoints at once a WAL that a killed writer left (DuckDB replayed it)."""
    path = os.path.join(root, CATALOG)
    con = None
    left = not read_only and wal_size(path) > 0
    try:
        with catalog_errors(path):
            if read_only:
                con = duckdb.connect(path, read_only=True)
            else:
                # 64 KiB blocks (CATALOG_BLOCK); the setting only applies at creation.
                # The writer's buffers are capped (a catalog of 1 M files is ~150 MB,
                # which DuckDB would otherwise keep cached; 128MB: 623 MB summed at
                # 1 M files, 32MB: 493 MB); it spills into tmp/.
                config: dict[str, str | bool | int | float | list[str]] = {
                    "default_block_size": str(CATALOG_BLOCK),
                    "memory_limit": CATALOG_MEMORY,
                    "allocator_flush_threshold": "16MB",  # freed buffers go back sooner
                    "temp_directory": os.path.join(directory, "tmp"),
                    "checkpoint_threshold": WAL_LIMIT,
                    "max_vacuum_tasks": 0,  # vacuumed when worth it (checkpoint)
                }
                con = duckdb.connect(path, config=config)
                # The writer checkpoints when it closes (DuckStore.close), itself: a
                # failure there is its own, and a test can leave a WAL as a kill does.
                con.execute("PRAGMA disable_checkpoint_on_shutdown")
            tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
            if tables and "sif_meta" in tables:
                app = con.execute("SELECT value FROM sif_meta WHERE key = 'app'").fetchone()
                if not app or app[0] != "sif":
                    raise corrupt(path, "not a sif index")
            elif tables - {"sif_migrations"}:  # alone: killed while it was created
                raise corrupt(path, "not a sif index")
            read_all(con, sorted(tables))
            if left:  # its rows held in memory until then (see WAL_LIMIT)
                checkpoint(con)
    except BaseException:
        if con is not None:
            with contextlib.suppress(duckdb.Error):
                con.close()
        raise
    return con


def read_all(con: duckdb.DuckDBPyConnection, tables: Sequence[str]) -> None:
    """Read every row of ``tables`` once: DuckDB checks each block's checksum as it
    reads it, so damage shows here, as one error, not later in some query. Cost: a
    scan of the catalog (a few ms for 38k files)."""
    for t in tables:
        con.execute(f'SELECT count(*), bit_xor(hash(t)) FROM "{t}" t').fetchall()


def fold_wal(root: str, directory: str) -> None:
    """Checkpoint the catalog of ``root`` if a killed writer left it a WAL (a rebuild's
    old catalog, before the new one replaces it: the WAL goes then, and a kill between
    must not find the old catalog without its last commits). A catalog DuckDB cannot
    open is left as it is: damaged, what the rebuild replaces."""
    if wal_size(os.path.join(root, CATALOG)):
        with contextlib.suppress(duckdb.Error, IndexCorrupt, IndexUnusable):
            connect(root, directory).close()


def schema_version(con: duckdb.DuckDBPyConnection, root: str) -> int | None:
    """The schema of the catalog of ``root`` (``None``: a new one, no migration yet)."""
    with catalog_errors(os.path.join(root, CATALOG)):
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        if "sif_migrations" not in tables:
            return None
        row = con.execute("SELECT max(version) FROM sif_migrations").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def migrate(con: duckdb.DuckDBPyConnection, root: str, secret: bytes) -> None:
    """Apply the migrations the catalog of ``root`` lacks, each in its own transaction,
    then checkpoint (a new schema is never left in the WAL, for a reader to replay or a
    later DuckDB to meet); :class:`IndexCorrupt` for a schema newer than this sif's.
    ``secret``: the index's path-key secret (schema 9 computes the keys with it)."""
    with catalog_errors(os.path.join(root, CATALOG)):
        con.execute(
            "CREATE TABLE IF NOT EXISTS sif_migrations "
            "(version INTEGER, name VARCHAR, applied_at TIMESTAMP)"
        )
        done = {r[0] for r in con.execute("SELECT version FROM sif_migrations").fetchall()}
        if done and max(done) > SCHEMA_VERSION:
            raise IndexCorrupt(
                f"{root}: index schema {max(done)} is newer than this sif "
                f"({SCHEMA_VERSION}); upgrade sif or use --rebuild"
            )
        applied = False
        for version, name, step in MIGRATIONS:
            if version in done:
                continue
            con.execute("BEGIN TRANSACTION")
            step(con, secret)
            con.execute(
                "INSERT INTO sif_migrations VALUES (?, ?, current_timestamp)",
                [version, name],
            )
            con.execute("COMMIT")
            applied = True
        if applied:
            checkpoint(con)


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables ORDER BY table_name"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _unfinished(root: str) -> IndexUnusable:
    """A catalog made by a first run that stopped before it held anything: no index yet,
    which the next ``sif index`` makes (``--info`` and ``--verify`` called it corrupt
    and advised ``--rebuild``)."""
    from sif.events import display_path

    return IndexUnusable(
        f"no index at {display_path(root)} yet: its first run did not finish (run 'sif index "
        "PATH...')"
    )


def check_schema(con: duckdb.DuckDBPyConnection, root: str) -> None:
    """For a reader: the catalog of ``root`` is of :data:`SCHEMA_VERSION`, else
    :class:`IndexCorrupt` (newer, or none) or :class:`IndexUnusable` (older: a writer
    migrates it)."""
    path = os.path.join(root, CATALOG)
    try:
        row = con.execute("SELECT max(version) FROM sif_migrations").fetchone()
    except duckdb.Error as exc:
        if not _tables(con):  # made, then the first run stopped (Ctrl-C, a kill)
            raise _unfinished(root) from None
        raise corrupt(path, "a catalog without migrations") from exc
    version = row[0] if row else None
    if version is None and _tables(con) == ["sif_migrations"]:
        raise _unfinished(root)  # the first migration never committed
    if version is None or version > SCHEMA_VERSION:
        raise corrupt(path, f"index schema {version}, this sif reads {SCHEMA_VERSION}")
    if version < SCHEMA_VERSION:
        raise IndexUnusable(
            f"{root}: index schema {version} is older than this sif's "
            f"({SCHEMA_VERSION}); 'sif index' migrates it"
        )
