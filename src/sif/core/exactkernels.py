"""The numba kernels of :mod:`sif.core.exactsets` (imported only on first use).

Each gives exactly the value of the numpy form beside its caller; the tests
compare them. Pure: arrays in, arrays out, no I/O.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sif.core.exactsets import SAMPLE_SALT
from sif.core.jitcache import njit  # numba's, with a cache this user can write
from sif.core.matches import mix64_one
from sif.core.rolling import U8, U64

I64 = npt.NDArray[np.int64]


@njit(cache=True, nogil=True)
def window_values(
    data: U8, window: int, base: np.uint64, top: np.uint64, out: U64
) -> U64:  # pragma: no cover
    """Karp-Rabin modulo 2^64 of every window, by the rolling update (one pass), into ``out``.

    ``top`` is ``base^(window-1)``: h' = (h - out * top) * base + in, which
    equals the prefix-sum form of :func:`sif.core.rolling.karp_rabin`.
    ``out`` (``len(data) - window + 1`` values, at least one) is allocated by
    the caller through numpy, which asks the kernel for huge pages for a large
    array: a value array made here would take a page fault every 512 values
    (about 1.5 ns a byte, 8% of a window set).
    """
    m = len(data) - window + 1
    h = np.uint64(0)
    for i in range(window):
        h = h * base + np.uint64(data[i])
    out[0] = h
    for i in range(1, m):
        h = (h - np.uint64(data[i - 1]) * top) * base + np.uint64(data[i + window - 1])
        out[i] = h
    return out


@njit(cache=True, nogil=True)
def distinct_sorted(s: I64) -> int:  # pragma: no cover
    """Move the distinct values of a sorted array to its front, in place; how many."""
    n = len(s)
    if n == 0:
        return 0
    k = 1
    for i in range(1, n):
        if s[i] != s[k - 1]:
            s[k] = s[i]
            k += 1
    return k


@njit(cache=True, nogil=True)
def intersection_size(a: I64, b: I64) -> int:  # pragma: no cover
    """|A ∩ B| of two sorted arrays of distinct values.

    A merge when the sizes are alike; when one is more than 16 times the
    other, a galloping search of the larger for each value of the smaller
    (O(m log(n / m))).
    """
    if len(a) > len(b):
        a, b = b, a
    m, n = len(a), len(b)
    if m == 0:
        return 0
    count = 0
    if n > 16 * m:
        lo = 0
        for i in range(m):
            x = a[i]
            step = 1
            hi = lo
            while hi < n and b[hi] < x:  # gallop: lo .. hi brackets x
                lo = hi
                hi += step
                step *= 2
            if hi > n:
                hi = n
            while lo < hi:  # b[lo - 1] < x <= b[hi] (or hi == n)
                mid = (lo + hi) // 2
                if b[mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < n and b[lo] == x:
                count += 1
                lo += 1
            if lo >= n:
                break
        return count
    # Branch-free: two alike files' sets interleave unpredictably, and a mispredicted
    # branch a step cost 13 ns a value where this costs 4-7 (sets of 4 M values).
    i = 0
    j = 0
    while i < m and j < n:
        x = a[i]
        y = b[j]
        count += x == y
        i += x <= y
        j += y <= x
    return count


_SIGN = np.uint64(0x8000000000000000)
#: Windows whose filter words :func:`probe_hits` loads together.
PROBE_BLOCK = 256


@njit(cache=True, nogil=True)
def bucket_offsets(s: I64, bits: int) -> npt.NDArray[np.int32]:  # pragma: no cover
    """Where each bucket of a sorted set starts: bucket = the top ``bits`` of the value.

    Sorted as signed integers, so the bucket is taken with the sign bit
    flipped (monotone in that order). One pass over the set (sequential
    writes: the buckets come in order).
    """
    shift = np.uint64(64 - bits)
    nb = 1 << bits
    off = np.empty(nb + 1, dtype=np.int32)  # sets of under 2^31 values (IndexedSet)
    k = 0
    for i in range(len(s)):
        b = np.int64((np.uint64(s[i]) ^ _SIGN) >> shift)
        while k <= b:
            off[k] = i
            k += 1
    while k <= nb:
        off[k] = len(s)
        k += 1
    return off


@njit(cache=True, nogil=True)
def bit_filter(s: I64, fbits: int) -> U64:  # pragma: no cover
    """A blocked Bloom filter of the values of ``s``: two bits a value in one 64-bit word.

    The word is chosen by the top ``fbits - 6`` bits of the value (sign
    flipped, as buckets), one bit in it by the next 6 bits, the other by the
    6 after those (:func:`_filter_mask`). A value with either bit clear is
    not in ``s``. Both bits in one word cost one memory access, and an absent
    value passes with about the square of the word's fill instead of the fill:
    on the small-file pass's table (309k values, 32 bits a value) the
    look-ups past the filter went from 5.3% of the windows to well under 1%,
    and a byte from 12 to 5 ns.
    """
    shift = np.uint64(64 - fbits)
    f = np.zeros(max(1, (1 << fbits) >> 6), dtype=np.uint64)
    for i in range(len(s)):
        u = np.uint64(s[i]) ^ _SIGN
        k = u >> shift
        f[k >> np.uint64(6)] |= _filter_mask(u, k, shift)
    return f


@njit(cache=True, nogil=True, inline="always")
def _filter_mask(u: np.uint64, k: np.uint64, shift: np.uint64) -> np.uint64:  # pragma: no cover
    """The two bits of :func:`bit_filter` for the value ``u`` (sign flipped) in word ``k >> 6``."""
    second = (u >> (shift - np.uint64(6))) & np.uint64(63)
    return (np.uint64(1) << (k & np.uint64(63))) | (np.uint64(1) << second)


@njit(cache=True, nogil=True)
def count_in(
    s: I64, off: npt.NDArray[np.int32], bits: int, f: U64, fbits: int, a: I64
) -> int:  # pragma: no cover
    """How many values of ``a`` are in the sorted set ``s`` indexed by :func:`bucket_offsets`.

    Each value is first looked up in the filter ``f`` of :func:`bit_filter`
    (``fbits`` bits, ``fbits >= bits``): most absent values stop there, on a
    table that stays in the cache, instead of two misses in ``off`` and ``s``.
    """
    shift = np.uint64(64 - bits)
    fshift = np.uint64(64 - fbits)
    count = 0
    for v in a:
        u = np.uint64(v) ^ _SIGN
        k = u >> fshift
        mask = _filter_mask(u, k, fshift)
        if f[k >> np.uint64(6)] & mask != mask:
            continue
        b = np.int64(u >> shift)
        for t in range(off[b], off[b + 1]):
            if s[t] == v:
                count += 1
                break
    return count


@njit(cache=True, nogil=True)
def probe_hits(
    data: U8,
    window: int,
    base: np.uint64,
    top: np.uint64,
    s: I64,
    own: npt.NDArray[np.int32],
    off: npt.NDArray[np.int32],
    bits: int,
    f: U64,
    fbits: int,
    stamp: npt.NDArray[np.uint16],
    mark: int,
    hits: npt.NDArray[np.int32],
    seen: npt.NDArray[np.int32],
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], bool]:  # pragma: no cover
    """Which owners' sampled windows the bytes ``data`` hold, and how many distinct ones.

    The Karp-Rabin value of every ``window``-byte substring (as
    :func:`window_values`, computed on the fly: no array of all the values) is
    looked up in a sorted table ``s`` of window values (repeats allowed: one
    entry an owner), ``own`` the owner of each entry, ``off``/``f`` its
    bucket offsets (:func:`bucket_offsets`) and bitmap (:func:`bit_filter`).
    Each entry counts once per file however often the file repeats the
    window: the entries of a value (one an owner, side by side) are stamped
    with ``mark`` (1..65535, new for each file; the caller zeroes ``stamp``
    when the marks start again: 2 bytes an entry) and noted in ``seen``
    (scratch, any length: a file holds few entries) the first time the file
    holds it; again, its first entry's stamp ends the look-up (a register
    header repeats its windows, a boilerplate window has hundreds of owners).
    When ``seen`` is too short, the look-up stops and the third value is
    False (the caller zeroes ``stamp`` and calls again with a ``seen`` as long
    as ``s``); growing it here made the whole loop twice as slow (numba).
    ``hits`` (one counter an owner, all 0) is scratch and left all 0.
    Returns (owners, distinct entries of each held). One pass over ``data``
    with nothing but the bitmap test for most windows, made :data:`PROBE_BLOCK`
    windows at a time: their values first, then their filter words with no
    branch between the loads, so that many are in flight when the filter is
    past the cache (40 MB of Linux sources in 4 KiB files against a table of
    12 M entries, as at a million files, a 34 MB filter: 14-17 ns a byte
    instead of 23-27, the same hits; 5-8 ns a byte at 1.2 M entries either way).
    """
    shift = np.uint64(64 - bits)
    fshift = np.uint64(64 - fbits)
    ns = 0
    n = len(data)
    m = max(n - window + 1, 0)
    h = np.uint64(0)
    for i in range(min(window, n)):
        h = h * base + np.uint64(data[i])
    us = np.empty(min(PROBE_BLOCK, m), dtype=np.uint64)
    ok = np.empty(min(PROBE_BLOCK, m), dtype=np.uint8)
    for lo in range(0, m, PROBE_BLOCK):
        nb = min(PROBE_BLOCK, m - lo)
        for j in range(nb):  # the block's values (the rolling hash: one chain)
            i = lo + j
            us[j] = h ^ _SIGN
            if i + window < n:
                h = (h - np.uint64(data[i]) * top) * base + np.uint64(data[i + window])
        for j in range(nb):  # the filter's words, no branch between the loads
            u = us[j]
            k = u >> fshift
            mask = _filter_mask(u, k, fshift)
            ok[j] = (f[k >> np.uint64(6)] & mask) == mask
        for j in range(nb):  # the few past the filter, in the windows' order
            if not ok[j]:
                continue
            u = us[j]
            v = np.int64(u ^ _SIGN)
            b = np.int64(u >> shift)
            end = off[b + 1]
            for t in range(off[b], end):
                if s[t] == v:
                    if stamp[t] != mark:  # first time in this file: the run of its owners
                        jj = t
                        while jj < end and s[jj] == v:
                            if ns == len(seen):  # the caller's scratch is too short
                                return seen[:0].copy(), seen[:0].copy(), False
                            stamp[jj] = mark
                            seen[ns] = jj
                            ns += 1
                            jj += 1
                    break  # a window the file repeats costs one test, whatever its owners
                if s[t] > v:  # a bucket is sorted
                    break
    nt = 0
    owners = np.empty(ns, dtype=np.int32)
    for j in range(ns):
        o = own[seen[j]]
        if hits[o] == 0:
            owners[nt] = o
            nt += 1
        hits[o] += 1
    counts = np.empty(nt, dtype=np.int32)
    for j in range(nt):
        counts[j] = hits[owners[j]]
        hits[owners[j]] = 0
    return owners[:nt].copy(), counts, True


@njit(cache=True, nogil=True)
def probe_files(
    buf: U8,
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    first: int,
    window: int,
    base: np.uint64,
    top: np.uint64,
    s: I64,
    own: npt.NDArray[np.int32],
    off: npt.NDArray[np.int32],
    bits: int,
    f: U64,
    fbits: int,
    stamp: npt.NDArray[np.uint16],
    mark: int,
    max_mark: int,
    hits: npt.NDArray[np.int32],
    seen: npt.NDArray[np.int32],
) -> tuple[
    npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32], int, int
]:  # pragma: no cover
    """:func:`probe_hits` of many files in one call: file ``k`` is
    ``buf[starts[k] : starts[k] + lengths[k]]``, from ``k = first``.

    Each file takes the next mark after ``mark`` (after ``max_mark``, at most
    65535, ``stamp`` is zeroed and the marks start again at 1). Returns the
    files' hits one after another, (file ``k``, owner, distinct entries held),
    the last mark taken, and where it stopped: ``len(starts)`` when every file
    is done, else the file whose entries ``seen`` could not hold (its hits are
    not in the result: the caller zeroes ``stamp`` and calls again from it,
    mark 0, with a ``seen`` as long as ``s``). The same hits, file by file, as
    :func:`probe_hits`, without a call from Python a file.
    """
    cap = 1024
    out_k = np.empty(cap, dtype=np.int32)
    out_o = np.empty(cap, dtype=np.int32)
    out_c = np.empty(cap, dtype=np.int32)
    n = 0
    for k in range(first, len(starts)):
        mark += 1
        if mark > max_mark:
            stamp[:] = 0
            mark = 1
        lo = starts[k]
        owners, counts, done = probe_hits(
            buf[lo : lo + lengths[k]],
            window,
            base,
            top,
            s,
            own,
            off,
            bits,
            f,
            fbits,
            stamp,
            mark,
            hits,
            seen,
        )
        if not done:
            return out_k[:n].copy(), out_o[:n].copy(), out_c[:n].copy(), mark, k
        if n + len(owners) > cap:
            while n + len(owners) > cap:
                cap *= 2
            grown_k = np.empty(cap, dtype=np.int32)
            grown_o = np.empty(cap, dtype=np.int32)
            grown_c = np.empty(cap, dtype=np.int32)
            grown_k[:n] = out_k[:n]
            grown_o[:n] = out_o[:n]
            grown_c[:n] = out_c[:n]
            out_k, out_o, out_c = grown_k, grown_o, grown_c
        for j in range(len(owners)):
            out_k[n] = k
            out_o[n] = owners[j]
            out_c[n] = counts[j]
            n += 1
    return out_k[:n].copy(), out_o[:n].copy(), out_c[:n].copy(), mark, len(starts)


_SALT = np.uint64(SAMPLE_SALT)


@njit(cache=True, nogil=True, inline="always")
def _sampled(v: np.int64, shift: np.uint64) -> bool:  # pragma: no cover
    """Whether the window value ``v`` is in the sample of rate ``2^-shift``
    (:func:`sif.core.exactsets.in_sample`: the top ``shift`` bits of
    mix64(v ^ salt) are zero; ``shift`` 1..63)."""
    return (mix64_one(np.uint64(v) ^ _SALT) >> (np.uint64(64) - shift)) == np.uint64(0)


@njit(cache=True, nogil=True)
def sample_keep(values: I64, shift: int) -> int:  # pragma: no cover
    """Move the values in the sample of rate ``2^-shift`` to the front, in order; how many.

    Nested: the sample at ``shift + 1`` is a subset of the one at ``shift``.
    """
    s = np.uint64(shift)
    k = 0
    for i in range(len(values)):
        v = values[i]
        if _sampled(v, s):
            values[k] = v
            k += 1
    return k


@njit(cache=True, nogil=True)
def sample_count(values: I64, shift: int) -> int:  # pragma: no cover
    """How many values are in the sample of rate ``2^-shift`` (:func:`sample_keep`)."""
    s = np.uint64(shift)
    k = 0
    for i in range(len(values)):
        if _sampled(values[i], s):
            k += 1
    return k


@njit(cache=True, nogil=True)
def radix_sort(values: I64, scratch: I64) -> None:  # pragma: no cover
    """Sort ``values`` in place, as ``np.sort`` does, by least-significant-digit radix.

    Eight passes of one byte each (the sign bit flipped, so that negative values
    come first), after one pass that counts every byte's histogram; a pass whose
    byte is the same for every value is skipped. ``scratch`` holds at least
    ``len(values)`` values (its content is lost). O(n), distribution-free.
    """
    n = len(values)
    if n < 2:
        return
    sign = np.uint64(1) << np.uint64(63)
    counts = np.zeros((8, 256), dtype=np.int64)
    for i in range(n):
        u = np.uint64(values[i]) ^ sign
        for d in range(8):
            counts[d, (u >> np.uint64(8 * d)) & np.uint64(255)] += 1
    src, dst = values, scratch[:n]
    in_scratch = False
    pos = np.empty(256, dtype=np.int64)
    for d in range(8):
        c = counts[d]
        total = 0
        constant = False
        for b in range(256):
            if c[b] == n:
                constant = True
            pos[b] = total
            total += c[b]
        if constant:
            continue
        shift = np.uint64(8 * d)
        for i in range(n):
            v = src[i]
            digit = ((np.uint64(v) ^ sign) >> shift) & np.uint64(255)
            dst[pos[digit]] = v
            pos[digit] += 1
        src, dst = dst, src
        in_scratch = not in_scratch
    if in_scratch:
        values[:] = src


#: :func:`bucket_sort`: a bucket of more values than this is sorted by :func:`radix_sort`
#: (many equal or close values: a run of one byte, a block repeated), a smaller one by
#: insertion (at most this many moves a value).
BUCKET_INSERTION_MAX = 32


@njit(cache=True, nogil=True)
def bucket_sort(values: I64, scratch: I64) -> None:  # pragma: no cover
    """Sort ``values`` in place, as ``np.sort`` does, by their top bits then by insertion.

    One pass counts the values of each of ``2^b`` buckets of the top ``b`` bits
    (the sign bit flipped, so that negative values come first), ``2^b`` at most
    ``n``: about one value a bucket when the values are well mixed, as the
    Karp-Rabin values of distinct windows are; one pass moves them into
    ``scratch`` by bucket; each bucket is then sorted where it lies, by
    insertion, or by :func:`radix_sort` past :data:`BUCKET_INSERTION_MAX` values
    (a repeated window fills one bucket). Then back into ``values``. Four
    passes where the radix makes nine; the counts (8 bytes a bucket) stay in
    the cache up to a few thousand values, and the radix is faster past that.
    ``scratch`` holds at least ``len(values)`` values (its content is lost).
    """
    n = len(values)
    if n < 2:
        return
    b = 1
    while (2 << b) <= n and b < 20:
        b += 1
    buckets = 1 << b
    sign = np.uint64(1) << np.uint64(63)
    shift = np.uint64(64 - b)
    ends = np.zeros(buckets + 1, dtype=np.int64)  # ends[k + 1]: where bucket k ends
    for i in range(n):
        ends[((np.uint64(values[i]) ^ sign) >> shift) + np.uint64(1)] += 1
    for k in range(buckets):
        ends[k + 1] += ends[k]
    pos = ends[:buckets].copy()
    out = scratch[:n]
    for i in range(n):
        v = values[i]
        top = (np.uint64(v) ^ sign) >> shift
        out[pos[top]] = v
        pos[top] += 1
    for k in range(buckets):
        lo, hi = ends[k], ends[k + 1]
        if hi - lo > BUCKET_INSERTION_MAX:
            radix_sort(out[lo:hi], values[lo:hi])  # values free here: the bucket's scratch
        else:
            for i in range(lo + 1, hi):
                v = out[i]
                j = i - 1
                while j >= lo and out[j] > v:
                    out[j + 1] = out[j]
                    j -= 1
                out[j + 1] = v
    values[:] = out
