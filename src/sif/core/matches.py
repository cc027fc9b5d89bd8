"""Shared windows of two byte strings, as maximal runs: the kernels of ``sif explain``.

The windows are those of the exact score: the value of the window at ``i``
is ``mix64(karp_rabin(data)[i])`` (:func:`sif.core.rolling.window_hashes`),
computed here by the rolling update in one pass, compiled
(:func:`window_hashes_jit` equals it value for value). Two files of 100 MB
have 10^8 windows each: too many to sort, or to hold as one table.

:func:`shared_windows`: the values are put in buckets by their top bits
(about :data:`BUCKET_WINDOWS` windows of the pair a bucket, counted in a
first pass); buckets are taken in groups that fit a memory budget, each
group a pass over both inputs that gathers its windows (value, position),
ordered by bucket in two cache-friendly scatters. Per bucket, a table of one
side's values (it fits in cache) is probed by the other side's windows:
that counts ``|S(A)|``, ``|S(B)|`` and ``|S(A) ∩ S(B)|`` (they add up over
buckets) and sets a bit for every shared window of each side. The two
inputs are hashed, and the two sides probed, in two threads (the kernels
release the GIL).

:func:`runs` then walks one side's bits: at a shared window whose value has
a seed (its first position in the other input), the bytes are compared
along the diagonal (a 64-bit collision is no match), forwards while they
agree and backwards as far as they agree: one maximal run of shared
windows. Values without a seed yet are looked up in rounds (a pass over the
other input per round, for the first window of each stretch still
unexplained). Run from both sides, every shared window of either input lies
in a run (a passage once in A and twice in B gives two runs).

Pure: arrays in, arrays out, no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.jitcache import njit
from sif.core.rolling import BASE, FMIX_C1, FMIX_C2, U8, U64

I64 = npt.NDArray[np.int64]
#: Positions: 4 bytes when the inputs have fewer than 2^31 windows, else 8.
Pos = npt.NDArray[np.int32] | npt.NDArray[np.int64]

#: The value :func:`sif.core.rolling.mix64` never yields: an empty table slot.
EMPTY = np.uint64((1 << 64) - 1)


@njit(cache=True, nogil=True, inline="always")
def mix64_one(x: np.uint64) -> np.uint64:  # pragma: no cover (compiled)
    """:func:`sif.core.rolling.mix64` of one value, in numba."""
    y = x ^ (x >> np.uint64(33))
    y = y * np.uint64(FMIX_C1)
    y = y ^ (y >> np.uint64(33))
    y = y * np.uint64(FMIX_C2)
    y = y ^ (y >> np.uint64(33))
    if y == np.uint64(0xFFFFFFFFFFFFFFFF):
        y = np.uint64(0xFFFFFFFFFFFFFFFE)
    return y


@njit(cache=True, nogil=True)
def _top_power(window: int, base: np.uint64) -> np.uint64:  # pragma: no cover (compiled)
    p = np.uint64(1)
    for _ in range(window - 1):
        p = p * base
    return p


@njit(cache=True, nogil=True)
def _hash_all(data: U8, window: int, base: np.uint64, out: U64) -> None:  # pragma: no cover
    top = _top_power(window, base)
    h = np.uint64(0)
    for j in range(window):
        h = h * base + np.uint64(data[j])
    out[0] = mix64_one(h)
    for i in range(1, len(data) - window + 1):
        h = (h - np.uint64(data[i - 1]) * top) * base + np.uint64(data[i + window - 1])
        out[i] = mix64_one(h)


def window_hashes_jit(data: U8, window: int, base: int = BASE) -> U64:
    """Every window's value, as :func:`sif.core.rolling.window_hashes` (one pass, compiled)."""
    m = len(data) - window + 1
    out = np.empty(max(0, m), dtype=np.uint64)
    if m > 0:
        _hash_all(data, window, np.uint64(base), out)
    return out


@njit(cache=True, nogil=True)
def _count_buckets(data: U8, window: int, base: np.uint64, bits: int) -> I64:  # pragma: no cover
    """Windows of ``data`` per bucket of the top ``bits`` bits of their value."""
    counts = np.zeros(1 << bits, dtype=np.int64)
    m = len(data) - window + 1
    if m <= 0:
        return counts
    top = _top_power(window, base)
    sh = np.uint64(64 - bits)
    h = np.uint64(0)
    for j in range(window - 1):
        h = h * base + np.uint64(data[j])
    for i in range(m):
        if i > 0:
            h = (h - np.uint64(data[i - 1]) * top) * base + np.uint64(data[i + window - 1])
        else:
            h = h * base + np.uint64(data[window - 1])
        if bits > 0:
            counts[np.int64(mix64_one(h) >> sh)] += 1
        else:
            counts[0] += 1
    return counts


@njit(cache=True, nogil=True)
def _collect(
    data: U8,
    window: int,
    base: np.uint64,
    bits: int,
    lo: int,
    hi: int,
    coarse_shift: int,
    fill: I64,
    out_v: U64,
    out_p: I64,
) -> None:  # pragma: no cover (compiled)
    """Windows whose bucket is in ``[lo, hi)``, scattered by coarse region of
    ``2^coarse_shift`` buckets (``fill``: next slot of each): few streams, in cache."""
    m = len(data) - window + 1
    if m <= 0:
        return
    top = _top_power(window, base)
    sh = np.uint64(64 - bits)
    h = np.uint64(0)
    for j in range(window - 1):
        h = h * base + np.uint64(data[j])
    for i in range(m):
        if i > 0:
            h = (h - np.uint64(data[i - 1]) * top) * base + np.uint64(data[i + window - 1])
        else:
            h = h * base + np.uint64(data[window - 1])
        v = mix64_one(h)
        bucket = np.int64(v >> sh) if bits > 0 else 0
        if lo <= bucket < hi:
            c = (bucket - lo) >> coarse_shift
            k = fill[c]
            out_v[k] = v
            out_p[k] = i
            fill[c] = k + 1


@njit(cache=True, nogil=True)
def _refine(
    v: U64, p: I64, start: I64, bits: int, lo: int, coarse_shift: int, sv: U64, sp: I64
) -> None:  # pragma: no cover (compiled)
    """Within each coarse region (``2^coarse_shift`` buckets), the windows ordered by bucket:
    a scatter into the cache-sized scratch ``sv``/``sp``, copied back."""
    sh = np.uint64(64 - bits)
    n_buckets = len(start) - 1
    per = 1 << coarse_shift
    fill = np.empty(per, dtype=np.int64)
    for c0 in range(0, n_buckets, per):
        c1 = min(n_buckets, c0 + per)
        r0, r1 = start[c0], start[c1]
        for k in range(c0, c1):
            fill[k - c0] = start[k] - r0
        for t in range(r0, r1):
            f = np.int64(v[t] >> sh) - lo - c0
            d = fill[f]
            sv[d] = v[t]
            sp[d] = p[t]
            fill[f] = d + 1
        for t in range(r1 - r0):
            v[r0 + t] = sv[t]
            p[r0 + t] = sp[t]


@njit(cache=True, nogil=True, inline="always")
def _table_put(keys: U64, mask: np.uint64, v: np.uint64) -> bool:  # pragma: no cover
    s = v & mask
    while True:
        k = keys[s]
        if k == v:
            return False
        if k == EMPTY:
            keys[s] = v
            return True
        s = (s + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def _join(
    vp: U64, pp: I64, start_p: I64, vt: U64, start_t: I64, bits_p: U8
) -> tuple[int, int]:  # pragma: no cover (compiled)
    """Per bucket (slices ``start[k]:start[k+1]``): a table of the values of side T (it
    fits in cache), probed by every window of side P, whose bit is set when found.
    Returns (distinct values of T, distinct values found: |S(P) ∩ S(T)|). Writes only
    ``bits_p``: the two sides run in two threads."""
    most = 1
    for k in range(len(start_t) - 1):
        most = max(most, start_t[k + 1] - start_t[k])
    cap = 16
    while cap < 2 * most:
        cap *= 2
    table = np.empty(cap, dtype=np.uint64)
    hit = np.empty(cap, dtype=np.uint8)
    n_t = common = 0
    for k in range(len(start_t) - 1):
        t0, t1 = start_t[k], start_t[k + 1]
        p0, p1 = start_p[k], start_p[k + 1]
        if t1 == t0:
            continue
        c = 16
        while c < 2 * (t1 - t0):
            c *= 2
        mask = np.uint64(c - 1)
        table[:c] = EMPTY
        hit[:c] = 0
        for t in range(t0, t1):
            if _table_put(table, mask, vt[t]):
                n_t += 1
        for t in range(p0, p1):
            v = vp[t]
            s = v & mask
            while True:
                key = table[s]
                if key == v:
                    q = pp[t]
                    bits_p[q >> 3] |= np.uint8(1 << (q & 7))
                    if hit[s] == 0:
                        hit[s] = 1
                        common += 1
                    break
                if key == EMPTY:
                    break
                s = (s + np.uint64(1)) & mask
    return n_t, common


#: Windows per bucket aimed at by :func:`shared_windows`: a bucket's tables fit in cache.
BUCKET_WINDOWS = 4096
#: Bytes of a collected window: its value, and its position (4 bytes under 2^31 windows).
ENTRY_BYTES = 12
#: Default bytes of collected windows held at once by :func:`shared_windows`.
DEFAULT_BUDGET = 1 << 30


#: Coarse regions a collecting pass writes to (then each is ordered by bucket in cache).
COARSE_BITS = 6


def _gather(
    data: U8,
    window: int,
    bits: int,
    lo: int,
    hi: int,
    shift: int,
    fill: I64,
    start: I64,
    v: U64,
    p: Pos,
) -> None:
    """The windows of buckets ``[lo, hi)`` into ``v``/``p``, ordered by bucket (two passes
    of few output streams each, rather than one of thousands)."""
    _collect(data, window, np.uint64(BASE), bits, lo, hi, shift, fill, v, p)
    if shift:
        regions = start[:: 1 << shift]
        most = int(np.max(np.diff(np.append(regions, start[-1])))) if len(regions) else 0
        _refine(v, p, start, bits, lo, shift, np.empty(most, v.dtype), np.empty(most, p.dtype))


#: Inputs of at least this many bytes in all are hashed in two threads (one a file).
THREADS_FROM = 4 << 20


class _Both:
    """Two calls of compiled kernels (they release the GIL), in two threads when large."""

    def __init__(self, size: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(1) if size >= THREADS_FROM else None

    def __call__(self, f: Any, g: Any) -> tuple[Any, Any]:
        if self.pool is None:
            return f(), g()
        later = self.pool.submit(g)
        return f(), later.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def shared_windows(
    a: U8, b: U8, window: int, budget: int = DEFAULT_BUDGET
) -> tuple[U8, U8, int, int, int]:
    """``(bits_a, bits_b, |S(A)|, |S(B)|, |S(A) ∩ S(B)|)``: which windows are shared.

    ``bits_a`` has bit ``i`` set (``bits_a[i >> 3] & (1 << (i & 7))``) when A's
    window ``i`` has a value that B has, ``bits_b`` the converse. The counts
    are those of :func:`sif.similar.window_set` and
    :func:`sif.similar.exact_containment`. The windows are hashed once to count
    them per bucket (top bits of the value, about :data:`BUCKET_WINDOWS` to a
    bucket), then buckets are taken in groups holding at most ``budget``
    bytes of collected windows (16 bytes each): each group is a pass over both
    inputs, then a table per bucket. Memory: ``budget`` and a bit per window.
    """
    base = np.uint64(BASE)
    ma = max(0, len(a) - window + 1)
    mb = max(0, len(b) - window + 1)
    bits_a = np.zeros((ma + 7) // 8, dtype=np.uint8)
    bits_b = np.zeros((mb + 7) // 8, dtype=np.uint8)
    bits = max(0, min(24, ((ma + mb) // BUCKET_WINDOWS).bit_length()))
    both = _Both(len(a) + len(b))
    counts_a, counts_b = both(
        lambda: _count_buckets(a, window, base, bits), lambda: _count_buckets(b, window, base, bits)
    )
    pos_type: type[np.signedinteger[Any]] = np.int32 if max(ma, mb) < (1 << 31) else np.int64
    per_group = max(1, budget // (8 + np.dtype(pos_type).itemsize))
    totals = counts_a + counts_b
    na = nb = common = 0
    lo = 0
    n_buckets = 1 << bits
    while lo < n_buckets:
        hi, held = lo, 0
        while hi < n_buckets and (hi == lo or held + totals[hi] <= per_group):
            held += int(totals[hi])
            hi += 1
        ca, cb = counts_a[lo:hi], counts_b[lo:hi]
        start_a = np.concatenate(([0], np.cumsum(ca))).astype(np.int64)
        start_b = np.concatenate(([0], np.cumsum(cb))).astype(np.int64)
        va = np.empty(int(start_a[-1]), dtype=np.uint64)
        pa: Pos = np.empty(len(va), dtype=pos_type)
        vb = np.empty(int(start_b[-1]), dtype=np.uint64)
        pb: Pos = np.empty(len(vb), dtype=pos_type)
        shift = max(0, (hi - lo - 1).bit_length() - COARSE_BITS)
        fill_a = start_a[: -1 : 1 << shift].copy()
        fill_b = start_b[: -1 : 1 << shift].copy()
        both(
            lambda: _gather(a, window, bits, lo, hi, shift, fill_a, start_a, va, pa),  # noqa: B023
            lambda: _gather(b, window, bits, lo, hi, shift, fill_b, start_b, vb, pb),  # noqa: B023
        )
        (y, z), (x, _) = both(
            lambda: _join(va, pa, start_a, vb, start_b, bits_a),  # noqa: B023
            lambda: _join(vb, pb, start_b, va, start_a, bits_b),  # noqa: B023
        )
        na, nb, common = na + x, nb + y, common + z
        del va, pa, vb, pb
        lo = hi
    both.close()
    return bits_a, bits_b, na, nb, common


@njit(cache=True, nogil=True, inline="always")
def _value_at(data: U8, i: int, window: int, base: np.uint64) -> np.uint64:  # pragma: no cover
    h = np.uint64(0)
    for t in range(window):
        h = h * base + np.uint64(data[i + t])
    return mix64_one(h)


@njit(cache=True, nogil=True, inline="always")
def _lookup(keys: U64, vals: I64, v: np.uint64) -> int:  # pragma: no cover
    mask = np.uint64(len(keys) - 1)
    s = v & mask
    while True:
        k = keys[s]
        if k == v:
            return vals[s]
        if k == EMPTY:
            return -2
        s = (s + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def _walk(
    a: U8,
    b: U8,
    pending: U8,
    window: int,
    base: np.uint64,
    keys: U64,
    vals: I64,
    start: int,
    out: I64,
    requests: U64,
) -> tuple[int, int, int]:  # pragma: no cover (compiled)
    """One round of the walk over A's pending shared windows (bits of ``pending``).

    At a pending window whose value is resolved (``keys`` -> first position
    in B, ``vals``), the seed is checked byte by byte, extended forwards
    while the next bytes agree (clearing those windows) and backwards while
    the previous ones do: a run ``(a_start, b_start, windows)`` into ``out``.
    An unresolved one is a request (its value), and the rest of its stretch
    of shared windows waits for the next round. Returns (runs, requests,
    where to resume: ``len(A's windows)`` when done); stops early when
    ``out`` or ``requests`` is full.
    """
    ma = len(a) - window + 1
    mb = len(b) - window + 1
    n = 0
    r = 0
    i = start
    while i < ma:
        if n >= len(out) or r >= len(requests):
            break
        byte = pending[i >> 3]
        if byte == 0 and (i & 7) == 0:
            i += 8
            continue
        if not (byte >> (i & 7)) & 1:
            i += 1
            continue
        v = _value_at(a, i, window, base)
        j = _lookup(keys, vals, v) if len(keys) else -2
        if j == -2:  # not resolved yet: ask, and skip this stretch
            requests[r] = v
            r += 1
            while i < ma and (pending[i >> 3] >> (i & 7)) & 1:
                i += 1
            continue
        ok = j >= 0
        if ok:
            for t in range(window):
                if a[i + t] != b[j + t]:
                    ok = False
                    break
        pending[i >> 3] &= np.uint8(255 ^ (1 << (i & 7)))
        if not ok:  # a 64-bit collision, or no longer in B: no shared window here
            i += 1
            continue
        k = 1
        while i + k < ma and j + k < mb and a[i + k + window - 1] == b[j + k + window - 1]:
            q = i + k
            pending[q >> 3] &= np.uint8(255 ^ (1 << (q & 7)))
            k += 1
        s = 0
        while i - s > 0 and j - s > 0 and a[i - s - 1] == b[j - s - 1]:
            s += 1
        out[n, 0] = i - s
        out[n, 1] = j - s
        out[n, 2] = k + s
        n += 1
        i += k
    return n, r, i


@njit(cache=True, nogil=True)
def _resolve(
    b: U8, window: int, base: np.uint64, keys: U64, vals: I64
) -> None:  # pragma: no cover (compiled)
    """``vals[s]`` = the first position in ``b`` of the value ``keys[s]`` (those at -2)."""
    m = len(b) - window + 1
    if m <= 0:
        return
    top = _top_power(window, base)
    mask = np.uint64(len(keys) - 1)
    h = np.uint64(0)
    for j in range(window - 1):
        h = h * base + np.uint64(b[j])
    for i in range(m):
        if i > 0:
            h = (h - np.uint64(b[i - 1]) * top) * base + np.uint64(b[i + window - 1])
        else:
            h = h * base + np.uint64(b[window - 1])
        v = mix64_one(h)
        s = v & mask
        while True:
            k = keys[s]
            if k == v:
                if vals[s] == -2:
                    vals[s] = i
                break
            if k == EMPTY:
                break
            s = (s + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def _rehash(
    keys: U64, vals: I64, new_keys: U64, new_vals: I64, extra: U64
) -> None:  # pragma: no cover
    mask = np.uint64(len(new_keys) - 1)
    for t in range(len(keys)):
        if keys[t] != EMPTY:
            s = keys[t] & mask
            while new_keys[s] != EMPTY:
                s = (s + np.uint64(1)) & mask
            new_keys[s] = keys[t]
            new_vals[s] = vals[t]
    for t in range(len(extra)):
        v = extra[t]
        s = v & mask
        while True:
            if new_keys[s] == v:
                break
            if new_keys[s] == EMPTY:
                new_keys[s] = v
                new_vals[s] = -2
                break
            s = (s + np.uint64(1)) & mask


#: Most runs and requests a round of :func:`runs` gathers before it resolves them.
ROUND_ROWS = 1 << 16


def runs(a: U8, b: U8, shared_a: U8, window: int) -> I64:
    """Maximal runs of shared windows seeded from A's side: rows ``(a_start, b_start, n)``.

    ``shared_a`` (from :func:`shared_windows`; consumed) marks A's windows
    found in B. Each is covered by one run, seeded at the first position of
    its value in B; a run covers ``n + window - 1`` bytes from each start and
    is maximal on its diagonal. Rounds: a walk over A asks for the values it
    has no seed for (one per stretch of shared windows), a pass over B
    resolves them, and the next walk goes on. Memory: a table of the values
    asked for. Cost: a pass over B per round (one or two usually: a new
    seed is needed only where a run ends inside a stretch of shared windows).
    """
    base = np.uint64(BASE)
    keys = np.empty(0, dtype=np.uint64)
    vals = np.empty(0, dtype=np.int64)
    held = 0
    found: list[I64] = []
    ma = max(0, len(a) - window + 1)
    requests = np.empty(ROUND_ROWS, dtype=np.uint64)
    while True:
        i, asked = 0, []
        while i < ma:
            out = np.empty((ROUND_ROWS, 3), dtype=np.int64)
            n, r, i = _walk(a, b, shared_a, window, base, keys, vals, i, out, requests)
            found.append(out[:n].copy())
            if r:
                asked.append(requests[:r].copy())
        if not asked:
            break
        extra = np.unique(np.concatenate(asked))
        held += len(extra)
        cap = 1 << max(4, (2 * held).bit_length())
        new_keys = np.full(cap, EMPTY, dtype=np.uint64)
        new_vals = np.full(cap, -2, dtype=np.int64)
        _rehash(keys, vals, new_keys, new_vals, extra)
        keys, vals = new_keys, new_vals
        _resolve(b, window, base, keys, vals)
        vals[vals == -2] = -1  # not in B after all (a changed file): never asked again
    return np.concatenate(found) if found else np.empty((0, 3), dtype=np.int64)
