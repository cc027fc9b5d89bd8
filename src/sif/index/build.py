"""``sif index``: bring the index up to date with a tree, incrementally, on all cores.

Plan first, then act: the walk (stat only) is compared with what the index
holds, by (device, inode, size, mtime_ns, ctime_ns) of each file on disk (the
ctime, which ``utime`` cannot set, tells a file rewritten with its mtime
restored), which splits
the files into new, changed, unchanged and removed; only new and changed
files are read. A file gives one or more entries (its content views,
:func:`sif.index.scan.scan_entries`: archive members, decompressed content);
a changed file is read whole again and all its old entries are dropped. They
are read on ``jobs`` processes (:func:`sif.executors.local.shared_map`) and
committed in checkpoints, every :data:`CHECKPOINT_BYTES` read,
:data:`CHECKPOINT_ROWS` fingerprints or :data:`CHECKPOINT_SECONDS`, so a run
killed at any moment keeps the work of its finished checkpoints and the next
run does the rest. With two jobs or more, a checkpoint is committed in a
thread while the next one is collected (:mod:`sif.index.committing`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from array import array
from collections.abc import Iterable, Iterator, MutableSequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from sif.content import ContentOptions
from sif.core.anchors import AnchorSet
from sif.core.sampling import JIT_MIN_BYTES
from sif.core.winnowc import available as compiled_winnow
from sif.errors import ConfigError, IndexInUse
from sif.events import NullProgress, Progress, WarningSink, ignore_warning
from sif.executors.engine import Engine
from sif.executors.local import WorkerPool, fork_pool, shared_map
from sif.fingerprint import FingerprintParams
from sif.index import indexdir, scanjobs
from sif.index.committing import Committer
from sif.index.entries import Entries
from sif.index.opening import Opening
from sif.index.runplan import plan_run
from sif.index.scanjobs import ReadBatch, _Item, _scan_batch, _warm
from sif.index.store import (
    IndexStore,
    KnownColumns,
    ParamSet,
    default_index_path,
    open_store,
)
from sif.keyedwalk import keyed_walk
from sif.memtrim import release_memory
from sif.treewalk import walk_helpers
from sif.walk import RecordColumns, WalkOptions

#: Commit after this many bytes read...
CHECKPOINT_BYTES = 256 << 20
#: ... or this many fingerprint rows (a commit sorts and writes them: its arrays are
#: most of what a checkpoint costs at the run's peak; the 100 k tree's entries hold ~43
#: each, so about 24 k entries a checkpoint there)...
CHECKPOINT_ROWS = 1 << 20
#: ... or this many entries (what waits for a commit is a few hundred bytes an entry as
#: columns, :class:`Entries`: ~380 B with its ~43 fingerprints on the 100 k tree, and
#: the fingerprints of 256 MiB read, ~5 MB, at most besides; twice with two jobs or
#: more, as one checkpoint commits in a thread while the next is collected). The rows
#: bind first but on files of a few fingerprints. A count of entries alone (16 k) made
#: a fresh index of 20 k small files (20 fingerprints each) two segments, which its end
#: then merged: 0.80 s (median of 10) against 0.71 s as one. On 150 k files of 10-120
#: bytes (one fingerprint or none), where this count binds, the run's summed peak was
#: 235 MB at 16 k entries, 254-257 MB at 32 k and 273-286 MB at 64 k...
CHECKPOINT_ENTRIES = 1 << 15
#: ... or this many seconds, whichever comes first.
CHECKPOINT_SECONDS = 30.0
#: The small-file tier (Manber, section 6: "each file needs at least 10-20
#: fingerprints"): ``winnow`` narrows its winnowing window for a file of fewer than
#: about 20 * 511 bytes, so that it keeps at least 20 (see :mod:`sif.fingerprint`).
#: Measured (bench/similar.py, 23 sdists): recall for pairs whose smaller file is
#: under 1 KB 0.60 -> 0.88 at T = 25%, F1 0.85 -> 0.94; the index grows from 2.64% to
#: 2.85% of a copy of the stdlib (bench/query.py), 32 would take it to 3.06%.
SMALL_FILE_FINGERPRINTS = 20
#: What the index fingerprints with when no parameters are given.
DEFAULT_PARAMS = FingerprintParams(min_fingerprints=SMALL_FILE_FINGERPRINTS)
#: Files per work item sent to a worker, and bytes at most (plain files of a batch are
#: read into one buffer and fingerprinted in one kernel call).
BATCH_FILES = 128
BATCH_BYTES = 8 << 20


@dataclass
class IndexStats:
    """What a run of :func:`build_index` did, for the summary."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0
    files_read: int = 0
    bytes_read: int = 0
    commits: int = 0
    seconds: float = 0.0
    read_rows: MutableSequence[int] = field(default_factory=lambda: array("q"), repr=False)
    """Rows of :attr:`walked` read in this run, in completion order (8 bytes a file)."""
    digest: str | None = field(default=None, repr=False)
    """:attr:`walk_digest` once known (given, or made when first asked)."""
    walked: RecordColumns | None = field(default=None, repr=False, compare=False)
    """This run's walk: the files in the scope of the command (its filters applied)."""

    _read_kept: list[str] | None = field(default=None, repr=False, compare=False)

    @property
    def read_paths(self) -> list[str]:
        """Paths read in this run, in completion order (tests assert what was re-read).

        From :attr:`walked`; once :meth:`drop_walk` dropped it, the paths it kept.
        Raises :class:`LookupError` when the walk went with more than
        :data:`READ_PATHS_KEPT` of them.
        """
        if self.walked is not None:
            return [self.walked.path(i) for i in self.read_rows]
        if self._read_kept is not None:
            return list(self._read_kept)
        if not len(self.read_rows):
            return []
        raise LookupError(f"{len(self.read_rows):,} paths read: the walk is no longer held")

    @property
    def walk_digest(self) -> str:
        """:meth:`sif.walk.RecordColumns.digest` of this run's walk: the index now holds
        exactly those files, unless ``failed`` (a stat walk giving the same digest later
        means nothing under the roots changed). Made when first asked (``sif similar``
        asks; at 1 M files it costs 0.2-0.4 s, which ``sif index`` does not spend);
        ``""`` when there was no walk."""
        if self.digest is None:
            self.digest = self.walked.digest() if self.walked is not None else ""
        return self.digest

    def drop_walk(self) -> None:
        """Let go of :attr:`walked` (a million files: 100 MB of names), keeping the read
        paths when they are few (a re-run reads only what changed), and its digest."""
        if self.walked is not None and len(self.read_rows) <= READ_PATHS_KEPT:
            self._read_kept = [self.walked.path(i) for i in self.read_rows]
        if self.walked is not None:
            self.walk_digest  # noqa: B018 (made while the walk is there)
        self.walked = None


#: :meth:`IndexStats.drop_walk` keeps the paths read when there are at most this many.
READ_PATHS_KEPT = 4096
#: A run that reads more than one walked file in this many has the walk's names decoded
#: all at once (a name alone costs about seven times its share of decoding them all).
DECODE_ALL_SHARE = 8


def _fresh(index: str | os.PathLike[str] | None, rebuild: bool) -> bool:
    """Whether this run builds an index from nothing (then it reads every file)."""
    from sif.index.indexdir import CATALOG
    from sif.index.store import default_index_path

    return rebuild or not os.path.exists(os.path.join(index or default_index_path(), CATALOG))


def _items(cols: RecordColumns, rows: list[int]) -> list[_Item]:
    """The items of ``rows`` (path, dev, ino, size, mtime_ns, ctime_ns), a column at a
    time (the lookups by ``map`` in C); a name the walk kept raw is decoded alone."""
    return list(
        zip(
            list(map(cols.path, rows)),
            map(cols.dev.__getitem__, rows),
            map(cols.ino.__getitem__, rows),
            map(cols.size.__getitem__, rows),
            map(cols.mtime_ns.__getitem__, rows),
            map(cols.ctime_ns.__getitem__, rows),
            strict=True,
        )
    )


def _batches(cols: RecordColumns, rows: npt.NDArray[np.int64]) -> Iterator[list[int]]:
    """``rows`` of ``cols`` cut into batches of :data:`BATCH_FILES` files or
    :data:`BATCH_BYTES` bytes at most (a file larger than that alone)."""
    batch: list[int] = []
    size = 0
    sizes = cols.size
    for i in rows.tolist():
        batch.append(i)
        size += sizes[i]
        if len(batch) >= BATCH_FILES or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def skip_index_dir(options: WalkOptions, directory: str | None) -> WalkOptions:
    """``options`` that never walk into the index directory ``directory`` (by inode)."""
    try:
        st = os.stat(directory) if directory is not None else None
    except OSError:
        st = None
    if st is None:
        return options
    return replace(options, skip_dirs=options.skip_dirs | {(st.st_dev, st.st_ino)})


def build_index(
    roots: Iterable[str | os.PathLike[str]],
    index: str | os.PathLike[str] | None = None,
    params: FingerprintParams | None = None,
    anchors: AnchorSet | None = None,
    *,
    options: WalkOptions | None = None,
    store: IndexStore | None = None,
    content: ContentOptions | None = None,
    wait: bool = False,
    rebuild: bool = False,
    jobs: int | None = None,
    on_warning: WarningSink = ignore_warning,
    progress: Progress | None = None,
    checkpoint_bytes: int = CHECKPOINT_BYTES,
    checkpoint_seconds: float = CHECKPOINT_SECONDS,
    engine: Engine | None = None,
) -> IndexStats:
    """Make the index hold exactly the files under ``roots`` (under ``params``).

    ``params`` defaults to :data:`DEFAULT_PARAMS` (``winnow`` with the small-file tier).

    Each file is indexed as its entries under ``content`` (default
    ``ContentOptions()``: normalisation ``auto``); the parameter set is
    ``ParamSet(params, content.normalize)``. Files of the index under
    ``roots`` that are gone from disk (or changed, when the walk's filters
    left them out) are removed; files that the filters of ``options`` left
    out but that are still as indexed, and files elsewhere, are kept;
    fingerprints under other parameter sets are kept beside, never mixed.
    ``store`` replaces the on-disk index at
    ``index`` (default location: :func:`sif.index.store.default_index_path`).
    Raises :class:`ConfigError` for a root that does not exist, before
    anything is created, and what :func:`sif.index.store.open_store` raises
    (``IndexInUse``, ``IndexCorrupt``, ``IndexUnusable`` for a directory that
    is not an index or cannot be written); unreadable files are warnings. The
    index directory is never walked (it may lie under a root). Cost: one stat per
    file, one read of each new or changed file, a commit per checkpoint.
    """
    started = time.perf_counter()
    abs_roots = [os.path.abspath(os.fspath(r)) for r in roots]
    for root in abs_roots:  # before anything is created: a typo makes no index
        try:
            os.lstat(root)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise ConfigError(f"{root}: {exc.strerror}") from None
        except OSError:
            pass  # the walk warns, naming the cause
    params = params or DEFAULT_PARAMS
    content = content or ContentOptions()
    pset = ParamSet(params, content.normalize)
    options = options or WalkOptions()
    progress = progress or NullProgress()
    jobs = jobs or os.cpu_count() or 1
    stats = IndexStats()
    scanjobs.set_run(params, anchors, content)
    own_store = store is None
    pool: WorkerPool | None = None
    opening: Opening | None = None
    committer: Committer | None = None
    try:
        # The pool forks before the store is opened: workers must not inherit the
        # lock or the catalog, or a killed run would leave the lock held. With
        # ``jobs`` >= 2 there is one worker a job, and this process coordinates:
        # it walks, plans, collects and commits, and never loads numba.
        pool = fork_pool(jobs + 1) if jobs >= 2 else None  # in the try: a Ctrl-C ends it
        # A new index reads every file: the workers load numba's kernels while this
        # process opens the store and walks (not needed with the compiled kernel,
        # :mod:`sif.core.winnowc`). With an engine, its workers read and warm.
        # The walk is this process's alone (at a million files in 111k directories,
        # reading ahead in the workers gained 5% of the walk's wall time but cost 3.5
        # more CPU seconds and 82 MB more peak); in C, threads of this process read ahead.
        warming = (
            pool is not None
            and store is None
            and not (params.scheme == "winnow" and compiled_winnow())
            and _fresh(index, rebuild)
        )
        if warming and engine is not None:
            engine.warm(params)
        elif warming:
            assert pool is not None
            for i in range(pool.processes):
                pool.submit(_warm, i)
        # With two jobs or more, the index is opened, verified and read in a thread
        # (sif.index.opening) while this one walks; a new index (its directory made first:
        # the walk must know it, to leave it out) while this one walks and reads too: it
        # knows nothing, so the plan needs nothing from it, and only the first commit waits
        # for it (DuckDB's import and the catalog's creation: ~0.12 s, a tenth of a run of
        # 7,773 files). Not with ``wait``: a run that waits for another must plan on what
        # the other wrote.
        directory = os.path.abspath(os.fspath(index or default_index_path()))
        fresh = own_store and _fresh(index, rebuild)  # nothing known: no keys to compare
        early = own_store and jobs >= 2 and (fresh or os.path.isdir(directory))
        deferred = early and fresh and not wait
        if early:
            if not os.path.isdir(directory):
                indexdir.prepare(directory)  # what open_store would do first
            opening = Opening(
                lambda cancel: open_store(directory, wait=wait, rebuild=rebuild, cancel=cancel),
                pset,
            )
        if opening is not None:
            options = skip_index_dir(options, directory)
            walk_progress = opening.watch(progress)
            # Read before the lock is had: a guess, which the plan checks (a rebuild
            # may have replaced a damaged secret meanwhile).
            secret = None if fresh else indexdir.peek_pathkey(directory)
        else:
            if store is None:
                store = open_store(index, wait=wait, rebuild=rebuild)
            options = skip_index_dir(options, getattr(store, "directory", None))
            progress.stage("verifying", None)
            store.verify()  # never build on damaged fingerprints: IndexCorrupt instead
            walk_progress = progress
            secret = None if fresh else store.path_secret
        progress.stage("walking", None)
        # In this process, in C where it can, with a helper thread a job reading ahead;
        # the files' keys under the index's secret made as they are met.
        helpers = walk_helpers(jobs)
        cols, _, keys = keyed_walk(abs_roots, options, on_warning, walk_progress, helpers, secret)
        release_memory()  # the walk's transient objects
        stats.walked = cols
        if deferred:
            known = KnownColumns.empty()  # the store is had at the first commit
        elif opening is not None:
            store, known = opening.result()
        else:
            assert store is not None
            known = store.known_columns(pset)
        empty = not len(known.ids)
        plan = plan_run(cols, known, abs_roots, keys, secret)
        del known, keys  # only the plan's ids are needed now
        todo, replaced, gone = plan.todo, plan.replaced, plan.gone
        release_memory()  # the walk's and the plan's transient objects
        stats.new, stats.changed, stats.unchanged = plan.new, plan.changed, plan.unchanged
        stats.removed = plan.removed
        progress.log(
            f"{stats.new:,} new, {stats.changed:,} changed, {stats.unchanged:,} unchanged, "
            f"{stats.removed:,} removed"
        )
        if len(todo) * DECODE_ALL_SHARE > len(cols):
            # Names the C walk kept raw: decoded all at once (0.05 s for 500k) rather than
            # a row at a time by _items (0.34 s for 500k), when many are to be read.
            cols.names  # noqa: B018
        todo_bytes = int(np.frombuffer(cols.size, dtype=np.int64)[todo].sum()) if len(cols) else 0
        progress.stage("fingerprinting", todo_bytes, unit="bytes")
        pending = Entries()
        dropped: list[int] = []
        pending_bytes = pending_rows = 0

        def committing() -> Committer:
            """The run's committer, made at its first use (with the store, if deferred)."""
            nonlocal store, committer
            if committer is None:
                if store is None:
                    assert opening is not None
                    store, known = opening.result()
                    if len(known.ids):  # another run filled it since this one looked
                        raise IndexInUse(
                            f"{directory}: another run wrote this new index meanwhile; "
                            "run again (or with --wait)"
                        )
                committer = Committer(store, pset, anchors, background=jobs >= 2)
            return committer

        if not deferred:
            committing()
        last = time.monotonic()
        bulk = warming or todo_bytes >= 2 * JIT_MIN_BYTES
        # The rows of each batch in flight, by its number (a batch's items are made as
        # the pool takes it: no Python object a file to read waits here).
        inflight: dict[int, list[int]] = {}

        def jobs_in() -> Iterator[tuple[bool, list[_Item]]]:
            for k, rows in enumerate(_batches(cols, todo)):
                inflight[k] = rows
                yield bulk, _items(cols, rows)

        if engine is not None:  # reads come back in walk order (the engine's parts)
            items = _items(cols, todo.tolist())
            mapped: Iterator[tuple[int, ReadBatch]] = engine.scan(
                items, bulk, params, anchors, content
            )
            del items
            order = iter(todo.tolist())
        else:
            mapped = shared_map(_scan_batch, jobs_in(), pool, share=False)
        for k, batch in mapped:
            if deferred and store is None and opening is not None:
                opening.check()  # its failure now (the index in use), not after the reads
            n = len(batch.paths)
            rows = inflight.pop(k) if engine is None else list(itertools.islice(order, n))
            for warnings, failure in batch.notes.values():  # in order; few
                for w in warnings:
                    on_warning(w)
                if failure is not None:
                    on_warning(failure)
                    stats.failed += 1
            if replaced:  # changed (or now unreadable): their old entries go
                for path in batch.paths:
                    old = replaced.get(path)
                    if old is not None:
                        dropped.extend(old)
            if batch.failed:
                bad = set(batch.failed)
                rows = [row for j, row in enumerate(rows) if j not in bad]
            read = sum(batch.sizes)
            stats.files_read += len(rows)
            stats.bytes_read += read
            stats.read_rows.extend(rows)
            pending_bytes += sum(batch.entries.size)
            pending_rows += sum(batch.entries.n_fp)
            pending.extend(batch.entries)
            progress.advance(read)
            if (
                pending_bytes >= checkpoint_bytes
                or pending_rows >= CHECKPOINT_ROWS
                or len(pending) >= CHECKPOINT_ENTRIES
                or time.monotonic() - last >= checkpoint_seconds
            ):
                committing().commit(pending, dropped)  # in a thread with two jobs or more
                stats.commits += 1
                pending, dropped, pending_bytes, pending_rows = Entries(), [], 0, 0
                last = time.monotonic()
        committing().wait()
        assert store is not None
        if pending or dropped or gone or empty:  # a run that changes nothing commits nothing
            store.commit(pset, anchors, pending, dropped + gone)
            stats.commits += 1
        pending, dropped = Entries(), []
        if pool is not None:  # no more reads: the workers' memory goes before compaction
            pool.shutdown()
        release_memory()
        progress.stage("compacting", None)
        store.finish(pset, roots=abs_roots)
    finally:
        # Every step, whatever an earlier one raised (a second Ctrl-C while the pool
        # shuts down, or while a commit in flight ends). Run last registered first: the
        # pool, the commits queued, the opening, the store, then the parameters.
        with contextlib.ExitStack() as steps:
            steps.callback(scanjobs.forget_run)
            if own_store and store is not None:
                steps.callback(store.close)
            if opening is not None:
                steps.callback(opening.close)
            if committer is not None:  # the commits queued end before the store is closed
                steps.callback(committer.close)
            if pool is not None:
                steps.callback(pool.shutdown)
    stats.seconds = time.perf_counter() - started
    return stats
