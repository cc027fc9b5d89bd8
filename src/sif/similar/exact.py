"""Exact containment over all windows: window sets, pairs of small or identical files."""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.rolling import as_bytes_array, window_hashes
from sif.events import Progress, ScanWarning, WarningSink
from sif.fingerprint import FingerprintParams
from sif.similar.estimate import pair_estimates
from sif.similar.model import (
    SimilarStats,
)

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: Pairs of small files scored exactly at collation time, in every run: both files
#: under this many bytes... Winnowing a shared region loses about one fingerprint at its
#: edges (a window picked in one file loses to a neighbour outside the region in the
#: other), which is much of a small file's 20: measured on 23 sdists, pairs of files
#: under 1 KB truly 25-26% alike were estimated at 19-23%. Measured on 1 GB of Linux
#: sources: 11k pairs, 2.3k files (1.2 MB) read, 0.3 s on one core; files under 4 KB
#: would be 23k pairs and 0.66 s.
SMALL_EXACT_BYTES = 1024
#: ... whose sampled score reaches this fraction. A fixed floor, not a share of the
#: threshold: the exact scores are stored with the pair counts, so that a re-threshold
#: uses them and opens nothing; below it (and for a pair of files unreadable at the
#: time) the estimate stands.
SMALL_EXACT_FLOOR = 0.10
#: ``exact``: bytes of window-hash sets kept in memory between pairs.
EXACT_CACHE_BYTES = 512 << 20


# --- exact containment over all windows -------------------------------------------


def window_set(data: bytes | memoryview | npt.NDArray[np.uint8], window: int) -> U64:
    """S(X): the distinct 64-bit hashes of every ``window``-byte substring, sorted.

    Cost: O(n log n) for n bytes (a hash per window, then a sort); 8 bytes a window.
    """
    arr = as_bytes_array(data)
    if len(arr) < window:
        return np.empty(0, dtype=np.uint64)
    return _distinct(window_hashes(arr, window))


def _distinct(values: U64) -> U64:
    """The distinct values, sorted: a sort and a mask (``np.unique`` costs 12x more here)."""
    s = np.sort(values)
    keep = np.empty(len(s), dtype=bool)
    keep[:1] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def exact_containment(sa: U64, sb: U64) -> tuple[float, float]:
    """(C(A,B), C(B,A)) = |S(A) ∩ S(B)| / |S(A)|, / |S(B)|, from sorted distinct sets.

    Cost: O(m log n) for sets of m <= n values.
    """
    if len(sa) == 0 or len(sb) == 0:
        return 0.0, 0.0
    few, many = (sa, sb) if len(sa) <= len(sb) else (sb, sa)
    # Binary search of the smaller set in the larger: O(small log large), no merge sort.
    pos = np.minimum(np.searchsorted(many, few), len(many) - 1)
    inter = int(np.count_nonzero(many[pos] == few))
    return inter / len(sa), inter / len(sb)


class _WindowSets:
    """Window sets of entries, computed on demand and kept under a byte budget (LRU).

    A window set is made of the same content the entry's fingerprints were:
    :func:`sif.content.entries` with the index's normalisation gives it again
    (a plain file as it is; a member, a decompressed file or a normalised
    view as indexed), every wanted entry of one file at once, so that an
    archive is opened once. A file that cannot be read is a warning.
    """

    def __init__(self, window: int, budget: int, normalize: str, on_warning: WarningSink) -> None:
        self.window = window
        self.budget = budget
        self.normalize = normalize
        self.on_warning = on_warning
        self.cache: OrderedDict[int, U64 | None] = OrderedDict()
        self.held = 0
        self.files_read = 0
        self.bytes_read = 0
        self.wanted: dict[str, dict[str, int]] = {}  # origin -> entry path -> id

    def want(self, fid: int, src: _Src) -> None:
        """Announce an entry, so that an archive is opened once for all its wanted members."""
        path, origin, _ = src
        self.wanted.setdefault(origin, {})[path] = fid

    def get(self, fid: int, src: _Src) -> U64 | None:
        if fid not in self.cache:
            path, origin, _ = src
            self._views(origin, {**self.wanted.get(origin, {}), path: fid})
            if fid not in self.cache:  # the entry is gone from its file: no exact score
                self._keep(fid, None)
        self.cache.move_to_end(fid)
        return self.cache[fid]

    def _views(self, origin: str, ids: dict[str, int]) -> None:
        """Window sets of the entries ``ids`` (path -> id) of the file ``origin``."""
        from sif.content import ContentOptions, entries

        options = ContentOptions(normalize=self.normalize)
        self.files_read += 1
        for entry in entries(origin, options=options, on_warning=self.on_warning):
            fid = ids.get(entry.path)
            if fid is None or fid in self.cache:
                continue
            data = entry.read()
            self.bytes_read += len(data)
            self._keep(fid, window_set(data, self.window))

    def _keep(self, fid: int, s: U64 | None) -> None:
        self.cache[fid] = s
        self.held += 0 if s is None else s.nbytes
        while self.held > self.budget and len(self.cache) > 1:
            _, old = self.cache.popitem(last=False)
            self.held -= 0 if old is None else old.nbytes


def _identical_unfingerprinted(
    files: dict[str, npt.NDArray[Any]], max_df: int
) -> dict[str, npt.NDArray[Any]]:
    """Pairs of identical files that have no fingerprint (under the window's length).

    They share no window, so the collation never pairs them: files of one
    group code, size (above 0) and digest are paired as exact copies (exact
    containment 1 both ways, ``shared`` 0). As for a stop-fingerprint, a
    content held by more than ``max_df`` files pairs none of them (twenty
    bytes of boilerplate in every package). Cost: a Python step per such file.
    """
    n_fp, size = files["n_fp"], files["size"]
    tiny = np.flatnonzero((n_fp == 0) & (size > 0))
    by_content: dict[tuple[int, int, bytes], list[int]] = {}
    for i in tiny.tolist():
        key = (int(files["grp"][i]), int(size[i]), bytes(files["digest"][i]))
        by_content.setdefault(key, []).append(int(files["id"][i]))
    a: list[int] = []
    b: list[int] = []
    for ids in by_content.values():
        if 2 <= len(ids) <= max_df:
            ids.sort()
            for j, x in enumerate(ids):
                a.extend([x] * (len(ids) - j - 1))
                b.extend(ids[j + 1 :])
    zero = np.zeros(len(a), dtype=np.uint32)
    return {
        "a": np.array(a, dtype=np.uint32),
        "b": np.array(b, dtype=np.uint32),
        "shared": zero,
        "hits_a": zero,
        "hits_b": zero,
        "exact_ab": np.ones(len(a)),
        "exact_ba": np.ones(len(a)),
    }


def _exact_small(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    params: FingerprintParams,
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any = None,
    jobs: int = 1,
) -> None:
    """Exact (C(A,B), C(B,A)) of the collated pairs of small files, into ``cols``.

    The pairs whose files are both under :data:`SMALL_EXACT_BYTES` and whose
    sampled score reaches :data:`SMALL_EXACT_FLOOR`, whatever the threshold, so
    that the scores can be stored with the counts. Counted in ``stats.exact_*``.
    Unreadable files are warnings; their pairs keep the estimate. Cost: one read
    and window set per small file of such a pair (1 GB of Linux sources: 2.3k
    files, 11k pairs, 0.3 s on one process).
    """
    if not len(cols["a"]):
        return
    ids = np.asarray(files["id"], dtype=np.uint32)
    ia, ib = np.searchsorted(ids, cols["a"]), np.searchsorted(ids, cols["b"])
    size = files["size"]
    small = np.maximum(size[ia], size[ib]) < SMALL_EXACT_BYTES
    if not small.any():
        return
    a_in_b, b_in_a, _ = pair_estimates(
        cols["shared"].astype(np.float64),
        size[ia],
        files["n_fp"][ia],
        files["n_distinct"][ia],
        size[ib],
        files["n_fp"][ib],
        files["n_distinct"][ib],
        params,
    )
    todo = np.flatnonzero(small & (np.maximum(a_in_b, b_in_a) >= SMALL_EXACT_FLOOR))
    if len(todo):
        _exact(todo, ia, ib, files, params.window, cols, stats, on_warning, progress, pool, jobs)


#: ``exact``: work items per job, so that the processes share the pairs evenly.
EXACT_CHUNKS_PER_JOB = 4

_Src = tuple[str, str, str]  # an entry's path, the file on disk holding it, its view
_ExactItem = tuple[int, int, _Src, int, _Src]  # pair row, id and source of a, of b


@dataclass(frozen=True)
class _ExactDone:
    """Exact containments of a chunk of pairs, and what computing them read."""

    rows: I64
    ab: F64
    ba: F64
    files_read: int
    bytes_read: int
    warnings: tuple[ScanWarning, ...]


def _exact_chunk(job: tuple[int, int, str, list[_ExactItem]]) -> _ExactDone:
    """Exact (C(A,B), C(B,A)) of the pairs of one chunk (a worker's item).

    Window sets are kept under ``budget`` bytes (LRU) within the chunk; a pair
    whose file cannot be read is left out (its warning is returned).
    """
    window, budget, normalize, items = job
    warnings: list[ScanWarning] = []
    sets = _WindowSets(window, budget, normalize, warnings.append)
    for _, fa, pa, fb, pb in items:
        sets.want(fa, pa)
        sets.want(fb, pb)
    rows, ab, ba = [], [], []
    for j, fa, pa, fb, pb in items:
        sa = sets.get(fa, pa)
        sb = sets.get(fb, pb)
        if sa is None or sb is None:
            continue
        x, y = exact_containment(sa, sb)
        rows.append(j)
        ab.append(x)
        ba.append(y)
    return _ExactDone(
        np.asarray(rows, dtype=np.int64),
        np.asarray(ab, dtype=np.float64),
        np.asarray(ba, dtype=np.float64),
        sets.files_read,
        sets.bytes_read,
        tuple(warnings),
    )


def _chunks(items: list[_ExactItem], n: int) -> list[list[_ExactItem]]:
    """Pairs cut into about ``n`` chunks of similar length, keeping files together.

    Pairs are grouped by connected component of the pair graph (a version
    history, a family of copies), so that a file's window set is computed in
    one chunk, not in several; components are packed, largest first, into
    the least-filled chunk; one larger than a chunk's share is cut in runs of
    its pairs (ordered by first file). Cost: O(pairs) with a union-find.
    """
    if n <= 1 or len(items) <= 1:
        return [items] if items else []
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    for _, fa, _, fb, _ in items:
        ra, rb = find(fa), find(fb)
        if ra != rb:
            parent[ra] = rb
    comps: dict[int, list[_ExactItem]] = {}
    for it in items:
        comps.setdefault(find(it[1]), []).append(it)
    share = -(-len(items) // n)
    pieces = [
        c[i : i + share]
        for c in sorted(comps.values(), key=len, reverse=True)
        for i in range(0, len(c), share)
    ]
    bins: list[list[_ExactItem]] = [[] for _ in range(n)]
    for piece in sorted(pieces, key=len, reverse=True):
        min(bins, key=len).extend(piece)
    return [b for b in bins if b]


def _exact(
    todo: I64,
    ia: I64,
    ib: I64,
    files: dict[str, npt.NDArray[Any]],
    window: int,
    cols: dict[str, npt.NDArray[Any]],
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any = None,
    jobs: int = 1,
) -> None:
    """Fill ``cols['exact_ab'/'exact_ba']`` for the pairs ``todo``, reading their files.

    The pairs, ordered by their first file (so that its window set is computed
    once), are cut into contiguous chunks shared between this process and the
    workers of ``pool`` (:func:`sif.executors.local.shared_map`). Cost: each
    file of a chunk read and hashed once (a sort of its window values), then a
    binary search per pair; memory at most :data:`EXACT_CACHE_BYTES` in all.
    """
    from sif.executors.local import shared_map

    t0 = time.perf_counter()
    order = todo[np.lexsort((ib[todo], ia[todo]))]
    progress.stage("exact containment", len(order), unit="pairs")
    srcs = [
        (os.fsdecode(bytes(p)), os.fsdecode(bytes(o)), str(v))
        for p, o, v in zip(files["path"], files["origin"], files["view"], strict=True)
    ]
    fid = files["id"]
    items: list[_ExactItem] = [
        (int(j), int(fid[ia[j]]), srcs[ia[j]], int(fid[ib[j]]), srcs[ib[j]]) for j in order
    ]
    normalize = str(files["normalize"][0]) if len(files["normalize"]) else "auto"
    jobs = max(1, jobs if pool is not None else 1)
    budget = EXACT_CACHE_BYTES // (2 * jobs) if jobs > 1 else EXACT_CACHE_BYTES
    chunks = [(window, budget, normalize, c) for c in _chunks(items, EXACT_CHUNKS_PER_JOB * jobs)]
    for _, done in shared_map(_exact_chunk, chunks, pool):
        for w in done.warnings:
            on_warning(w)
        cols["exact_ab"][done.rows] = done.ab
        cols["exact_ba"][done.rows] = done.ba
        stats.exact_pairs += len(done.rows)
        stats.exact_files_read += done.files_read
        stats.exact_bytes_read += done.bytes_read
        progress.advance(len(done.rows))
    stats.seconds_exact += time.perf_counter() - t0
