"""Choosing which windows become fingerprints: ``sif94`` mod-sampling and winnowing.

Both schemes look at every ``w``-byte window (Manber, section 2: "we need to
consider all 50-byte substrings, including all overlaps") and keep a few:

``sif94``, exactly the paper's second method (section 2)
    Karp-Rabin modulo ``M = 2^30`` (``2^31``, ``2^32`` "if the number of
    files is very large"); keep the windows whose low ``k = 8`` bits are 0;
    no overlaps ("once a fingerprint is identified, the text is shifted to
    the end of it"); store the value shifted right by ``k``. After a kept
    window the next candidate is at least ``w`` bytes on, so on random data
    the mean gap is ``w + 2^k - 1`` bytes: density ``1 / (w + 2^k - 1)``,
    one per 305 bytes with the paper's numbers, not one per 256. Degenerate
    windows are kept as the paper keeps them (its 50 underscores).

``winnow`` (Schleimer, Wilkerson and Aiken, SIGMOD 2003)
    The well-mixed 64-bit value of every window (:func:`sif.core.rolling.mix64`
    of its Karp-Rabin hash modulo ``2^64``); in every run of ``W`` consecutive
    windows (a winnowing window) the minimum is kept, the rightmost one on a
    tie, each position once. On random data the density is ``2 / (W + 1)``;
    with ``W = 2^(k+1) - 1`` it is ``2^-k``, the paper's one per 256 bytes for
    ``k = 8`` (``W = 511``). Guarantee: the winnowing windows inside any
    shared run of ``w + W - 1`` bytes are identical in both files, so both
    keep their minimum: any shared run of at least ``w + W - 1`` bytes (560
    with the defaults) that holds a non-degenerate window yields a shared
    fingerprint. Mod-sampling gives no such guarantee: a long passage may
    hold no window whose low ``k`` bits are 0.

Degenerate windows (never kept by ``winnow``, nor by the anchors scheme)
    A window is degenerate when it is periodic with a period of at most
    ``max_period`` bytes (8 by default): ``x[j] == x[j + q]`` for every ``j``
    for some ``q <= max_period``. Period 1 is a run of one byte (the paper's
    50 underscores, runs of NULs in binaries); periods up to 8 cover ``-=-=``
    rules, ``"\\0\\0\\0\\x01"`` tables, repeated short words. Such windows
    occur in many unrelated files and say nothing about where they came
    from. Windows with merely few distinct bytes are not excluded, since DNA
    (four letters) or bit-strings are informative. Because a period ``q``
    implies every multiple of ``q`` below ``w``, it is enough to test the
    periods in ``(max_period / 2, max_period]``; ``max_period`` is at most
    ``w // 2`` (longer periods would exclude every window), 0 disables it.

Everything here is pure: arrays in, arrays out, no I/O. The winnowing kernel
is compiled with numba: a sequential minimum over a sliding window has no
fast numpy form, and the kernel (rolling hash, mixing, selection and a lazy
degeneracy test in one pass) runs at about 2.7 ns a byte on one core.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from sif.core.rolling import (
    BASE,
    FMIX_C1,
    FMIX_C2,
    MODULUS_BITS,
    U8,
    U64,
    WINDOW,
    karp_rabin,
)

I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]

#: The paper's selection parameter ``k`` (section 2): keep values whose low k bits are 0.
K = 8
#: Default longest period of a degenerate window (see the module docstring).
MAX_PERIOD = 8
#: Reserved value: "no usable window here"; real values equal to it are moved to ``NONE - 1``.
NONE = np.uint64(0xFFFFFFFFFFFFFFFF)


def winnow_window_for(k: int) -> int:
    """The winnowing window ``W = 2^(k+1) - 1`` whose density ``2/(W+1)`` is ``2^-k``."""
    return (1 << (k + 1)) - 1


def winnow_density(winnow_window: int) -> float:
    """Expected fingerprints per byte of ``winnow`` on random data: ``2 / (W + 1)``."""
    return 2.0 / (winnow_window + 1)


def sif94_density(window: int, k: int) -> float:
    """Expected fingerprints per byte of ``sif94`` on random data: ``1 / (w + 2^k - 1)``."""
    return 1.0 / (window + (1 << k) - 1)


def degenerate_mask(data: U8, window: int = WINDOW, max_period: int = MAX_PERIOD) -> BOOL:
    """Whether each of the ``len(data) - window + 1`` windows is degenerate.

    The reference definition, vectorised: for each tested period ``q``, a
    window is ``q``-periodic when its ``window - q`` byte comparisons with the
    byte ``q`` before all hold (a sliding count over a prefix sum). Cost:
    O(n * max_period / 2) time, 5 bytes a byte of memory per period.
    """
    m = len(data) - window + 1
    out = np.zeros(max(m, 0), dtype=bool)
    if m <= 0:
        return out
    for q in range(max_period // 2 + 1, max_period + 1):
        differ = np.empty(len(data) - q + 1, dtype=np.int32)
        differ[0] = 0
        np.cumsum(data[q:] != data[:-q], out=differ[1:])
        # Window i compares positions i+q .. i+w-1 with q before: entries i .. i+w-q-1.
        out |= differ[window - q : window - q + m] == differ[:m]
    return out


def degenerate_at(
    data: U8, starts: I64, window: int = WINDOW, max_period: int = MAX_PERIOD
) -> BOOL:
    """Whether the windows starting at ``starts`` are degenerate (same test, gathered).

    Cost: O(len(starts) * window * max_period / 2); cheap for sparse starts.
    """
    out = np.zeros(len(starts), dtype=bool)
    if len(starts) == 0 or max_period == 0:
        return out
    windows = data[starts[:, None] + np.arange(window)]
    for q in range(max_period // 2 + 1, max_period + 1):
        out |= (windows[:, q:] == windows[:, :-q]).all(axis=1)
    return out


# --- sif94 ------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _non_overlapping(candidates: I64, window: int, first: int) -> I64:  # pragma: no cover
    # Greedy left to right, as the paper scans: keep a candidate, jump past its end.
    keep = np.empty(len(candidates), dtype=np.int64)
    n = 0
    nxt = first
    for c in candidates:
        if c >= nxt:
            keep[n] = c
            n += 1
            nxt = c + window
    return keep[:n]


def sif94_select(
    data: U8,
    window: int = WINDOW,
    k: int = K,
    modulus_bits: int = MODULUS_BITS,
    first: int = 0,
    base: int = BASE,
    shift: int | None = None,
) -> tuple[I64, U64]:
    """The paper's fingerprints of ``data``: ``(starts, values)``, starts ascending.

    A window starting at ``i >= first`` is kept when its Karp-Rabin value
    modulo ``2^modulus_bits`` has its low ``k`` bits 0 and it does not overlap
    the previously kept window; its value is shifted right by ``shift``
    (default ``k``; a small file sampled with a smaller ``k`` keeps the
    shift of the nominal one, so that values stay comparable). ``first``
    carries the non-overlap rule across blocks (the end of the last window
    kept). Cost: O(n), dominated by :func:`karp_rabin`.
    """
    h = karp_rabin(data, window, base)
    if modulus_bits < 64:
        h &= np.uint64((1 << modulus_bits) - 1)
    low = np.uint64((1 << k) - 1)
    candidates = np.flatnonzero((h & low) == 0).astype(np.int64)
    starts = _non_overlapping(candidates, window, first)
    return starts, h[starts] >> np.uint64(k if shift is None else shift)


# --- winnowing --------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _period(data: U8, i: int, window: int, lo: int, hi: int) -> int:  # pragma: no cover
    # The first tested period of window i, or 0; text fails on the first byte.
    for q in range(lo, hi + 1):
        periodic = True
        for r in range(i + q, i + window):
            if data[r] != data[r - q]:
                periodic = False
                break
        if periodic:
            return q
    return 0


@njit(cache=True, nogil=True, inline="always")
def _run_end(data: U8, i: int, window: int, q: int, m: int) -> int:  # pragma: no cover
    # Window i is q-periodic; window e+1 is too iff one more byte repeats the one q before.
    e = i
    while e + 1 < m and data[e + window] == data[e + window - q]:
        e += 1
    return e


@njit(cache=True, nogil=True)
def _rescan(
    data: U8,
    ring: U64,
    i: int,
    window: int,
    ww: int,
    lo: int,
    max_period: int,
    m: int,
    dead_until: int,
) -> tuple[int, np.uint64, int]:  # pragma: no cover
    """The rightmost non-degenerate minimum of windows ``i-ww+1 .. i``: (pos, value, dead_until).

    A tight loop finds the minimum, then only the winner is tested: a
    degenerate winner has its whole periodic run (inside the winnowing
    window, and ahead through ``dead_until``) retired, and the loop runs
    again; each pass retires a run, so passes are few.
    """
    none = np.uint64(0xFFFFFFFFFFFFFFFF)
    mask = ring.shape[0] - 1
    first = i - ww + 1
    while True:
        mval = none
        mpos = first
        for r in range(first, i + 1):
            y = ring[r & mask]
            if y <= mval:
                mpos = r
                mval = y
        if mval == none:
            return mpos, mval, dead_until
        q = _period(data, mpos, window, lo, max_period)
        if q == 0:
            return mpos, mval, dead_until
        e = _run_end(data, mpos, window, q, m)
        # Window b-1 is q-periodic too iff its first byte repeats q bytes on.
        b = mpos
        while b > first and data[b - 1] == data[b - 1 + q]:
            b -= 1
        for d in range(b, min(e, i) + 1):
            ring[d & mask] = none
        dead_until = max(dead_until, e)


@njit(cache=True, nogil=True)
def _winnow_kernel(
    data: U8,
    window: int,
    ww: int,
    max_period: int,
    base: np.uint64,
    top_power: np.uint64,
    out: I64,
    out_values: U64,
) -> int:  # pragma: no cover
    """Write the kept starts to ``out`` and their values to ``out_values``; return how many.

    The last ``ww`` window values live in a ring (a few KB, so it stays in
    L1 cache; a full array of values would cost a page fault every 512
    windows). A ring entry is ``NONE`` for a window found degenerate;
    windows never tested may hold their raw value even if degenerate.

    Degeneracy is tested lazily, only for a minimum about to be kept: a
    minimum found by a rescan is tested there; one that arrived as a new
    smallest value is tested when it is kept (a test on arrival would sit in
    the hot loop and slows it by a third). Until it is kept it can only be
    displaced by a value no larger, which the exact rule would accept too,
    so the kept sequence is the same as if every window had been tested.
    """
    m = data.shape[0] - window + 1
    lo = max_period // 2 + 1
    size = 1
    while size < ww:
        size *= 2
    ring = np.empty(size, dtype=np.uint64)
    mask = size - 1
    none = np.uint64(0xFFFFFFFFFFFFFFFF)
    # Section 2: "a table of all possible values of (t_i p^49) mod M for all 256 byte
    # values": a lookup instead of a multiply in the rolling update.
    outgoing = np.empty(256, dtype=np.uint64)
    for b in range(256):
        outgoing[b] = np.uint64(b) * top_power
    h = np.uint64(0)
    for j in range(window - 1):
        h = h * base + np.uint64(data[j])
    dead_until = -1  # windows up to here are known to be degenerate
    mpos = 0
    mval = none
    tested = True  # whether the current minimum has passed the degeneracy test
    last = -1
    n = 0
    for i in range(m):
        h = h * base + np.uint64(data[i + window - 1])
        if i <= dead_until:
            x = none
        else:
            x = h ^ (h >> np.uint64(33))
            x *= np.uint64(FMIX_C1)
            x ^= x >> np.uint64(33)
            x *= np.uint64(FMIX_C2)
            x ^= x >> np.uint64(33)
            if x == none:
                x = np.uint64(0xFFFFFFFFFFFFFFFE)
        h -= outgoing[data[i]]
        ring[i & mask] = x
        if x <= mval:
            mpos = i
            mval = x
            tested = x == none
        elif mpos <= i - ww:
            mpos, mval, dead_until = _rescan(
                data, ring, i, window, ww, lo, max_period, m, dead_until
            )
            tested = True
        if i >= ww - 1 and mpos != last:
            if not tested:
                tested = True
                q = _period(data, mpos, window, lo, max_period)
                if q:
                    ring[mpos & mask] = none
                    dead_until = max(dead_until, _run_end(data, mpos, window, q, m))
                    mpos, mval, dead_until = _rescan(
                        data, ring, i, window, ww, lo, max_period, m, dead_until
                    )
            if mpos != last:
                last = mpos
                if mval != none:
                    out[n] = mpos
                    out_values[n] = mval
                    n += 1
    return n


def winnow_select(
    data: U8,
    window: int = WINDOW,
    winnow_window: int = 511,
    max_period: int = MAX_PERIOD,
    base: int = BASE,
) -> tuple[I64, U64]:
    """Winnowing fingerprints of ``data``: ``(starts, values)``, starts ascending.

    For every run of ``winnow_window`` consecutive windows that fits in
    ``data``, the rightmost non-degenerate window of minimum value is kept;
    each start is reported once. If ``data`` has fewer windows than that, the
    winnowing window shrinks to all of them (one minimum). Values are
    :func:`sif.core.rolling.window_hashes`. Cost: O(n) time, one numba pass
    (about 2.7 ns a byte); scratch memory is a ring of ``W`` values plus
    the output.
    """
    m = len(data) - window + 1
    if m <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    ww = min(winnow_window, m)
    # Worst case one start per window (decreasing values); untouched pages cost nothing.
    out = np.empty(m, dtype=np.int64)
    out_values = np.empty(m, dtype=np.uint64)
    top = pow(base, window - 1, 1 << 64)
    n = _winnow_kernel(
        np.ascontiguousarray(data),
        window,
        ww,
        max_period,
        np.uint64(base),
        np.uint64(top),
        out,
        out_values,
    )
    return out[:n].copy(), out_values[:n].copy()
