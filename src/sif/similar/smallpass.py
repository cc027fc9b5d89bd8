"""The small-file pass: small files held by others that share no sampled fingerprint with them.

A file of a few hundred bytes inside a larger one is easily missed by the
fingerprints: the larger file keeps one window in hundreds, and a shared
passage of 100 windows then holds none of them (on 18 release histories,
every pair missed at 25% whose smaller file is 256-1024 bytes shared no
fingerprint, even with every window of the smaller file looked up). The
index cannot hold a denser sample of every file without growing past a few
percent of the corpus, so this pass looks from the other side, at
collation: it takes a sample of each small file's own windows (all of them
for the smallest), chosen by value, and streams every window of every file
in scope through a table of those samples. A file holding a good share of a
small file's sampled windows holds a good share of the small file: the pair
is scored exactly with the others, and stored with the pair counts, so that
a re-threshold still opens nothing.

Sampling by value keeps the pass exact where it can be and bounded where
it cannot: a small file of at most :data:`SAMPLE_WINDOWS` windows is taken
whole (its hits are its exact intersection), a larger one keeps each window
with probability ``SAMPLE_WINDOWS / |S(X)|``, so its hits are a binomial
count of the shared windows, bounded as the fingerprints are
(:data:`sif.core.evidence.CANDIDATE_Z`). Cost: one read and one pass of a
rolling hash over every file of the scope's groups (numba, on all cores),
one filter test a window, and the exact scoring of the pairs found.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sif.core import exactsets as _sets
from sif.core.evidence import CANDIDATE_Z, poisson_bounds
from sif.core.rolling import mix64
from sif.events import Progress, ScanWarning, WarningSink
from sif.memtrim import release_memory
from sif.similar.exact import EXACT_CACHE_BYTES, sources, unshared_pairs
from sif.similar.model import SimilarStats
from sif.similar.plainread import PlainReader, is_plain
from sif.windowsets import Src, WindowSets

if TYPE_CHECKING:
    from sif.executors.engine import Engine

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

#: The directories of the mapped table begin so (a killed run's are removed by the next
#: writer: :func:`sif.index.indexdir.clear_staging`).
TABLE_PREFIX = "sif-smallpass-"
#: Files under this many bytes are looked for in all others (the issue's 256-1024 B
#: class, and the smaller ones).
SMALL_PASS_BYTES = 1024
#: Sampled windows a small file keeps (all of them when it has fewer).
SAMPLE_WINDOWS = 64
#: A pair the pass finds is scored exactly when the upper bound of the small file's
#: containment in the other reaches this, whatever the threshold (a fixed floor: the
#: exact scores are stored with the pair counts, so that a re-threshold opens nothing).
#: Below it, small files held by others are found only through shared fingerprints.
#: At 10% the pass scored 435k pairs on 1 GB of Linux sources (mostly tiny Makefiles
#: and Kconfig files held 10-25% by others), at 25% 73,712.
SMALL_PASS_FLOOR = 0.25
#: Marks of files the probe's stamp tells apart (``uint16``; 0 is no mark).
STAMP_MARKS = (1 << 16) - 1
#: Entries of the table a file may hold before the probe's scratch list is made as long
#: as the table (a file of boilerplate held by thousands of small files).
SEEN_FIRST = 1 << 16
#: Work items a job when streaming.
STREAM_CHUNKS_PER_JOB = 8
#: Hits of a chunk held before they are cut down to the candidates (:func:`_stream_chunk`).
HITS_BATCH = 1 << 18
#: The columns of ``files`` a streaming chunk carries for its files.
_STREAMED = ("id", "size", "path", "origin", "view")


@dataclass(frozen=True)
class _Table:
    """The sampled windows of the small files: sorted, indexed, and their owners."""

    index: _sets.IndexedSet
    owners: I32  # row of the owner in ``files``, for each value
    n_owners: int
    n_windows: I32  # by row of ``files``: the small file's windows (0: not a small file)
    n_sample: I32  # ... and how many of them the table holds
    grp: npt.NDArray[Any]  # by row of ``files``: its group (files pair within a group)


_ARRAYS = ("values", "offsets", "filter", "owners", "n_windows", "n_sample", "grp")


@dataclass(frozen=True)
class _TableFiles:
    """A :class:`_Table` written once to files of the run's temporary directory; what a
    worker's item carries instead of the table, which a pickle copied into every item
    (two items queued a worker, and the worker's own copy: at 300 k files, 440 MB more
    than the table itself). A worker maps the files: their pages are shared."""

    directory: str
    bits: int
    fbits: int
    n_owners: int

    def load(self) -> _Table:
        def mapped(name: str) -> npt.NDArray[Any]:
            # Copy-on-write, never written: plain writable arrays for the kernels.
            path = os.path.join(self.directory, name + ".npy")
            return np.asarray(np.load(path, mmap_mode="c", allow_pickle=False))

        a = {name: mapped(name) for name in _ARRAYS}
        index = _sets.IndexedSet.of_arrays(
            a["values"], a["offsets"], a["filter"], self.bits, self.fbits
        )
        return _Table(index, a["owners"], self.n_owners, a["n_windows"], a["n_sample"], a["grp"])


def _write_table(table: _Table, under: str) -> _TableFiles | None:
    """``table`` in a new directory under ``under``; None where it cannot be written (a
    read-only or full file system, a group column of objects): the items then carry it."""
    ix = table.index
    arrays = {
        "values": ix.values,
        "offsets": ix.offsets,
        "filter": ix.filter,
        "owners": table.owners,
        "n_windows": table.n_windows,
        "n_sample": table.n_sample,
        "grp": table.grp,
    }
    if any(a.dtype.hasobject for a in arrays.values()):
        return None
    try:
        directory = tempfile.mkdtemp(prefix=TABLE_PREFIX, dir=under)
    except OSError:
        return None
    try:
        for name, a in arrays.items():
            np.save(os.path.join(directory, name + ".npy"), a, allow_pickle=False)
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)  # the directory made just above
        return None
    return _TableFiles(directory, ix.bits, ix.fbits, table.n_owners)


def _stream_mapped(files: _TableFiles, job: _Chunk) -> _Streamed:
    """:func:`_stream_chunk` through the table's files (a worker's item), its scratch then
    given back to the system.

    A chunk's scratch (a stamp and a scratch list up to the table's length, its
    hits) is freed when it returns but stayed in the heap of the process, which
    then ran the next chunk at its high-water mark.
    """
    done = _stream_chunk(files.load(), job)
    release_memory()
    return done


@dataclass(frozen=True)
class _Streamed:
    """The hits of a chunk of files: (owner row, file row, distinct sampled windows held)."""

    owner: I32
    row: I32
    hits: I32
    files_read: int
    bytes_read: int
    changed: int
    warnings: tuple[ScanWarning, ...]


def _sample(s: I64) -> I64:
    """The windows of ``s`` kept by value: all up to :data:`SAMPLE_WINDOWS`, else about as many."""
    if len(s) <= SAMPLE_WINDOWS:
        return s
    mixed = mix64(s.view(np.uint64))
    cut = np.uint64(int(SAMPLE_WINDOWS / len(s) * 2.0**64))
    return s[mixed < cut]


def _table(
    job: tuple[list[tuple[int, int, Src]], dict[int, bytes], npt.NDArray[Any], int, str],
) -> tuple[_Table, I64, I64, int, int, tuple[ScanWarning, ...]]:
    """The table of the small files; their window counts and sample sizes; reads; warnings.

    ``job``: the small files (row in ``files``, id, source), their indexed
    digests, the group of every row of ``files``, the window and the
    normalisation. Run here, or as one task on an engine's worker.
    """
    small, digests, grp, window, normalize = job
    n_files = len(grp)
    warnings: list[ScanWarning] = []
    sets = WindowSets(window, EXACT_CACHE_BYTES, normalize, digests, warnings.append)
    n_windows = np.zeros(n_files, dtype=np.int64)
    n_sample = np.zeros(n_files, dtype=np.int64)
    parts: list[I64] = []
    kept_rows: list[int] = []
    kept_counts: list[int] = []
    for r, fid, src in small:
        s = sets.get(fid, src)
        sets.release(fid, src)
        if s is None or not len(s):
            continue
        kept = _sample(s)
        n_windows[r], n_sample[r] = len(s), len(kept)
        parts.append(kept)
        kept_rows.append(r)
        kept_counts.append(len(kept))
    # Sorted with as few copies as can be (at a million files, 12 M values: each copy
    # 100 MB): the parts go once joined, the owners are made as a run each.
    values = np.concatenate(parts) if parts else np.empty(0, np.int64)
    del parts
    own = np.repeat(np.asarray(kept_rows, dtype=np.int32), kept_counts)
    order = np.argsort(values, kind="stable")
    values = values[order]
    own = own[order]
    del order
    # 16-32 bits of filter an entry: each window of the tree is one test of it.
    table = _Table(
        _sets.IndexedSet(values, filter_bits=5),
        own,
        n_files,
        n_windows.astype(np.int32),
        n_sample.astype(np.int32),
        np.asarray(grp),
    )
    return table, n_windows, n_sample, sets.files_read, sets.bytes_read, tuple(warnings)


_Chunk = tuple[int, str, I64, dict[str, npt.NDArray[Any]]]
"""A worker's item: the window, the normalisation, the rows of the files to stream
and their columns (``id``, ``size``, ``path``, ``origin``, ``view``)."""


def _candidates(table: _Table, o: I64, r: I64, h: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """Which hits (small file at row ``o`` held ``h`` sampled windows of file ``r``) make
    a candidate pair: another file of its group whose upper bound on the small file's
    containment reaches :data:`SMALL_PASS_FLOOR`.

    Exact when the sample is the whole set, else a binomial count bounded as a Poisson one.
    """
    h = np.asarray(h, dtype=np.float64)
    n_windows = table.n_windows[o].astype(np.float64)
    n_sample = table.n_sample[o].astype(np.float64)
    whole = n_sample == n_windows
    _, hi = poisson_bounds(h, CANDIDATE_Z)
    rate = n_sample / np.maximum(n_windows, 1)
    upper = np.where(whole, h, hi / np.maximum(rate, 1e-12)) / np.maximum(n_windows, 1)
    return (o != r) & (table.grp[o] == table.grp[r]) & (upper >= SMALL_PASS_FLOOR)


def _stream_chunk(table: _Table, job: _Chunk) -> _Streamed:
    """Every window of each file of a chunk through ``table`` (a worker's item).

    Returns the candidate hits only (:func:`_candidates`): a small file of
    boilerplate is hit by most files, and those hits stay here.
    Content is checked by its indexed size only: a file that changed since it
    was indexed can give a wrong candidate, never a wrong score (the exact
    pass checks every byte against the indexed digest). Plain files are read
    :data:`sif.similar.plainread.PLAIN_BATCH_BYTES` at a time and probed in one kernel call
    (:func:`sif.core.exactkernels.probe_files`): on the 1 M tree, the pass took
    70 s instead of 77, the same hits.
    """
    window, normalize, rows, f = job
    sizes = {int(i): int(n) for i, n in zip(f["id"], f["size"], strict=True)}
    srcs = sources(f)  # by position in the chunk
    items = [(int(r), int(i), srcs[k]) for k, (r, i) in enumerate(zip(rows, f["id"], strict=True))]
    k = _sets._compiled()
    ix = table.index
    # A mark a file, 2 bytes an entry, and a scratch list of the entries a file holds
    # made as long as the table only when a file holds that many (at a million files,
    # 12 M entries: 100 MB a process with both as long as the table, in 4 bytes).
    stamp = np.zeros(len(ix), dtype=np.uint16)
    hits = np.zeros(table.n_owners, dtype=np.int32)
    scratch = {"seen": np.empty(min(len(ix), SEEN_FIRST), dtype=np.int32)}
    marks = {"next": 0}

    base, top = np.uint64(_sets.BASE), _sets._top_power(_sets.BASE, window)
    # What both kernels take between a file's bytes and its mark.
    lookup: tuple[Any, ...] = (window, base, top, ix.values, table.owners, ix.offsets)
    lookup += (ix.bits, ix.filter, ix.fbits, stamp)

    def start_again() -> None:
        """More entries than the scratch list: a file again, with one as long as the table."""
        scratch["seen"] = np.empty(len(ix), dtype=np.int32)
        stamp[:] = 0
        marks["next"] = 0

    def probe(data: bytes) -> npt.NDArray[np.int32]:
        arr = np.frombuffer(data, dtype=np.uint8)
        if len(arr) < window or not len(ix):
            return np.empty((2, 0), dtype=np.int32)
        while True:
            marks["next"] += 1
            if marks["next"] > STAMP_MARKS:  # the marks start again on a clean stamp
                stamp[:] = 0
                marks["next"] = 1
            owners, counts, done = k["probe"](arr, *lookup, marks["next"], hits, scratch["seen"])
            if done:
                break
            start_again()
        return np.stack([owners, counts])

    warnings: list[ScanWarning] = []
    sets = WindowSets(window, 1 << 20, normalize, {}, warnings.append, make=probe, sizes=sizes)
    # Plain files (most of a tree) are read into a buffer a batch at a time and probed
    # in one kernel call (:class:`PlainReader`); the others through their content views.
    plain = [it for it in items if len(ix) and is_plain(it[2])]
    others = [it for it in items if not (len(ix) and is_plain(it[2]))]
    for _, fid, src in others:
        sets.want(fid, src)
    kept: list[tuple[I32, I32, I32]] = []
    o_parts: list[I32] = []
    r_parts: list[I32] = []
    h_parts: list[I32] = []

    def cat(parts: list[I32]) -> I32:
        return np.concatenate(parts) if parts else np.empty(0, np.int32)

    def settle() -> None:
        """The hits held so far cut down to the candidates (a batch of hits at a time:
        a boilerplate file hit by most files made a chunk's hits, and their temporaries
        in :func:`_candidates`, 150 MB at a million files)."""
        o, r, h = cat(o_parts), cat(r_parts), cat(h_parts)
        for parts in (o_parts, r_parts, h_parts):
            parts.clear()
        keep = _candidates(table, o.astype(np.int64), r.astype(np.int64), h)
        kept.append((o[keep], r[keep], h[keep]))

    held = 0

    def add(o: I32, r: I32, h: I32) -> None:
        nonlocal held
        o_parts.append(o)
        r_parts.append(r)
        h_parts.append(h)
        held += len(o)
        if held >= HITS_BATCH:
            settle()
            held = 0

    def probe_batch(rows_: I32, buf: npt.NDArray[np.uint8], starts: I64, lengths: I64) -> None:
        first = 0
        while first < len(starts):
            at, owners, counts, marks["next"], first = k["probe_files"](
                buf, starts, lengths, first, *lookup, marks["next"], STAMP_MARKS, hits,
                scratch["seen"],
            )  # fmt: skip
            add(owners, rows_[at], counts)
            if first < len(starts):  # as probe(): again from that file
                start_again()

    read = PlainReader(warnings.append)
    for batch in read.batches(plain, sizes):
        probe_batch(*batch)
    # A plain file whose size is not the indexed one goes the way of the others (its
    # content view, as WindowSets gives it: a compressed file), which counts its read.
    for row, fid, src in others + read.misfits:
        got = sets.get(fid, src)
        sets.release(fid, src)
        if got is None or not got.shape[1]:
            continue
        add(got[0], np.full(got.shape[1], row, dtype=np.int32), got[1])
    settle()
    o, r, h = (cat([k[i] for k in kept]) for i in range(3))
    return _Streamed(
        o,
        r,
        h,
        sets.files_read + read.files_read,
        sets.bytes_read + read.bytes_read,
        sets.changed,
        tuple(warnings),
    )


#: Collated pairs looked at a time when the pass's candidates are checked against them.
KNOWN_SLICE = 1 << 18


def _known(key: npt.NDArray[np.uint64], cols: Mapping[str, npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """Which of the sorted, distinct pair keys ``key`` (``a << 32 | b``) are pairs of ``cols``.

    The collated pairs are looked up :data:`KNOWN_SLICE` at a time in ``key`` (a binary
    search each): no key array of every collated pair (8 bytes each, and as much
    again to sort them).
    """
    found = np.zeros(len(key), dtype=bool)
    if not len(key):
        return found
    for lo in range(0, len(cols["a"]), KNOWN_SLICE):
        a = cols["a"][lo : lo + KNOWN_SLICE].astype(np.uint64)
        k = (a << np.uint64(32)) | cols["b"][lo : lo + KNOWN_SLICE].astype(np.uint64)
        at = np.minimum(np.searchsorted(key, k), len(key) - 1)
        found[at[key[at] == k]] = True
    return found


def small_pass(
    cols: Mapping[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    window: int,
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any = None,
    jobs: int = 1,
    engine: Engine | None = None,
    spill: str | None = None,
) -> dict[str, npt.NDArray[Any]]:
    """New pairs (not in ``cols``) of a small file and a file holding much of it, to score.

    The small files are those under :data:`SMALL_PASS_BYTES` with at least
    one window; a file of the same group holding their sampled windows is a
    candidate when the upper bound of its containment reaches
    :data:`SMALL_PASS_FLOOR` (a fixed floor: the exact scores are stored,
    whatever the threshold).
    Returns the pair columns of ``cols`` (``shared`` 0: no shared
    fingerprint), exact scores NaN: the exact pass scores them with the
    other candidates (:func:`sif.similar.score.pending_exact`), each larger
    file read once for all its partners. Counted in ``stats.small_*``.
    Cost: see the module. With ``engine``, its workers read the files (the
    same chunks: :meth:`sif.executors.engine.Engine.map_exact`). With a
    ``pool``, the table goes to its workers as files in a new directory under
    ``spill`` (removed at the end), which they map, where ``spill`` is given
    and writable; else in each item.
    """
    t0 = time.perf_counter()
    try:
        return _small_pass(
            cols, files, window, stats, on_warning, progress, pool, jobs, engine, spill
        )
    finally:
        stats.seconds_small += time.perf_counter() - t0


def _small_pass(
    cols: Mapping[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    window: int,
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any,
    jobs: int,
    engine: Engine | None = None,
    spill: str | None = None,
) -> dict[str, npt.NDArray[Any]]:
    """:func:`small_pass`, untimed."""
    from sif.executors.local import shared_map

    empty = {k: np.empty(0, dtype=v.dtype) for k, v in cols.items()}  # no view of cols
    size = np.asarray(files["size"], dtype=np.int64)
    grp = np.asarray(files["grp"])
    small = np.flatnonzero((size >= window) & (size < SMALL_PASS_BYTES))
    if not len(small):
        return empty
    srcs = sources(files, small)
    normalize = str(files["normalize"][0]) if len(files["normalize"]) else "auto"
    ids = files["id"]
    job = (
        [(r, int(ids[r]), srcs[r]) for r in small.tolist()],
        {int(ids[r]): bytes(files["digest"][r]) for r in small.tolist()},
        grp,
        window,
        normalize,
    )
    if engine is None:
        made = _table(job)
    else:
        [(_, made)] = list(engine.map_exact(_table, [job]))
    table, n_windows, _, f_read, b_read, warned = made
    for w in warned:
        on_warning(w)
    stats.small_files += int(np.count_nonzero(n_windows))
    del n_windows, _  # the table holds its own (int32); these int64 copies, 8 MB each at 1 M
    stats.small_files_read += f_read
    stats.small_bytes_read += b_read
    if not len(table.index):
        return empty
    # Every file of a group holding a small file, dealt by size into a few chunks a job
    # of about equal bytes (the table goes with each chunk).
    wanted = np.flatnonzero(np.isin(grp, np.unique(grp[small])) & (size >= window))
    wanted = wanted[np.argsort(-size[wanted], kind="stable")]
    jobs = engine.workers() if engine is not None else max(1, jobs if pool is not None else 1)
    n_chunks = max(1, min(STREAM_CHUNKS_PER_JOB * jobs, len(wanted)))
    parts = [np.sort(wanted[c::n_chunks]) for c in range(n_chunks)]  # an archive once

    def chunks() -> Iterator[_Chunk]:  # made as the workers take them
        for part in parts:
            yield window, normalize, part, {k: files[k][part] for k in _STREAMED}

    progress.stage("small files held by others", len(wanted), unit="files")
    owner, row, hits = [], [], []
    # The small files' sources and digests: the table holds what the streaming needs
    # (at a million files, 193 k sources: 59 MB of str and tuples held while it streamed).
    del job, srcs
    mapped = _write_table(table, spill) if engine is None and pool and spill else None
    if mapped is not None:
        # This process streams through the files too: their pages come in as the probe
        # touches them (the filter, the few values it hits), where the table it built is
        # resident whole (at a million files, 12 M entries: 150 MB).
        here = functools.partial(_stream_mapped, mapped)
        del table, made
        # The build's freed pages (its sort, the small files' sets: 400 MB of heap at a
        # million files) and the table's own back to the system before the streaming
        # (nothing here holds the table now): the main process then streamed at 850-890
        # MB instead of 950-960.
        release_memory()
    else:
        here = functools.partial(_stream_chunk, table)
    streamed = (
        shared_map(here, chunks(), pool, here, depth=1)
        if engine is None
        else engine.map_exact(_stream_chunk, chunks(), common=table)
    )
    try:
        for i, done in streamed:
            for w in done.warnings:
                on_warning(w)
            owner.append(done.owner)
            row.append(done.row)
            hits.append(done.hits)
            stats.small_files_read += done.files_read
            stats.small_bytes_read += done.bytes_read
            progress.advance(len(parts[i]))
    finally:
        if mapped is not None:
            shutil.rmtree(mapped.directory, ignore_errors=True)  # sif's own directory
    o = np.concatenate(owner).astype(np.int64)  # candidates only (_candidates)
    r = np.concatenate(row).astype(np.int64)
    a = np.minimum(ids[o], ids[r]).astype(np.uint64)
    b = np.maximum(ids[o], ids[r]).astype(np.uint64)
    key = np.unique((a << np.uint64(32)) | b)  # a pair of two small files is found twice
    key = key[~_known(key, cols)]
    stats.small_candidates += len(key)
    if not len(key):
        return empty
    a_new = (key >> np.uint64(32)).astype(np.uint32)
    return unshared_pairs(a_new, (key & np.uint64(0xFFFFFFFF)).astype(np.uint32), np.nan)
