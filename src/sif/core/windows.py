"""Every window of a query, and the containment estimates they give (Manber, section 5).

Winnowing picks a fingerprint by comparing neighbouring windows, so a window
that survived an edit may be picked in the query and lose to a changed
neighbour in the original: the share of the query's fingerprints found in a
file (the paper's percentage) runs low, about 10 points at the paper's
experiment (36% of the windows survive, 26% reported). The estimate here
does not depend on the query's selection at all:

- the query's side is *every* window: the value each window would be stored
  as if it were selected (:func:`window_values`);
- the indexed file B's side is its stored fingerprints, a sample of its
  windows chosen by B's content alone. A stored value of B is among the
  query's windows exactly when that window of B survived in the query
  (up to 32-bit collisions), so ``hits / n_distinct(B)`` is an unbiased
  estimate of C(B in Q), the share of B's distinct windows found in Q,
  with the variance of a binomial over ``n_distinct(B)`` draws;
- C(Q in B) = |S(Q) ∩ S(B)| / |S(Q)| follows by scaling with the number of
  distinct windows of each side, estimated alike for both files as
  ``(size - w + 1) * n_distinct / n_fp`` (repeated content lowers it).

A long query would mean millions of lookups (0.7 s a million at 20 M
indexed rows), so at most :data:`MAX_LOOKUPS` distinct values are kept:
those whose low ``level`` bits are 0, ``level`` raised until they fit
(adaptive sampling). The subset is defined by the value, so a window is in
it in the query exactly when it is in it in B; each of B's values is in it
with probability ``2^-level``, and the hits are scaled by ``2^level``.
The number of B's values in the subset is itself random (binomial), which
adds to the error: about 6% of the estimate when B is as long as the query
(measured on a 4 MB query: 41.8% where 36.9% of the windows survived, B
holding 264 values in the subset where 244 were expected). Counting each
file's values by trailing zero bits at index time would remove that term.

Pure: arrays in, arrays out, no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.rolling import U8, U64, karp_rabin, window_hashes

U32 = npt.NDArray[np.uint32]
F64 = npt.NDArray[np.float64]

#: Most distinct query values looked up: about 45 ms at 20 M indexed rows. An
#: indexed file as long as the query then keeps at least 2^16 / 256 = 256 of its
#: fingerprints in the sample: a standard error of at most 3 points.
MAX_LOOKUPS = 1 << 16


def distinct(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The distinct values of ``values``, sorted: ``np.unique`` as a sort and a mask.

    The same result; ``np.unique`` imports ``numpy.ma`` on its first call (numpy
    2), several ms of a short-lived process's start, and costs more. O(n log n).
    """
    s = np.sort(values)
    keep = np.empty(len(s), dtype=bool)
    keep[:1] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def in_sorted(values: npt.NDArray[Any], table: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """``np.isin(values, table)`` for a sorted ``table``: a binary search each. O(n log m)."""
    if len(table) == 0:
        return np.zeros(len(values), dtype=bool)
    pos = np.minimum(np.searchsorted(table, values), len(table) - 1)
    return np.asarray(table[pos] == values)


def fold32(values: U64) -> U32:
    """64-bit (or narrower) fingerprint values -> well-mixed 32-bit stored values.

    The splitmix64 finaliser, then the high half: ``winnow`` values are
    already mixed, but ``sif94`` values hold 22-24 bits and ``anchors``
    values are structured, and the index buckets on the high bits, so all
    are mixed alike. Pure and vectorised; O(n).
    """
    z = values.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(32)).astype(np.uint32)


def window_values(
    data: U8,
    scheme: str,
    window: int,
    k: int | None = None,
    modulus_bits: int | None = None,
) -> U32:
    """The stored value of every window of ``data`` that ``scheme`` could select.

    ``winnow`` and ``anchors`` store :func:`fold32` of
    :func:`sif.core.rolling.window_hashes`, so every window is a candidate;
    ``sif94`` stores only windows whose Karp-Rabin value modulo
    ``2^modulus_bits`` has its low ``k`` bits 0 (about one in ``2^k``), as
    that value shifted right by ``k``. (A small file indexed with
    ``min_fingerprints`` under ``sif94`` may hold windows with fewer low zero
    bits: those are not looked up, and its estimate runs low.) Cost: O(n),
    about a dozen passes over ``uint64`` arrays.
    """
    if scheme != "sif94":
        return fold32(window_hashes(data, window))
    h = karp_rabin(data, window)
    bits = int(modulus_bits or 30)
    if bits < 64:
        h &= np.uint64((1 << bits) - 1)
    shift = np.uint64(int(k or 0))
    low = np.uint64((1 << int(k or 0)) - 1)
    return fold32(h[(h & low) == 0] >> shift)


class WindowSample:
    """The distinct window values of a stream, sampled down to :data:`MAX_LOOKUPS`.

    Feed blocks of values with :meth:`add`; :attr:`level` is the number of
    low bits that must be 0 for a value to be kept, raised whenever more than
    ``cap`` distinct values are held. Memory: O(cap) besides the block.
    """

    def __init__(self, cap: int = MAX_LOOKUPS) -> None:
        self.cap = cap
        self.level = 0
        self._parts: list[U32] = []
        self._held = 0

    def add(self, values: U32) -> None:
        """Keep the values of ``values`` that are in the current subset."""
        if self.level:
            values = values[(values & np.uint32((1 << self.level) - 1)) == 0]
        self._parts.append(values)
        self._held += len(values)
        if self._held > 2 * self.cap:
            self._squeeze()

    def _squeeze(self) -> None:
        kept = distinct(np.concatenate(self._parts)) if self._parts else np.empty(0, np.uint32)
        while len(kept) > self.cap:
            self.level += 1
            kept = kept[(kept & np.uint32((1 << self.level) - 1)) == 0]
        self._parts = [kept]
        self._held = len(kept)

    def values(self) -> U32:
        """The distinct values kept, sorted."""
        self._squeeze()
        return self._parts[0]

    @property
    def scale(self) -> int:
        """``2^level``: one kept value stands for this many."""
        return 1 << self.level


def distinct_windows(
    size: npt.ArrayLike, n_fp: npt.ArrayLike, n_distinct: npt.ArrayLike, window: int
) -> F64:
    """Estimated distinct windows of a file: ``(size - w + 1) * n_distinct / n_fp``.

    Repeated content (a file holding two copies of a text) repeats its
    fingerprints, so the ratio of distinct to all fingerprints scales the
    window count down alike. At least 1.
    """
    windows = np.maximum(np.asarray(size, dtype=np.float64) - window + 1, 1.0)
    ratio = np.asarray(n_distinct, dtype=np.float64) / np.maximum(np.asarray(n_fp, np.float64), 1)
    return np.asarray(np.maximum(windows * np.where(ratio > 0, ratio, 1.0), 1.0), np.float64)


def containment(
    hits: F64,
    scale: int,
    n_distinct: F64,
    file_windows: F64,
    query_windows: float,
) -> tuple[F64, F64]:
    """Estimates of (C(Q in B), C(B in Q)) for indexed files B, as fractions in [0, 1].

    ``hits``: the distinct stored values of each B found among the query's
    sampled windows; ``scale``: :attr:`WindowSample.scale`; ``n_distinct``:
    B's distinct stored values; ``file_windows``, ``query_windows``:
    :func:`distinct_windows` of B and of the query. C(B in Q) is
    ``scale * hits / n_distinct`` (unbiased; binomial standard error
    ``sqrt(c (1 - c) / n_distinct)``), and C(Q in B) is it times
    ``file_windows / query_windows``; both are capped at 1. Vectorised.
    """
    b_in_q = np.minimum(scale * hits / np.maximum(n_distinct, 1.0), 1.0)
    q_in_b = np.minimum(b_in_q * file_windows / max(query_windows, 1.0), 1.0)
    return q_in_b, b_in_q
