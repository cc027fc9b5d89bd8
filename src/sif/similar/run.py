"""The driver of ``sif similar``: the index, the stored pair counts, the run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.content import ContentOptions
from sif.core.anchors import AnchorSet
from sif.errors import ConfigError, IndexUnusable, OutOfMemory
from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.executors.local import fork_pool
from sif.fingerprint import FingerprintParams
from sif.index.build import DEFAULT_PARAMS, IndexStats, build_index, skip_index_dir
from sif.index.segments import Segment
from sif.index.store import ParamSet, param_set
from sif.similar.collate import (
    _collate_within,
)
from sif.similar.exact import (
    _exact_small,
    _identical_unfingerprinted,
)
from sif.similar.model import (
    SimilarGroup,
    SimilarOptions,
    SimilarPair,
    SimilarResult,
    SimilarSet,
    SimilarStats,
)
from sif.similar.score import _score
from sif.similar.sets import similar_groups, similar_sets
from sif.walk import WalkOptions, parallel_walk

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: DuckDB's working memory for the collation; it spills to ``temp_directory`` beyond.
DEFAULT_MEMORY_LIMIT = "1GB"
#: The version of the rules that turn fingerprints into stored pair counts and exact
#: scores (the collation, the small-file exact pass, the pairs of identical tiny
#: files). Stored pairs made under another version are collated again: bump it
#: whenever what is stored would differ.
RULES_VERSION = 2


# --- the driver -------------------------------------------------------------------


def _scope(
    con: Any,
    pid: int,
    roots: Sequence[str],
    groups: bool = True,
    walked: Sequence[str] | None = None,
) -> dict[str, npt.NDArray[Any]]:
    """The indexed files under ``roots`` (params ``pid``), sorted by id, with a group code.

    ``walked``: the paths of this run's walk (its filters applied); only the
    entries of those files are in scope (the index may hold more under the
    roots: files that a filter leaves out stay indexed).

    ``grp`` (with ``groups``) numbers the distinct (kind, content view) of the
    files: files of another kind or view are never compared. The root filter
    runs in the query, as byte ranges of the path (``root/`` <= path <
    ``root0``: the byte after ``/``); the sort by id in numpy. Cost: one scan
    of ``files``, mostly the conversion of paths, kinds and digests to Python
    objects (~25 ms for 40k files).
    """
    where, args = [], []
    for r in roots:
        b = os.fsencode(os.path.abspath(r)).rstrip(b"/")
        where.append("path = ? OR (path >= ? AND path < ?)")
        args += [b or b"/", b + b"/", b + b"0"]
    grp = (
        ", dense_rank() OVER (ORDER BY kind, coalesce(CAST(view AS VARCHAR), '')) - 1 AS grp"
        if groups
        else ""
    )
    within = ""
    cur = con
    if walked is not None:  # on a cursor of its own: the connection may hold a result
        cur = con.cursor()
        cur.register("sif_walked", {"origin": np.array([os.fsencode(p) for p in walked], object)})
        within = " AND coalesce(origin, path) IN (SELECT origin FROM sif_walked)"
    try:
        cols = cur.execute(
            "SELECT id, path, coalesce(origin, path) AS origin, "
            "coalesce(CAST(view AS VARCHAR), 'raw') AS view, size, kind, n_fp, n_distinct, digest"
            f"{grp} "
            f"FROM files WHERE params_id = ? AND ({' OR '.join(where) or 'false'}){within}",
            [pid, *args],
        ).fetchnumpy()
    finally:
        if walked is not None:
            cur.unregister("sif_walked")
            cur.close()
    order = np.argsort(np.asarray(cols["id"]), kind="stable")
    out = {k: np.asarray(v)[order] for k, v in cols.items()}
    mode = con.execute("SELECT normalize FROM params WHERE id = ?", [pid]).fetchone()
    out["normalize"] = np.full(len(order), (mode and mode[0]) or "auto", dtype=object)
    if groups:
        if len(out["grp"]) and int(out["grp"].max()) > 255:
            raise IndexUnusable("more than 255 kinds and views of files in one run")
        out["grp"] = out["grp"].astype(np.uint8)
    return out


def _rows(
    root: str, con: Any, pid: int, ids: U32, grp: npt.NDArray[np.uint8]
) -> tuple[U32, U32, npt.NDArray[np.uint8]]:
    """Every fingerprint row of the files ``ids`` (sorted): (value, file id, group)."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM segments WHERE params_id = ? ORDER BY id", [pid]
        ).fetchall()
    ]
    vparts, iparts = [], []
    for name in names:
        seg = Segment(os.path.join(root, "segments", name))
        try:
            values, fids = seg.all_rows()
        finally:
            seg.close()
        pos = np.searchsorted(ids, fids)
        pos = np.minimum(pos, max(len(ids) - 1, 0))
        keep = ids[pos] == fids if len(ids) else np.zeros(len(fids), dtype=bool)
        vparts.append(values[keep])
        iparts.append(fids[keep])
    values = np.concatenate(vparts) if vparts else np.empty(0, np.uint32)
    fids = np.concatenate(iparts) if iparts else np.empty(0, np.uint32)
    groups: npt.NDArray[np.uint8] = grp[np.searchsorted(ids, fids)] if len(ids) else grp[:0]
    return values, fids, groups


def _params_id(store: Any, params: FingerprintParams | ParamSet) -> int | None:
    """The catalog's id of the parameter set ``build_index`` just used, if any."""
    pid = store._find_params(param_set(params))
    return None if pid is None else int(pid)


_MEMORY_LIMIT = re.compile(r"^\s*\d+(?:\.\d+)?\s*(?:[KMGT]i?B|B|%)?\s*$", re.IGNORECASE)
"""What DuckDB's ``memory_limit`` accepts: a number and a unit (or a share, ``80%``)."""


def _sql_string(text: str) -> str:
    """``text`` as an SQL string literal (SET takes no parameters): quotes doubled."""
    return "'" + text.replace("'", "''") + "'"


def _meta(con: Any, key: str) -> str:
    rows = con.execute("SELECT value FROM sif_meta WHERE key = ?", [key]).fetchall()
    return str(rows[0][0]) if rows else ""


def _run_key(
    pid: int, generation: str, roots: Sequence[str], max_df: int, ids: npt.NDArray[Any]
) -> str:
    """What stored pair counts were made from: another key, another collation.

    The parameter set, the index generation, the roots, ``max_df``, the files
    in scope (``ids``: a filter changes them, and with them the stop-fingerprints)
    and :data:`RULES_VERSION`.
    """
    scope = hashlib.blake2b(np.asarray(ids, dtype=np.uint32).tobytes(), digest_size=16)
    return json.dumps(
        {
            "params": pid,
            "generation": generation,
            "roots": sorted(os.path.abspath(r) for r in roots),
            "max_df": max_df,
            "scope": scope.hexdigest(),
            "rules": RULES_VERSION,
        },
        sort_keys=True,
    )


PAIR_COLUMNS = ("a", "b", "shared", "hits_a", "hits_b")


def _stored_run(con: Any, key: str) -> tuple[int, str | None] | None:
    """(stop-fingerprints, walk digest) of the run stored for ``key``, or ``None``."""
    rows = con.execute(
        "SELECT stopped, walk_digest FROM similar_runs WHERE run_key = ?", [key]
    ).fetchall()
    return (int(rows[0][0]), rows[0][1]) if rows else None


def _load_pairs(con: Any, key: str) -> tuple[dict[str, npt.NDArray[Any]], int] | None:
    """The pair counts stored for ``key``, or ``None`` (none, or stale).

    In the order stored (the scoring needs none); an exact score not computed
    is NaN. Cost: one scan of ``similar_pairs`` (~0.05 s for 500k pairs).
    """
    run = _stored_run(con, key)
    if run is None:
        return None
    cols = con.execute(
        "SELECT a, b, shared, hits_a, hits_b, coalesce(exact_ab, 'NaN'::DOUBLE) AS exact_ab, "
        "coalesce(exact_ba, 'NaN'::DOUBLE) AS exact_ba FROM similar_pairs"
    ).fetchnumpy()
    out = {k: np.asarray(cols[k], dtype=np.uint32) for k in PAIR_COLUMNS}
    for k in ("exact_ab", "exact_ba"):
        out[k] = np.asarray(cols[k], dtype=np.float64)
    return out, run[0]


def _store_pairs(
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
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM similar_pairs")
        con.execute("DELETE FROM similar_runs")
        con.register("sif_pairs", {k: cols[k] for k in (*PAIR_COLUMNS, "exact_ab", "exact_ba")})
        con.execute(
            "INSERT INTO similar_pairs SELECT a, b, shared, hits_a, hits_b, "
            "CAST(CASE WHEN isnan(exact_ab) THEN NULL ELSE exact_ab END AS DOUBLE), "
            "CAST(CASE WHEN isnan(exact_ba) THEN NULL ELSE exact_ba END AS DOUBLE) FROM sif_pairs"
        )
        con.unregister("sif_pairs")
        con.execute(
            "INSERT INTO similar_runs (run_key, stopped, pairs, created, walk_digest) "
            "VALUES (?, ?, ?, current_timestamp, ?)",
            [key, stopped, len(cols["a"]), walk_digest],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def find_similar(
    roots: Iterable[str | os.PathLike[str]],
    index: str | os.PathLike[str] | None = None,
    params: FingerprintParams | None = None,
    anchors: AnchorSet | None = None,
    *,
    options: SimilarOptions | None = None,
    walk: WalkOptions | None = None,
    jobs: int | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    partitions: int = 1,
    content: ContentOptions | None = None,
    wait: bool = False,
    on_warning: WarningSink = ignore_warning,
    progress: Progress | None = None,
) -> SimilarResult:
    """All groups of similar files under ``roots`` (the paper's section 4).

    ``wait``: block while another process writes the index (as ``sif index
    --wait``), instead of raising :class:`sif.errors.IndexInUse`.

    ``content`` says how files become content views (default: ``auto``); each
    normalisation is a parameter set of its own in the index, never mixed.

    Brings the index at ``index`` up to date first (see
    :func:`sif.index.build_index`: only new and changed files are read), then
    collates, or reuses the pair counts stored by the last run over the same
    roots and index state with the same ``max_df`` (then no file under the
    roots is opened, unless ``exact`` needs a pair it has not scored yet).
    Without ``exact``, a stat walk equal to the one stored with the pairs
    skips the index update altogether (:func:`_reuse_unchanged`).
    Raises what :func:`sif.index.open_store` raises (``IndexInUse``,
    ``IndexCorrupt``) and :class:`ConfigError` for bad options; unreadable
    files are warnings. Cost: the index update, then the collation, about
    linear in the fingerprint rows (1 GB of text: ~4 M rows, a few seconds),
    or, when reused, a read of the stored pairs (after a stat walk alone, when
    nothing changed); at collation, one read of each small file of a pair of
    small files (:func:`_exact_small`: 0.25 s for 1 GB of Linux sources); with
    ``exact``, one read and
    a sort of the windows of each file of a candidate pair, on ``jobs`` processes.
    """
    started = time.perf_counter()
    options = options or SimilarOptions()
    if not _MEMORY_LIMIT.match(memory_limit):
        raise ConfigError(
            f"--memory-limit must be a size such as 500MB or 2GB, not {memory_limit!r}"
        )
    progress = progress or NullProgress()
    params = params or DEFAULT_PARAMS
    root_list = [os.path.abspath(os.fspath(r)) for r in roots]
    if not root_list:
        raise ConfigError("no PATH given")
    stats = SimilarStats()
    jobs = jobs or os.cpu_count() or 1
    # Workers for the exact pass fork now, before the index is opened: they must not
    # inherit its lock or its catalog.
    pool = fork_pool(jobs) if options.exact else None
    try:
        return _find(
            root_list,
            index,
            ParamSet(params, content.normalize) if content is not None else params,
            anchors,
            options,
            walk,
            jobs,
            memory_limit,
            partitions,
            on_warning,
            progress,
            stats,
            started,
            pool,
            wait,
        )
    finally:
        if pool is not None:
            pool.shutdown()


def _find(
    root_list: list[str],
    index: str | os.PathLike[str] | None,
    params: FingerprintParams | ParamSet,
    anchors: AnchorSet | None,
    options: SimilarOptions,
    walk: WalkOptions | None,
    jobs: int,
    memory_limit: str,
    partitions: int,
    on_warning: WarningSink,
    progress: Progress,
    stats: SimilarStats,
    started: float,
    pool: Any,
    wait: bool = False,
) -> SimilarResult:
    """:func:`find_similar` once its options are checked and its workers forked."""
    import duckdb

    from sif.index import open_store
    from sif.index.duck import DuckStore

    fp_params = params.params if isinstance(params, ParamSet) else params
    if not options.exact:  # --exact may need to read and store scores: the full path
        reused = _reuse_unchanged(
            root_list, index, params, options, walk, jobs, on_warning, progress, stats, wait
        )
        if reused is not None:
            cols, files = reused
            pairs = _score(cols, files, options, fp_params, stats, on_warning, progress)
            return _result(pairs, options, stats, started)
    normalize = getattr(params, "normalize", None)
    stats.index = build_index(
        root_list,
        index,
        fp_params,
        anchors,
        content=ContentOptions(normalize=normalize) if normalize else None,
        options=walk,
        jobs=jobs,
        wait=wait,
        on_warning=on_warning,
        progress=progress,
    )
    stats.seconds_index = time.perf_counter() - started
    # The walk the index now matches, unless a file failed (the next run must retry it).
    digest = stats.index.walk_digest if not stats.index.failed else None
    store = open_store(index, wait=wait)
    try:
        if not isinstance(store, DuckStore):  # pragma: no cover - the factory's only type
            raise IndexUnusable("sif similar needs the on-disk index")
        con = store.catalog()
        found = _params_id(store, params)
        if found is None:
            return _empty(options, stats, started)
        pid = found
        walked = stats.index.walked
        files = _scope(con, pid, root_list, walked=walked.paths if walked is not None else None)
        stats.files = len(files["id"])
        key = _run_key(pid, _meta(con, "generation"), root_list, options.max_df, files["id"])
        t0 = time.perf_counter()
        loaded = _load_pairs(con, key)
        if loaded is not None:
            cols, stats.stopped = loaded
            stats.reused = True
            progress.log(f"reusing {len(cols['a']):,} stored pairs")
            con.execute("UPDATE similar_runs SET walk_digest = ? WHERE run_key = ?", [digest, key])
        else:
            progress.stage("collating", None)
            tmp = os.path.join(store.root, "tmp")
            os.makedirs(tmp, exist_ok=True)
            con.execute(f"SET memory_limit = {_sql_string(memory_limit)}")
            con.execute(f"SET temp_directory = {_sql_string(tmp)}")
            con.execute(f"SET threads = {int(jobs)}")
            con.execute("SET preserve_insertion_order = false")  # the pairs get sorted
            ids = np.asarray(files["id"], dtype=np.uint32)
            values, fids, grp = _rows(
                store.root, con, pid, ids, np.asarray(files["grp"], dtype=np.uint8)
            )
            stats.fingerprints = len(values)
            cols, stats.stopped = _collate_within(
                con, values, fids, grp, options.max_df, partitions, jobs, memory_limit
            )
            for k in ("exact_ab", "exact_ba"):
                cols[k] = np.full(len(cols["a"]), np.nan)
            _exact_small(cols, files, fp_params, stats, on_warning, progress, pool, jobs)
            tiny = _identical_unfingerprinted(files, options.max_df)
            cols = {k: np.concatenate([v, tiny[k]]) for k, v in cols.items()}
            try:
                _store_pairs(con, key, cols, stats.stopped, digest)
            except duckdb.OutOfMemoryException:
                raise OutOfMemory(
                    f"out of memory: storing {len(cols['a']):,} pairs does not fit in "
                    f"--memory-limit {memory_limit}; raise --memory-limit"
                ) from None
        stats.seconds_collate = time.perf_counter() - t0
        stats.pairs_collated = len(cols["a"])
        pairs = _score(cols, files, options, fp_params, stats, on_warning, progress, pool, jobs)
        if options.exact and stats.exact_pairs:
            _save_exact(con, cols)
    finally:
        store.close()
    return _result(pairs, options, stats, started)


def _reuse_unchanged(
    root_list: list[str],
    index: str | os.PathLike[str] | None,
    params: FingerprintParams | ParamSet,
    options: SimilarOptions,
    walk: WalkOptions | None,
    jobs: int,
    on_warning: WarningSink,
    progress: Progress,
    stats: SimilarStats,
    wait: bool = False,
) -> tuple[dict[str, npt.NDArray[Any]], dict[str, npt.NDArray[Any]]] | None:
    """The stored pair counts and the files in scope, if nothing changed since they were made.

    A re-threshold with no rescan: a stat walk of the roots (no file opened),
    whose digest (:meth:`sif.walk.RecordColumns.digest`) must equal the one
    stored with the pairs, and a run key (parameters, index generation,
    roots, ``max_df``) equal to theirs; then the index update would change
    nothing, so it is skipped with its catalog work. The catalog is opened
    once, read-only. ``None`` when anything differs, when there is no index or
    no stored run, or when the index cannot be opened read-only (in use, an
    older schema): the caller then takes the full path, which says why if it
    fails too. Walk warnings are passed on only when the pairs are used (the
    full path walks again). Raises nothing of its own. Cost: the walk (one
    ``lstat`` a file, on ``jobs`` processes), a digest, one scan of ``files``
    and of ``similar_pairs``.
    """
    from sif.index.duck import CATALOG, DuckStore
    from sif.index.store import default_index_path

    t0 = time.perf_counter()
    location = os.fspath(index) if index is not None else default_index_path()
    if not os.path.exists(os.path.join(location, CATALOG)):
        return None
    warnings: list[ScanWarning] = []
    progress.stage("walking", None)
    pool = fork_pool(jobs)  # forked before the store is opened: no inherited lock
    try:
        skipping = skip_index_dir(walk or WalkOptions(), location)
        walked, _ = parallel_walk(root_list, skipping, warnings.append, pool, jobs, progress)
    finally:
        if pool is not None:
            pool.shutdown()
    digest = walked.digest()
    try:
        store = DuckStore(location, read_only=True, wait=wait)
    except IndexUnusable:
        return None
    try:
        con = store.catalog()
        pid = _params_id(store, params)
        if pid is None:
            return None
        files = _scope(con, pid, root_list, groups=False, walked=walked.paths)
        key = _run_key(pid, _meta(con, "generation"), root_list, options.max_df, files["id"])
        run = _stored_run(con, key)
        if run is None or run[1] != digest:
            return None
        loaded = _load_pairs(con, key)
        if loaded is None:  # pragma: no cover - read under the lock just above
            return None
    finally:
        store.close()
    for w in warnings:
        on_warning(w)
    cols, stats.stopped = loaded
    stats.files = len(files["id"])
    stats.reused = True
    stats.pairs_collated = len(cols["a"])
    stats.index = IndexStats(unchanged=len(walked), walk_digest=digest)
    stats.index.seconds = stats.seconds_index = time.perf_counter() - t0
    progress.log(f"nothing changed under the roots: reusing {len(cols['a']):,} stored pairs")
    return cols, files


def _result(
    pairs: list[SimilarPair], options: SimilarOptions, stats: SimilarStats, started: float
) -> SimilarResult:
    """The groups or sets of ``pairs``, and the run's figures."""
    groups: list[SimilarGroup] = []
    sets: list[SimilarSet] = []
    if options.sets is None:
        groups = similar_groups(pairs)
    else:
        sets = similar_sets(pairs, options.sets)
    stats.pairs = len(pairs)
    stats.seconds = time.perf_counter() - started
    return SimilarResult(options, tuple(pairs), tuple(groups), tuple(sets), stats)


def _empty(options: SimilarOptions, stats: SimilarStats, started: float) -> SimilarResult:
    stats.seconds = time.perf_counter() - started
    return SimilarResult(options, (), (), (), stats)


def _save_exact(con: Any, cols: dict[str, npt.NDArray[Any]]) -> None:
    """Store the exact containments computed this run beside the pair counts."""
    done = ~np.isnan(cols["exact_ab"])
    con.register(
        "sif_exact",
        {
            "a": cols["a"][done],
            "b": cols["b"][done],
            "ab": cols["exact_ab"][done],
            "ba": cols["exact_ba"][done],
        },
    )
    con.execute(
        "UPDATE similar_pairs SET exact_ab = e.ab, exact_ba = e.ba FROM sif_exact e "
        "WHERE similar_pairs.a = e.a AND similar_pairs.b = e.b"
    )
    con.unregister("sif_exact")
