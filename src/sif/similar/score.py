"""Scores, filters and the threshold over all collated pairs (vectorised)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.evidence import (
    CANDIDATE_Z,
    FAST_LOWER_SHARE,
    FAST_MIN_SHARED,
    INTERVAL_Z,
    score_bounds,
    share_bounds,
)
from sif.events import Progress, WarningSink
from sif.fingerprint import FingerprintParams
from sif.similar.estimate import pair_estimates
from sif.similar.exact import (
    _exact,
)
from sif.similar.model import SimilarOptions, SimilarStats

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Estimates:
    """Row positions, the filters' verdict and the sampled scores of all collated pairs."""

    ia: I64
    ib: I64
    ok: npt.NDArray[np.bool_]
    a_in_b: F64
    b_in_a: F64
    jaccard: F64
    est: F64


def _estimates(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    options: SimilarOptions,
    params: FingerprintParams,
) -> _Estimates:
    """Sampled scores and filters (size ratio, suffix) over all pairs. Vectorised."""
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
    return _Estimates(ia, ib, ok, a_in_b, b_in_a, jac, est)


def pending_exact(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    options: SimilarOptions,
    params: FingerprintParams,
    e: _Estimates | None = None,
) -> I64:
    """The rows of the pairs to score exactly that have no exact score yet.

    Under ``exact`` (the default): every pair whose sampled score could reach
    the threshold (its 97.7% upper bound, :data:`CANDIDATE_Z`, does), and
    every pair of the small-file pass (:mod:`sif.similar.smallpass`); none
    under ``--fast``. Pure; O(pairs).
    """
    if not options.exact:
        return np.empty(0, dtype=np.int64)
    e = e or _estimates(cols, files, options, params)
    shared = cols["shared"]
    _, high = score_bounds(shared, e.est, CANDIDATE_Z)
    cand = e.ok & (high >= options.threshold) & (shared >= max(options.min_shared, 1))
    # A pair of the small-file pass (no shared fingerprint; its own bound chose it).
    cand |= e.ok & (shared == 0)
    return np.flatnonzero(cand & np.isnan(cols["exact_ab"]))


#: Collated pairs scored at a time: the score's temporaries (about 20 arrays a pair)
#: exist for one slice, not for all the pairs (10 M pairs would hold 1.6 GB of them;
#: a slice of 1 M, 160 MB).
SCORE_SLICE = 1 << 18


def _slice(cols: dict[str, npt.NDArray[Any]], lo: int, hi: int) -> dict[str, npt.NDArray[Any]]:
    return {k: v[lo:hi] for k, v in cols.items()}


def _spans(n: int) -> list[tuple[int, int]]:
    return [(lo, min(n, lo + SCORE_SLICE)) for lo in range(0, n, SCORE_SLICE)] or [(0, 0)]


def score_exact(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    options: SimilarOptions,
    params: FingerprintParams,
    stats: SimilarStats,
    on_warning: WarningSink,
    progress: Progress,
    pool: Any = None,
    jobs: int = 1,
    engine: Any = None,
) -> None:
    """The exact scores of the pairs to score (:func:`pending_exact`), into ``cols``: read
    and scored together (:func:`sif.similar.exact._exact`: each larger file once), on
    ``pool``'s workers and this process, or ``engine``'s workers. The last use of
    either in a run."""
    todo = np.concatenate(
        [
            lo + pending_exact(_slice(cols, lo, hi), files, options, params)
            for lo, hi in _spans(len(cols["a"]))
        ]
    )
    if not len(todo):
        return
    # The files' rows of the pairs to score only, 4 bytes each (every estimate of a
    # million candidates: 130 bytes each); the scores go straight into ``cols``.
    ids = np.asarray(files["id"], dtype=np.uint32)
    ia = np.empty(len(todo), dtype=np.int32)
    ib = np.empty(len(todo), dtype=np.int32)
    for lo in range(0, len(todo), SCORE_SLICE):
        part = todo[lo : lo + SCORE_SLICE]
        ia[lo : lo + SCORE_SLICE] = np.searchsorted(ids, cols["a"][part])
        ib[lo : lo + SCORE_SLICE] = np.searchsorted(ids, cols["b"][part])
    _exact(
        todo,
        ia,
        ib,
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


def decide(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    options: SimilarOptions,
    params: FingerprintParams,
    stats: SimilarStats,
) -> dict[str, npt.NDArray[Any]]:
    """The decision over all collated pairs, a slice of :data:`SCORE_SLICE` pairs at a
    time (:func:`_decide`): the columns of the kept pairs' :class:`PairTable`."""
    kept = [
        _decide(_slice(cols, lo, hi), files, options, params, stats)
        for lo, hi in _spans(len(cols["a"]))
    ]
    # A column at a time, each slice's part let go once joined (not the kept pairs twice).
    joined = {k: np.concatenate([c.pop(k) for c in kept]) for k in list(kept[0])}
    del kept
    return joined


def _decide(
    cols: dict[str, npt.NDArray[Any]],
    files: dict[str, npt.NDArray[Any]],
    options: SimilarOptions,
    params: FingerprintParams,
    stats: SimilarStats,
) -> dict[str, npt.NDArray[Any]]:
    """The columns of :class:`PairTable` for the pairs of ``cols`` that pass."""
    e = _estimates(cols, files, options, params)
    ia, ib, ok, est = e.ia, e.ib, e.ok, e.est
    a_in_b, b_in_a, jac = e.a_in_b, e.b_in_a, e.jaccard
    exact_ab, exact_ba = cols["exact_ab"], cols["exact_ba"]
    t = options.threshold
    shared_n = cols["shared"]
    # An exact score, when known (this run's, a past run's, a pair of small or identical
    # tiny files), decides; else the estimate, with its evidence (a file that could not
    # be read, or changed since it was indexed, keeps its sampled score).
    known = ~np.isnan(exact_ab) & ~np.isnan(exact_ba)
    with np.errstate(invalid="ignore"):
        exact_keep = 100.0 * np.maximum(exact_ab, exact_ba) >= t
    low, high = score_bounds(shared_n, est, INTERVAL_Z)
    # A score taken on a window sample (two large files: exactsets.SAMPLE_FROM) decides as an
    # exact one, and is shown as an estimate, with its binomial interval.
    exact_n = cols.get("exact_n")
    if exact_n is None:
        exact_n = np.zeros(len(known), dtype=np.uint32)
    sampled = known & (exact_n > 0)
    evidence = (shared_n >= max(options.min_shared, FAST_MIN_SHARED)) & (
        low >= FAST_LOWER_SHARE * t
    )
    keep = ok & np.where(known, exact_keep, (est >= t) & evidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        nfa = np.maximum(files["n_fp"][ia], 1).astype(np.float64)
        nfb = np.maximum(files["n_fp"][ib], 1).astype(np.float64)
        pa = 100.0 * cols["hits_b"] / nfa
        pb = 100.0 * cols["hits_a"] / nfb
    # Identical files without fingerprints (_identical_unfingerprinted): all of each other.
    # (The other pairs sharing no fingerprint, a small file held by another, found by the
    # small-file pass, estimate 0: their score is exact or they are left out.)
    copies = (cols["shared"] == 0) & (exact_ab == 1.0) & (exact_ba == 1.0)
    if copies.any():
        a_in_b, b_in_a, jac = (np.where(copies, 1.0, x) for x in (a_in_b, b_in_a, jac))
        pa, pb = np.where(copies, 100.0, pa), np.where(copies, 100.0, pb)
    if sampled.any():
        s_lo, s_hi = share_bounds(np.maximum(exact_ab, exact_ba), exact_n, INTERVAL_Z)
        low, high = np.where(sampled, s_lo, low), np.where(sampled, s_hi, high)
        a_in_b, b_in_a = np.where(sampled, exact_ab, a_in_b), np.where(sampled, exact_ba, b_in_a)
        exact_ab = np.where(sampled, np.nan, exact_ab)
        exact_ba = np.where(sampled, np.nan, exact_ba)
        known = known & ~sampled
    stats.estimated += int(np.count_nonzero(keep & ~known))
    stats.sampled += int(np.count_nonzero(keep & sampled))
    j = np.flatnonzero(keep)
    return {
        "ia": ia[j],
        "ib": ib[j],
        "shared": shared_n[j],
        "a_in_b": a_in_b[j],
        "b_in_a": b_in_a[j],
        "jaccard": jac[j],
        "pa": pa[j],
        "pb": pb[j],
        "exact_ab": exact_ab[j],
        "exact_ba": exact_ba[j],
        "low": np.where(known, np.nan, low)[j],
        "high": np.where(known, np.nan, high)[j],
    }
