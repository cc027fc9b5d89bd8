"""Evidence: how far a sampled score can be from the truth, from how many fingerprints it rests on.

A sampled score counts shared fingerprints, each standing for about
``1 / rate`` shared windows (the sparser file's density): the count is close
to a Poisson count, and the score scales with it. :func:`score_bounds` gives
the interval that ``--fast`` shows and the upper bound that picks the pairs
to score exactly. Pure and vectorised.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

#: An estimate (``--fast``, or a pair whose file changed since it was indexed) needs at
#: least this many shared fingerprints in ``sif similar``: one never makes a pair
#: similar (``sif query`` asks 2 by default, ``--min-shared``).
FAST_MIN_SHARED = 2
#: ... and the lower end of its 90% interval (:data:`INTERVAL_Z`) at this share of the
#: threshold or more.
FAST_LOWER_SHARE = 0.5
#: One-sided confidence of the upper bound that picks the pairs to score exactly: a
#: pair whose upper bound is under the threshold is left out unread. 97.7%: z = 2.
#: Winnowing picks more evenly than a Poisson sample, so the bound loses fewer pairs
#: than its confidence says. Measured at T = 25% against the exact truth (all pairs of
#: 23 sdists and of 18 release histories; on Linux 6.1 fs+net+sound, the pairs found
#: at 99%): going from z = 2.326 (99%) to 2 keeps 10,799 of the 10,800 positive pairs
#: and scores 16% fewer candidates on Linux (31,878 instead of 37,998); z = 1.645
#: (95%) would score 32% fewer but lose 11 positives.
CANDIDATE_Z = 2.0
#: One-sided confidence of the interval shown with an estimate (``--fast``, or a file
#: that changed since it was indexed): 90%, z = 1.28, both ends.
INTERVAL_Z = 1.282


def poisson_bounds(k: npt.ArrayLike, z: float) -> tuple[F64, F64]:
    """(lower, upper) one-sided ``z`` bounds of the mean of a Poisson count ``k``.

    Wilson and Hilferty's approximation of the exact (Garwood) bounds:
    ``k (1 - 1/(9k) - z/(3 sqrt k))^3`` and ``(k+1) (1 - 1/(9(k+1)) + z/(3
    sqrt(k+1)))^3``; within 1% of the exact ones from k = 1. The lower bound
    of 0 is 0. Vectorised; O(n).
    """
    kk = np.asarray(k, dtype=np.float64)
    safe = np.maximum(kk, 1.0)
    lo = safe * np.maximum(1.0 - 1.0 / (9.0 * safe) - z / (3.0 * np.sqrt(safe)), 0.0) ** 3
    k1 = kk + 1.0
    hi = k1 * (1.0 - 1.0 / (9.0 * k1) + z / (3.0 * np.sqrt(k1))) ** 3
    return np.where(kk > 0, lo, 0.0), hi


def score_bounds(shared: npt.ArrayLike, score: npt.ArrayLike, z: float) -> tuple[F64, F64]:
    """(lower, upper) bounds of sampled scores (in percent) resting on ``shared`` fingerprints.

    A score is ``shared / (rate * windows)``: the shared windows seen through a
    sample that keeps each with probability ``rate`` (the sparser file's
    density), so ``shared`` is close to a Poisson count and the score scales
    with it; winnowing picks more evenly than chance, so the bounds are on
    the safe side, and the upper one counts one more fingerprint, lost at a
    shared region's edges (a window picked in one file loses to a neighbour
    outside the region in the other). Capped at 100. One fingerprint
    (``shared`` 1) at a score of 100 gives [9.9, 100] at 90%: never a
    believable 100. Vectorised; O(n).
    """
    k = np.asarray(shared, dtype=np.float64)
    s = np.asarray(score, dtype=np.float64)
    lo, hi = poisson_bounds(k, z)
    per = np.where(k > 0, s / np.maximum(k, 1.0), 0.0)  # the score of one fingerprint
    upper = np.where(k > 0, per * hi, s)
    return np.minimum(per * lo, s), np.minimum(np.maximum(upper, s), 100.0)


def share_bounds(share: npt.ArrayLike, n: npt.ArrayLike, z: float) -> tuple[F64, F64]:
    """(lower, upper) Wilson bounds, in percent, of a binomial ``share`` (a fraction) of ``n``.

    The interval of a score taken on a window sample (:data:`sif.core.exactsets.SAMPLE_FROM`):
    the intersection's values over the ``n`` values of the smaller file's
    sample, each in the other file's sample or not. The sample is a share of
    the whole set drawn without replacement, so the binomial bounds are on the
    safe side. ``n`` 0 gives [share, share]. Vectorised; O(n).
    """
    p = np.clip(np.asarray(share, dtype=np.float64), 0.0, 1.0)
    m = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        m1 = np.maximum(m, 1.0)
        z2 = z * z / m1
        mid = (p + z2 / 2) / (1 + z2)
        half = z * np.sqrt(p * (1 - p) / m1 + z2 / (4 * m1)) / (1 + z2)
    lo = np.where(m > 0, np.clip(mid - half, 0.0, p), p)
    hi = np.where(m > 0, np.clip(mid + half, p, 1.0), p)
    return 100.0 * lo, 100.0 * hi
