"""The catalog's side of ``sif similar``: the files in scope, fingerprint rows, stored pairs.

Every statement of ``sif similar`` that reads or writes the catalog's tables
(``files``, ``segments``, ``params``, ``sif_meta``, ``similar_runs``,
``similar_pairs``) is here; :mod:`sif.similar` composes them. Each takes the
catalog's DuckDB connection (:meth:`sif.index.duck.DuckStore.catalog`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.packed import Labels, PackedBytes
from sif.errors import IndexUnusable
from sif.fingerprint import FingerprintParams
from sif.index.pairstore import in_scope
from sif.index.segments import RangeReader
from sif.index.store import ParamSet, param_set

U32 = npt.NDArray[np.uint32]


#: Rows fetched at a time where a column becomes Python objects (paths, digests):
#: they exist for one batch, then live packed (:class:`PackedBytes`).
FETCH_ROWS = 1 << 16


def scope(
    con: Any,
    pid: int,
    roots: Sequence[str],
    groups: bool = True,
    walked: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The indexed files under ``roots`` (params ``pid``), sorted by id, with a group code.

    ``walked``: the paths of this run's walk (its filters applied); only the
    entries of those files are in scope (the index may hold more under the
    roots: files that a filter leaves out stay indexed).

    ``grp`` (with ``groups``) numbers the distinct (kind, content view) of the
    files: files of another kind or view are never compared. The root filter
    runs in the query, as byte ranges of the path (``root/`` <= path <
    ``root0``: the byte after ``/``), sorted by id, in one transaction, a
    column a query. Paths, origins and digests come packed
    (:class:`sif.core.packed.PackedBytes`: one buffer, no object a file; an
    origin shares its path's bytes), kinds and views as
    :class:`sif.core.packed.Labels`: about 100 bytes a file of 44-byte paths
    (at a million files 540 MB as Python objects, 100 MB packed); the walk's
    filter is :func:`walked_rows`. Cost: a scan of ``files`` a column, and a
    few Python steps a file (its path, its digest, :func:`walked_rows`), in
    batches of :data:`FETCH_ROWS`.
    """
    where, args = [], []
    for r in roots:
        b = os.fsencode(os.path.abspath(r)).rstrip(b"/")
        where.append("path = ? OR (path >= ? AND path < ?)")
        args += [b or b"/", b + b"/", b + b"0"]
    rank = "dense_rank() OVER (ORDER BY kind, coalesce(CAST(view AS VARCHAR), '')) - 1"
    cur = con.cursor()  # one transaction of its own: every column of one snapshot
    cur.begin()
    try:
        selected = f"FROM files WHERE params_id = ? AND ({' OR '.join(where) or 'false'})"
        params = [pid, *args]
        # One column a query, sorted by id: DuckDB's result of all columns at once, beside
        # their Python objects, took 280 MB more at a million files. Kinds and views come
        # as one small code a file and their labels once.
        out: dict[str, Any] = {}
        for c in ("id", "size", "n_fp", "n_distinct", rank):
            got = cur.execute(f"SELECT {c} AS c {selected} ORDER BY id", params)
            out["grp" if c == rank else c] = np.asarray(got.fetchnumpy()["c"])
        ids = out["id"]
        path = _fetch_packed(cur, "path", selected, params, ids)
        out["digest"] = _fetch_packed(cur, "digest", selected, params, ids)
        # origin is NULL for a plain file: its path's bytes; an archive member's file
        # on disk is added after the paths.
        got = cur.execute(
            f"SELECT id, origin {selected} AND origin IS NOT NULL ORDER BY id", params
        ).fetchnumpy()
        labels = cur.execute(
            f"SELECT DISTINCT {rank} AS grp, kind, coalesce(CAST(view AS VARCHAR), 'raw') "
            f"{selected} ORDER BY grp",
            params,
        ).fetchall()
    finally:
        cur.rollback()
        cur.close()
    out["path"] = path
    rows = np.searchsorted(out["id"], np.asarray(got["id"]))
    out["origin"] = _with_origins(path, rows, [bytes(o) for o in got["origin"]])
    code = np.asarray(out.pop("grp"), dtype=np.int64)
    kinds = [k for _, k, _ in labels]
    views = [v for _, _, v in labels]
    if walked is not None:
        keep = walked_rows(out["origin"], walked)
        if not keep.all():
            out = {k: v[keep] for k, v in out.items()}
            path, origin = out["path"], out["origin"]
            rows = np.flatnonzero((origin.start != path.start) | (origin.size != path.size))
            out["path"] = path.compact()
            out["origin"] = _with_origins(out["path"], rows, [origin[r] for r in rows.tolist()])
            out["digest"] = out["digest"].compact()
            used, code = np.unique(code[keep], return_inverse=True)
            kinds, views = [kinds[u] for u in used.tolist()], [views[u] for u in used.tolist()]
    out["kind"] = Labels(kinds, code)
    out["view"] = Labels(views, code)
    mode = con.execute("SELECT normalize FROM params WHERE id = ?", [pid]).fetchone()
    out["normalize"] = Labels([(mode and mode[0]) or "auto"], np.zeros(len(code), np.uint8))
    if groups:
        if len(code) and int(code.max()) > 255:
            raise IndexUnusable("more than 255 kinds and views of files in one run")
        out["grp"] = code.astype(np.uint8)
    return out


def walked_rows(origin: PackedBytes, walked: Sequence[str]) -> npt.NDArray[np.bool_]:
    """Which of ``origin`` (files on disk, as bytes) are among the paths ``walked``.

    By a 64-bit hash of each encoded path, then each match checked byte for
    byte (a collision keeps no file that was not walked). Memory: 8 bytes a
    path of each side, no object a path beyond one at a time; Python steps: a
    few a path.
    """
    hw = np.fromiter((hash(os.fsencode(p)) for p in walked), dtype=np.int64, count=len(walked))
    order = np.argsort(hw, kind="stable")
    hw = hw[order]
    hr = np.fromiter(map(hash, origin), dtype=np.int64, count=len(origin))
    lo = np.searchsorted(hw, hr, side="left")
    hi = np.searchsorted(hw, hr, side="right")
    keep = hi > lo
    for r in np.flatnonzero(keep).tolist():
        mine = origin[r]
        keep[r] = any(
            os.fsencode(walked[int(order[j])]) == mine for j in range(int(lo[r]), int(hi[r]))
        )
    return keep


def _fetch_packed(cur: Any, column: str, selected: str, params: list[Any], ids: U32) -> PackedBytes:
    """The BLOB ``column`` of the rows ``selected`` (sorted by id: ``ids``) packed, by id
    range :data:`FETCH_ROWS` rows at a time: DuckDB's result of all rows at once
    (a million paths: 130 MB) is never made."""
    sizes = []
    parts = []
    for lo in range(0, len(ids), FETCH_ROWS):
        first, last = int(ids[lo]), int(ids[min(lo + FETCH_ROWS, len(ids)) - 1])
        got = cur.execute(
            f"SELECT {column} AS c {selected} AND id BETWEEN ? AND ? ORDER BY id",
            [*params, first, last],
        ).fetchall()
        items = [b"" if r[0] is None else r[0] for r in got]
        sizes.append(np.fromiter(map(len, items), dtype=np.uint32, count=len(items)))
        parts.append(b"".join(items))
        del got, items
    size = np.concatenate(sizes) if sizes else np.empty(0, np.uint32)
    if len(size) != len(ids):  # pragma: no cover - one transaction: one snapshot
        raise IndexUnusable("the catalog changed while it was read")
    start = np.zeros(len(size), dtype=np.int64)
    if len(size) > 1:
        np.cumsum(size[:-1], out=start[1:])
    data = bytearray(int(size.sum(dtype=np.int64)))
    pos = 0
    while parts:  # joined part by part, each freed once copied
        part = parts.pop(0)
        data[pos : pos + len(part)] = part
        pos += len(part)
    return PackedBytes(data, start, size)


def _with_origins(path: PackedBytes, rows: npt.NDArray[Any], origins: list[bytes]) -> PackedBytes:
    """Each file's file on disk: its path, or for the ``rows`` their ``origins``
    (appended to the paths' buffer, which both then share)."""
    start, size = path.start.copy(), path.size.copy()
    data = path.data
    if len(rows):
        n = np.fromiter(map(len, origins), dtype=np.uint32, count=len(origins))
        start[rows] = len(data) + np.cumsum(n, dtype=np.int64) - n
        size[rows] = n
        data = path.data if isinstance(path.data, bytearray) else bytearray(path.data)
        data += b"".join(origins)
        path.data = data
    return PackedBytes(data, start, size)


@dataclass
class SegmentRows:
    """The fingerprint rows of the files ``ids`` (sorted), read from segments by bucket range.

    A :class:`sif.index.pairstore.RowSource`: it holds the segment directories
    and the ids in scope, not the rows, and pickles as that (an engine's
    workers read their ranges from the same segments: a shared file system).
    Segments are opened for each read and closed after it.
    """

    directories: tuple[str, ...]
    ids: U32
    grp: npt.NDArray[np.uint8]
    total: int
    _code: npt.NDArray[np.uint16] | None = field(default=None, repr=False, compare=False)
    #: Each segment, opened once (:class:`sif.index.segments.RangeReader`): a row's id
    #: is then a gather from its file ids, 4 bytes a file, not from the records'
    #: strided column (a cache miss a row: reading the 42 M rows of 1 M files in 42
    #: ranges took 2.5-3.4 s before, 1.1-1.2 s now).
    _readers: dict[str, RangeReader] = field(default_factory=dict, repr=False, compare=False)

    def rows(self, lo: int, hi: int) -> tuple[U32, U32, npt.NDArray[np.uint8]]:
        code = self._codes()
        vparts, iparts = [], []
        gparts: list[npt.NDArray[Any]] = []
        for d in self.directories:
            reader = self._readers.get(d)
            if reader is None:
                reader = self._readers[d] = RangeReader(d)
            values, local = reader.rows(lo, hi)
            fids = reader.ids[local]
            if code is not None:  # one gather a row: group + 1, 0 out of scope
                c = code[np.minimum(fids, len(code) - 1)]
                keep = c > 0
                gparts.append(c[keep] - 1)
            else:
                keep = in_scope(self.ids, fids)
                gparts.append(self.grp[np.searchsorted(self.ids, fids[keep])])
            vparts.append(values[keep])
            iparts.append(fids[keep])
        if not vparts:
            return np.empty(0, np.uint32), np.empty(0, np.uint32), np.empty(0, np.uint8)
        return (
            np.concatenate(vparts),
            np.concatenate(iparts),
            np.concatenate(gparts).astype(np.uint8),
        )

    def _codes(self) -> npt.NDArray[np.uint16] | None:
        """A table from file id to its group + 1 (0: not in scope), when ids are dense enough.

        At most 2 bytes per id up to the largest id in scope, and only when that is
        under 8 times the ids in scope (else :func:`in_scope`'s binary search).
        """
        if self._code is None and len(self.ids):
            top = int(self.ids[-1])
            if top <= 8 * len(self.ids) + (1 << 20):
                code = np.zeros(top + 2, dtype=np.uint16)  # the last slot: ids beyond
                code[self.ids] = self.grp.astype(np.uint16) + 1
                self._code = code
        return self._code

    def close(self) -> None:
        """Nothing to release: each read opens and closes its segments."""

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_code"] = None  # made again where it is used
        state["_readers"] = {}  # a worker opens its own
        return state


def segment_rows(root: str, con: Any, pid: int, files: dict[str, npt.NDArray[Any]]) -> SegmentRows:
    """The :class:`SegmentRows` of the files in scope ``files`` (:func:`scope`) of set ``pid``."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM segments WHERE params_id = ? ORDER BY id", [pid]
        ).fetchall()
    ]
    dirs = tuple(os.path.join(root, "segments", n) for n in names)
    ids = np.asarray(files["id"], dtype=np.uint32)
    total = int(np.asarray(files["n_fp"], dtype=np.int64).sum())
    return SegmentRows(dirs, ids, np.asarray(files["grp"], dtype=np.uint8), total)


def params_id(store: Any, params: FingerprintParams | ParamSet) -> int | None:
    """The catalog's id of the parameter set ``build_index`` just used, if any."""
    pid = store._find_params(param_set(params))
    return None if pid is None else int(pid)


def meta(con: Any, key: str) -> str:
    rows = con.execute("SELECT value FROM sif_meta WHERE key = ?", [key]).fetchall()
    return str(rows[0][0]) if rows else ""


PAIR_COLUMNS = ("a", "b", "shared", "hits_a", "hits_b")


def stored_run(con: Any, key: str) -> tuple[int, str | None] | None:
    """(stop-fingerprints, walk digest) of the run stored for ``key``, or ``None``."""
    rows = con.execute(
        "SELECT stopped, walk_digest FROM similar_runs WHERE run_key = ?", [key]
    ).fetchall()
    return (int(rows[0][0]), rows[0][1]) if rows else None


def walk_stored(con: Any, digest: str) -> bool:
    """Whether a stored run's pairs were last used with the stat walk ``digest``."""
    rows = con.execute("SELECT 1 FROM similar_runs WHERE walk_digest = ? LIMIT 1", [digest])
    return bool(rows.fetchall())


def _sql_string(text: str) -> str:
    """``text`` as an SQL string literal (SET takes no parameters): quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def set_walk_digest(con: Any, key: str, digest: str | None) -> None:
    """Record the stat walk the index matched when the pairs of ``key`` were last used."""
    con.execute("UPDATE similar_runs SET walk_digest = ? WHERE run_key = ?", [digest, key])


def load_pairs(con: Any, key: str) -> tuple[dict[str, npt.NDArray[Any]], int] | None:
    """The pair counts stored for ``key``, or ``None`` (none, or stale).

    In the order stored (the scoring needs none); an exact score not computed
    is NaN. Cost: one scan of ``similar_pairs`` (~0.05 s for 500k pairs).
    """
    run = stored_run(con, key)
    if run is None:
        return None
    cols = con.execute(
        "SELECT a, b, shared, hits_a, hits_b, coalesce(exact_ab, 'NaN'::DOUBLE) AS exact_ab, "
        "coalesce(exact_ba, 'NaN'::DOUBLE) AS exact_ba, coalesce(exact_n, 0) AS exact_n "
        "FROM similar_pairs"
    ).fetchnumpy()
    out = {k: np.asarray(cols[k], dtype=np.uint32) for k in PAIR_COLUMNS}
    for k in ("exact_ab", "exact_ba"):
        out[k] = np.asarray(cols[k], dtype=np.float64)
    out["exact_n"] = np.asarray(cols["exact_n"], dtype=np.uint32)
    return out, run[0]


def store_pairs(
    con: Any,
    key: str,
    cols: dict[str, npt.NDArray[Any]],
    stopped: int,
    walk_digest: str | None,
) -> None:
    """Replace the stored pair counts by ``cols`` (one transaction).

    ``walk_digest``: the walk that the index matched when they were collated,
    or ``None`` when it is not known to (a file failed to be read).
    """
    with _transaction(con):
        con.execute("DELETE FROM similar_runs")
        _write_pairs(con, cols)
        con.execute(
            "INSERT INTO similar_runs (run_key, stopped, pairs, created, walk_digest) "
            "VALUES (?, ?, ?, current_timestamp, ?)",
            [key, stopped, len(cols["a"]), walk_digest],
        )


@contextlib.contextmanager
def _transaction(con: Any) -> Iterator[None]:
    """The statements of the block in one transaction: committed, or rolled back. A
    COMMIT that fails (a full disk) has ended the transaction already: the ROLLBACK's
    own error ("no transaction is active") is dropped, so that the COMMIT's, naming the
    cause, is the one raised."""
    import duckdb

    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _write_pairs(con: Any, cols: dict[str, npt.NDArray[Any]]) -> None:
    """``similar_pairs`` emptied and filled with ``cols`` (NaN scores as NULL), in their
    order, inside the caller's transaction: one streaming insert, within the catalog's
    memory whatever the number of pairs."""
    con.execute("DELETE FROM similar_pairs")
    names = (*PAIR_COLUMNS, "exact_ab", "exact_ba", "exact_n")
    con.register("sif_pairs", {k: _exact_n(cols) if k == "exact_n" else cols[k] for k in names})
    try:
        con.execute(
            "INSERT INTO similar_pairs SELECT a, b, shared, hits_a, hits_b, "
            "CAST(CASE WHEN isnan(exact_ab) THEN NULL ELSE exact_ab END AS DOUBLE), "
            "CAST(CASE WHEN isnan(exact_ba) THEN NULL ELSE exact_ba END AS DOUBLE), "
            "CAST(nullif(exact_n, 0) AS UINTEGER) FROM sif_pairs"
        )
    finally:
        con.unregister("sif_pairs")


def _exact_n(cols: dict[str, npt.NDArray[Any]]) -> npt.NDArray[np.uint32]:
    """The pairs' window-sample sizes (0: a score over every window, or none)."""
    n = cols.get("exact_n")
    return np.zeros(len(cols["a"]), np.uint32) if n is None else np.asarray(n, np.uint32)


def save_exact(con: Any, cols: dict[str, npt.NDArray[Any]]) -> None:
    """Store the exact containments computed this run beside the pair counts (with the
    size of the window sample they were taken on, if any).

    ``cols`` is, as :func:`sif.similar.run` passes it, every stored pair in the order
    stored or loaded (:func:`store_pairs`, :func:`load_pairs`), its scores filled in
    since: the table is then written again from it whole, in one transaction (a
    streaming insert). Otherwise (other pairs, or another order) the scores computed
    are joined into the stored pairs by ``(a, b)``: an ``UPDATE`` whose join spills
    within the catalog's 32 MB (4 M scores into 5.4 M pairs: 46 s, against 1 s
    written whole).
    """
    done = ~np.isnan(cols["exact_ab"])
    if not done.any():
        return
    stored = con.execute("SELECT a, b FROM similar_pairs").fetchnumpy()
    same = np.array_equal(np.asarray(stored["a"]), cols["a"]) and np.array_equal(
        np.asarray(stored["b"]), cols["b"]
    )
    del stored
    if same:
        with _transaction(con):
            _write_pairs(con, cols)
        return
    con.register(
        "sif_exact",
        {
            "a": cols["a"][done],
            "b": cols["b"][done],
            "ab": cols["exact_ab"][done],
            "ba": cols["exact_ba"][done],
            "n": _exact_n(cols)[done],
        },
    )
    try:
        con.execute(
            "UPDATE similar_pairs SET exact_ab = e.ab, exact_ba = e.ba, "
            "exact_n = CAST(nullif(e.n, 0) AS UINTEGER) FROM sif_exact e "
            "WHERE similar_pairs.a = e.a AND similar_pairs.b = e.b"
        )
    finally:
        con.unregister("sif_exact")


#: DuckDB's memory for the catalog between the statements of ``sif similar``. Opening
#: the index reads every block of the catalog once (each block's checksum), and DuckDB
#: kept them all resident through the run (170 MB at a million files); at rest the
#: limit evicts them and the memory returns to the system (221 -> 114 MB there).
RESTING_MEMORY = "16MB"


class DuckPairs:
    """The on-disk index (a :class:`~sif.index.duck.DuckStore`) as a
    :class:`sif.index.pairstore.PairStore`: the functions above on its catalog.

    Between statements the catalog's DuckDB holds at most :data:`RESTING_MEMORY`
    (each statement runs under the connection's own limit, then memory is given
    back: :meth:`_working`).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.con = store.catalog()
        got = self.con.execute("SELECT current_setting('memory_limit')").fetchone()
        self._limit = str(got[0]) if got else "1GB"
        self._rest()

    def _rest(self) -> None:
        for setting in ("allocator_flush_threshold", "allocator_bulk_deallocation_flush_threshold"):
            self.con.execute(f"SET {setting} = {_sql_string(RESTING_MEMORY)}")
        self.con.execute(f"SET memory_limit = {_sql_string(RESTING_MEMORY)}")

    @contextlib.contextmanager
    def _working(self) -> Iterator[None]:
        self.con.execute(f"SET memory_limit = {_sql_string(self._limit)}")
        try:
            yield
        finally:
            self._rest()

    def params_id(self, params: FingerprintParams | ParamSet) -> int | None:
        with self._working():
            return params_id(self.store, params)

    def generation(self) -> str:
        return meta(self.con, "generation")

    def scope(
        self,
        pid: int,
        roots: Sequence[str],
        groups: bool = True,
        walked: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        with self._working():
            return scope(self.con, pid, roots, groups, walked)

    def scope_rows(self, pid: int, files: dict[str, npt.NDArray[Any]]) -> SegmentRows:
        return segment_rows(self.store.root, self.con, pid, files)

    def temp_directory(self) -> str:
        tmp = os.path.join(self.store.root, "tmp")
        os.makedirs(tmp, exist_ok=True)
        return tmp

    def stored_run(self, key: str) -> tuple[int, str | None] | None:
        return stored_run(self.con, key)

    def walk_stored(self, digest: str) -> bool:
        return walk_stored(self.con, digest)

    def load_pairs(self, key: str) -> tuple[dict[str, npt.NDArray[Any]], int] | None:
        with self._working():
            return load_pairs(self.con, key)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A statement that writes, under the connection's limit; a write the system
        refuses (a full disk, a read-only place) is IndexUnusable naming the cause, as
        for the store's own writes (:func:`sif.index.duck._write_error`)."""
        import duckdb

        from sif.index.duck import _write_error

        with self._working():
            try:
                yield
            except (OSError, duckdb.Error) as exc:
                error = _write_error(self.store.directory, exc)
                if error is None:
                    raise
                raise error from exc

    def store_pairs(
        self, key: str, cols: dict[str, npt.NDArray[Any]], stopped: int, walk_digest: str | None
    ) -> None:
        with self._writing():
            store_pairs(self.con, key, cols, stopped, walk_digest)

    def set_walk_digest(self, key: str, digest: str | None) -> None:
        with self._writing():
            set_walk_digest(self.con, key, digest)

    def save_exact(self, cols: dict[str, npt.NDArray[Any]]) -> None:
        with self._writing():
            save_exact(self.con, cols)

    def close(self) -> None:
        # The store's own last statements (a checkpoint) under the connection's limit.
        self.con.execute(f"SET memory_limit = {_sql_string(self._limit)}")
        self.store.close()
