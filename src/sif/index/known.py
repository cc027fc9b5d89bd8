"""What the catalog knows of the files an index holds, for a run's plan (from ``duck.py``).

:func:`known_columns` reads every live entry of a parameter set as columns
(:class:`sif.index.store.KnownColumns`: the 128-bit keys of the origins, ids,
device, inode, size, mtime and ctime), :data:`KNOWN_CHUNK` ids at a time;
:func:`origins` reads the paths of a few of them again, for the files a run
found changed or did not meet.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from sif.index.checks import corrupt
from sif.index.store import U32, KnownColumns

if TYPE_CHECKING:
    from sif.index.duck import DuckStore

#: Catalog ids read at a time by :func:`known_columns`.
KNOWN_CHUNK = 1 << 18


def known_columns(store: DuckStore, pid: int) -> KnownColumns:
    """One row per live entry of parameter set ``pid`` (by id). Cost: a scan of the
    numbers of ``files`` (the origins' keys were computed when they were committed: no
    path is read; :attr:`KnownColumns.origins` reads the few a run needs), into arrays
    made once, :data:`KNOWN_CHUNK` ids at a time (DuckDB holds the result of one chunk).
    Raises :class:`sif.errors.IndexCorrupt` if the rows change while read, or an entry
    lacks its key."""
    from sif.index.duck import CATALOG, UNKNOWN_CTIME

    con, catalog = store.catalog(), os.path.join(store.root, CATALOG)
    types = {"id": np.uint32, "origin_key": np.uint64, "origin_check": np.uint64}
    types |= {"dev": np.uint64, "ino": np.uint64, "file_size": np.int64}
    types |= {"mtime_ns": np.int64, "ctime_ns": np.int64}
    lo, hi, n, keyed = con.execute(
        "SELECT coalesce(min(id), 0), coalesce(max(id), -1), count(*), "
        "count(origin_key) + count(origin_check) FROM files WHERE params_id = ?",
        [pid],
    ).fetchone()  # type: ignore[misc]
    if keyed != 2 * n:
        raise corrupt(catalog, "entries without the key of their origin")
    out = {k: np.empty(int(n), dtype=t) for k, t in types.items()}  # filled in place
    pos = 0
    for start in range(int(lo), int(hi) + 1, KNOWN_CHUNK):
        cols = con.execute(
            "SELECT id, origin_key, origin_check, dev, ino, file_size, mtime_ns, "
            f"coalesce(ctime_ns, {UNKNOWN_CTIME}) AS ctime_ns "
            "FROM files WHERE params_id = ? AND id >= ? AND id < ?",
            [pid, start, start + KNOWN_CHUNK],
        ).fetchnumpy()
        m = len(cols["id"])
        if pos + m > int(n):
            raise corrupt(catalog, "files changed while read")
        for k, v in cols.items():
            out[k][pos : pos + m] = np.asarray(v)
        pos += m
        del cols
    if pos != int(n):
        raise corrupt(catalog, "files changed while read")
    ids = out["id"]
    return KnownColumns(
        out["origin_key"],
        out["origin_check"],
        ids,
        out["dev"],
        out["ino"],
        out["file_size"],
        out["mtime_ns"],
        out["ctime_ns"],
        origins=functools.partial(origins, store, pid, ids),
    )


def origins(store: DuckStore, pid: int, ids: U32, rows: npt.NDArray[np.int64]) -> list[str]:
    """The origins (decoded paths on disk) of the entries ``ids[rows]``, in that order."""
    from sif.index.duck import CATALOG, catalog_errors

    if not len(rows):
        return []
    enc, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    want = ids[rows]
    catalog, con = os.path.join(store.root, CATALOG), store.catalog()
    with catalog_errors(catalog):
        con.register("sif_want", {"id": want})
        try:
            # Tuples, not numpy: numpy's masked arrays are never needed (their module's
            # import alone took 16 ms of an incremental run's plan).
            got = con.execute(
                "SELECT id, coalesce(origin, path) AS origin FROM files "
                "WHERE params_id = ? AND id IN (SELECT id FROM sif_want) ORDER BY id",
                [pid],
            ).fetchall()
        finally:
            con.unregister("sif_want")
    found = np.fromiter((r[0] for r in got), dtype=np.uint32, count=len(got))
    at = np.searchsorted(found, want)
    ordered = np.sort(want)  # not np.unique: it imports numpy.ma (16 ms)
    distinct = int(np.count_nonzero(ordered[1:] != ordered[:-1])) + 1
    if len(found) != distinct or not np.array_equal(found[np.minimum(at, len(found) - 1)], want):
        raise corrupt(catalog, "files changed while read")
    return [bytes(got[i][1]).decode(enc, errors) for i in at.tolist()]
