"""Exact containment over all windows: window sets, pairs of small or identical files."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sif.core import exactsets as _sets
from sif.core.sampling import want_jit
from sif.events import Progress, ScanWarning, WarningSink
from sif.fingerprint import FingerprintParams
from sif.memtrim import release_memory
from sif.similar.estimate import pair_estimates
from sif.similar.model import (
    SimilarStats,
)
from sif.windowsets import Src, WindowSets

if TYPE_CHECKING:
    from sif.executors.engine import Engine

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
#: ``exact``: bytes of window-hash sets kept in memory between pairs (shared out between
#: the jobs; the set needed last goes first). Measured on 300,000 generated files (1.06 M
#: candidates, 2 jobs): 128 MB instead of 512 read 2.7% more files again and took the
#: pass's summed peak from 1,150 to 1,041 MB; but on 1 GB of Linux sources (285k
#: candidates, 2 jobs, load 2) it read 3.7 GiB instead of 1.3 and took 133 CPU seconds
#: instead of 70: a register header's set (up to 190 MB) is larger than a job's share,
#: and each one read drops every other set. Speed first: 512 MB.
EXACT_CACHE_BYTES = 512 << 20
#: ``exact``: a larger file's set of at least this many values, with several partners,
#: gets a bucket index (:class:`sif.core.exactsets.IndexedSet`: about 8 ns a value to
#: build, then 10-40 ns a lookup, more as the partner's share of it falls and the
#: look-ups spread), made when a partner under half its size first needs it; a smaller
#: one, one with a single partner, or a partner of at least half its size is merged
#: (numba, branch-free: 4-7 ns a value of the smaller where a look-up costs 12-17). In
#: a bulk run every set and every intersection goes through numba, whatever its size:
#: measured on Linux sources, a 2 KB file's window set costs 28 us there against 50 us
#: in numpy, the intersection of two such sets 8 us against 55 us.
INDEX_FROM = 4096
#: Pairs of one slice of the exact pass: its work items (a tuple a pair) exist for
#: one slice at a time, so that memory does not grow with the candidates (3 M
#: candidates of a million files would hold 0.5 GB of them). A larger file's
#: pairs stay in one slice (its window set is made once).
EXACT_SLICE_PAIRS = 1 << 18


# --- exact containment over all windows -------------------------------------------

window_set = _sets.window_set
exact_containment = _sets.containment


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
    return unshared_pairs(np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32), 1.0)


def unshared_pairs(a: U32, b: U32, exact: float) -> dict[str, npt.NDArray[Any]]:
    """Pair columns of pairs that share no fingerprint (``shared`` 0), both exact scores ``exact``.

    Identical files without a window (exact 1), or the small-file pass's
    candidates (NaN: to score).
    """
    zero = np.zeros(len(a), dtype=np.uint32)
    return {
        "a": a,
        "b": b,
        "shared": zero,
        "hits_a": zero,
        "hits_b": zero,
        "exact_ab": np.full(len(a), exact),
        "exact_ba": np.full(len(a), exact),
        "exact_n": np.zeros(len(a), dtype=np.uint32),
    }


def sources(files: dict[str, npt.NDArray[Any]], rows: I64 | None = None) -> dict[int, Src]:
    """The (path, file on disk, view) of the files at ``rows`` (default: all), by row,
    as :class:`sif.windowsets.WindowSets` reads them."""
    if rows is None:
        rows = np.arange(len(files["id"]), dtype=np.int64)
    path, origin, view = files["path"], files["origin"], files["view"]
    return {
        r: (os.fsdecode(bytes(path[r])), os.fsdecode(bytes(origin[r])), str(view[r]))
        for r in np.unique(rows).tolist()
    }


#: Pairs looked at a time for the pairs of small files: the estimates' temporaries exist
#: for one slice, not for every collated pair.
SMALL_SCAN_SLICE = 1 << 18


def _exact_small(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    params: FingerprintParams,
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any = None,
    jobs: int = 1,
    engine: Engine | None = None,
) -> None:
    """Exact (C(A,B), C(B,A)) of the collated pairs of small files, into ``cols``.

    The pairs whose files are both under :data:`SMALL_EXACT_BYTES` and whose
    sampled score reaches :data:`SMALL_EXACT_FLOOR`, whatever the threshold, so
    that the scores can be stored with the counts. Counted in ``stats.exact_*``.
    Unreadable files are warnings; their pairs keep the estimate. Cost: one read
    and window set per small file of such a pair (1 GB of Linux sources: 2.3k
    files, 11k pairs, 0.3 s on one process); on ``engine``'s workers if given.
    Memory: the pairs are looked at :data:`SMALL_SCAN_SLICE` at a time (their
    estimates), and only those to score are kept (a row and two file rows each);
    no column of ``cols`` is copied.
    """
    n = len(cols["a"])
    ids = np.asarray(files["id"], dtype=np.uint32)
    if not n or not len(ids):
        return
    size = np.asarray(files["size"], dtype=np.int64)
    last = len(ids) - 1
    rows, ias, ibs = [], [], []
    for lo in range(0, n, SMALL_SCAN_SLICE):
        hi = min(n, lo + SMALL_SCAN_SLICE)
        ia = np.minimum(np.searchsorted(ids, cols["a"][lo:hi]), last)
        ib = np.minimum(np.searchsorted(ids, cols["b"][lo:hi]), last)
        small = np.flatnonzero(np.maximum(size[ia], size[ib]) < SMALL_EXACT_BYTES)
        if not len(small):
            continue
        ia, ib = ia[small], ib[small]
        a_in_b, b_in_a, _ = pair_estimates(
            cols["shared"][lo:hi][small].astype(np.float64),
            size[ia],
            files["n_fp"][ia],
            files["n_distinct"][ia],
            size[ib],
            files["n_fp"][ib],
            files["n_distinct"][ib],
            params,
        )
        keep = np.maximum(a_in_b, b_in_a) >= SMALL_EXACT_FLOOR
        rows.append(lo + small[keep])
        ias.append(ia[keep].astype(np.int32))
        ibs.append(ib[keep].astype(np.int32))
    if rows and sum(len(r) for r in rows):
        _exact(
            np.concatenate(rows),
            np.concatenate(ias),
            np.concatenate(ibs),
            files,
            params.window,
            cols,
            stats,
            on_warning,
            progress,
            pool,
            jobs,
            engine,
        )


#: ``exact``: work items per job, so that the processes share the pairs evenly.
EXACT_CHUNKS_PER_JOB = 8

#: A pair to score: its row, the id and source of its larger file, of its smaller, whether
#: the larger is the pair's ``a``, and the shift of its window sample (0: every window).
_ExactItem = tuple[int, int, Src, int, Src, bool, int]


@dataclass(frozen=True)
class _ExactDone:
    """Exact containments of a chunk of pairs, and what computing them read.

    ``shift``: a pair scored on the windows of the sample of rate ``2^-shift``
    (0: on every window, or two identical files); ``shared``, ``n_a`` and
    ``n_b`` count the sample's values then.
    """

    rows: I64
    shared: I64
    n_a: I64
    n_b: I64
    shift: I64
    files_read: int
    bytes_read: int
    changed: int
    warnings: tuple[ScanWarning, ...]


def _exact_chunk(
    job: tuple[int, int, str, dict[int, bytes], list[_ExactItem], bool],
) -> _ExactDone:
    """Exact (C(A,B), C(B,A)) of the pairs of one chunk (a worker's item).

    The pairs come grouped by their larger file: its window set is made once,
    then compared with the set of each smaller partner (kept in a cache under
    ``budget`` bytes, least recently used out first: a small file is cheap to
    read again). A file's set holds the sample its pairs of the chunk need
    (the densest: every window if one of them is not sampled); a pair of
    sampled files compares the sample of its own rate. A pair whose file
    cannot be read, or changed since it was indexed, is left out (its warning
    is returned; the pair keeps its estimate).
    """
    window, budget, normalize, digests, items, jit = job
    need: dict[int, int] = {}  # the sample each file's set holds: the densest its pairs ask
    for it in items:
        for f in (it[1], it[3]):
            need[f] = min(need.get(f, 1 << 30), it[6])
    warnings: list[ScanWarning] = []
    sets = WindowSets(window, budget, normalize, digests, warnings.append, jit, shifts=need)
    for _, fb, pb, fs, ps, _, _ in items:
        sets.want(fb, pb)
        sets.want(fs, ps)
    left: dict[int, int] = {}  # pairs of the chunk still to score, per file
    partners: dict[int, int] = {}  # pairs per larger file
    for it in items:
        left[it[1]] = left.get(it[1], 0) + 1
        left[it[3]] = left.get(it[3], 0) + 1
        partners[it[1]] = partners.get(it[1], 0) + 1
    # When each set is needed next (Belady's rule for the cache): the chunk's reads are
    # the larger file then the smaller of each pair, in order; -1: never again.
    later: dict[int, int] = {}
    nxt = [0] * (2 * len(items))
    for k in range(len(items) - 1, -1, -1):
        for role, f in ((1, items[k][3]), (0, items[k][1])):
            nxt[2 * k + role] = later.get(f, -1)
            later[f] = 2 * k + role
    rows, inters, n_a, n_b, shifts = [], [], [], [], []
    indexed: tuple[int, _sets.IndexedSet | None] = (-1, None)
    big_sizes: dict[tuple[int, int], int] = {}  # |sample r of a larger file's set|
    for k, (j, fb, pb, fs, ps, big_is_a, r) in enumerate(items):
        sb = sets.get(fb, pb, nxt[2 * k])
        ss = sets.get(fs, ps, nxt[2 * k + 1]) if sb is not None else None
        if sb is not None and ss is not None:
            if digests.get(fb) == digests.get(fs):  # identical, both unchanged: all of each other
                inter, na, nb, r = 1, 1, 1, 0
            else:
                if need[fs] < r:
                    ss = _sets.sampled(ss, r, jit)
                nb = len(sb)
                if need[fb] < r:
                    got = big_sizes.get((fb, r))
                    nb = big_sizes[fb, r] = _sets.sample_size(sb, r, jit) if got is None else got
                na = len(ss)
                if r and na < _sets.SAMPLE_FROM // 4:  # repeated windows: too few values to tell
                    inter = -1
                elif not jit:
                    inter = _sets.intersection_size(sb, ss)
                elif INDEX_FROM <= len(sb) < 1 << 31 and partners[fb] > 1 and 2 * na < len(sb):
                    if indexed[0] != fb:
                        indexed = (fb, _sets.IndexedSet(sb))
                    assert indexed[1] is not None
                    inter = indexed[1].shared(ss)
                else:
                    inter = _sets.intersection_size_jit(sb, ss)
            if inter >= 0:  # else left out: the pair keeps its estimate
                rows.append(j)
                inters.append(inter)
                n_a.append(nb if big_is_a else na)
                n_b.append(na if big_is_a else nb)
                shifts.append(r)
        for f, src in ((fb, pb), (fs, ps)):
            left[f] -= 1
            if not left[f]:
                sets.release(f, src)
                if indexed[0] == f:
                    indexed = (-1, None)
    done = _ExactDone(
        np.asarray(rows, dtype=np.int64),
        np.asarray(inters, dtype=np.int64),
        np.asarray(n_a, dtype=np.int64),
        np.asarray(n_b, dtype=np.int64),
        np.asarray(shifts, dtype=np.int64),
        sets.files_read,
        sets.bytes_read,
        sets.changed,
        tuple(warnings),
    )
    # The chunk's window sets (up to its share of EXACT_CACHE_BYTES) back to the system:
    # freed, they stayed in the heap of the process that runs the next chunk.
    del sets, indexed, rows, inters, n_a, n_b, shifts
    release_memory()
    return done


def _chunk_bounds(big: I64, cost: I64, n: int) -> tuple[I64, I64]:
    """Pairs sorted by larger file (``big``, each pair's ``cost``) cut into about ``n``
    runs of similar cost: ``(bounds, order)``, chunk ``c`` being the pairs
    ``bounds[c]:bounds[c + 1]`` and ``order`` the chunks, the costliest first.

    Cuts fall only between larger files, so that a larger file is read in one chunk;
    within a chunk the order is kept (files near each other in the tree, often
    alike, stay together). A chunk begins at the first larger file whose pairs
    start past a multiple of the share (``sum(cost) / n``): a larger file costlier
    than a share ends its chunk, larger than the others. Handed out first, it no
    longer ends the pass on one core while the other jobs wait (on 1 GB of Linux
    sources, the last 5 of 26 s ran on one of two cores). Cost: O(pairs) in numpy,
    no Python work a pair or a file.
    """
    m = len(big)
    if not m:
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, big[1:] != big[:-1]])
    cost = np.asarray(cost, dtype=np.float64)
    share = float(cost.sum()) / n if n > 1 else 0.0
    if share > 0:
        before = np.cumsum(cost) - cost  # the cost of the pairs before each one
        # At most n chunks: pairs of no cost after the last share's start stay in it.
        run = np.minimum(np.floor(before[starts] / share), n - 1)
        cut = starts[np.r_[True, run[1:] != run[:-1]]]
    else:
        cut = starts[:1]
    bounds = np.r_[cut, m].astype(np.int64)
    spent = np.add.reduceat(cost, cut)
    return bounds, np.argsort(-spent, kind="stable").astype(np.int64)  # stable: ties in order


def _exact(
    rows: I64,
    ia: npt.NDArray[Any],
    ib: npt.NDArray[Any],
    files: dict[str, npt.NDArray[Any]],
    window: int,
    cols: dict[str, npt.NDArray[Any]],
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any = None,
    jobs: int = 1,
    engine: Engine | None = None,
) -> None:
    """Fill ``cols['exact_ab'/'exact_ba'/'exact_n']`` at ``rows``, reading their files.

    ``ia``, ``ib``: the rows in ``files`` of each pair's ``a`` and ``b``, aligned
    with ``rows`` (only the pairs to score: no column of every collated pair).
    The pairs, grouped by their larger file (whose window set is made once),
    are cut into contiguous chunks of similar cost shared between this process
    and the workers of ``pool`` (:func:`sif.executors.local.shared_map`), or
    among ``engine``'s workers (:meth:`sif.executors.engine.Engine.map_exact`:
    the same chunks, the same function, the same scores).
    Cost: each larger file read and hashed once (a sort of its window values,
    then a bucket index over them), each smaller one once per chunk unless the
    cache lost it, then one lookup per window of the smaller file (a merge or
    a galloping search for a larger file with one partner); memory at most
    :data:`EXACT_CACHE_BYTES` of window sets in all, and about 30 bytes a pair
    to score beside ``rows``. Measured on 1 GB of Linux sources: 251k pairs,
    1.4 GiB read, about 100 CPU seconds.
    """

    t0 = time.perf_counter()
    progress.stage("exact containment", len(rows), unit="pairs")
    rank = cluster_rank(len(files["size"]), ia, ib)
    for part in _slices(ia, ib, files, rank):
        ok, inter, n_a, n_b, shift = _exact_pass(
            ia[part],
            ib[part],
            files,
            window,
            stats,
            on_warning,
            pool,
            jobs,
            progress,
            engine,
            rank,
        )
        done = rows[part][ok]
        cols["exact_ab"][done] = inter[ok] / np.maximum(n_a[ok], 1)
        cols["exact_ba"][done] = inter[ok] / np.maximum(n_b[ok], 1)
        # A sampled score: the values its larger share counts (the interval's n).
        sampled = shift[ok] > 0
        cols["exact_n"][done] = np.where(sampled, np.minimum(n_a[ok], n_b[ok]), 0)
        stats.exact_pairs += len(done)
        stats.sampled_pairs += int(np.count_nonzero(sampled))
    stats.seconds_exact += time.perf_counter() - t0


def _larger(
    a: npt.NDArray[Any], b: npt.NDArray[Any], files: dict[str, npt.NDArray[Any]]
) -> tuple[npt.NDArray[np.bool_], I64, I64]:
    """For the pairs of files at rows ``a`` and ``b``: whether ``a`` is the larger file
    (ties: the first row), the larger file's row and the smaller's."""
    size = np.asarray(files["size"], dtype=np.int64)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    a_big = (size[a] > size[b]) | ((size[a] == size[b]) & (a <= b))
    return a_big, np.where(a_big, a, b), np.where(a_big, b, a)


def cluster_rank(n: int, ia: npt.NDArray[Any], ib: npt.NDArray[Any]) -> I64:
    """Each of ``n`` files' place in the order the exact pass takes the larger files in:
    by cluster, then by row (the tree's order).

    A cluster is a component of the forest in which each file of a pair (rows
    ``ia``, ``ib``) is linked to its partner of the lowest row. Files alike are
    mostly in one cluster, so their pairs fall in one slice and one chunk,
    where each file is read once (a chunk's window sets are its own). In the
    tree's order alone, a family of edited copies spread over the tree had
    its pairs in many chunks and its files read again in each: on 1 M
    generated files (4.0 M pairs) the pass read 2.69 M files (10.4 GiB), and
    1.39 M (5.3 GiB) in this order; with all pairs as links, one cluster
    held most files, and with each file's best-scored partner only, the
    clusters stayed small (1.67 M reads). Cost: O(pairs + files) in numpy
    (components by hooking and pointer jumping), no Python work a file.
    """
    rows = np.arange(n, dtype=np.int64)
    low = np.full(n, n, dtype=np.int64)  # each file's partner of the lowest row (n: none)
    if len(ia):
        a, b = np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64)
        np.minimum.at(low, a, b)
        np.minimum.at(low, b, a)
    x = np.flatnonzero(low < n)
    y = low[x]
    root = components(n, x, y)
    order = np.lexsort((rows, root))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = rows
    return rank


def components(n: int, x: I64, y: I64) -> I64:
    """The component of each of ``n`` nodes under the edges ``x[k]``-``y[k]``, named by its
    lowest node. Rounds of hooking each edge's higher root under its lower one, then
    pointer jumping until every node points at its root: a few rounds, each in numpy."""
    parent = np.arange(n, dtype=np.int64)
    while True:
        rx, ry = parent[x], parent[y]  # roots: parent is fully compressed here
        cross = rx != ry
        if not cross.any():
            return parent
        lo, hi = np.minimum(rx[cross], ry[cross]), np.maximum(rx[cross], ry[cross])
        np.minimum.at(parent, hi, lo)  # a root under a lower root: no cycle
        while True:
            up = parent[parent]
            if np.array_equal(up, parent):
                break
            parent = up


def _slices(
    ia: npt.NDArray[Any],
    ib: npt.NDArray[Any],
    files: dict[str, npt.NDArray[Any]],
    rank: I64 | None = None,
) -> list[I64]:
    """The positions of the pairs (files at ``ia``, ``ib``) cut into slices of about
    :data:`EXACT_SLICE_PAIRS` pairs, each a run of larger files in the order of ``rank``
    (:func:`cluster_rank`; ``None``: the tree's order), never two slices for one larger
    file.

    The cut is made on the count of pairs a larger file (a histogram), not by sorting the
    pairs: a few bytes a pair beside the slice's positions (a sort of 4 M pairs held
    about 20 arrays of them).
    """
    n = len(ia)
    if n <= EXACT_SLICE_PAIRS:
        return [np.arange(n, dtype=np.int64)]
    size = np.asarray(files["size"], dtype=np.int64)
    big = np.empty(n, dtype=np.int64)
    step = EXACT_SLICE_PAIRS
    for lo in range(0, n, step):  # in steps: the comparison's temporaries stay small
        a = np.asarray(ia[lo : lo + step], dtype=np.int64)
        b = np.asarray(ib[lo : lo + step], dtype=np.int64)
        a_big = (size[a] > size[b]) | ((size[a] == size[b]) & (a <= b))
        big[lo : lo + step] = np.where(a_big, a, b)
    if rank is not None:
        big = rank[big]  # the larger file's place in the order
    counts = np.bincount(big, minlength=len(size))
    before = np.cumsum(counts) - counts  # the pairs of the larger files before each file
    # A slice begins at the first larger file whose pairs start past a multiple of the
    # slice's size: a file with more pairs than that ends its slice, as before.
    slice_of_file = (before // EXACT_SLICE_PAIRS).astype(np.int32)
    slice_of_pair = slice_of_file[big]
    del big, counts, before
    return [np.flatnonzero(slice_of_pair == k) for k in np.unique(slice_of_pair).tolist()]


def _exact_pass(
    ia: npt.NDArray[Any],
    ib: npt.NDArray[Any],
    files: dict[str, npt.NDArray[Any]],
    window: int,
    stats: SimilarStats,
    on_warning: WarningSink,
    pool: Any,
    jobs: int,
    progress: Progress | None = None,
    engine: Engine | None = None,
    rank: I64 | None = None,
) -> tuple[npt.NDArray[np.bool_], I64, I64, I64, I64]:
    """|S(A) ∩ S(B)|, |S(A)|, |S(B)| of the pairs of files at ``ia``, ``ib``, or of their
    window samples.

    Returns, aligned with ``ia``: whether the pair was scored (both files
    read and unchanged), the intersection and both set sizes, and the shift of
    the sample they count (0: every window; :data:`sif.core.exactsets.SAMPLE_FROM`).
    With ``engine``, the chunks (about :data:`EXACT_CHUNKS_PER_JOB` a worker) run on its
    workers: this process reads no file.
    """
    from sif.executors.local import shared_map

    size = np.asarray(files["size"], dtype=np.int64)
    a_big, big, small = _larger(ia, ib, files)
    # Grouped by larger file, in the order of rank (the tree's order without it).
    sort = np.lexsort((small, big) if rank is None else (rank[small], rank[big]))
    a_big, big, small = a_big[sort], big[sort], small[sort]
    # The sample's rate from the smaller file's distinct windows, estimated as its windows
    # times the share of its fingerprints that are distinct (a file repeating itself, as
    # a register header or a run of zeros, keeps a denser sample or none).
    n_fp = np.asarray(files["n_fp"], dtype=np.float64)[small]
    n_distinct = np.asarray(files["n_distinct"], dtype=np.float64)[small]
    distinct = (size[small] - window + 1) * np.where(n_fp > 0, n_distinct / np.maximum(n_fp, 1), 1)
    shift = _sets.sample_shift(distinct)
    # A larger file's set is made once, with its first pair.
    first = np.r_[True, big[1:] != big[:-1]] if len(big) else np.empty(0, dtype=bool)
    cost = size[small] + np.where(first, size[big], 0)
    normalize = str(files["normalize"][0]) if len(files["normalize"]) else "auto"
    # numba's kernels for a bulk pass (import numba alone costs half a second).
    jit = want_jit(int(cost.sum()))
    if engine is not None:  # a worker holds the sets of the chunk it runs, in its memory
        jobs = engine.workers()
        budget = EXACT_CACHE_BYTES // 2
    else:
        jobs = max(1, jobs if pool is not None else 1)
        budget = EXACT_CACHE_BYTES // (2 * jobs) if jobs > 1 else EXACT_CACHE_BYTES
    bounds, order = _chunk_bounds(big, cost, EXACT_CHUNKS_PER_JOB * jobs)
    fid = files["id"]

    def chunks() -> Iterator[tuple[int, int, str, dict[int, bytes], list[_ExactItem], bool]]:
        # Each chunk's work items (a tuple a pair, its files' paths and digests) are made
        # as it is handed out: a slice's items all at once took 80 MB at 262k pairs.
        for c in order.tolist():
            lo, hi = int(bounds[c]), int(bounds[c + 1])
            srcs = sources(files, np.concatenate([big[lo:hi], small[lo:hi]]))
            digest = {int(fid[r]): bytes(files["digest"][r]) for r in srcs}
            items: list[_ExactItem] = [
                (k, int(fid[bi]), srcs[bi], int(fid[si]), srcs[si], ab, r)
                for k, bi, si, ab, r in zip(
                    sort[lo:hi].tolist(),
                    big[lo:hi].tolist(),
                    small[lo:hi].tolist(),
                    a_big[lo:hi].tolist(),
                    shift[lo:hi].tolist(),
                    strict=True,
                )
            ]
            yield window, budget, normalize, digest, items, jit

    ok = np.zeros(len(ia), dtype=bool)
    inter = np.zeros(len(ia), dtype=np.int64)
    n_a = np.zeros(len(ia), dtype=np.int64)
    n_b = np.zeros(len(ia), dtype=np.int64)
    shifts = np.zeros(len(ia), dtype=np.int64)
    mapped = (
        shared_map(_exact_chunk, chunks(), pool, depth=1)
        if engine is None
        else engine.map_exact(_exact_chunk, chunks())
    )
    for _, done in mapped:
        for w in done.warnings:
            on_warning(w)
        ok[done.rows] = True
        inter[done.rows] = done.shared
        n_a[done.rows] = done.n_a
        n_b[done.rows] = done.n_b
        shifts[done.rows] = done.shift
        stats.exact_files_read += done.files_read
        stats.exact_bytes_read += done.bytes_read
        stats.exact_changed += done.changed
        if progress is not None:
            progress.advance(len(done.rows))
    return ok, inter, n_a, n_b, shifts
