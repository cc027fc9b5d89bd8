"""The catalog's schema as migrations (:data:`MIGRATIONS`), applied in order by
:class:`sif.index.duck.DuckStore` (split from :mod:`sif.index.duck`: the schema is
described there)."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import numpy as np

from sif.index.store import LEGACY_NORMALIZE


def _v1(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    con.execute("CREATE TABLE sif_meta (key VARCHAR, value VARCHAR)")
    con.execute(
        "INSERT INTO sif_meta VALUES ('app', 'sif'), ('next_file_id', '1'), "
        "('next_segment_id', '1'), ('generation', '0'), ('last_params', '')"
    )
    con.execute("CREATE TABLE params (id INTEGER, key VARCHAR, anchors VARCHAR)")
    con.execute(
        "CREATE TABLE files (id UINTEGER, params_id INTEGER, path BLOB, dev UBIGINT, "
        "ino UBIGINT, size BIGINT, mtime_ns BIGINT, kind VARCHAR, digest BLOB, "
        "n_fp UINTEGER, n_distinct UINTEGER, segment INTEGER)"
    )
    con.execute(
        "CREATE TABLE segments (id INTEGER, params_id INTEGER, name VARCHAR, "
        "files BIGINT, rows BIGINT)"
    )
    con.execute("CREATE TABLE dead (id UINTEGER, segment INTEGER, n_fp UINTEGER)")


def _v2(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # sif similar's collated pair counts (sif.similar), kept for re-thresholding; one
    # run at a time, keyed by the index generation, roots and max_df it was made from.
    con.execute(
        "CREATE TABLE similar_runs (run_key VARCHAR, stopped BIGINT, pairs BIGINT, "
        "created TIMESTAMP)"
    )
    con.execute(
        "CREATE TABLE similar_pairs (a UINTEGER, b UINTEGER, shared UINTEGER, "
        "hits_a UINTEGER, hits_b UINTEGER, exact_ab DOUBLE, exact_ba DOUBLE)"
    )


def _v3(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # Content views (issue 7): what was indexed before them is raw, whole files.
    con.execute(f"ALTER TABLE params ADD COLUMN normalize VARCHAR DEFAULT '{LEGACY_NORMALIZE}'")
    con.execute("ALTER TABLE files ADD COLUMN view VARCHAR DEFAULT 'raw'")
    con.execute("ALTER TABLE files ADD COLUMN origin BLOB")
    con.execute("ALTER TABLE files ADD COLUMN file_size BIGINT")
    con.execute("UPDATE files SET origin = path, file_size = size")


def _v4(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # The walk the stored pairs were made from: a re-threshold compares it and skips the
    # catalog work of an index update when nothing under the roots changed.
    con.execute("ALTER TABLE similar_runs ADD COLUMN walk_digest VARCHAR")


def _v5(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # Integrity (issue 10): ctime tells a file rewritten with its mtime restored (NULL:
    # unknown, read again once); each segment's file lengths and checksums; the last run.
    con.execute("ALTER TABLE files ADD COLUMN ctime_ns BIGINT")
    con.execute("ALTER TABLE segments ADD COLUMN checks VARCHAR")
    con.execute("ALTER TABLE params ADD COLUMN last_run VARCHAR")


def _v6(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # Index size (issue 15): a file's origin is kept only when it is not its path (an
    # archive member, a decompressed view); readers take coalesce(origin, path).
    con.execute("UPDATE files SET origin = NULL WHERE origin = path")


def _v7(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # Scores of large files on a window sample (issue 11): the values the sample's share
    # counts, NULL when the score is over every window.
    con.execute("ALTER TABLE similar_pairs ADD COLUMN exact_n UINTEGER")


#: Rows whose origin keys :func:`_v9` computes at a time.
KEY_ROWS = 1 << 16


def _v8(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # Speed (issue 15): each entry keeps its origin's key (sif.pathkeys), so that a run's
    # plan reads numbers from the catalog, not a path a file (at 1 M files, the origins
    # read and hashed were 0.8-1.5 s of an incremental run that changed 1% of them). The
    # keys are computed by _v9 (schema 8 as a development branch first made it computed
    # XXH64 keys, which 9 replaces).
    con.execute("ALTER TABLE files ADD COLUMN origin_key UBIGINT")
    con.execute("ALTER TABLE files ADD COLUMN origin_check UBIGINT")


def _v9(con: duckdb.DuckDBPyConnection, secret: bytes) -> None:
    # The keys keyed by the index's secret (its pathkey file; sif.pathkeys): every
    # origin's key computed again, and the secret's check recorded, which tells the
    # catalog's keys from those of another secret.
    from sif.index.store import origin_keys
    from sif.pathkeys import secret_check

    lo, hi = con.execute("SELECT coalesce(min(id), 0), coalesce(max(id), -1) FROM files").fetchone()  # type: ignore[misc]
    for start in range(int(lo), int(hi) + 1, KEY_ROWS):
        got = con.execute(
            "SELECT id, coalesce(origin, path) AS origin FROM files WHERE id >= ? AND id < ?",
            [start, start + KEY_ROWS],
        ).fetchnumpy()
        n = len(got["id"])
        keys, checks = origin_keys((bytes(o) for o in got["origin"]), n, secret)
        con.register("sif_keys", {"id": np.asarray(got["id"]), "k": keys, "c": checks})
        con.execute(
            "UPDATE files SET origin_key = sif_keys.k, origin_check = sif_keys.c "
            "FROM sif_keys WHERE files.id = sif_keys.id"
        )
        con.unregister("sif_keys")
    con.execute("DELETE FROM sif_meta WHERE key = 'path_key'")
    con.execute("INSERT INTO sif_meta VALUES ('path_key', ?)", [secret_check(secret)])


MIGRATIONS: list[tuple[int, str, Callable[[duckdb.DuckDBPyConnection, bytes], None]]] = [
    (1, "files, params, segments, dead", _v1),
    (2, "similar_runs, similar_pairs", _v2),
    (3, "content views: params.normalize, files.view, origin, file_size", _v3),
    (4, "similar_runs.walk_digest", _v4),
    (5, "files.ctime_ns, segments.checks, params.last_run", _v5),
    (6, "files.origin NULL where it is the path", _v6),
    (7, "similar_pairs.exact_n", _v7),
    (8, "files.origin_key, origin_check", _v8),
    (9, "origin keys under the index's secret (pathkey)", _v9),
]
"""Registered migrations, applied in order, each in its own transaction: ``step(con,
secret)``, ``secret`` the index's path-key secret (:func:`sif.index.indexdir.ensure_pathkey`)."""

SCHEMA_VERSION = MIGRATIONS[-1][0]
#: The first schema whose keys are under the index's secret: an older catalog gets one.
PATHKEY_SCHEMA = 9
