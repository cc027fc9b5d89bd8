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

Everything here is pure: arrays in, arrays out, no I/O. Each selection has
two implementations that give bit-identical results:

- numpy (this module): whole-array passes, about 50-70 ns a byte for
  ``winnow`` (the sliding minimum is van Herk / Gil-Werman over blocks of
  ``W``), no compiler: what a process that fingerprints a few small files
  (``sif query``) uses, since ``import numba`` alone costs about half a
  second;
- numba (:mod:`sif.core.kernels`, imported on first use): one fused pass,
  about 2 ns a byte, for bulk work.

``jit=None`` (the default) picks numba when the kernels are already loaded
or the input has at least :data:`JIT_MIN_BYTES` bytes.
"""

from __future__ import annotations

import sys

import numpy as np
import numpy.typing as npt

from sif.core.rolling import (
    BASE,
    MODULUS_BITS,
    U8,
    U64,
    WINDOW,
    karp_rabin,
    window_hashes,
)

I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]

#: The paper's selection parameter ``k`` (section 2): keep values whose low k bits are 0.
K = 8
#: Default longest period of a degenerate window (see the module docstring).
MAX_PERIOD = 8
#: Reserved value: "no usable window here"; real values equal to it are moved to ``NONE - 1``.
NONE = np.uint64(0xFFFFFFFFFFFFFFFF)
#: Inputs of at least this many bytes go to the numba kernels when ``jit=None``: below it,
#: the numpy path costs less than importing numba and loading the kernels (measured:
#: about 0.6 s of start-up against 50-70 ns a byte; see bench/fingerprint.py).
JIT_MIN_BYTES = 8 << 20
_KERNELS = "sif.core.kernels"


def kernels_loaded() -> bool:
    """Whether the numba kernels are imported in this process (then they cost nothing more)."""
    return _KERNELS in sys.modules


def want_jit(nbytes: int) -> bool:
    """The default choice for an input of ``nbytes``: numba if loaded or the input is large."""
    return nbytes >= JIT_MIN_BYTES or kernels_loaded()


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


def _non_overlapping(candidates: I64, window: int, first: int) -> I64:
    """The paper's greedy scan over sorted ``candidates``: keep one, skip to its end.

    Vectorised by pointer doubling: ``jump[c]`` is the candidate kept after
    ``c``; the chain from the first candidate at or past ``first`` is built
    ``len`` entries at a time (``jump`` composed with itself each round).
    Cost: O(c log c) for c candidates, log2(kept) rounds.
    """
    n = len(candidates)
    jump = np.empty(n + 1, dtype=np.int64)
    jump[:n] = np.searchsorted(candidates, candidates + window)
    jump[n] = n  # the end absorbs
    chain = np.array([np.searchsorted(candidates, first)], dtype=np.int64)
    while chain[-1] < n:
        chain = np.concatenate((chain, jump[chain]))
        jump = jump[jump]
    return candidates[chain[chain < n]]


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
    kept). Cost: O(n), dominated by :func:`karp_rabin`; numpy only.
    """
    h = karp_rabin(data, window, base)
    if modulus_bits < 64:
        h &= np.uint64((1 << modulus_bits) - 1)
    low = np.uint64((1 << k) - 1)
    candidates = np.flatnonzero((h & low) == 0).astype(np.int64)
    starts = _non_overlapping(candidates, window, first)
    return starts, h[starts] >> np.uint64(k if shift is None else shift)


# --- winnowing --------------------------------------------------------------


def sliding_argmin(values: U64, ww: int) -> I64:
    """The rightmost position of the minimum of every ``ww`` consecutive ``values``.

    Element ``j`` is for ``values[j : j + ww]`` (``len(values) - ww + 1`` of
    them; ``1 <= ww <= len(values)``). Van Herk / Gil-Werman: cut the array
    into blocks of ``ww``; a window is a suffix of one block and a prefix of
    the next. Prefix minima give the rightmost argmin of a prefix as the last
    position equal to its prefix minimum (a running maximum of such
    positions); the rightmost argmin of a suffix is the nearest position at
    or after its start smaller than everything after it in the block (a
    running maximum over the reversed block). The prefix part wins ties
    (it lies to the right). Cost: O(n), about a dozen passes, 8 + 4 bytes
    of scratch per value and a reversed copy.
    """
    m = len(values)
    nb = -(-m // ww)
    pad = np.full(nb * ww, NONE, dtype=np.uint64)  # padding lies after every window
    pad[:m] = values
    col = np.arange(ww, dtype=np.int32)
    blocks = pad.reshape(nb, ww)
    pre = np.minimum.accumulate(blocks, axis=1)
    pre_arg = np.where(blocks == pre, col, np.int32(-1))
    np.maximum.accumulate(pre_arg, axis=1, out=pre_arg)
    # Suffixes as prefixes of the reversed blocks (a contiguous copy keeps accumulate fast).
    rev = pad[::-1].copy().reshape(nb, ww)
    suf = np.minimum.accumulate(rev, axis=1)
    strict = np.empty(rev.shape, dtype=bool)
    strict[:, 0] = True
    np.less(rev[:, 1:], suf[:, :-1], out=strict[:, 1:])
    suf_arg = np.where(strict, col, np.int32(-1))
    np.maximum.accumulate(suf_arg, axis=1, out=suf_arg)
    k = m - ww + 1
    ends = slice(ww - 1, m)
    block_start = np.arange(ww - 1, m, dtype=np.int64)
    block_start -= block_start % ww  # of each window's last position
    # The start's suffix ends at block_start - 1 (or is the whole block when aligned).
    take_prefix = pre.ravel()[ends] <= suf.ravel()[::-1][:k]
    return np.where(
        take_prefix,
        block_start + pre_arg.ravel()[ends],
        block_start - 1 - suf_arg.ravel()[::-1][:k],
    )


def _winnow_numpy(data: U8, window: int, ww: int, max_period: int, base: int) -> tuple[I64, U64]:
    # The exact rule of the module docstring, one whole-array pass per step.
    values = window_hashes(data, window, base)
    if max_period:
        values[degenerate_mask(data, window, max_period)] = NONE
    picks = sliding_argmin(values, ww)
    # The rightmost argmin never moves left, so "each start once" is "where it changes".
    fresh = np.empty(len(picks), dtype=bool)
    fresh[0] = True
    np.not_equal(picks[1:], picks[:-1], out=fresh[1:])
    picks = picks[fresh]
    kept = values[picks]
    usable = kept != NONE
    return picks[usable], kept[usable]


def winnow_select(
    data: U8,
    window: int = WINDOW,
    winnow_window: int = 511,
    max_period: int = MAX_PERIOD,
    base: int = BASE,
    *,
    jit: bool | None = None,
) -> tuple[I64, U64]:
    """Winnowing fingerprints of ``data``: ``(starts, values)``, starts ascending.

    For every run of ``winnow_window`` consecutive windows that fits in
    ``data``, the rightmost non-degenerate window of minimum value is kept;
    each start is reported once. If ``data`` has fewer windows than that, the
    winnowing window shrinks to all of them (one minimum). Values are
    :func:`sif.core.rolling.window_hashes`. ``jit`` picks the numba kernel
    (True), numpy (False) or by size (None, :func:`want_jit`); the results
    are identical. Cost: O(n): numba about 2 ns a byte (plus about 0.6 s to
    import numba once), scratch a ring of ``W`` values plus the output;
    numpy about 50-70 ns a byte, scratch about 40 bytes a byte.
    """
    m = len(data) - window + 1
    if m <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    ww = min(winnow_window, m)
    if jit is None:
        jit = want_jit(len(data))
    if not jit:
        return _winnow_numpy(data, window, ww, max_period, base)
    from sif.core.kernels import winnow_jit

    return winnow_jit(np.ascontiguousarray(data), window, ww, max_period, base)
