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
)
from sif.events import Progress, WarningSink
from sif.fingerprint import FingerprintParams
from sif.similar.estimate import pair_estimates
from sif.similar.exact import (
    _exact,
)
from sif.similar.model import (
    SimilarFile,
    SimilarOptions,
    SimilarPair,
    SimilarStats,
)

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
    engine: Any = None,
) -> list[SimilarPair]:
    """Scores, filters and threshold over all collated pairs (vectorised), then values."""
    ids = np.asarray(files["id"], dtype=np.uint32)
    e = _estimates(cols, files, options, params)
    ia, ib, ok, est = e.ia, e.ib, e.ok, e.est
    a_in_b, b_in_a, jac = e.a_in_b, e.b_in_a, e.jaccard
    exact_ab, exact_ba = cols["exact_ab"], cols["exact_ba"]
    t = options.threshold
    shared_n = cols["shared"]
    todo = pending_exact(cols, files, options, params, e)
    if len(todo):
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
    # An exact score, when known (this run's, a past run's, a pair of small or identical
    # tiny files), decides; else the estimate, with its evidence (a file that could not
    # be read, or changed since it was indexed, keeps its sampled score).
    known = ~np.isnan(exact_ab) & ~np.isnan(exact_ba)
    with np.errstate(invalid="ignore"):
        exact_keep = 100.0 * np.maximum(exact_ab, exact_ba) >= t
    low, high = score_bounds(shared_n, est, INTERVAL_Z)
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
            None if known[j] else float(low[j]),
            None if known[j] else float(high[j]),
        )
        if fb.path < fa.path:  # a before b by path, for stable reports
            p = SimilarPair(
                fb,
                fa,
                p.shared,
                p.b_in_a,
                p.a_in_b,
                p.jaccard,
                pb[j],
                pa[j],
                ex_ba,
                ex_ab,
                p.score_low,
                p.score_high,
            )
        stats.estimated += not known[j]
        out.append(p)
    out.sort(key=lambda p: (-p.score, p.a.path, p.b.path))
    return out
