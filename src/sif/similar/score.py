"""Scores, filters and the threshold over all collated pairs (vectorised)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.typing as npt

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

#: ``exact``: candidates are the pairs whose sampled score reaches this share of the
#: threshold, with at least one shared fingerprint (the exact score then decides).
EXACT_CANDIDATE_SHARE = 0.5


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
        # Candidates from a lower, sampled threshold are scored exactly.
        cand = ok & (est >= EXACT_CANDIDATE_SHARE * t) & (cols["shared"] >= 1)
        todo = np.flatnonzero(cand & np.isnan(exact_ab))
        if len(todo):
            _exact(todo, ia, ib, files, window, cols, stats, on_warning, progress, pool, jobs)
    # An exact score, when known (this run's, a past --exact run's, a pair of small or
    # identical tiny files), decides; else the estimate (a file that could not be read
    # keeps its sampled score).
    known = ~np.isnan(exact_ab) & ~np.isnan(exact_ba)
    with np.errstate(invalid="ignore"):
        exact_keep = 100.0 * np.maximum(exact_ab, exact_ba) >= t
    keep = ok & np.where(known, exact_keep, (est >= t) & (cols["shared"] >= options.min_shared))
    with np.errstate(divide="ignore", invalid="ignore"):
        nfa = np.maximum(files["n_fp"][ia], 1).astype(np.float64)
        nfb = np.maximum(files["n_fp"][ib], 1).astype(np.float64)
        pa = 100.0 * cols["hits_b"] / nfa
        pb = 100.0 * cols["hits_a"] / nfb
    # Identical files without fingerprints (_identical_unfingerprinted): all of each other.
    copies = cols["shared"] == 0
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
        )
        if fb.path < fa.path:  # a before b by path, for stable reports
            p = SimilarPair(
                fb, fa, p.shared, p.b_in_a, p.a_in_b, p.jaccard, pb[j], pa[j], ex_ba, ex_ab
            )
        out.append(p)
    out.sort(key=lambda p: (-p.score, p.a.path, p.b.path))
    return out
