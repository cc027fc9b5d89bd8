"""The collation (Manber, section 4): pair counts of fingerprint rows, in DuckDB."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.errors import ConfigError, OutOfMemory
from sif.index.pairstore import BUCKETS, RowSource, bucket_ranges
from sif.index.segments import BUCKET_BITS

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

COLLATE_SQL = """
WITH
  -- each (fingerprint, file) once, with its multiplicity (section 3: counted twice if twice)
  m AS (
    SELECT fp, file_id AS id, grp, count(*)::UINTEGER AS mult
    FROM fp GROUP BY fp, file_id, grp
  ),
  -- Figure 1: the set of files holding each fingerprint, shared by 2..max_df files;
  -- the set is named by order-free signatures of its members, one integer per
  -- (file, multiplicity) (hash(id, mult) would combine linearly: the xor of two members
  -- of equal multiplicity would cancel it). Two signatures of 64 bits, the xor of
  -- hash(member) and of hash(member, seed) = hash(member) * C ^ hash(seed), which is
  -- no GF(2)-linear function of the first: two different sets of the same size merge
  -- with a probability of about 2^-128, not 2^-64 (a few percent at 10^9 sets)
  sets AS (
    SELECT fp, grp,
           bit_xor(hash(member)) AS sig1, bit_xor(hash(member, 1994)) AS sig2,
           count(*) AS n
    FROM (SELECT fp, grp, id::UBIGINT * 4294967296 + mult AS member FROM m)
    GROUP BY fp, grp
    HAVING count(*) BETWEEN 2 AND $max_df
  ),
  -- Figure 2: each distinct set once, with its counter and one fingerprint naming it
  counted AS (
    SELECT grp, min(fp) AS rep, count(*)::UINTEGER AS c
    FROM sets GROUP BY grp, sig1, sig2, n
  ),
  members AS (
    SELECT m.id, m.mult, counted.rep, counted.grp, counted.c
    FROM m JOIN counted ON m.fp = counted.rep AND m.grp = counted.grp
  )
-- each set adds its counter to every pair of its files
SELECT x.id AS a, y.id AS b,
       sum(x.c)::UINTEGER AS shared,
       sum(x.c * x.mult)::UINTEGER AS hits_a,
       sum(x.c * y.mult)::UINTEGER AS hits_b
FROM members x JOIN members y ON x.rep = y.rep AND x.grp = y.grp AND x.id < y.id
GROUP BY x.id, y.id
"""
"""The collation (section 4), over a relation ``fp(fp UINTEGER, file_id UINTEGER,
grp UTINYINT)`` with parameter ``$max_df``. One row per pair of files (a < b) of the
same ``grp`` sharing a non-stop fingerprint: ``shared`` distinct fingerprints, and
``hits_a``/``hits_b``, the rows of each file that hold them (multiplicity). Exact on any
partition holding all rows of its fingerprints; partial results add up."""

STOPPED_SQL = """
SELECT count(*) FROM (
  SELECT fp FROM fp GROUP BY fp, grp HAVING count(DISTINCT file_id) > $max_df
)
"""


# --- collation --------------------------------------------------------------------

#: Rows of one hash partition of the embedded collation: the scope is cut into
#: about ``rows / PARTITION_ROWS`` bucket ranges, each collated alone, so the
#: rows held at once (9 bytes each, plus DuckDB's working memory under its
#: limit) are those of one partition, never the whole index. Measured on the
#: 4.25 M rows of 100,000 generated files (bench/scale.py), collation alone:
#: 16 M rows a partition (one) took 4.2 CPU seconds and 520 MB above the
#: process's base, 4 M 3.9 s and 240 MB, 2 M 2.9 s and 150 MB, 1 M 2.9 s and
#: 115 MB: DuckDB's hash tables grow with the partition, and smaller ones stay
#: in cache.
PARTITION_ROWS = 1 << 19
#: DuckDB's allocator keeps memory freed up to this much before it returns it.
ALLOCATOR_FLUSH = "16MB"
#: When DuckDB runs out of memory under the limit, a partition is collated again
#: with one thread (each thread's hash tables need their own memory), then cut into
#: this many times more bucket ranges, twice (each part holds a share of the rows).
OOM_PARTITION_STEP = 8

Rows = Callable[[int, int], tuple[U32, U32, npt.NDArray[np.uint8]]]
"""Rows by bucket range: ``rows(lo, hi)`` -> (value, file id, group) whose
``value >> BUCKET_BITS`` is in ``[lo, hi)`` (:meth:`sif.index.pairstore.RowSource.rows`)."""

Pairs = dict[str, npt.NDArray[Any]]


def _sql_string(text: str) -> str:
    """``text`` as an SQL string literal (SET takes no parameters): quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def collation_connection(memory_limit: str, temp_directory: str | None, threads: int) -> Any:
    """A DuckDB connection of its own for the collation: working memory, spill, threads."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET memory_limit = {_sql_string(memory_limit)}")
    if temp_directory is not None:
        con.execute(f"SET temp_directory = {_sql_string(temp_directory)}")
    con.execute(f"SET threads = {int(threads)}")
    con.execute("SET preserve_insertion_order = false")  # the pairs get sorted
    # Memory DuckDB frees goes back to the system beyond this (by default it kept up to
    # 128 MB, and 512 MB after a bulk free: a partition's hash tables).
    con.execute(f"SET allocator_flush_threshold = {_sql_string(ALLOCATOR_FLUSH)}")
    con.execute(f"SET allocator_bulk_deallocation_flush_threshold = {_sql_string(ALLOCATOR_FLUSH)}")
    return con


def sub_ranges(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut into at most ``parts`` consecutive bucket ranges."""
    parts = max(1, min(parts, hi - lo))
    edges = [lo + (p * (hi - lo)) // parts for p in range(parts + 1)]
    return [(edges[p], edges[p + 1]) for p in range(parts)]


def merge_pairs(parts: Sequence[Pairs]) -> Pairs:
    """Partial pair counts of hash partitions summed per pair, sorted by (a, b).

    Exact: each shared fingerprint lives in one partition, so a pair's
    counts are the sum of its partial counts.
    """
    cols = {
        k: np.concatenate([np.asarray(p[k], dtype=np.uint32) for p in parts])
        if parts
        else np.empty(0, np.uint32)
        for k in PAIR_KEYS
    }
    key = (cols["a"].astype(np.uint64) << np.uint64(32)) | cols["b"].astype(np.uint64)
    if len(parts) > 1:  # partial counts of one pair in several parts add up
        uniq, inv = np.unique(key, return_inverse=True)
        out = {
            "a": (uniq >> np.uint64(32)).astype(np.uint32),
            "b": (uniq & np.uint64(0xFFFFFFFF)).astype(np.uint32),
        }
        for k in ("shared", "hits_a", "hits_b"):
            out[k] = np.bincount(inv, weights=cols[k], minlength=len(uniq)).astype(np.uint32)
        return out
    order = np.argsort(key, kind="stable")
    return {k: v[order] for k, v in cols.items()}


PAIR_KEYS = ("a", "b", "shared", "hits_a", "hits_b")


def add_pairs(x: Pairs, y: Pairs) -> Pairs:
    """Two sets of pair counts, each sorted by (a, b) with no pair twice, summed per pair.

    What :func:`merge_pairs` gives for both, by a merge: the pairs of ``y``
    found in ``x`` add their counts to ``x``'s, the others are inserted where
    they sort. ``x`` is the caller's running sum: it is updated in place and
    returned, a column replaced at a time. Memory: ``x``, a key of 8 bytes a
    pair of ``x`` (then one new column at a time: about 28 bytes a pair of
    ``x``, where a sort of both would take 64).
    """
    if not len(x["a"]):
        return y
    if not len(y["a"]):
        return x
    kx = (x["a"].astype(np.uint64) << np.uint64(32)) | x["b"].astype(np.uint64)
    ky = (y["a"].astype(np.uint64) << np.uint64(32)) | y["b"].astype(np.uint64)
    pos = np.searchsorted(kx, ky)
    hit = kx[np.minimum(pos, len(kx) - 1)] == ky
    del kx, ky
    at = pos[hit]
    for c in ("shared", "hits_a", "hits_b"):
        x[c] = np.asarray(x[c], dtype=np.uint32)
        x[c][at] += np.asarray(y[c], dtype=np.uint32)[hit]
    del at
    new = ~hit
    where = pos[new]
    for c in PAIR_KEYS:  # pairs only in y, before the first larger pair of x
        x[c] = np.insert(np.asarray(x[c], dtype=np.uint32), where, y[c][new])
    return x


def collate_ranges(
    con: Any, rows: Rows, ranges: Sequence[tuple[int, int]], max_df: int
) -> tuple[Pairs, int, int]:
    """:data:`COLLATE_SQL` on the rows of each bucket range, one range at a time.

    Returns the summed pair counts (:func:`merge_pairs`), the stop-fingerprints
    and the rows read. A fingerprint's rows all lie in one range, so its
    document frequency, the ``max_df`` cap and :data:`STOPPED_SQL` are exact on
    the range: the result does not depend on the ranges. Memory: the rows of
    one range at a time.
    """
    parts: list[Pairs] = []
    stopped = n = 0
    for lo, hi in ranges:
        values, file_ids, groups = rows(lo, hi)
        n += len(values)
        if not len(values):
            continue
        con.register("fp", {"fp": values, "file_id": file_ids, "grp": groups})
        try:
            parts.append(con.execute(COLLATE_SQL, {"max_df": max_df}).fetchnumpy())
            stopped += stop_count(values, file_ids, groups, max_df)
        finally:
            con.unregister("fp")
        del values, file_ids, groups
    return merge_pairs(parts), stopped, n


def stop_count(values: U32, file_ids: U32, groups: npt.NDArray[np.uint8], max_df: int) -> int:
    """:data:`STOPPED_SQL` in numpy: the (fingerprint, group)s held by more than ``max_df`` files.

    Only a value with more than ``max_df`` rows can be one; their distinct
    (value, group, file) triples are counted. Measured on a million
    generated files, the SQL took a fifth of the collation (a second
    aggregation over every row); this is one sort of the values.
    """
    if len(values) <= max_df:
        return 0
    v = np.sort(values)
    edge = np.flatnonzero(np.r_[True, v[1:] != v[:-1], True])
    many = v[edge[:-1][np.diff(edge) > max_df]]
    if not len(many):
        return 0
    sel = np.isin(values, many)
    key = np.unique(np.rec.fromarrays([values[sel], groups[sel].astype(np.uint32), file_ids[sel]]))
    vg = np.rec.fromarrays([key["f0"], key["f1"]])
    _, files = np.unique(vg, return_counts=True)
    return int(np.count_nonzero(files > max_df))


def collate(
    con: Any,
    values: U32,
    file_ids: U32,
    groups: npt.NDArray[np.uint8],
    max_df: int,
    partitions: int = 1,
) -> tuple[dict[str, npt.NDArray[Any]], int]:
    """Pair counts of the rows (``values``, ``file_ids``, ``groups``): :data:`COLLATE_SQL`.

    Returns the columns ``a``, ``b``, ``shared``, ``hits_a``, ``hits_b`` (``a < b``,
    sorted) and the number of stop-fingerprints. With ``partitions > 1`` the rows
    are split into bucket ranges of the value (a hash partition: each fingerprint's
    rows land in one part), the same statement runs on each part and the partial
    counts are summed (:func:`collate_ranges`), which is how a cluster runs it.
    ``con`` is a DuckDB connection (its memory limit and temporary directory
    apply). Cost: a few hash aggregations and one join over the rows, then one
    per distinct set.
    """
    if partitions < 1:
        raise ConfigError("partitions must be at least 1")
    if partitions == 1:
        whole = (values, file_ids, groups)
        cols, stopped, _ = collate_ranges(con, lambda lo, hi: whole, [(0, BUCKETS)], max_df)
        return cols, stopped
    bucket = values >> np.uint32(BUCKET_BITS)

    def rows(lo: int, hi: int) -> tuple[U32, U32, npt.NDArray[np.uint8]]:
        sel = (bucket >= lo) & (bucket < hi)
        return values[sel], file_ids[sel], groups[sel]

    cols, stopped, _ = collate_ranges(con, rows, bucket_ranges(partitions), max_df)
    return cols, stopped


def collate_range(
    con: Any,
    rows: Rows,
    lo: int,
    hi: int,
    max_df: int,
    threads: int,
    memory_limit: str,
) -> tuple[Pairs, int, int]:
    """:func:`collate_ranges` of the buckets ``[lo, hi)`` under ``memory_limit``.

    DuckDB spills its hash tables to ``temp_directory`` but still needs some
    memory per thread and per table; when it runs out anyway, the range is
    collated again with one thread, then cut into :data:`OOM_PARTITION_STEP`
    and its square more ranges (the partial counts add up). Raises
    :class:`OutOfMemory` (one line: raise the limit) when even that fails.
    The unit of work of both engines (a Dask task runs it on one partition).
    Cost: at most four attempts; a failed one stops early.
    """
    import duckdb

    attempts = [(threads, 1), (1, 1)] if threads > 1 else [(1, 1)]
    attempts += [(1, OOM_PARTITION_STEP), (1, OOM_PARTITION_STEP**2)]
    n = 0
    for t, split in attempts:
        try:
            con.execute(f"SET threads = {int(t)}")
            return collate_ranges(con, rows, sub_ranges(lo, hi, split), max_df)
        except duckdb.OutOfMemoryException:
            n = n or len(rows(lo, hi)[0])
            continue
    raise OutOfMemory(
        f"out of memory: collating {n:,} fingerprint rows does not fit in "
        f"--memory-limit {memory_limit}, even spilling to disk; raise --memory-limit"
    )


def collate_group(
    con: Any,
    rows: Rows,
    ranges: Sequence[tuple[int, int]],
    max_df: int,
    threads: int,
    memory_limit: str,
) -> tuple[Pairs, int, int]:
    """:func:`collate_range` of each of ``ranges`` in turn, the pairs summed as they come.

    (pairs sorted by (a, b), stop-fingerprints, rows). A running sum
    (:func:`add_pairs`), so that memory holds the distinct pairs found so far
    and one range's, not every range's partial counts (a pair of files alike
    shares fingerprints in most ranges: on 200 M synthetic rows, 13 ranges of
    8 M partial pairs each summed to 10 M pairs). The unit of work of both
    engines: the embedded one runs all ranges, a Dask task a group of them.
    """
    total: Pairs | None = None
    stopped = n = 0
    for lo, hi in ranges:
        cols, s, r = collate_range(con, rows, lo, hi, max_df, threads, memory_limit)
        total = cols if total is None else add_pairs(total, cols)
        del cols
        stopped += s
        n += r
    if total is None:
        total = merge_pairs([])
    return total, stopped, n


def partition_count(total_rows: int, partitions: int = 1) -> int:
    """Bucket ranges for ``total_rows``: at least ``partitions``, about
    :data:`PARTITION_ROWS` rows each (at most one range per bucket)."""
    return max(1, min(BUCKETS, max(partitions, -(-total_rows // PARTITION_ROWS))))


def collate_source(
    source: RowSource,
    max_df: int,
    partitions: int,
    threads: int,
    memory_limit: str,
    temp_directory: str | None,
) -> tuple[Pairs, int, int]:
    """The embedded collation of a scope: its bucket ranges one after the other.

    (pairs, stop-fingerprints, rows). Peak memory: the rows of one range
    (:func:`partition_count`), DuckDB's ``memory_limit``, and the pairs
    (:func:`collate_group`'s running sum).
    """
    con = collation_connection(memory_limit, temp_directory, threads)
    try:
        ranges = bucket_ranges(partition_count(source.total, partitions))
        return collate_group(con, source.rows, ranges, max_df, threads, memory_limit)
    finally:
        con.close()
