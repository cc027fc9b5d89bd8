"""The driver of ``sif similar``: the index, the stored pair counts, the run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from sif.content import ContentOptions
from sif.core.anchors import AnchorSet
from sif.core.packed import labels, packed
from sif.errors import ConfigError, IndexUnusable, OutOfMemory
from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.executors.engine import Engine
from sif.executors.local import fork_pool
from sif.fingerprint import FingerprintParams
from sif.index.build import DEFAULT_PARAMS, IndexStats, build_index, skip_index_dir
from sif.index.pairstore import PairStore
from sif.index.store import ParamSet
from sif.similar.collate import collate_source
from sif.similar.exact import (
    _exact_small,
    _identical_unfingerprinted,
)
from sif.similar.model import (
    SimilarGroup,
    SimilarOptions,
    SimilarResult,
    SimilarSet,
    SimilarStats,
)
from sif.similar.score import decide, pending_exact, score_exact
from sif.similar.sets import similar_sets
from sif.similar.smallpass import small_pass
from sif.similar.spill import spill
from sif.similar.table import GroupTable, PairTable
from sif.walk import RecordColumns, WalkOptions, c_walk, parallel_walk

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: DuckDB's working memory for the collation; it spills to ``temp_directory`` beyond.
DEFAULT_MEMORY_LIMIT = "1GB"
#: The version of the rules that turn fingerprints into stored pair counts and exact
#: scores (the collation, the small-file exact pass, the pairs of identical tiny
#: files, the small files held by others: :mod:`sif.similar.smallpass`). Stored pairs
#: made under another version are collated again: bump it whenever what is stored
#: would differ.
RULES_VERSION = 3


# --- the driver -------------------------------------------------------------------


_MEMORY_LIMIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B|%)\s*$", re.IGNORECASE)
"""What DuckDB's ``memory_limit`` accepts: a number and a unit (or a share, ``80%``); a
bare number was DuckDB's parser error, and only when a collation ran."""


_UNIT = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


def _run_key(
    pid: int,
    generation: str,
    roots: Sequence[str],
    max_df: int,
    ids: npt.NDArray[Any],
    small_pass: bool = True,
) -> str:
    """What stored pair counts were made from: another key, another collation.

    The parameter set, the index generation, the roots, ``max_df``, the files
    in scope (``ids``: a filter changes them, and with them the stop-fingerprints)
    and :data:`RULES_VERSION`; and whether the small-file pass ran
    (:mod:`sif.similar.smallpass`: by default, not under ``--fast``, which
    reads no file again), so that each mode stores its own pairs.
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
            "small_pass": small_pass,
        },
        sort_keys=True,
    )


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
    store: PairStore | None = None,
    engine: Engine | None = None,
) -> SimilarResult:
    """All groups of similar files under ``roots`` (the paper's section 4).

    ``wait``: block while another process writes the index (as ``sif index
    --wait``), instead of raising :class:`sif.errors.IndexInUse`.

    ``store``: an index to use instead of the one at ``index`` (an
    :class:`sif.index.memory.MemoryIndex` in tests: both protocols, ``IndexStore``
    and :class:`sif.index.pairstore.PairStore`); it is not closed. ``engine``
    runs the fingerprinting and the collation elsewhere
    (:class:`sif.executors.dask.DaskEngine`), with the same results; ``None``:
    here, on ``jobs`` processes. ``partitions``: the least number of hash
    partitions (bucket ranges) of the collation; it uses more to keep about
    :data:`sif.similar.collate.PARTITION_ROWS` rows in memory at a time.

    ``content`` says how files become content views (default: ``auto``); each
    normalisation is a parameter set of its own in the index, never mixed.

    Brings the index at ``index`` up to date first (see
    :func:`sif.index.build_index`: only new and changed files are read), then
    collates, or reuses the pair counts stored by the last run over the same
    roots and index state with the same ``max_df`` (then no file under the
    roots is opened, unless a pair that could reach the threshold has no exact
    score yet: a lower threshold than any before). A stat walk equal to the one
    stored with the pairs, and no pair left to score, skip the index update
    altogether (:func:`_reuse_unchanged`).
    Raises what :func:`sif.index.open_store` raises (``IndexInUse``,
    ``IndexCorrupt``) and :class:`ConfigError` for bad options; unreadable
    files are warnings. Cost: the index update, then the collation, about
    linear in the fingerprint rows (1 GB of text: ~4 M rows, a few seconds),
    or, when reused, a read of the stored pairs (after a stat walk alone, when
    nothing changed); at collation, one read of each small file of a pair of
    small files (:func:`_exact_small`: 0.25 s for 1 GB of Linux sources); with
    ``exact`` (the default), one read and a sort of the windows of each file of a
    candidate pair, on ``jobs`` processes (a file read once, its set kept while
    its pairs need it).
    """
    started = time.perf_counter()
    options = options or SimilarOptions()
    limit = _MEMORY_LIMIT.match(memory_limit)
    if (
        not limit
        or float(limit.group(1)) * _UNIT.get(limit.group(2).upper().replace("IB", "B"), 1) > 2**50
        or (limit.group(2) == "%" and not 0 < float(limit.group(1)) <= 100)
    ):
        raise ConfigError(
            f"--memory-limit must be a size such as 500MB or 2GB (up to 1 PiB) or a share "
            f"such as 80%, not {memory_limit!r}"
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
    pool = None
    try:  # the fork inside: a Ctrl-C just after it still ends the workers
        pool = fork_pool(jobs) if options.exact and engine is None else None
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
            store,
            engine,
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
    store: PairStore | None = None,
    engine: Engine | None = None,
) -> SimilarResult:
    """:func:`find_similar` once its options are checked and its workers forked."""
    import duckdb

    from sif.index import open_store
    from sif.index.pairstore import pair_store

    fp_params = params.params if isinstance(params, ParamSet) else params
    reused = (
        _reuse_unchanged(
            root_list, index, params, options, walk, jobs, on_warning, progress, stats, wait, pool
        )
        if store is None
        else None
    )
    if reused is not None:  # every score needed is stored: no file is opened
        _end_workers(pool)
        cols, files = reused
        # (_reuse_unchanged took them only with no pair left to score exactly.)
        kept = decide(cols, files, options, fp_params, stats)
        pairs = PairTable(files, kept, take=True)
        return _result(pairs, options, stats, started)
    normalize = getattr(params, "normalize", None)
    stats.index = build_index(
        root_list,
        index,
        fp_params,
        anchors,
        content=ContentOptions(normalize=normalize) if normalize else None,
        options=walk,
        store=store,  # type: ignore[arg-type]
        jobs=jobs,
        wait=wait,
        on_warning=on_warning,
        progress=progress,
        engine=engine,
    )
    stats.seconds_index = time.perf_counter() - started
    # The walk the index now matches, unless a file failed (the next run must retry it).
    digest = stats.index.walk_digest if not stats.index.failed else None
    pstore = store if store is not None else pair_store(open_store(index, wait=wait))
    try:
        found = pstore.params_id(params)
        if found is None:
            return _empty(options, stats, started)
        pid = found
        # The walk is needed no longer (a million files: 100 MB of names).
        walked = stats.index.walked
        stats.index.drop_walk()
        files = _columnar(
            pstore.scope(pid, root_list, walked=_WalkPaths(walked) if walked is not None else None)
        )
        del walked
        stats.files = len(files["id"])
        key = _run_key(
            pid, pstore.generation(), root_list, options.max_df, files["id"], options.exact
        )
        t0 = time.perf_counter()
        loaded = pstore.load_pairs(key)
        if loaded is not None:
            cols, stats.stopped = loaded
            stats.reused = True
            progress.log(f"reusing {len(cols['a']):,} stored pairs")
            pstore.set_walk_digest(key, digest)
        else:
            progress.stage("collating", None)
            source = pstore.scope_rows(pid, files)
            if engine is not None:
                cols, stats.stopped, stats.fingerprints = engine.collate(
                    source, options.max_df, partitions, memory_limit
                )
            else:
                cols, stats.stopped, stats.fingerprints = collate_source(
                    source, options.max_df, partitions, jobs, memory_limit, pstore.temp_directory()
                )
            for k in ("exact_ab", "exact_ba"):
                cols[k] = np.full(len(cols["a"]), np.nan)
            cols["exact_n"] = np.zeros(len(cols["a"]), dtype=np.uint32)
            _exact_small(cols, files, fp_params, stats, on_warning, progress, pool, jobs, engine)
            cols = _append(cols, _identical_unfingerprinted(files, options.max_df))
            if options.exact:  # --fast reads no file again
                tmp = pstore.temp_directory()
                # The collated pairs wait on disk while the pass streams every file (the
                # run's memory peak); it reads two of their columns at its end.
                spilled = spill(cols, tmp)
                try:
                    held = small_pass(
                        cols if spilled is None else spilled,
                        files,
                        fp_params.window,
                        stats,
                        on_warning,
                        progress,
                        pool,
                        jobs,
                        engine,
                        spill=tmp,
                    )
                    if spilled is not None:
                        cols = spilled.load()
                finally:
                    if spilled is not None:
                        spilled.remove()
                cols = _append(cols, held)
            try:
                pstore.store_pairs(key, cols, stats.stopped, digest)
            except duckdb.OutOfMemoryException:
                raise OutOfMemory(
                    f"out of memory: storing {len(cols['a']):,} pairs does not fit in "
                    f"--memory-limit {memory_limit}; raise --memory-limit"
                ) from None
        stats.seconds_collate = time.perf_counter() - t0
        stats.pairs_collated = len(cols["a"])
        score_exact(
            cols, files, options, fp_params, stats, on_warning, progress, pool, jobs, engine
        )
        _end_workers(pool)
        kept = decide(cols, files, options, fp_params, stats)
        if options.exact and stats.exact_pairs:
            pstore.save_exact(cols)
        # Every collated pair (a million files: 5.4 M, 215 MB) goes before the kept ones are
        # ordered into their table.
        del cols, loaded
        pairs = PairTable(files, kept, take=True)
    finally:
        if store is None:
            pstore.close()
    return _result(pairs, options, stats, started)


def _end_workers(pool: Any) -> None:
    """End the exact pass's workers once the last file is read, before the decision and
    the result are made: at a million files an idle worker held 168-177 MB through the
    run's peak of summed memory, the decision's kept columns (main 1,186 MB). The
    caller (:func:`find_similar`) ends them again in any case (a second shutdown does
    nothing)."""
    if pool is not None:
        pool.shutdown(cancel=False)


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
    workers: Any = None,
) -> tuple[dict[str, npt.NDArray[Any]], dict[str, npt.NDArray[Any]]] | None:
    """The stored pair counts and the files in scope, if nothing changed since they were made.

    ``workers``: a pool to walk on (the exact pass's), else one is forked for the walk.

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
    from sif.index.pairs import DuckPairs
    from sif.index.store import default_index_path

    t0 = time.perf_counter()
    location = os.fspath(index) if index is not None else default_index_path()
    if not os.path.exists(os.path.join(location, CATALOG)):
        return None
    warnings: list[ScanWarning] = []
    progress.stage("walking", None)
    # The exact pass's workers walk too (forked before any store was opened); without
    # them, workers of its own, forked before the store is opened: no inherited lock.
    # The C walk needs none (its helpers are threads of this process).
    own = None
    try:  # the fork inside: a Ctrl-C just after it still ends the workers
        own = fork_pool(jobs) if workers is None and not c_walk(walk or WalkOptions()) else None
        skipping = skip_index_dir(walk or WalkOptions(), location)
        walked, _ = parallel_walk(
            root_list, skipping, warnings.append, workers or own, jobs, progress
        )
    finally:
        if own is not None:
            own.shutdown()
    digest = walked.digest()
    try:
        pstore = DuckPairs(DuckStore(location, read_only=True, wait=wait))
    except IndexUnusable:
        return None
    try:
        pid = pstore.params_id(params)
        if pid is None or not pstore.walk_stored(digest):
            return None  # no stored run of this walk: no scope to make (a million files: 10 s)
        files = _columnar(pstore.scope(pid, root_list, groups=False, walked=_WalkPaths(walked)))
        walked_files = len(walked)
        del walked
        key = _run_key(
            pid, pstore.generation(), root_list, options.max_df, files["id"], options.exact
        )
        run = pstore.stored_run(key)
        if run is None or run[1] != digest:
            return None
        loaded = pstore.load_pairs(key)
        if loaded is None:  # pragma: no cover - read under the lock just above
            return None
        fp_params = params.params if isinstance(params, ParamSet) else params
        if len(pending_exact(loaded[0], files, options, fp_params)):
            return None  # pairs to score exactly (a lower threshold): read and store them
    finally:
        pstore.close()
    for w in warnings:
        on_warning(w)
    cols, stats.stopped = loaded
    stats.files = len(files["id"])
    stats.reused = True
    stats.pairs_collated = len(cols["a"])
    stats.index = IndexStats(unchanged=walked_files, digest=digest)
    stats.index.seconds = stats.seconds_index = time.perf_counter() - t0
    progress.log(f"nothing changed under the roots: reusing {len(cols['a']):,} stored pairs")
    return cols, files


def _append(
    cols: dict[str, npt.NDArray[Any]], more: dict[str, npt.NDArray[Any]]
) -> dict[str, npt.NDArray[Any]]:
    """The pair columns ``cols`` followed by ``more`` (``cols`` itself when ``more`` is empty:
    no copy of millions of pairs for none). A column at a time, each old one let go before
    the next is made: the copy holds one column twice, not every one (at a million files,
    5.4 M pairs: 215 MB of columns)."""
    if not len(more["a"]):
        return cols
    out = dict(cols)
    cols.clear()  # the caller's dict: its columns go as they are replaced
    for k in list(out):
        out[k] = np.concatenate([out[k], more[k]])
    return out


class _WalkPaths(Sequence[str]):
    """The paths of a walk, each made when read (a list of a million took 90 MB)."""

    def __init__(self, walked: RecordColumns) -> None:
        self.walked = walked

    def __len__(self) -> int:
        return len(self.walked)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self.walked.path(j) for j in range(*i.indices(len(self)))]
        return self.walked.path(i)

    def __iter__(self) -> Iterator[str]:
        dirs = self.walked.dirs
        return (dirs[d] + n for d, n in zip(self.walked.dir_of, self.walked.names, strict=True))


def _columnar(files: dict[str, Any]) -> dict[str, Any]:
    """The scope with its byte columns packed and its string columns as codes
    (:mod:`sif.core.packed`), whichever store made it (the on-disk index packs
    them already)."""
    out = dict(files)
    for k in ("path", "origin", "digest"):
        out[k] = packed(files[k])
    for k in ("kind", "view", "normalize"):
        out[k] = labels(files[k])
    return out


def _result(
    pairs: PairTable, options: SimilarOptions, stats: SimilarStats, started: float
) -> SimilarResult:
    """The groups or sets of ``pairs``, and the run's figures.

    The pairs and the groups stay columns (:mod:`sif.similar.table`): their
    values are made as a report reads them.
    """
    groups: Sequence[SimilarGroup] = ()
    sets: list[SimilarSet] = []
    if options.sets is None:
        groups = GroupTable(pairs)
    else:
        sets = similar_sets(pairs, options.sets)
    stats.pairs = len(pairs)
    stats.seconds = time.perf_counter() - started
    return SimilarResult(options, pairs, groups, tuple(sets), stats)


def _empty(options: SimilarOptions, stats: SimilarStats, started: float) -> SimilarResult:
    stats.seconds = time.perf_counter() - started
    return SimilarResult(options, (), (), (), stats)
