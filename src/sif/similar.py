"""All-against-all (Manber, section 4): every group of similar files under some trees.

The pipeline, each stage feeding the next:

1. **Fingerprints through the index.** :func:`sif.index.build_index` brings
   the index up to date with the trees (a second run reads only changed
   files); the files in scope are the indexed files under the roots.
2. **Collation** (:data:`COLLATE_SQL`, one DuckDB statement). As the paper
   does it: fingerprints held by more than one file become *sets of files*
   (Figure 1); identical sets are collapsed into one with a *counter*
   (Figure 2); each set then adds its counter to every pair of its files.
   Only files of the same kind (text, binary, and content view once the
   index records one) are ever paired. A fingerprint held by more than
   ``max_df`` files is a *stop-fingerprint* (PostScript prologs, licence
   texts, generated boilerplate, section 2): it creates no pairs. The
   statement reads a relation ``fp(fp, file_id, grp)`` and is exact on any
   subset of rows that holds *all* rows of its fingerprints, so it runs as
   well on one hash partition of the rows (the top bits of the value, as
   the index's segments bucket them); partial pair counts add up
   (:func:`collate`). DuckDB works out of core under ``memory_limit``.
3. **Pair counts kept.** The collated counts go into the index
   (``similar_runs``, ``similar_pairs``, keyed by the index generation, the
   roots and ``max_df``), so that a new threshold or filter is the paper's
   "one more second" of post-processing with no file opened; any change to
   the index changes its generation and invalidates them. A digest of the
   stat walk the index matched is stored with them: a re-threshold walks
   (stat only), and when the digest and the generation are unchanged it
   skips the index update, opens the catalog once, read-only, and scores
   the stored counts (:func:`_reuse_unchanged`; 1 GB, 38k files: ~0.5 s in
   the library); any touched file sends it down the full path.
4. **Scores and filters** (vectorised over all pairs): containment both
   ways, Jaccard, the paper's multiplicity percentage; then ``min_shared``,
   ``size_ratio``, ``same_suffix`` and the threshold on the score, the
   estimate of max(C(A,B), C(B,A)): how much of the smaller file the larger
   holds. With ``exact``, pairs from a lower, sampled threshold are scored
   exactly over all ``w``-byte windows of both files (:func:`exact_containment`).
   Pairs of small files (both under :data:`SMALL_EXACT_BYTES`) are scored
   exactly in every run, at collation, whatever the threshold, and stored with
   the counts (:func:`_exact_small`): winnowing's edge effects cost a small
   file a large share of its few fingerprints. An exact score, once known,
   decides in place of the estimate.
5. **Groups** (the paper's first version): each file is a reference with the
   files similar to it; each distinct set is reported once. Or **interesting
   sets** (the second version): maximal cliques or connected components
   (:func:`similar_sets`).

Estimates, not counts of substrings: the containment is the share of the
smaller file's *distinct* fingerprints that the other holds, when both files
were sampled alike. A small file is sampled more densely (the index's
small-file tier, at least 20 fingerprints a file): then the shared
fingerprints count the shared windows at the sparser file's rate, and the
estimate is scaled by it (:func:`pair_estimates`). Stop-fingerprints stay in
the denominators, so boilerplate shared by a pair lowers its estimate
slightly rather than making unrelated files look alike.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.content import ContentOptions
from sif.core.anchors import AnchorSet
from sif.core.rolling import as_bytes_array, window_hashes
from sif.core.windows import distinct_windows
from sif.errors import ConfigError, IndexUnusable
from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.executors.local import fork_pool
from sif.fingerprint import FingerprintParams
from sif.index.build import DEFAULT_PARAMS, IndexStats, build_index
from sif.index.segments import BUCKET_BITS, Segment
from sif.index.store import ParamSet, param_set
from sif.walk import WalkOptions, parallel_walk

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

SETS = ("cliques", "components")

#: Default stop-fingerprint cap: a fingerprint in more than this many files creates no
#: pairs. Measured (bench/similar.py): in 23 sdists of six packages (2,456 files), the
#: most frequent fingerprint is in 37 files (chardet modules vendored in each requests
#: release: a real version history, to keep); in /usr/share/doc (4,461 files), the 12
#: fingerprints in more than 100 files are all copyright and licence texts and generated
#: HTML (the most frequent in 257 files).
DEFAULT_MAX_DF = 100
#: Default least number of distinct shared fingerprints. The paper (section 6) wants 5-10
#: for strong evidence, but a small file held by a large one shares only the large
#: file's sparse fingerprints (one per 256 bytes: 3-4 in 1 KB), and the threshold on
#: the containment already asks for T * n of them. Measured on 23 sdists with the
#: small-file tier (bench/similar.py): 1 gives F1 0.936 and small-file recall 0.88 at
#: T = 25%, 2 gives 0.940 and 0.85, 3 gives 0.934 and 0.83. A chance hit of 32-bit
#: values costs a small file about n * (distinct values) / 2^32 (0.3% at 4 M values).
DEFAULT_MIN_SHARED = 1
#: ``exact``: candidates are the pairs whose sampled score reaches this share of the
#: threshold, with at least one shared fingerprint (the exact score then decides).
EXACT_CANDIDATE_SHARE = 0.5
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
#: DuckDB's working memory for the collation; it spills to ``temp_directory`` beyond.
DEFAULT_MEMORY_LIMIT = "1GB"
#: Bron-Kerbosch steps allowed per connected component before the greedy cover.
CLIQUE_BUDGET = 20_000

COLLATE_SQL = """
WITH
  -- each (fingerprint, file) once, with its multiplicity (section 3: counted twice if twice)
  m AS (
    SELECT fp, file_id AS id, grp, count(*)::UINTEGER AS mult
    FROM fp GROUP BY fp, file_id, grp
  ),
  -- Figure 1: the set of files holding each fingerprint, shared by 2..max_df files;
  -- the set is named by an order-free signature of its (file, multiplicity) members;
  -- one integer per member is hashed: hash(id, mult) combines linearly, so the xor of
  -- two members of equal multiplicity would cancel it and merge sets that differ in it
  sets AS (
    SELECT fp, grp, bit_xor(hash(id::UBIGINT * 4294967296 + mult)) AS sig, count(*) AS n
    FROM m GROUP BY fp, grp
    HAVING count(*) BETWEEN 2 AND $max_df
  ),
  -- Figure 2: each distinct set once, with its counter and one fingerprint naming it
  counted AS (
    SELECT grp, min(fp) AS rep, count(*)::UINTEGER AS c
    FROM sets GROUP BY grp, sig, n
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


# --- value types ------------------------------------------------------------------


@dataclass(frozen=True)
class SimilarOptions:
    """What ``sif similar`` looks for. Raises :class:`ConfigError` for a bad value.

    - ``threshold``: least score, in percent (the paper's T, default 25);
    - ``max_df``: stop-fingerprint cap (more files than this: no pairs);
    - ``min_shared``: least number of distinct shared fingerprints;
    - ``size_ratio``: skip pairs whose sizes differ more than this many times;
    - ``same_suffix``: pair only files with the same suffix (``.c``, ``.py``);
    - ``exact``: score candidate pairs over all their windows (reads them);
    - ``sets``: ``None`` for the paper's groups, ``"cliques"`` or ``"components"``.
    """

    threshold: float = 25.0
    max_df: int = DEFAULT_MAX_DF
    min_shared: int = DEFAULT_MIN_SHARED
    size_ratio: float | None = None
    same_suffix: bool = False
    exact: bool = False
    sets: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 100:
            raise ConfigError(f"threshold must be in 0..100, got {self.threshold}")
        if self.max_df < 2:
            raise ConfigError(f"--max-df must be at least 2, got {self.max_df}")
        if self.min_shared < 1:
            raise ConfigError(f"--min-shared must be at least 1, got {self.min_shared}")
        if self.size_ratio is not None and self.size_ratio < 1:
            raise ConfigError(f"--size-ratio must be at least 1, got {self.size_ratio}")
        if self.sets is not None and self.sets not in SETS:
            raise ConfigError(f"unknown --sets {self.sets!r} (choose from {', '.join(SETS)})")


@dataclass(frozen=True)
class SimilarFile:
    """A file of the scope, as the index holds it."""

    id: int
    path: str
    size: int
    kind: str
    n_fp: int
    n_distinct: int
    digest: bytes


@dataclass(frozen=True)
class SimilarPair:
    """Two similar files (``a`` before ``b`` by path). Shares are fractions in [0, 1].

    ``a_in_b``/``b_in_a``: the estimated containment (:func:`pair_estimates`:
    shared distinct fingerprints over each file's distinct fingerprints, scaled
    to the sparser file's density when a small file was sampled more densely);
    ``jaccard`` the estimated resemblance; ``percent_a_in_b``/``percent_b_in_a``: the paper's
    percentage, the rows of the other file holding the shared fingerprints
    over the file's fingerprints (multiplicity: it can exceed 100);
    ``exact_a_in_b``/``exact_b_in_a``: C(A,B) and C(B,A) over all windows
    when known (``exact``, or a pair of small files: :func:`_exact_small`), else
    ``None``.
    """

    a: SimilarFile
    b: SimilarFile
    shared: int
    a_in_b: float
    b_in_a: float
    jaccard: float
    percent_a_in_b: float
    percent_b_in_a: float
    exact_a_in_b: float | None = None
    exact_b_in_a: float | None = None

    @property
    def score(self) -> float:
        """max(C(A,B), C(B,A)) in percent: exact when known, else the estimate."""
        if self.exact_a_in_b is not None and self.exact_b_in_a is not None:
            return 100.0 * max(self.exact_a_in_b, self.exact_b_in_a)
        return 100.0 * max(self.a_in_b, self.b_in_a)

    @property
    def identical(self) -> bool:
        """Same size and BLAKE3 digest: exact copies."""
        return self.a.size == self.b.size and self.a.digest == self.b.digest

    def other(self, f: SimilarFile) -> SimilarFile:
        return self.b if f.id == self.a.id else self.a

    def percent_for(self, f: SimilarFile) -> float:
        """The paper's percentage shown beside ``f``'s partner in ``f``'s group.

        It is taken in the direction of the score: the share of the
        fingerprints of the file more contained in the other (the smaller).
        """
        if self.a_in_b >= self.b_in_a:
            return self.percent_a_in_b
        return self.percent_b_in_a


@dataclass(frozen=True)
class GroupMember:
    """A file similar to a group's reference, with the figures shown beside it."""

    file: SimilarFile
    percent: float
    score: float
    identical: bool


@dataclass(frozen=True)
class SimilarGroup:
    """A reference file (``R`` in Figure 3) and the files similar to it, best first."""

    reference: SimilarFile
    members: tuple[GroupMember, ...]


@dataclass(frozen=True)
class SimilarSet:
    """An interesting set: a clique or component, with each file's least pairwise score."""

    files: tuple[SimilarFile, ...]
    least: tuple[float, ...]


@dataclass
class SimilarStats:
    """What a run did, for the summary."""

    files: int = 0
    fingerprints: int = 0
    stopped: int = 0
    pairs_collated: int = 0
    pairs: int = 0
    reused: bool = False
    exact_pairs: int = 0
    exact_files_read: int = 0
    exact_bytes_read: int = 0
    index: IndexStats | None = None
    seconds_index: float = 0.0
    seconds_collate: float = 0.0
    seconds_exact: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True)
class SimilarResult:
    """Pairs above the threshold (best first), the groups or sets, and the figures."""

    options: SimilarOptions
    pairs: tuple[SimilarPair, ...]
    groups: tuple[SimilarGroup, ...]
    sets: tuple[SimilarSet, ...]
    stats: SimilarStats = field(compare=False)


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


# --- estimates --------------------------------------------------------------------


def sampling_tier(params: FingerprintParams, size: npt.ArrayLike) -> I64:
    """The winnowing window each file of ``size`` bytes was fingerprinted with (vectorised).

    ``winnow`` with ``min_fingerprints = N`` winnows a file of ``m`` windows
    with ``min(W, max(1, m // N))`` (never more than ``m``): the small-file
    tier (see :mod:`sif.fingerprint`). Every other scheme samples all files
    alike: the tier is 0 for all. Pure; O(n).
    """
    sizes = np.asarray(size, dtype=np.int64)
    if params.scheme != "winnow":
        return np.zeros(sizes.shape, dtype=np.int64)
    m = sizes - params.window + 1
    ww = np.full(sizes.shape, int(params.winnow_window or 1), dtype=np.int64)
    if params.min_fingerprints:
        ww = np.minimum(ww, np.maximum(1, m // params.min_fingerprints))
    return np.asarray(np.maximum(1, np.minimum(ww, m)), dtype=np.int64)


def pair_estimates(
    shared: F64,
    size_a: npt.ArrayLike,
    n_fp_a: npt.ArrayLike,
    n_distinct_a: npt.ArrayLike,
    size_b: npt.ArrayLike,
    n_fp_b: npt.ArrayLike,
    n_distinct_b: npt.ArrayLike,
    params: FingerprintParams,
) -> tuple[F64, F64, F64]:
    """Estimated (C(A in B), C(B in A), Jaccard) of pairs sharing ``shared`` fingerprints.

    Files sampled alike (the same winnowing window, :func:`sampling_tier`):
    ``shared / n_distinct`` of each side, as the paper counts. Files of
    different tiers (a small file winnowed densely, a large one at the
    nominal density): in a region the two share, the sparser file's
    fingerprints are, edges aside, a subset of the denser one's (a window
    that is the least of a wide neighbourhood is also the least of a
    narrower one inside it), so the shared fingerprints count the shared
    windows at the *sparser* file's rate, its distinct fingerprints per
    distinct window (:func:`sif.core.windows.distinct_windows`). Then
    shared windows = shared / rate, and C(A in B) = shared windows over A's
    distinct windows; dividing by A's own (denser) count instead would
    understate a small file held by a large one by the ratio of their
    densities. All capped at 1. Vectorised; O(pairs).
    """
    na = np.maximum(np.asarray(n_distinct_a, dtype=np.float64), 1.0)
    nb = np.maximum(np.asarray(n_distinct_b, dtype=np.float64), 1.0)
    wa = distinct_windows(size_a, n_fp_a, n_distinct_a, params.window)
    wb = distinct_windows(size_b, n_fp_b, n_distinct_b, params.window)
    ta, tb = sampling_tier(params, size_a), sampling_tier(params, size_b)
    # The sparser side's rate, where the tiers differ; each side's own where alike.
    rate_a = np.where(ta == tb, na / wa, np.where(ta > tb, na / wa, nb / wb))
    rate_b = np.where(ta == tb, nb / wb, np.where(ta > tb, na / wa, nb / wb))
    inter_a = shared / rate_a  # shared distinct windows, as seen from A
    inter_b = shared / rate_b
    a_in_b = np.minimum(inter_a / wa, 1.0)
    b_in_a = np.minimum(inter_b / wb, 1.0)
    inter = np.minimum(np.minimum(inter_a, inter_b), np.minimum(wa, wb))
    jac = np.where(
        ta == tb,
        shared / np.maximum(na + nb - shared, 1.0),
        inter / np.maximum(wa + wb - inter, 1.0),
    )
    return a_in_b, b_in_a, np.minimum(jac, 1.0)


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


# --- interesting sets -------------------------------------------------------------


def _components(nodes: Sequence[int], adj: dict[int, set[int]]) -> list[list[int]]:
    seen: set[int] = set()
    out: list[list[int]] = []
    for n in nodes:
        if n in seen:
            continue
        comp, stack = [], [n]
        seen.add(n)
        while stack:
            x = stack.pop()
            comp.append(x)
            for y in adj[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        out.append(sorted(comp))
    return out


def _cliques(comp: list[int], adj: dict[int, set[int]], budget: int) -> list[frozenset[int]]:
    """Maximal cliques of one component: Bron-Kerbosch with pivoting, then greedy.

    Listing all maximal cliques is exponential in the worst case (and the
    paper's "interesting sets" problem is NP-complete), so the search stops
    after ``budget`` steps; the vertices it has not yet covered are then
    covered greedily: from the highest-degree uncovered vertex, add the
    neighbour with most neighbours in the clique so far, until none is
    adjacent to all; every set so found is maximal, but some maximal sets
    may be missed.
    """
    found: list[frozenset[int]] = []
    steps = 0

    def bk(r: set[int], p: set[int], x: set[int]) -> bool:
        nonlocal steps
        steps += 1
        if steps > budget:
            return False
        if not p and not x:
            found.append(frozenset(r))
            return True
        pivot = max(p | x, key=lambda u: len(adj[u] & p))
        for v in list(p - adj[pivot]):
            if not bk(r | {v}, p & adj[v], x & adj[v]):
                return False
            p.discard(v)
            x.add(v)
        return True

    if bk(set(), set(comp), set()):
        return found
    covered = set().union(*found) if found else set()
    for v in sorted(comp, key=lambda u: (-len(adj[u]), u)):
        if v in covered:
            continue
        clique = {v}
        cand = set(adj[v])
        while cand:
            best = max(sorted(cand), key=lambda u: len(adj[u] & cand))
            clique.add(best)
            cand &= adj[best]
        found.append(frozenset(clique))
        covered |= clique
    return list(dict.fromkeys(found))


def similar_sets(pairs: Sequence[SimilarPair], kind: str) -> list[SimilarSet]:
    """The paper's "interesting sets" (section 4, second version) from the kept pairs.

    ``kind="cliques"``: maximal sets whose members are pairwise similar (each
    pair above the threshold), see :func:`_cliques` for the bounded search;
    ``"components"``: connected components of the similarity graph (any
    chain of similar pairs). Each set lists, for each file, its least score
    with the other members (for a component, with its neighbours in it).
    Sorted by size, then path. Cost: O(pairs) for components; bounded per
    component for cliques.
    """
    if kind not in SETS:
        raise ConfigError(f"unknown sets {kind!r} (choose from {', '.join(SETS)})")
    adj: dict[int, set[int]] = {}
    files: dict[int, SimilarFile] = {}
    score: dict[tuple[int, int], float] = {}
    for p in pairs:
        adj.setdefault(p.a.id, set()).add(p.b.id)
        adj.setdefault(p.b.id, set()).add(p.a.id)
        files[p.a.id], files[p.b.id] = p.a, p.b
        score[(p.a.id, p.b.id)] = score[(p.b.id, p.a.id)] = p.score
    nodes = sorted(adj, key=lambda i: files[i].path)
    comps = _components(nodes, adj)
    groups: list[frozenset[int]] = []
    for comp in comps:
        if kind == "components":
            groups.append(frozenset(comp))
        else:
            groups.extend(_cliques(comp, adj, CLIQUE_BUDGET))
    out: list[SimilarSet] = []
    for g in groups:
        members = sorted(g, key=lambda i: files[i].path)
        least = tuple(
            min(score[(i, j)] for j in members if j != i and (i, j) in score) for i in members
        )
        out.append(SimilarSet(tuple(files[i] for i in members), least))
    out.sort(key=lambda s: (-len(s.files), s.files[0].path))
    return out


# --- groups (section 4, first version) --------------------------------------------


def similar_groups(pairs: Sequence[SimilarPair]) -> list[SimilarGroup]:
    """Each file as a reference with the files similar to it; each distinct set once.

    As the paper: references in turn (here by path), members best first
    (score, then path); a group whose set of files (reference included) was
    already reported is skipped, since the percentages would differ only
    slightly. Cost: O(pairs log pairs).
    """
    by_file: dict[int, list[SimilarPair]] = {}
    files: dict[int, SimilarFile] = {}
    for p in pairs:
        by_file.setdefault(p.a.id, []).append(p)
        by_file.setdefault(p.b.id, []).append(p)
        files[p.a.id], files[p.b.id] = p.a, p.b
    seen: set[frozenset[int]] = set()
    out: list[SimilarGroup] = []
    for fid in sorted(by_file, key=lambda i: files[i].path):
        ref = files[fid]
        members = [
            GroupMember(p.other(ref), p.percent_for(ref), p.score, p.identical)
            for p in by_file[fid]
        ]
        key = frozenset([fid, *(m.file.id for m in members)])
        if key in seen:
            continue
        seen.add(key)
        members.sort(key=lambda m: (-m.score, m.file.path))
        out.append(SimilarGroup(ref, tuple(members)))
    return out


# --- the driver -------------------------------------------------------------------


def _scope(
    con: Any, pid: int, roots: Sequence[str], groups: bool = True
) -> dict[str, npt.NDArray[Any]]:
    """The indexed files under ``roots`` (params ``pid``), sorted by id, with a group code.

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
    cols = con.execute(
        "SELECT id, path, coalesce(origin, path) AS origin, "
        "coalesce(CAST(view AS VARCHAR), 'raw') AS view, size, kind, n_fp, n_distinct, digest"
        f"{grp} "
        f"FROM files WHERE params_id = ? AND ({' OR '.join(where) or 'false'})",
        [pid, *args],
    ).fetchnumpy()
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


def _run_key(pid: int, generation: str, roots: Sequence[str], max_df: int) -> str:
    return json.dumps(
        {
            "params": pid,
            "generation": generation,
            "roots": sorted(os.path.abspath(r) for r in roots),
            "max_df": max_df,
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
    on_warning: WarningSink = ignore_warning,
    progress: Progress | None = None,
) -> SimilarResult:
    """All groups of similar files under ``roots`` (the paper's section 4).

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
) -> SimilarResult:
    """:func:`find_similar` once its options are checked and its workers forked."""
    from sif.index import open_store
    from sif.index.duck import DuckStore

    fp_params = params.params if isinstance(params, ParamSet) else params
    if not options.exact:  # --exact may need to read and store scores: the full path
        reused = _reuse_unchanged(
            root_list, index, params, options, walk, jobs, on_warning, progress, stats
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
        on_warning=on_warning,
        progress=progress,
    )
    stats.seconds_index = time.perf_counter() - started
    # The walk the index now matches, unless a file failed (the next run must retry it).
    digest = stats.index.walk_digest if not stats.index.failed else None
    store = open_store(index)
    try:
        if not isinstance(store, DuckStore):  # pragma: no cover - the factory's only type
            raise IndexUnusable("sif similar needs the on-disk index")
        con = store.catalog()
        found = _params_id(store, params)
        if found is None:
            return _empty(options, stats, started)
        pid = found
        files = _scope(con, pid, root_list)
        stats.files = len(files["id"])
        key = _run_key(pid, _meta(con, "generation"), root_list, options.max_df)
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
            ids = np.asarray(files["id"], dtype=np.uint32)
            values, fids, grp = _rows(
                store.root, con, pid, ids, np.asarray(files["grp"], dtype=np.uint8)
            )
            stats.fingerprints = len(values)
            cols, stats.stopped = collate(con, values, fids, grp, options.max_df, partitions)
            for k in ("exact_ab", "exact_ba"):
                cols[k] = np.full(len(cols["a"]), np.nan)
            _exact_small(cols, files, fp_params, stats, on_warning, progress, pool, jobs)
            _store_pairs(con, key, cols, stats.stopped, digest)
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
        walked, _ = parallel_walk(
            root_list, walk or WalkOptions(), warnings.append, pool, jobs, progress
        )
    finally:
        if pool is not None:
            pool.shutdown()
    digest = walked.digest()
    try:
        store = DuckStore(location, read_only=True)
    except IndexUnusable:
        return None
    try:
        con = store.catalog()
        pid = _params_id(store, params)
        if pid is None:
            return None
        key = _run_key(pid, _meta(con, "generation"), root_list, options.max_df)
        run = _stored_run(con, key)
        if run is None or run[1] != digest:
            return None
        files = _scope(con, pid, root_list, groups=False)
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


def _score(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    options: SimilarOptions,
    params: FingerprintParams,
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any = None,
    jobs: int = 1,
) -> list[SimilarPair]:
    """Scores, filters and threshold over all collated pairs (vectorised), then values."""
    window = params.window
    ids = np.asarray(files["id"], dtype=np.uint32)
    ia = np.searchsorted(ids, cols["a"])
    ib = np.searchsorted(ids, cols["b"])
    # A pair whose file left the scope (stored pairs cover exactly the scope: none do).
    ok = (ia < len(ids)) & (ib < len(ids))
    ia, ib = np.minimum(ia, len(ids) - 1), np.minimum(ib, len(ids) - 1)
    ok &= (ids[ia] == cols["a"]) & (ids[ib] == cols["b"])
    shared = cols["shared"].astype(np.float64)
    a_in_b, b_in_a, jac = pair_estimates(
        shared,
        files["size"][ia],
        files["n_fp"][ia],
        files["n_distinct"][ia],
        files["size"][ib],
        files["n_fp"][ib],
        files["n_distinct"][ib],
        params,
    )
    est = 100.0 * np.maximum(a_in_b, b_in_a)
    size = files["size"].astype(np.float64)
    if options.size_ratio is not None:
        sa, sb = size[ia], size[ib]
        ok &= np.maximum(sa, sb) <= options.size_ratio * np.maximum(np.minimum(sa, sb), 1.0)
    if options.same_suffix:
        suffix = np.array(
            [os.path.splitext(os.fsdecode(bytes(p)))[1] for p in files["path"]], dtype=object
        )
        ok &= suffix[ia] == suffix[ib]
    exact_ab, exact_ba = cols["exact_ab"], cols["exact_ba"]
    t = options.threshold
    if options.exact:
        # Candidates from a lower, sampled threshold; the exact score decides.
        cand = ok & (est >= EXACT_CANDIDATE_SHARE * t) & (cols["shared"] >= 1)
        todo = np.flatnonzero(cand & np.isnan(exact_ab))
        if len(todo):
            _exact(todo, ia, ib, files, window, cols, stats, on_warning, progress, pool, jobs)
        score = 100.0 * np.maximum(exact_ab, exact_ba)
        keep = cand & ~np.isnan(score) & (score >= t)
        # A file that could not be read keeps its sampled score.
        keep |= cand & np.isnan(score) & (est >= t) & (cols["shared"] >= options.min_shared)
    else:
        # An exact score already known (small pairs, a past --exact run) decides.
        known = ~np.isnan(exact_ab) & ~np.isnan(exact_ba)
        with np.errstate(invalid="ignore"):
            exact_keep = 100.0 * np.maximum(exact_ab, exact_ba) >= t
        keep = ok & np.where(known, exact_keep, (est >= t) & (cols["shared"] >= options.min_shared))
    with np.errstate(divide="ignore", invalid="ignore"):
        nfa = np.maximum(files["n_fp"][ia], 1).astype(np.float64)
        nfb = np.maximum(files["n_fp"][ib], 1).astype(np.float64)
        pa = 100.0 * cols["hits_b"] / nfa
        pb = 100.0 * cols["hits_a"] / nfb
    described: dict[int, SimilarFile] = {}

    def describe(i: int) -> SimilarFile:
        f = described.get(i)
        if f is None:
            f = SimilarFile(
                id=int(ids[i]),
                path=os.fsdecode(bytes(files["path"][i])),
                size=int(files["size"][i]),
                kind=str(files["kind"][i]),
                n_fp=int(files["n_fp"][i]),
                n_distinct=int(files["n_distinct"][i]),
                digest=bytes(files["digest"][i]),
            )
            described[i] = f
        return f

    out: list[SimilarPair] = []
    for j in np.flatnonzero(keep):
        fa, fb = describe(int(ia[j])), describe(int(ib[j]))
        ex_ab = None if np.isnan(exact_ab[j]) else float(exact_ab[j])
        ex_ba = None if np.isnan(exact_ba[j]) else float(exact_ba[j])
        p = SimilarPair(
            fa,
            fb,
            int(cols["shared"][j]),
            float(a_in_b[j]),
            float(b_in_a[j]),
            float(jac[j]),
            float(pa[j]),
            float(pb[j]),
            ex_ab,
            ex_ba,
        )
        if fb.path < fa.path:  # a before b by path, for stable reports
            p = SimilarPair(
                fb, fa, p.shared, p.b_in_a, p.a_in_b, p.jaccard, pb[j], pa[j], ex_ba, ex_ab
            )
        out.append(p)
    out.sort(key=lambda p: (-p.score, p.a.path, p.b.path))
    return out


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
