"""The collation (Manber, section 4): pair counts of fingerprint rows, in DuckDB."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.errors import ConfigError, OutOfMemory
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
    are split by the top bits of the value (a hash partition: each fingerprint's
    rows land in one part), the same statement runs on each part and the partial
    counts are summed, which is how a cluster runs it. ``con`` is a DuckDB
    connection (its memory limit and temporary directory apply). Cost: a few
    hash aggregations and one join over the rows, then one per distinct set.
    """
    parts: list[dict[str, npt.NDArray[Any]]] = []
    stopped = 0
    if partitions < 1:
        raise ConfigError("partitions must be at least 1")
    bits = max(0, min(BUCKET_BITS, math.ceil(math.log2(partitions)))) if partitions > 1 else 0
    top = (values >> np.uint32(32 - bits)).astype(np.int64) if bits else None
    for part in range(partitions):
        if top is None:
            sel: slice | npt.NDArray[np.bool_] = slice(None)
        else:
            sel = (top * partitions >> bits) == part
        rel = {"fp": values[sel], "file_id": file_ids[sel], "grp": groups[sel]}
        con.register("fp", rel)
        try:
            parts.append(con.execute(COLLATE_SQL, {"max_df": max_df}).fetchnumpy())
            stopped += int(con.execute(STOPPED_SQL, {"max_df": max_df}).fetchall()[0][0])
        finally:
            con.unregister("fp")
    cols = {
        k: np.concatenate([np.asarray(p[k], dtype=np.uint32) for p in parts])
        for k in ("a", "b", "shared", "hits_a", "hits_b")
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
        return out, stopped
    order = np.argsort(key, kind="stable")
    return {k: v[order] for k, v in cols.items()}, stopped


#: When DuckDB runs out of memory under the limit, the collation is run again with
#: one thread (each thread's hash tables need their own memory), then with this many
#: times more hash partitions, twice (each part holds a share of the rows).
OOM_PARTITION_STEP = 8


def _collate_within(
    con: Any,
    values: U32,
    file_ids: U32,
    groups: npt.NDArray[np.uint8],
    max_df: int,
    partitions: int,
    jobs: int,
    memory_limit: str,
) -> tuple[dict[str, npt.NDArray[Any]], int]:
    """:func:`collate` under ``memory_limit``, which it does not fit otherwise.

    DuckDB spills its hash tables to ``temp_directory`` but still needs some
    memory per thread and per table; when it runs out anyway, the same
    collation runs again with one thread, then on :data:`OOM_PARTITION_STEP`
    and its square times more hash partitions (the partial counts add up,
    :func:`collate`). Raises :class:`OutOfMemory` (one line: raise the limit)
    when even that fails. Cost: at most four attempts; a failed one stops early.
    """
    import duckdb

    attempts = [(jobs, partitions), (1, partitions)] if jobs > 1 else [(1, partitions)]
    attempts += [(1, partitions * OOM_PARTITION_STEP), (1, partitions * OOM_PARTITION_STEP**2)]
    for threads, parts in attempts:
        try:
            con.execute(f"SET threads = {int(threads)}")
            return collate(con, values, file_ids, groups, max_df, parts)
        except duckdb.OutOfMemoryException:
            continue
    raise OutOfMemory(
        f"out of memory: collating {len(values):,} fingerprint rows does not fit in "
        f"--memory-limit {memory_limit}, even spilling to disk; raise --memory-limit"
    )
