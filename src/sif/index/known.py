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
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from sif.index.checks import corrupt
from sif.index.store import U32, KnownColumns

if TYPE_CHECKING:
    from sif.index.duck import DuckStore

#: Catalog ids read at a time by :func:`known_columns`.
KNOWN_CHUNK = 1 << 18


def known_columns(store: DuckStore, pid: int, secret: bytes) -> KnownColumns:
    """One row per live entry of parameter set ``pid`` (by id). Cost: a scan of the
    numbers of ``files`` (the origins' keys were computed when they were committed: no
    path is read; :attr:`KnownColumns.origins` reads the few a run needs), into arrays
    made once, :data:`KNOWN_CHUNK` ids at a time (DuckDB holds the result of one chunk);
    ``secret`` is the one the keys are under (the store's).
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
        origins_under=lambda rows, roots: read_origins(store, pid, ids, rows, roots),
        secret=secret,
    )


#: Entries whose origins :func:`origins` asks the catalog for at a time: the catalog
#: works within ``CATALOG_MEMORY`` (32 MB), and the origins of 400k entries, sorted in
#: one statement, did not fit (an index of 400k files refused every new root).
ORIGINS_CHUNK = 1 << 12


def _root_ranges(roots: Sequence[str]) -> tuple[str, list[bytes]]:
    """SQL over ``o`` true for a path equal to a root or under it, and its arguments
    (the byte ranges ``root/ <= o < root0``, as :func:`sif.index.pairs.scope`)."""
    where, args = [], []
    for r in roots:
        b = os.fsencode(r).rstrip(b"/")
        where.append("o = ? OR (o >= ? AND o < ?)")
        args += [b or b"/", b + b"/", b + b"0"]
    return " OR ".join(where) or "false", args


def origins(store: DuckStore, pid: int, ids: U32, rows: npt.NDArray[np.int64]) -> list[str]:
    """The origins (decoded paths on disk) of the entries ``ids[rows]``, in that order."""
    return read_origins(store, pid, ids, rows)[1]


def read_origins(
    store: DuckStore,
    pid: int,
    ids: U32,
    rows: npt.NDArray[np.int64],
    under: Sequence[str] | None = None,
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """The origins (decoded paths on disk) of the entries ``ids[rows]``, in that order, and
    the rows they are of: all of ``rows``, or with ``under`` (roots) those whose origin is
    one of the roots or lies under one.

    Read :data:`ORIGINS_CHUNK` entries at a time, unsorted (the order is made here), so
    that the catalog's memory does not grow with the rows asked for. Raises
    :class:`sif.errors.IndexCorrupt` when an entry asked for is not in the catalog.
    """
    from sif.index.duck import CATALOG, catalog_errors

    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return rows, []
    enc, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    catalog, con = os.path.join(store.root, CATALOG), store.catalog()
    where, args = _root_ranges(under) if under is not None else ("true", [])
    want = ids[rows]
    order = np.argsort(want, kind="stable")
    wanted = want[order]  # sorted: a chunk is a range of ids
    found_ids: list[npt.NDArray[np.uint32]] = []
    found: list[bytes] = []
    with catalog_errors(catalog):
        for lo in range(0, len(wanted), ORIGINS_CHUNK):
            part = wanted[lo : lo + ORIGINS_CHUNK]
            con.register("sif_want", {"id": part})
            try:
                # Tuples, not numpy: numpy's masked arrays are never needed (their module's
                # import alone took 16 ms of an incremental run's plan).
                got = con.execute(
                    "SELECT id, o FROM (SELECT id, coalesce(origin, path) AS o FROM files "
                    "WHERE params_id = ? AND id BETWEEN ? AND ? "  # a range: fewer blocks
                    "AND id IN (SELECT id FROM sif_want)) "
                    f"WHERE {where}",
                    [pid, int(part[0]), int(part[-1]), *args],
                ).fetchall()
            finally:
                con.unregister("sif_want")
            if under is None:
                distinct = int(np.count_nonzero(part[1:] != part[:-1])) + 1
                if len(got) != distinct:
                    raise corrupt(catalog, "files changed while read")
            found_ids.append(np.fromiter((r[0] for r in got), dtype=np.uint32, count=len(got)))
            found.extend(bytes(r[1]) for r in got)
    fid = np.concatenate(found_ids) if found_ids else np.empty(0, dtype=np.uint32)
    by_id = np.argsort(fid, kind="stable")
    fid = fid[by_id]
    at = np.minimum(np.searchsorted(fid, want), max(len(fid) - 1, 0))
    hit = fid[at] == want if len(fid) else np.zeros(len(want), dtype=bool)
    if under is None and not hit.all():
        raise corrupt(catalog, "files changed while read")
    keep = np.flatnonzero(hit)
    return rows[keep], [found[by_id[i]].decode(enc, errors) for i in at[keep].tolist()]
