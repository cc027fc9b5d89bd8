"""The numba kernels: the bulk-work forms of :mod:`sif.core.sampling` and :mod:`sif.core.anchors`.

Imported only on first use (``import numba`` alone costs about half a
second, more than a query's whole work), by a selection asked for with
``jit=True`` or given a large input. Each kernel gives exactly the result of
the numpy form beside its caller; the tests compare them.

Pure: arrays in, arrays out, no I/O.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sif.core.jitcache import njit  # numba's, with a cache this user can write
from sif.core.rolling import FMIX_C1, FMIX_C2, U8, U64
from sif.core.winnowc import run_many, run_one

I64 = npt.NDArray[np.int64]


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


@njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
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

    Returns the full count even when it exceeds ``len(out)`` (then only the
    first ``len(out)`` are written: the caller runs again with room).

    The hot loop carries only the rolling hash (window i from window i - 1:
    one multiply and one add on the dependency chain), fmix64, the ring
    store and one comparison; it leaves at the first event (a new minimum,
    the minimum expiring, a dead window), which the general step handles.

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
    pw = top_power * base
    for b in range(256):
        outgoing[b] = np.uint64(b) * pw
    h = np.uint64(0)
    for j in range(window):
        h = h * base + np.uint64(data[j])
    cap = out.shape[0]
    dead_until = -1  # windows up to here are known to be degenerate
    mpos = 0
    mval = none
    tested = True  # whether the current minimum has passed the degeneracy test
    last = -1
    n = 0
    i = 0
    while i < m:
        have_x = False
        if i >= ww and i > dead_until:
            # The common case, kept lean: no dead window, the minimum neither replaced
            # nor expiring (then nothing is emitted); leave at the first event.
            stop = min(m, mpos + ww)
            while i < stop:
                h = h * base + (np.uint64(data[i + window - 1]) - outgoing[data[i - 1]])
                x = h ^ (h >> np.uint64(33))
                x *= np.uint64(FMIX_C1)
                x ^= x >> np.uint64(33)
                x *= np.uint64(FMIX_C2)
                x ^= x >> np.uint64(33)
                x -= np.uint64(x == none)
                ring[i & mask] = x
                if x <= mval:
                    have_x = True
                    break
                i += 1
            if i >= m:
                break
        if not have_x:
            if i:
                h = h * base + (np.uint64(data[i + window - 1]) - outgoing[data[i - 1]])
            if i <= dead_until:
                x = none
            else:
                x = h ^ (h >> np.uint64(33))
                x *= np.uint64(FMIX_C1)
                x ^= x >> np.uint64(33)
                x *= np.uint64(FMIX_C2)
                x ^= x >> np.uint64(33)
                x -= np.uint64(x == none)
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
                    if n < cap:
                        out[n] = mpos
                        out_values[n] = mval
                    n += 1
        i += 1
    return n


@njit(cache=True, nogil=True)
def _winnow_many(
    data: U8,
    starts: I64,
    ends: I64,
    wws: I64,
    window: int,
    max_period: int,
    base: np.uint64,
    top_power: np.uint64,
    room: I64,
    out: I64,
    out_values: U64,
    counts: I64,
) -> None:  # pragma: no cover
    """:func:`_winnow_kernel` over the inputs ``data[starts[i]:ends[i]]``, one after another.

    Input ``i`` (at least ``window`` bytes, winnowing window ``wws[i]``) writes
    into ``out[room[i]:room[i + 1]]``; ``counts[i]`` is its full count (more
    than its room: the caller runs it again alone).
    """
    for i in range(starts.shape[0]):
        lo, hi = room[i], room[i + 1]
        counts[i] = _winnow_kernel(
            data[starts[i] : ends[i]],
            window,
            wws[i],
            max_period,
            base,
            top_power,
            out[lo:hi],
            out_values[lo:hi],
        )


def winnow_many(
    data: U8, starts: I64, ends: I64, wws: I64, window: int, max_period: int, base: int
) -> tuple[I64, U64, I64]:
    """:func:`winnow_jit` of each input ``data[starts[i]:ends[i]]`` (winnowing window
    ``wws[i] <= its windows``) in one call: (starts, values, counts), the results of
    the inputs one after another, ``counts[i]`` of input ``i``. The starts are
    relative to each input. Cost: one kernel call for all, instead of a Python
    call, two allocations and a dispatch per input (~20 us each). The compiled
    form (:mod:`sif.core.winnowc`) gives the same and loads without numba.
    """
    return run_many(_winnow_many, data, starts, ends, wws, window, max_period, base)


def winnow_jit(data: U8, window: int, ww: int, max_period: int, base: int) -> tuple[I64, U64]:
    """:func:`sif.core.sampling.winnow_select` in one numba pass (``ww <= windows``).

    The output is sized for four times the expected density ``2 / (ww + 1)``
    (a few KB per MB instead of 16 bytes a byte); an input that keeps more
    (long decreasing runs) is counted in full and run once more with room.
    It goes through the same compiled function as :func:`winnow_many` (one
    kernel to load from numba's cache per process).
    """
    return run_one(_winnow_many, data, window, ww, max_period, base)


# --- anchors ----------------------------------------------------------------


@njit(cache=True, nogil=True)
def find_anchors_kernel(
    data: U8,
    length: int,
    bitmap: npt.NDArray[np.bool_],
    filter_bits: int,
    golden: np.uint64,
    wanted: U64,
    out: I64,
) -> int:  # pragma: no cover
    """Write to ``out`` the starts of :func:`sif.core.anchors.find_anchors`; return how many."""
    # A rolling q-gram code, a hashed bitmap that rejects almost every position at
    # once, then a binary search of the sorted anchor codes for the rare hits.
    m = data.shape[0] - length + 1
    shift = np.uint64(64 - filter_bits)
    top = np.uint64(8 * (length - 1))
    code = np.uint64(0)
    for j in range(length - 1):
        code |= np.uint64(data[j]) << np.uint64(8 * j)
    n = 0
    for i in range(m):
        code |= np.uint64(data[i + length - 1]) << top
        if bitmap[(code * golden) >> shift]:
            k = np.searchsorted(wanted, code)
            if k < wanted.shape[0] and wanted[k] == code:
                out[n] = i
                n += 1
        code >>= np.uint64(8)
    return n
