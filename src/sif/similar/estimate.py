"""Estimated containment and resemblance of pairs from their shared fingerprints."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sif.core.evidence import CANDIDATE_Z, INTERVAL_Z, poisson_bounds, score_bounds
from sif.core.windows import distinct_windows
from sif.fingerprint import FingerprintParams

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

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


__all__ = [
    "CANDIDATE_Z",
    "INTERVAL_Z",
    "pair_estimates",
    "poisson_bounds",
    "sampling_tier",
    "score_bounds",
]
